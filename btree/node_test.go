package btree

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

// TestTornPagesDoNotPanic: an optimistic reader may see any bytes while a
// writer changes a page (it restarts when it validates). Every read
// accessor must stay inside the page whatever the bytes say.
func TestTornPagesDoNotPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	page := make([]byte, protocol.PageSize)
	key := []byte("some key")
	for range 20000 {
		for i := range page {
			page[i] = byte(r.Uint32())
		}
		if r.IntN(2) == 0 {
			page[0] = byte(1 + r.IntN(2)) // a plausible kind
		}
		n := node(page)
		_ = n.valid()
		_, _ = n.lowerBound(key)
		_ = n.childFor(key)
		for i := -1; i <= n.count(); i++ {
			_, _, _ = n.slot(i)
			_ = n.key(i)
			_ = n.value(i)
			_ = n.child(i)
		}
	}
}

// TestLowerBoundOrdersLikeBytes: key heads (zero-padded) must order keys
// exactly as bytes.Compare does, ties of short keys and keys sharing their
// first 8 bytes included.
func TestLowerBoundOrdersLikeBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte{0, 1, 'a', 0xff}
	randKey := func() []byte {
		k := make([]byte, 1+r.IntN(12))
		for i := range k {
			k[i] = alphabet[r.IntN(len(alphabet))]
		}
		return k
	}
	for range 2000 {
		page := make([]byte, protocol.PageSize)
		initNode(page, kindLeaf)
		n := node(page)
		var keys [][]byte
		for range 40 {
			k := randKey()
			i, found := n.lowerBound(k)
			if found {
				continue
			}
			n.insertAt(i, k, nil)
			keys = append(keys, k)
		}
		sorted := slices.SortedFunc(slices.Values(keys), bytes.Compare)
		for i, k := range sorted {
			if got := n.key(i); !bytes.Equal(got, k) {
				t.Fatalf("slot %d holds %q, want %q", i, got, k)
			}
		}
		for range 40 {
			k := randKey()
			want, wantFound := slices.BinarySearchFunc(sorted, k, bytes.Compare)
			if got, found := n.lowerBound(k); got != want || found != wantFound {
				t.Fatalf("lowerBound(%q) = %d,%v, want %d,%v", k, got, found, want, wantFound)
			}
		}
	}
}
