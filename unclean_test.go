package scalestore

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/storage/nvme"
)

// killAfterFlush stops db as a process killed right after its pages
// reached the store would leave it: every page written, the catalog and the
// allocator of its last clean close still in the superblock, marked in use.
func killAfterFlush(t *testing.T, db *DB) {
	t.Helper()
	if err := db.rt.Close(); err != nil {
		t.Fatal(err)
	}
	abandon(db.store)
}

// growAfterCleanClose makes a store whose pages, written after its last
// clean close, point past the pages that close counted: 300 keys closed
// cleanly, then 20,000 more (the tree grows new leaves, inner nodes and
// root) flushed without a clean close.
func growAfterCleanClose(t *testing.T, dir string, opts Options) {
	t.Helper()
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := db.Put(fmt.Appendf(nil, "key%06d", i), []byte("clean")); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		if err := db.Put(fmt.Appendf(nil, "key%06d", i), bytes.Repeat([]byte("v"), 40)); err != nil {
			t.Fatal(err)
		}
	}
	killAfterFlush(t, db)
}

// checkUncleanReads opens the unclean store in dir: refused without
// OpenUnclean, read-only with it; every key reads as a value, as absent or
// as an unreadable page (never a protocol violation), Salvage goes to the
// end, naming what it skips, and Close leaves the store unclean.
func checkUncleanReads(t *testing.T, dir string, opts Options) (read, lost int) {
	t.Helper()
	if _, err := Open(dir, opts); !errors.Is(err, ErrUnclean) || !strings.Contains(err.Error(), "OpenUnclean") {
		t.Fatalf("Open of a killed store: %v, want ErrUnclean and the way out", err)
	}
	opts.OpenUnclean = true
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open with OpenUnclean: %v", err)
	}
	for i := 0; i < 20000; i += 97 {
		_, _, err := db.Get(fmt.Appendf(nil, "key%06d", i), nil)
		if err != nil && !errors.Is(err, ErrUnreadable) {
			t.Fatalf("Get of key %d in an unclean store: %v, want a value, absence or ErrUnreadable", i, err)
		}
		if err != nil && errors.Is(err, actors.ErrProtocol) {
			t.Fatalf("Get of key %d: a protocol violation: %v", i, err)
		}
	}
	err = db.Salvage(nil, nil, func(k, v []byte) bool { read++; return true },
		func(lo, hi []byte, err error) bool {
			if !errors.Is(err, ErrUnreadable) {
				t.Errorf("skipped %q..%q: %v, want ErrUnreadable", lo, hi, err)
			}
			lost++
			return true
		})
	if err != nil {
		t.Fatalf("Salvage: %v", err)
	}
	if err := db.Put([]byte("k"), []byte("v")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Put on a store opened unclean: %v, want ErrReadOnly", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close of a store opened unclean: %v", err)
	}
	opts.OpenUnclean = false
	if _, err := Open(dir, opts); !errors.Is(err, ErrUnclean) {
		t.Fatalf("reopen after reading it unclean: %v, want ErrUnclean still", err)
	}
	return read, lost
}

// TestUncleanStoreReadsPagesWrittenAfterItsCatalog: on the O_DIRECT store,
// OpenUnclean reads the pages written after the last clean close too (the
// store tells how far its data goes): the keys the flush wrote are there.
func TestUncleanStoreReadsPagesWrittenAfterItsCatalog(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CachePages: 64, Slots: 1 << 14, NoSync: true}
	growAfterCleanClose(t, dir, opts)
	// Without its log and its undo journal (a store of a build that kept
	// neither), the store can be neither recovered nor rolled back.
	for _, f := range []string{LogFile, StoreFile + nvme.JournalSuffix} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	read, lost := checkUncleanReads(t, dir, opts)
	if read != 20000 || lost != 0 {
		t.Fatalf("salvaged %d keys, %d ranges lost; want all 20000 keys, the flush having written every page", read, lost)
	}
}

