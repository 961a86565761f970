package btree

import (
	"bytes"
	"encoding/binary"
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
			_, _, _, _ = n.span(i)
			_ = n.appendKey(nil, i)
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

// fillLeaf inserts 8-byte big-endian keys from first, ascending, with
// vl-byte values, until the leaf has no room for one more.
func fillLeaf(n node, first uint64, vl int) {
	val := make([]byte, vl)
	for k := first; ; k++ {
		key := binary.BigEndian.AppendUint64(nil, k)
		if !n.room(len(key), vl) {
			return
		}
		n.insertAt(n.count(), key, val)
	}
}

// TestSplitAtTheEndForAscendingKeys: a key after every key of a full leaf
// (an ascending load) leaves the leaf whole and starts the new one; any
// other key splits in half. Both keep left <= separator < right.
func TestSplitAtTheEndForAscendingKeys(t *testing.T) {
	for _, tc := range []struct {
		name      string
		key       uint64
		wantLeft  func(c int) int
		wantRight func(c int) int
	}{
		{"ascending", 1 << 40, func(c int) int { return c }, func(int) int { return 0 }},
		{"middle", 1010, func(c int) int { return c/2 + 1 }, func(c int) int { return c - c/2 - 1 }},
		{"before", 1, func(c int) int { return c/2 + 1 }, func(c int) int { return c - c/2 - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lb, rb [protocol.PageSize]byte
			initNode(lb[:], kindLeaf)
			initNode(rb[:], kindLeaf)
			l, r := node(lb[:]), node(rb[:])
			fillLeaf(l, 1000, 128)
			c := l.count()
			key := binary.BigEndian.AppendUint64(nil, tc.key)
			sep := l.splitInto(r, 77, key)
			if l.count() != tc.wantLeft(c) || r.count() != tc.wantRight(c) {
				t.Fatalf("split of %d entries: left %d right %d, want %d and %d", c, l.count(), r.count(), tc.wantLeft(c), tc.wantRight(c))
			}
			for i := range l.count() {
				if bytes.Compare(l.key(i), sep) > 0 {
					t.Fatalf("left key %x > separator %x", l.key(i), sep)
				}
			}
			for i := range r.count() {
				if bytes.Compare(r.key(i), sep) <= 0 {
					t.Fatalf("right key %x <= separator %x", r.key(i), sep)
				}
			}
			if l.upper() != 78 {
				t.Fatalf("left leaf links to %d, want the right page 77 (+1)", l.upper())
			}
		})
	}
}

// TestSplitWhereTheRunEnds: a leaf holds an ascending run, then the first
// keys of another range. A key that continues the run (right after the
// latest insert) moves the other range's keys to the new leaf, and the
// separator lies just below them, so the run's next keys stay in the old
// leaf. A key that does not continue the latest insert splits in half.
func TestSplitWhereTheRunEnds(t *testing.T) {
	build := func() (node, int) {
		var lb [protocol.PageSize]byte
		initNode(lb[:], kindLeaf)
		l := node(lb[:])
		val := make([]byte, 128)
		for k := uint64(5000); k < 5004; k++ { // the other range's first keys
			l.insertAt(l.count(), binary.BigEndian.AppendUint64(nil, k), val)
		}
		k := uint64(1000)
		for ; l.room(8, 128); k++ { // the run, inserted ascending before them
			l.insertAt(l.count()-4, binary.BigEndian.AppendUint64(nil, k), val)
		}
		return l, int(k - 1000)
	}
	l, run := build()
	var rb [protocol.PageSize]byte
	initNode(rb[:], kindLeaf)
	r := node(rb[:])
	next := binary.BigEndian.AppendUint64(nil, uint64(1000+run))
	sep := l.splitInto(r, 9, next)
	if l.count() != run || r.count() != 4 {
		t.Fatalf("left %d right %d, want the run (%d) and the other range (4)", l.count(), r.count(), run)
	}
	if want := binary.BigEndian.AppendUint64(nil, 4999); !bytes.Equal(sep, want) {
		t.Fatalf("separator %x, want %x (just below the other range)", sep, want)
	}
	if bytes.Compare(next, sep) > 0 {
		t.Fatal("the run's next key goes to the other range's leaf")
	}

	l, _ = build()
	initNode(rb[:], kindLeaf)
	c := l.count()
	l.splitInto(r, 9, binary.BigEndian.AppendUint64(nil, 1003)) // inside the run, not after the latest insert
	if l.count() != c/2+1 || r.count() != c-c/2-1 {
		t.Fatalf("left %d right %d of %d: want a half split", l.count(), r.count(), c)
	}
}

func TestBelow(t *testing.T) {
	for _, tc := range []struct{ b, want string }{
		{"\x05", "\x04"}, {"ab\x00", "ab"}, {"\x00", ""}, {"a\x01", "a\x00"},
	} {
		if got := below([]byte(tc.b)); string(got) != tc.want || bytes.Compare(got, []byte(tc.b)) >= 0 {
			t.Errorf("below(%q) = %q, want %q", tc.b, got, tc.want)
		}
	}
}

// TestRoomForCountsTheReplacedEntry: a full leaf takes an update whose
// value is no larger than the old one (no split), and nothing more.
func TestRoomForCountsTheReplacedEntry(t *testing.T) {
	var b [protocol.PageSize]byte
	initNode(b[:], kindLeaf)
	n := node(b[:])
	fillLeaf(n, 0, 128)
	last := uint64(n.count() - 1)
	inside := binary.BigEndian.AppendUint64(nil, last)
	outside := binary.BigEndian.AppendUint64(nil, last+1)
	if n.room(8, 128) {
		t.Fatal("fillLeaf left room")
	}
	if !n.roomFor(inside, 128) || !n.roomFor(inside, 100) {
		t.Fatal("an update of a full leaf with a value of the same size or smaller needs a split")
	}
	if n.roomFor(outside, 128) {
		t.Fatal("a new key fits in a full leaf")
	}
	free := usable - headerSize - n.live()
	if n.roomFor(inside, 128+free+1) {
		t.Fatalf("an update growing the value by %d bytes fits in %d free bytes", free+1, free)
	}
}

// TestShortKeysInline: a node keeps a key of at most 8 bytes in its slot
// alone, so a leaf of YCSB entries (8-byte keys, 128-byte values) holds 28
// where it held 26; longer keys still go to the heap. A page written
// before the flag existed (every key in the heap) reads the same, takes
// inserts in its own format, and is converted by its next compaction.
func TestShortKeysInline(t *testing.T) {
	var b [protocol.PageSize]byte
	initNode(b[:], kindLeaf)
	n := node(b[:])
	fillLeaf(n, 0, 128)
	if n.count() != 28 {
		t.Fatalf("a leaf holds %d entries of 8+128 bytes, want 28", n.count())
	}

	// The old format, built by hand: flag clear, keys in the heap.
	r := rand.New(rand.NewPCG(5, 6))
	type entry struct{ k, v []byte }
	var want []entry
	initNode(b[:], kindLeaf)
	n[1] = 0
	for len(want) < 20 {
		k := make([]byte, 1+r.IntN(14)) // short and long keys
		for i := range k {
			k[i] = byte(r.IntN(4))
		}
		i, found := n.lowerBound(k)
		if found {
			continue
		}
		v := make([]byte, r.IntN(40))
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		n.insertAt(i, k, v)
		want = slices.Insert(want, i, entry{k, v})
	}
	check := func(stage string) {
		t.Helper()
		if n.count() != len(want) {
			t.Fatalf("%s: %d entries, want %d", stage, n.count(), len(want))
		}
		for i, e := range want {
			if !bytes.Equal(n.key(i), e.k) || !bytes.Equal(n.appendKey([]byte("x"), i), append([]byte("x"), e.k...)) {
				t.Fatalf("%s: slot %d key %x, want %x", stage, i, n.key(i), e.k)
			}
			if !bytes.Equal(n.value(i), e.v) {
				t.Fatalf("%s: slot %d value %x, want %x", stage, i, n.value(i), e.v)
			}
			if j, found := n.lowerBound(e.k); j != i || !found {
				t.Fatalf("%s: lowerBound(%x) = %d,%v, want %d,true", stage, e.k, j, found, i)
			}
		}
	}
	oldLive := n.live()
	check("old format")
	n.compact()
	if n[1] != flagShortInline {
		t.Fatalf("compaction left the flags at %#x", n[1])
	}
	check("after compaction")
	short := 0
	for _, e := range want {
		if len(e.k) <= 8 {
			short += len(e.k)
		}
	}
	if short == 0 || n.live() != oldLive-short {
		t.Fatalf("live bytes %d after compaction, want %d (the short keys' %d bytes gone)", n.live(), oldLive-short, short)
	}
	if !n.valid() {
		t.Fatal("a compacted node is not valid")
	}
	n[1] = 0x80
	if n.valid() {
		t.Fatal("a node with an unknown flag is valid")
	}
}

// TestInnerSplitAtTheEndForAscendingKeys: an inner node full for a key
// that goes to its last child keeps every entry but the last (whose child
// becomes its upper), and the new node starts with no entry and the old
// upper; any other key splits in half. Either way every key still leads
// to the child it led to before, on the side of the separator it is on.
func TestInnerSplitAtTheEndForAscendingKeys(t *testing.T) {
	for _, tc := range []struct {
		name      string
		key       uint64
		wantLeft  func(c int) int
		wantRight func(c int) int
	}{
		{"ascending", 1 << 40, func(c int) int { return c - 1 }, func(int) int { return 0 }},
		{"middle", 1010, func(c int) int { return c / 2 }, func(c int) int { return c - c/2 - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lb, rb [protocol.PageSize]byte
			initNode(lb[:], kindInner)
			initNode(rb[:], kindInner)
			l, r := node(lb[:]), node(rb[:])
			var child [8]byte
			for k := uint64(1000); l.room(MaxKey, 8); k++ {
				binary.LittleEndian.PutUint64(child[:], k) // child k holds keys up to k
				l.insertAt(l.count(), binary.BigEndian.AppendUint64(nil, k), child[:])
			}
			c := l.count()
			l.setUpper(1 << 50)
			probes := []uint64{0, 1000, 1001, 1000 + uint64(c)/2, 1000 + uint64(c) - 1, 1000 + uint64(c), 1 << 45}
			before := make([]uint64, len(probes))
			for i, p := range probes {
				before[i] = l.childFor(binary.BigEndian.AppendUint64(nil, p))
			}
			sep := l.splitInto(r, 77, binary.BigEndian.AppendUint64(nil, tc.key))
			if l.count() != tc.wantLeft(c) || r.count() != tc.wantRight(c) {
				t.Fatalf("split of %d entries: left %d right %d, want %d and %d", c, l.count(), r.count(), tc.wantLeft(c), tc.wantRight(c))
			}
			for i, p := range probes {
				k := binary.BigEndian.AppendUint64(nil, p)
				side := l
				if bytes.Compare(k, sep) > 0 {
					side = r
				}
				if got := side.childFor(k); got != before[i] {
					t.Fatalf("key %d leads to child %d after the split, %d before", p, got, before[i])
				}
			}
		})
	}
}
