package scalestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/internal/inparallel"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/storage/nvme"
)

// memStore is a Store that outlives Close, to test reopening without disks.
type memStore struct {
	*memfile.Store
	meta   []byte
	closed bool
}

func (m *memStore) Meta() []byte           { return append([]byte(nil), m.meta...) }
func (m *memStore) SetMeta(b []byte) error { m.meta = append(m.meta[:0], b...); return nil }
func (m *memStore) Close() error           { m.closed = true; return nil }

func memOptions(ms *memStore) Options {
	return Options{CachePages: 16, OpenStore: func(string, uint64) (Store, error) { return ms, nil }}
}

func TestReopenKeepsEverything(t *testing.T) {
	ms := &memStore{Store: memfile.New(4096, nil)}
	db, err := Open("x", memOptions(ms))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := db.Put([]byte(fmt.Sprintf("key%04d", i)), []byte(fmt.Sprintf("value-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Delete([]byte("key0007")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open("x", memOptions(ms))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 300 {
		v, ok, err := db.Get([]byte(fmt.Sprintf("key%04d", i)), nil)
		if i == 7 {
			if ok {
				t.Fatal("deleted key came back")
			}
			continue
		}
		if err != nil || !ok || string(v) != fmt.Sprintf("value-%d", i) {
			t.Fatalf("key %d after reopen: %q %v %v", i, v, ok, err)
		}
	}
	n := 0
	if err := db.Scan([]byte("key0100"), []byte("key0200"), func(k, v []byte) bool { n++; return true }); err != nil || n != 100 {
		t.Fatalf("scan: %d keys, %v", n, err)
	}
}

// Many goroutines at once, data several times the cache.
func TestConcurrentUse(t *testing.T) {
	ms := &memStore{Store: memfile.New(8192, nil)}
	db, err := Open("x", memOptions(ms))
	if err != nil {
		t.Fatal(err)
	}
	inparallel.Run(t, 8, func(g int) error {
		for i := range 400 {
			k := []byte(fmt.Sprintf("g%d-%05d", g, i))
			if err := db.Put(k, make([]byte, 100)); err != nil {
				return err
			}
			if _, ok, err := db.Get(k, nil); err != nil || !ok {
				return fmt.Errorf("get %s: %v %v", k, ok, err)
			}
		}
		return nil
	})
	n := 0
	if err := db.Scan(nil, nil, func(k, v []byte) bool { n++; return true }); err != nil || n != 3200 {
		t.Fatalf("scan all: %d, %v", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// Many goroutines at once on the O_DIRECT/io_uring store, data several
// times the cache: workers submit their own reads while the I/O goroutine
// sleeps on completions (run it with -race). Every value must read back,
// now and after a reopen.
func TestConcurrentUseOnDisk(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CachePages: 32})
	if err != nil {
		t.Fatal(err)
	}
	value := func(k []byte) []byte { return bytes.Repeat(k, 24) } // 2,400 entries in about 4x the cache
	inparallel.Run(t, 8, func(g int) error {
		for i := range 300 {
			k := []byte(fmt.Sprintf("g%d-%05d", g, i))
			if err := db.Put(k, value(k)); err != nil {
				return err
			}
			j := (i * 7919) % (i + 1) // an earlier key of ours, spread over all of them: likely evicted
			old := []byte(fmt.Sprintf("g%d-%05d", g, j))
			if v, ok, err := db.Get(old, nil); err != nil || !ok || !bytes.Equal(v, value(old)) {
				return fmt.Errorf("get %s: %q %v %v", old, v, ok, err)
			}
		}
		return nil
	})
	if s := db.Stats(); s.SSDReads == 0 {
		t.Fatalf("no reads from the store (%+v): the data did not exceed the cache", s)
	} else {
		t.Logf("%+v", s)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{CachePages: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	err = db.Scan(nil, nil, func(k, v []byte) bool {
		if !bytes.Equal(v, value(k)) {
			t.Errorf("after reopen %s = %q", k, v)
		}
		n++
		return true
	})
	if err != nil || n != 2400 {
		t.Fatalf("scan after reopen: %d keys, %v", n, err)
	}
}

// TestGetAllocatesNothing: a lookup of a cached key into a buffer with room,
// on the DB or through a session, allocates nothing (the buffer manager's hot path, the B-tree's optimistic
// descent and the embedded API around them).
func TestGetAllocatesNothing(t *testing.T) {
	db, err := Open("", Options{InMemory: true, CachePages: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 1000 {
		k := []byte(fmt.Sprintf("key%04d", i))
		if err := db.Put(k, k); err != nil {
			t.Fatal(err)
		}
	}
	key, dst := []byte("key0500"), make([]byte, 0, 64)
	s := db.NewSession()
	defer s.Close()
	for name, get := range map[string]func(key, dst []byte) ([]byte, bool, error){"DB.Get": db.Get, "Session.Get": s.Get} {
		allocs := testing.AllocsPerRun(1000, func() {
			if v, ok, err := get(key, dst[:0]); err != nil || !ok || string(v) != "key0500" {
				t.Errorf("%s: %q %v %v", name, v, ok, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s of a cached key: %.1f allocations, want 0", name, allocs)
		}
	}
}

// TestOpenUpgradesOldCatalog: a store whose catalog carries the magic of
// the format before short keys were inlined opens, reads and writes as
// before, and its catalog is upgraded so that an older binary refuses it.
func TestOpenUpgradesOldCatalog(t *testing.T) {
	ms := &memStore{Store: memfile.New(4096, nil)}
	db, err := Open("x", memOptions(ms))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if err := db.Put([]byte(fmt.Sprintf("k%05d", i)), []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	slot := protocol.PID(binary.LittleEndian.Uint64(ms.meta[16:])).Slot()
	page := make([]byte, protocol.PageSize)
	magic := func() uint64 {
		t.Helper()
		if err := ms.ReadPage(slot, page); err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(page)
	}
	const v1, current = 0x5343415441, 0x5343415443
	if m := magic(); m != current {
		t.Fatalf("a new catalog has magic %#x, want %#x", m, current)
	}
	binary.LittleEndian.PutUint64(page, v1)
	if err := ms.WritePage(slot, page); err != nil {
		t.Fatal(err)
	}

	db, err = Open("x", memOptions(ms))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("k99999"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if v, ok, err := db.Get([]byte(fmt.Sprintf("k%05d", i)), nil); err != nil || !ok || string(v) != fmt.Sprintf("v%d", i) {
			t.Fatalf("key %d in the old-catalog store: %q %v %v", i, v, ok, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if m := magic(); m != current {
		t.Fatalf("the old catalog was not upgraded: magic %#x", m)
	}
}

// TestFullStoreLosesNothing: when the store has no slot left for a split,
// Put fails with ErrStoreFull, and every key put before is still there (by
// Get and by a scan), however few slots were left: a root split needs two
// pages, and must not move half a leaf into the first when the second is
// refused. The keys come in a scrambled order, so that leaves split in
// half (an ascending run splits off an empty page).
func TestFullStoreLosesNothing(t *testing.T) {
	for _, slots := range []uint64{3, 4, 5, 9, 40} {
		db, err := Open("", Options{InMemory: true, CachePages: 64, Slots: slots})
		if err != nil {
			t.Fatal(err)
		}
		val := bytes.Repeat([]byte("v"), 100)
		n := 0
		for ; ; n++ {
			err = db.Put(scrambled(n), val)
			if err != nil {
				break
			}
			if n > 100_000 {
				t.Fatalf("%d slots: %d puts and no error", slots, n)
			}
		}
		if !errors.Is(err, actors.ErrStoreFull) {
			t.Fatalf("%d slots: put %d failed with %v, want ErrStoreFull", slots, n, err)
		}
		for i := range n {
			if v, ok, err := db.Get(scrambled(i), nil); err != nil || !ok || !bytes.Equal(v, val) {
				t.Fatalf("%d slots, %d keys put: key %d: %q, %v, %v", slots, n, i, v, ok, err)
			}
		}
		seen := 0
		if err := db.Scan(nil, nil, func(k, v []byte) bool { seen++; return true }); err != nil || seen != n {
			t.Fatalf("%d slots: scan saw %d of %d keys (%v)", slots, seen, n, err)
		}
		// Updates in place and deletes still work on a full store.
		if err := db.Put(scrambled(0), []byte("w")); err != nil {
			t.Errorf("%d slots: update of a stored key: %v", slots, err)
		}
		if found, err := db.Delete(scrambled(1)); err != nil || !found {
			t.Errorf("%d slots: delete: %v, %v", slots, found, err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("%d slots: close: %v", slots, err)
		}
	}
}

// scrambled is the i-th key of a sequence in no order (distinct for i below
// 1<<20).
func scrambled(i int) []byte { return fmt.Appendf(nil, "key%07d", (i*786433)%(1<<20)) }

// trackedStore is a memStore that remembers, as the NVMe store does,
// whether its last user closed it or abandoned it, and that can refuse
// writes as a full disk does.
type trackedStore struct {
	memStore
	clean, wasClean bool
	fullDisk        bool
}

func (s *trackedStore) WasClean() bool { return s.wasClean }
func (s *trackedStore) Close() error   { s.clean = true; return nil }
func (s *trackedStore) Abandon() error { s.clean = false; return nil }
func (s *trackedStore) WritePage(slot uint64, buf []byte) error {
	if s.fullDisk {
		return fmt.Errorf("write of slot %d: %w", slot, syscall.ENOSPC)
	}
	return s.memStore.WritePage(slot, buf)
}

func (s *trackedStore) options(unclean bool) Options { return trackedOptions(s, s, unclean) }

// trackedOptions opens st, whose clean state s tracks.
func trackedOptions(s *trackedStore, st Store, unclean bool) Options {
	return Options{CachePages: 16, OpenUnclean: unclean, OpenStore: func(string, uint64) (Store, error) {
		s.wasClean, s.clean = s.clean, false // Open marks the store in use
		return st, nil
	}}
}

// TestFailedFlushLeavesStoreUnclean: a Close whose flush fails (a full disk)
// reports the store's error, leaves the metadata of the last clean close and
// the store marked unclean; the next Open refuses it with ErrUnclean, and
// Options.OpenUnclean opens it read-only (here nothing reached the pages, so
// every key of the clean close is there) and leaves it unclean.
func TestFailedFlushLeavesStoreUnclean(t *testing.T) {
	ts := &trackedStore{memStore: memStore{Store: memfile.New(4096, nil)}, clean: true}
	db, err := Open("x", ts.options(false))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := db.Put(fmt.Appendf(nil, "key%04d", i), []byte("first")); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	meta := ts.Meta()

	db, err = Open("x", ts.options(false))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := db.Put(fmt.Appendf(nil, "key%04d", i), []byte("second")); err != nil {
			t.Fatal(err)
		}
	}
	ts.fullDisk = true
	if err := db.Close(); !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, actors.ErrStorage) {
		t.Fatalf("Close on a full disk: %v, want ENOSPC as a storage failure", err)
	}
	if ts.clean || !bytes.Equal(ts.Meta(), meta) {
		t.Fatalf("after the failed flush: clean %v, metadata changed %v", ts.clean, !bytes.Equal(ts.Meta(), meta))
	}
	ts.fullDisk = false

	for range 2 { // a refused Open leaves it unclean
		if _, err := Open("x", ts.options(false)); !errors.Is(err, ErrUnclean) {
			t.Fatalf("Open of an unclean store: %v, want ErrUnclean", err)
		}
	}
	db, err = Open("x", ts.options(true))
	if err != nil {
		t.Fatalf("Open with OpenUnclean: %v", err)
	}
	for i := range 300 {
		if v, ok, err := db.Get(fmt.Appendf(nil, "key%04d", i), nil); err != nil || !ok || string(v) != "first" {
			t.Fatalf("key %d: %q %v %v", i, v, ok, err)
		}
	}
	if err := db.Put([]byte("key0000"), []byte("third")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Put on a store opened unclean: %v, want ErrReadOnly", err)
	}
	if _, err := db.Delete([]byte("key0000")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Delete on a store opened unclean: %v, want ErrReadOnly", err)
	}
	if err := db.Close(); err != nil || ts.clean {
		t.Fatalf("Close after OpenUnclean: %v, clean %v (want it left unclean)", err, ts.clean)
	}
	if _, err := Open("x", ts.options(false)); !errors.Is(err, ErrUnclean) {
		t.Fatalf("Open after an unclean store was read: %v, want ErrUnclean", err)
	}
}

// roomyStore is a trackedStore whose disk has room for the first room
// slots: Reserve refuses any slot past them, as storage/nvme's does on a
// full filesystem.
type roomyStore struct {
	trackedStore
	room uint64
}

func (s *roomyStore) Reserve(slot uint64) error {
	if slot >= s.room {
		return fmt.Errorf("reserve slot %d: %w", slot, syscall.ENOSPC)
	}
	return nil
}

// TestFullDiskFailsPutsNotTheFlush: when the disk has no room for another
// page, the Put that needs one fails (ErrStoreFull, with the disk's ENOSPC),
// as it does again when retried, while the store keeps all it took, closes
// cleanly and reopens with every key.
func TestFullDiskFailsPutsNotTheFlush(t *testing.T) {
	rs := &roomyStore{trackedStore: trackedStore{memStore: memStore{Store: memfile.New(4096, nil)}, clean: true}, room: 20}
	db, err := Open("x", trackedOptions(&rs.trackedStore, rs, false))
	if err != nil {
		t.Fatal(err)
	}
	val := bytes.Repeat([]byte("v"), 100)
	n := 0
	for ; ; n++ {
		if err = db.Put(scrambled(n), val); err != nil {
			break
		}
	}
	if !errors.Is(err, actors.ErrStoreFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("put %d on a full disk: %v, want ErrStoreFull with ENOSPC", n, err)
	}
	if err := db.Put(scrambled(n), val); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the same put again: %v", err)
	}
	if err := db.Close(); err != nil || !rs.clean {
		t.Fatalf("Close on a full disk: %v (clean %v)", err, rs.clean)
	}
	db, err = Open("x", trackedOptions(&rs.trackedStore, rs, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range n {
		if v, ok, err := db.Get(scrambled(i), nil); err != nil || !ok || !bytes.Equal(v, val) {
			t.Fatalf("key %d of %d after reopen: %q %v %v", i, n, v, ok, err)
		}
	}
}

// TestCorruptPageFailsOnlyItsKeys: a page that fails its checksum fails the
// operations that need it, with an error that names the page and the
// cause, and nothing else: the other keys read and write as before, the
// store closes cleanly, and the corrupt page is never written back (after a
// reopen its keys still fail instead of being silently lost or changed).
func TestCorruptPageFailsOnlyItsKeys(t *testing.T) {
	dir := t.TempDir()
	const keys = 3000
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%05d", i)) }
	value := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 50) }
	db, err := Open(dir, Options{CachePages: 16})
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if err := db.Put(key(i), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	pages := db.Stats().Pages
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Garbage over a page in the middle of the data (a leaf: the few inner
	// pages were allocated first).
	slot := pages / 2
	f, err := os.OpenFile(filepath.Join(dir, "scalestore.db"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte{0x5A}, protocol.PageSize)
	if _, err := f.WriteAt(junk, int64(slot+1)*protocol.PageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	check := func(round string, db *DB) (bad []int) {
		for i := range keys {
			v, ok, err := db.Get(key(i), nil)
			switch {
			case err != nil:
				if !errors.Is(err, bufmgr.ErrUnreadable) || !errors.Is(err, actors.ErrStorage) || !errors.Is(err, nvme.ErrCorrupt) ||
					!strings.Contains(err.Error(), fmt.Sprintf("0:%d", slot)) {
					t.Fatalf("%s: get %s: %v, want an unreadable page 0:%d (a storage failure, corrupt)", round, key(i), err, slot)
				}
				bad = append(bad, i)
			case !ok || !bytes.Equal(v, value(i)):
				t.Fatalf("%s: get %s = %x, %v", round, key(i), v, ok)
			}
		}
		if len(bad) == 0 || len(bad) > keys/10 {
			t.Fatalf("%s: %d of %d keys failed, want those of one leaf", round, len(bad), keys)
		}
		return bad
	}
	db, err = Open(dir, Options{CachePages: 16})
	if err != nil {
		t.Fatal(err)
	}
	bad := check("first open", db)
	// A batch fails only its keys of the corrupt leaf, and answers the
	// others; a batch away from it is answered whole.
	isBad := map[int]bool{}
	for _, i := range bad {
		isBad[i] = true
	}
	for _, from := range []int{max(bad[0]-5, 0), (bad[0] + keys/2) % (keys - 20)} {
		ks, vals, found := make([][]byte, 20), make([][]byte, 20), make([]bool, 20)
		var want []int
		for j := range ks {
			ks[j] = key(from + j)
			if isBad[from+j] {
				want = append(want, j)
			}
		}
		err := db.GetBatch(ks, vals, found)
		var be *BatchError
		switch {
		case len(want) == 0 && err != nil:
			t.Fatalf("batch from %d, away from the corrupt leaf: %v", from, err)
		case len(want) > 0 && (!errors.As(err, &be) || !errors.Is(err, ErrUnreadable) || !slices.Equal(be.Keys, want)):
			t.Fatalf("batch from %d: %v, want a BatchError for keys %v", from, err, want)
		}
		for j := range ks {
			if !isBad[from+j] && (!found[j] || !bytes.Equal(vals[j], value(from+j))) {
				t.Fatalf("batch from %d: key %s = %x %v", from, ks[j], vals[j], found[j])
			}
		}
	}
	// A scan stops at the corrupt leaf; a salvage reads every other key, in
	// order, and names the range it skipped: the corrupt leaf's keys and no
	// other.
	if err := db.Scan(nil, nil, func(k, v []byte) bool { return true }); !errors.Is(err, ErrUnreadable) {
		t.Fatalf("scan across the corrupt leaf: %v, want ErrUnreadable", err)
	}
	var got []int
	type skip struct{ lo, hi []byte }
	var skips []skip
	err = db.Salvage(nil, nil, func(k, v []byte) bool {
		var i int
		if _, err := fmt.Sscanf(string(k), "k%05d", &i); err != nil || !bytes.Equal(v, value(i)) {
			t.Fatalf("salvage: %q = %x", k, v)
		}
		got = append(got, i)
		return true
	}, func(lo, hi []byte, err error) bool {
		if !errors.Is(err, ErrUnreadable) {
			t.Fatalf("salvage skipped %q..%q: %v, want ErrUnreadable", lo, hi, err)
		}
		skips = append(skips, skip{bytes.Clone(lo), bytes.Clone(hi)})
		return true
	})
	if err != nil {
		t.Fatalf("salvage: %v", err)
	}
	var want []int
	for i := range keys {
		if !isBad[i] {
			want = append(want, i)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("salvage read %d keys, want the %d outside the corrupt leaf", len(got), len(want))
	}
	if len(skips) != 1 || skips[0].hi == nil {
		t.Fatalf("salvage skipped %d ranges (%q), want the corrupt leaf's", len(skips), skips)
	}
	for i := range keys {
		k := key(i)
		if in := bytes.Compare(k, skips[0].lo) >= 0 && bytes.Compare(k, skips[0].hi) <= 0; in != isBad[i] {
			t.Fatalf("key %s: in the skipped range %q..%q %v, unreadable %v", k, skips[0].lo, skips[0].hi, in, isBad[i])
		}
	}
	// A salvage of a range away from the corrupt leaf skips nothing.
	n := 0
	if err := db.Salvage(key(bad[0]+keys/4), key(bad[0]+keys/4+50), func(k, v []byte) bool { n++; return true },
		func(lo, hi []byte, err error) bool {
			t.Fatalf("salvage away from the leaf skipped %q..%q", lo, hi)
			return false
		}); err != nil || n != 50 {
		t.Fatalf("salvage of 50 keys away from the corrupt leaf: %d keys, %v", n, err)
	}
	// The failure is not cached for good: the page is read (and fails) again.
	reads := db.Stats().SSDReads
	if again := check("again", db); len(again) != len(bad) {
		t.Fatalf("%d keys failed the first time, %d the second", len(bad), len(again))
	}
	if db.Stats().SSDReads == reads {
		t.Fatal("the second round did not read the store again")
	}
	// Writes: a key of the corrupt leaf fails, the others work.
	if err := db.Put(key(bad[0]), []byte("new")); !errors.Is(err, bufmgr.ErrUnreadable) {
		t.Fatalf("put into the corrupt leaf: %v", err)
	}
	good := (bad[0] + keys/2) % keys
	if err := db.Put(key(good), value(good+1)); err != nil {
		t.Fatalf("put %s: %v", key(good), err)
	}
	if err := db.Put(key(good), value(good)); err != nil {
		t.Fatalf("put %s: %v", key(good), err)
	}
	if err := db.Scan(nil, nil, func(k, v []byte) bool { return true }); !errors.Is(err, bufmgr.ErrUnreadable) {
		t.Fatalf("a scan over the corrupt leaf: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close after the failures: %v", err)
	}
	db, err = Open(dir, Options{CachePages: 16})
	if err != nil {
		t.Fatalf("reopen (the store must be clean): %v", err)
	}
	defer db.Close()
	if after := check("after reopen", db); len(after) != len(bad) {
		t.Fatalf("%d keys failed before the close, %d after", len(bad), len(after))
	}
}