// TestUncleanStoreWithoutLogRollsBack: a killed store whose log is gone
// cannot be recovered (refused, ErrUnclean), but its undo journal still
// puts its pages back as of its last checkpoint, so OpenUnclean reads that
// consistent state, every page readable.
func TestUncleanStoreWithoutLogRollsBack(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CachePages: 64, Slots: 1 << 14, NoSync: true}
	growAfterCleanClose(t, dir, opts)
	if err := os.Remove(filepath.Join(dir, LogFile)); err != nil {
		t.Fatal(err)
	}
	read, lost := checkUncleanReads(t, dir, opts)
	if read != 300 || lost != 0 {
		t.Fatalf("salvaged %d keys, %d ranges lost; want the 300 keys of the last checkpoint", read, lost)
	}
}

// TestPagesPastTheCatalogAreUnreadable: a store that cannot tell how far
// its data goes keeps the allocator of its last clean close, and the pages
// past it are unreadable pages (actors.ErrUnallocated), not a protocol
// violation.
func TestPagesPastTheCatalogAreUnreadable(t *testing.T) {
	ts := &trackedStore{memStore: memStore{Store: memfile.New(1<<14, nil)}, clean: true}
	opts := ts.options(false)
	opts.CachePages = 64
	growAfterCleanClose(t, "x", opts)
	read, lost := checkUncleanReads(t, "x", opts)
	if lost == 0 || read >= 20000 {
		t.Fatalf("salvaged %d keys, %d ranges lost; want the keys under new pages lost", read, lost)
	}
	opts.OpenUnclean = true
	db, err := Open("x", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var unallocated error
	for i := 0; i < 20000 && unallocated == nil; i += 97 {
		if _, _, err := db.Get(fmt.Appendf(nil, "key%06d", i), nil); errors.Is(err, actors.ErrUnallocated) {
			unallocated = err
		}
	}
	if unallocated == nil || !strings.Contains(unallocated.Error(), "x: ") || !strings.Contains(unallocated.Error(), "Salvage") {
		t.Fatalf("no key failed on a page past the catalog, or its error names neither the store nor the way out: %v", unallocated)
	}
}

// TestKilledStoreFixture is the store of issue 20, cut to the pages that
// matter: killed after a clean session, its catalog (slot 1) names a root,
// slot 116, that was allocated after that session and never written, and
// the superblock counts 2 pages. It is refused; OpenUnclean reads it
// without a protocol violation: "first" is behind the unwritten root, an
// unreadable page, and Salvage names every key as lost.
func TestKilledStoreFixture(t *testing.T) {
	dir := t.TempDir()
	loadFixture(t, "testdata/killed-store.pages.gz", filepath.Join(dir, StoreFile))
	opts := Options{CachePages: 64}
	if _, err := Open(dir, opts); !errors.Is(err, ErrUnclean) {
		t.Fatalf("Open: %v, want ErrUnclean", err)
	}
	opts.OpenUnclean = true
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = db.Get([]byte("first"), nil)
	if !errors.Is(err, ErrUnreadable) || !errors.Is(err, btree.ErrCorrupt) || !strings.Contains(err.Error(), "page 0:116") {
		t.Fatalf("Get(first): %v, want page 0:116 unreadable", err)
	}
	var ranges []string
	err = db.Salvage(nil, nil, func(k, v []byte) bool { t.Errorf("salvaged %q", k); return true },
		func(lo, hi []byte, err error) bool {
			ranges = append(ranges, fmt.Sprintf("%q..%q", lo, hi))
			return true
		})
	if err != nil || len(ranges) != 1 || ranges[0] != `""..""` {
		t.Fatalf("Salvage: %v, skipped %v; want every key in one lost range", err, ranges)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// loadFixture writes the sparse store file path from a fixture of pages:
// gzip of records of a little-endian uint64 file page index (0 the
// superblock, slot s at s+1) and the 4096-byte page.
func loadFixture(t *testing.T, fixture, path string) {
	t.Helper()
	in, err := os.Open(fixture)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	z, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var rec [8 + nvme.PageSize]byte
	var slots uint64
	for {
		if _, err := io.ReadFull(z, rec[:]); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		idx := binary.LittleEndian.Uint64(rec[:8])
		if idx == 0 {
			slots = binary.LittleEndian.Uint64(rec[8+16:]) // the superblock's capacity
		}
		if _, err := out.WriteAt(rec[8:], int64(idx)*nvme.PageSize); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Truncate(int64(slots+1) * nvme.PageSize); err != nil {
		t.Fatal(err)
	}
}
