package btree_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scalestore-go/scalestore"
	"github.com/scalestore-go/scalestore/btree"
)

// TestGetBatchMatchesGet loads keys of many lengths (so heads tie and
// longer keys are compared in the heap) and checks that batches of present
// and absent keys, longer than MaxBatch, answer exactly as Get does: with a
// cache that holds the whole tree (every read on the hot path) and with one
// of a few frames (batch lookups miss, park and evict each other's pages).
func TestGetBatchMatchesGet(t *testing.T) {
	for _, frames := range []int{4096, 12} {
		t.Run(fmt.Sprintf("frames=%d", frames), func(t *testing.T) {
			db, err := scalestore.Open("", scalestore.Options{InMemory: true, CachePages: frames, Slots: 1 << 14})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			r := rand.New(rand.NewPCG(7, uint64(frames)))
			key := func(i int) []byte {
				// 1 to 40 bytes; a shared 8-byte prefix for a third of them.
				k := fmt.Appendf(nil, "%d", i*7919)
				if i%3 == 0 {
					k = append([]byte("prefix00"), k...)
				}
				return bytes.Repeat(k, 1+i%4)[:min(40, len(k)*(1+i%4))]
			}
			for i := 0; i < 3000; i += 2 { // odd i stay absent
				if err := db.Put(key(i), bytes.Repeat([]byte{byte(i)}, 1+i%200)); err != nil {
					t.Fatal(err)
				}
			}
			rounds := 200
			if frames < 100 {
				rounds = 30 // every miss waits for the page provider: slow
			}
			for range rounds {
				n := 1 + r.IntN(3*btree.MaxBatch)
				keys := make([][]byte, n)
				vals := make([][]byte, n)
				found := make([]bool, n)
				for j := range keys {
					keys[j] = key(r.IntN(3000))
					vals[j] = []byte("stale") // must be replaced, not appended to
				}
				if err := db.GetBatch(keys, vals, found); err != nil {
					t.Fatal(err)
				}
				for j, k := range keys {
					want, ok, err := db.Get(k, nil)
					if err != nil {
						t.Fatal(err)
					}
					if found[j] != ok || !bytes.Equal(vals[j], want) {
						t.Fatalf("batch of %d, key %q: %v %x, Get says %v %x", n, k, found[j], vals[j], ok, want)
					}
				}
			}
		})
	}
}

func TestGetBatchRejectsBadInput(t *testing.T) {
	db, err := scalestore.Open("", scalestore.Options{InMemory: true, CachePages: 64, Slots: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys := [][]byte{[]byte("a"), []byte("b")}
	if err := db.GetBatch(keys, make([][]byte, 1), make([]bool, 2)); !errors.Is(err, btree.ErrBatchShape) {
		t.Fatalf("short vals: %v, want ErrBatchShape", err)
	}
	keys[1] = nil
	if err := db.GetBatch(keys, make([][]byte, 2), make([]bool, 2)); !errors.Is(err, btree.ErrKeySize) {
		t.Fatalf("empty key: %v, want ErrKeySize", err)
	}
	if err := db.GetBatch(nil, nil, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
}
