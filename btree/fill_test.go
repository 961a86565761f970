package btree_test

import (
	"encoding/binary"
	"testing"

	"github.com/scalestore-go/scalestore"
	"github.com/scalestore-go/scalestore/internal/inparallel"
)

// TestAscendingLoadFillsLeaves loads YCSB-shaped records (8-byte keys,
// 128-byte values) the way the ycsb driver does, each goroutine appending
// its own ascending range, then updates every record with a value of the
// same size. A 4 KiB leaf holds 28 such entries (the 8-byte keys live in
// the slots alone): the load must fill the leaves (a half split on every
// append leaves 14), and the updates must not split at all.
func TestAscendingLoadFillsLeaves(t *testing.T) {
	const records, goroutines = 20000, 16
	db, err := scalestore.Open("", scalestore.Options{InMemory: true, CachePages: 4096, Slots: 1 << 14})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := func(i, round int) []byte {
		v := make([]byte, 128)
		binary.LittleEndian.PutUint64(v, uint64(i))
		v[8] = byte(round)
		return v
	}
	load := func(round int) {
		per := records / goroutines
		inparallel.Run(t, goroutines, func(g int) error {
			for i := g * per; i < (g+1)*per; i++ {
				if err := db.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), val(i, round)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	load(0)
	loaded := db.Stats().Pages
	t.Logf("%d records in %d pages", records, loaded)
	if perLeaf := float64(records) / float64(loaded); perLeaf < 26 {
		t.Fatalf("%d records took %d pages: %.1f a page, want at least 26 of the 28 that fit", records, loaded, perLeaf)
	}
	load(1)
	if after := db.Stats().Pages; after != loaded {
		t.Fatalf("updating every record in place grew the tree from %d to %d pages", loaded, after)
	}
	for i := range records {
		v, ok, err := db.Get(binary.BigEndian.AppendUint64(nil, uint64(i)), nil)
		if err != nil || !ok || string(v) != string(val(i, 1)) {
			t.Fatalf("record %d after the update: ok %v err %v", i, ok, err)
		}
	}
}

// TestAscendingLoadFillsInnerNodes loads keys in ascending order from one
// goroutine: the inner nodes above the leaves must come out full too, not
// half full, so that the tree has hardly more pages than its leaves. An
// inner node is full at 158 separators of 8-byte keys (24 bytes each), when
// fewer than the 280 bytes a separator of MaxKey bytes needs are free.
func TestAscendingLoadFillsInnerNodes(t *testing.T) {
	const records = 200000
	db, err := scalestore.Open("", scalestore.Options{InMemory: true, CachePages: 16384, Slots: 1 << 15})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 128)
	for i := range records {
		if err := db.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), val); err != nil {
			t.Fatal(err)
		}
	}
	leaves := (records + 27) / 28
	// Full inner nodes: one per 158 leaves, a root and the catalog. Half
	// full ones would take about twice as many.
	inner := int(db.Stats().Pages) - leaves
	t.Logf("%d records: %d leaves, %d other pages", records, leaves, inner)
	if want := leaves/158 + 3; inner > want {
		t.Fatalf("%d pages above %d full leaves, want at most %d", inner, leaves, want)
	}
}
