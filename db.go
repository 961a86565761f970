// Package scalestore is the embedded API: open a single-node store in a
// directory and get, put, delete and scan keys. Underneath it is the same
// engine the cluster runs: the B-tree of the paper (§5.2) on the buffer
// manager's guards, one node of the coherence protocol, and an SSD store.
//
//	db, err := scalestore.Open("data", scalestore.Options{})
//	err = db.Put([]byte("k"), []byte("v"))
//	v, ok, err := db.Get([]byte("k"), nil)
//	err = db.Close() // flushes every page and the catalog
//
// A DB is safe for concurrent use by many goroutines.
//
// Writes are durable once Close returns: there is no log. A store that may
// have taken writes since its last clean close (its process stopped without
// Close, or its Close could not write every page) is refused by the next
// Open (ErrUnclean), a new store as well as an old one: Open persists the
// store's catalog, marked in use, before it returns, so no write is ever
// acknowledged by a store that would reopen as clean. OpenUnclean opens such
// a store read-only to get out what it still holds. A full disk fails the
// Put that needs a new page (the store reserves disk space before it hands
// a page out), not the Close.
package scalestore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
	"github.com/scalestore-go/scalestore/storage/memfile"
)

// Store is what the DB needs of its storage: pages plus a small metadata
// blob that survives a clean close (the catalog and the page allocator).
type Store interface {
	storage.PageStore
	Meta() []byte
	SetMeta([]byte) error
}

// Options configure Open.
type Options struct {
	// CachePages is the number of 4 KiB frames in memory (default 4096,
	// 16 MiB).
	CachePages int
	// Slots is the capacity in pages when the store is created (default
	// 1<<20, 4 GiB).
	Slots uint64
	// OpenStore opens (or creates) the store in dir; the default is the
	// O_DIRECT NVMe store.
	OpenStore func(dir string, slots uint64) (Store, error)
	// InMemory keeps the pages in memory instead of a directory (nothing
	// survives Close): for benchmarks and tests.
	InMemory bool
	// OpenUnclean opens a store that was not closed cleanly (see
	// ErrUnclean) instead of refusing it, read-only, to read what it
	// holds. Its pages may not match its catalog: lookups can miss keys,
	// find older values, or fail with ErrUnreadable on a page that is
	// damaged or lies past the pages the catalog allocated; Salvage reads
	// on past such pages. Put and Delete fail with ErrReadOnly, and Close
	// leaves the store as unclean as it was: write what Salvage finds into
	// a new store. A store that was closed cleanly opens as usual.
	OpenUnclean bool
}

// ErrUnclean is returned by Open for a store that holds a tree but was not
// closed cleanly: its process stopped without closing it, or its last
// flush failed (a full disk, an I/O error). The store has no log to recover
// from, so the pages written before the stop may not match the catalog and
// the allocator of its last clean close. Options.OpenUnclean opens it
// anyway.
var ErrUnclean = errors.New("store was not closed cleanly")

// ErrReadOnly is returned by Put and Delete on a store opened with
// OpenUnclean that was not clean.
var ErrReadOnly = errors.New("scalestore: the store is open read-only")

// Stats are the DB's counters.
type Stats struct {
	CacheHits, CacheMisses uint64
	// SlowHits are cache hits that went through the slow path (under the
	// node's lock), a part of CacheHits.
	SlowHits            uint64
	SSDReads, SSDWrites uint64
	// Pages is how many pages the store has allocated: slots 0 to Pages-1
	// hold the data (the region a same-disk baseline should read).
	Pages uint64
}

// Stats reads the counters.
func (db *DB) Stats() Stats {
	var s Stats
	db.rt.Locked(func() {
		cs := db.rt.Node().Cache().Stats()
		s = Stats{CacheHits: cs.Hits, CacheMisses: cs.Misses, SlowHits: cs.SlowHits, SSDReads: db.rt.Reads, SSDWrites: db.rt.Writes,
			Pages: db.rt.Node().Directory().Allocated()}
	})
	return s
}

// memoryStore keeps pages in memory (Options.InMemory).
type memoryStore struct {
	*memfile.Store
	meta []byte
}

func (m *memoryStore) Meta() []byte           { return append([]byte(nil), m.meta...) }
func (m *memoryStore) SetMeta(b []byte) error { m.meta = append(m.meta[:0], b...); return nil }

// DB is an open store.
type DB struct {
	rt    *actors.Local
	store Store
	tree  *btree.Tree
	// allocate is rt.Allocate, made once: a method value made per
	// operation would be an allocation on every Get.
	allocate func(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error)
	// unclean: open the store even if it was not closed cleanly.
	unclean bool
	// readOnly is why Put and Delete fail, if they do: the store was
	// opened unclean.
	readOnly error
	// dir names the store in errors.
	dir string
}

const metaMagic = 0x5353474F4D455441 // "SSGOMETA"

// Open opens the store in dir, creating it if it does not exist.
func Open(dir string, opts Options) (*DB, error) {
	if opts.CachePages == 0 {
		opts.CachePages = 4096
	}
	if opts.CachePages < 8 {
		return nil, fmt.Errorf("scalestore: CachePages %d: want at least 8", opts.CachePages)
	}
	if opts.Slots == 0 {
		opts.Slots = 1 << 20
	}
	open := opts.OpenStore
	if opts.InMemory {
		open = func(string, uint64) (Store, error) { return &memoryStore{Store: memfile.New(opts.Slots, nil)}, nil }
	}
	if open == nil {
		open = defaultStore
	}
	if open == nil {
		return nil, errors.New("scalestore: no store implementation built in")
	}
	store, err := open(dir, opts.Slots)
	if err != nil {
		return nil, fmt.Errorf("scalestore: opening %s: %w", dir, err)
	}
	rt, err := actors.NewLocal(actors.Config{CacheFrames: opts.CachePages}, store)
	if err != nil {
		store.Close()
		return nil, err
	}
	db := &DB{rt: rt, store: store, allocate: rt.Allocate, unclean: opts.OpenUnclean, dir: dir}
	if err := db.load(); err != nil {
		rt.Close()
		if !db.wasClean() {
			abandon(store) // refused, it must stay unclean: Close would mark it clean
		} else {
			store.Close()
		}
		return nil, err
	}
	return db, nil
}

// wasClean reports whether the store was closed cleanly before this Open
// (stores that cannot tell always were).
func (db *DB) wasClean() bool {
	c, ok := db.store.(interface{ WasClean() bool })
	return !ok || c.WasClean()
}

// load restores the catalog and the allocator from the store's metadata,
// or creates the tree in a new store.
func (db *DB) load() error {
	meta := db.store.Meta()
	if len(meta) == 0 {
		if !db.wasClean() {
			// This build persists the catalog before Open returns (below),
			// so only a store of an earlier build, which kept none until
			// its first clean close, can be in use without one.
			return fmt.Errorf("scalestore: %s: %w: it was created and then killed (or its flush failed) before it was "+
				"ever closed, by a build that kept no catalog until then, so any writes it took cannot be found; "+
				"remove %s to start over", db.dir, ErrUnclean, StoreFile)
		}
		return db.create()
	}
	if len(meta) < 24 || binary.LittleEndian.Uint64(meta) != metaMagic {
		return fmt.Errorf("scalestore: %s: metadata of %d bytes is not ours", db.dir, len(meta))
	}
	if !db.wasClean() {
		if !db.unclean {
			return fmt.Errorf("scalestore: %s: %w (its process stopped without closing it, or its last flush failed): "+
				"writes since its last clean close may be missing and its pages may not match its catalog; "+
				"open it with Options.OpenUnclean (kv --unclean) to read what is there, or remove %s to start over",
				db.dir, ErrUnclean, StoreFile)
		}
		db.readOnly = fmt.Errorf("%w: %s was opened with OpenUnclean (not closed cleanly); "+
			"copy what it holds into a new store", ErrReadOnly, db.dir)
	}
	return db.rt.Do(func(w *bufmgr.Worker) error {
		allocated := binary.LittleEndian.Uint64(meta[8:])
		if w, ok := db.store.(interface{ WrittenSlots() (uint64, error) }); ok && db.readOnly != nil {
			// Pages written after the last clean close lie past the pages
			// it counted, and pages it counted point to them: read them
			// too. (Read-only: nothing is allocated from here on.)
			written, err := w.WrittenSlots()
			if err != nil {
				return fmt.Errorf("scalestore: %s: finding the written pages: %w", db.dir, err)
			}
			allocated = max(allocated, written)
		}
		var err error
		db.rt.Locked(func() { err = db.rt.Node().Directory().Restore(allocated) })
		if err != nil {
			return fmt.Errorf("scalestore: restoring the allocator: %w", err)
		}
		db.tree = btree.Open(protocol.PID(binary.LittleEndian.Uint64(meta[16:])))
		if db.readOnly != nil {
			return nil // Upgrade would write, and a damaged catalog is Get's to report
		}
		if err := db.tree.Upgrade(db.session(w)); err != nil {
			return fmt.Errorf("scalestore: opening the tree: %w", err)
		}
		return nil
	})
}

// create makes the tree of a new store and persists its catalog with the
// store marked in use before Open returns: a store killed after it took a
// write is then refused as unclean at the next Open, never opened as new
// and empty. Killed before this, it holds nothing anybody was told of.
func (db *DB) create() error {
	err := db.rt.Do(func(w *bufmgr.Worker) error {
		t, err := btree.Create(db.session(w))
		if err != nil {
			return fmt.Errorf("scalestore: creating the tree: %w", err)
		}
		db.tree = t
		return nil
	})
	if err != nil {
		return err
	}
	// The metadata first: the tree's first page write marks the store in
	// use with it. Then the empty tree's pages, so that the catalog on disk
	// names a root from the start and a store killed before its first
	// clean close reads with OpenUnclean as far as its pages go.
	if err := db.store.SetMeta(db.meta()); err != nil {
		return fmt.Errorf("scalestore: %s: recording the new tree: %w", db.dir, err)
	}
	if err := db.rt.Flush(); err != nil {
		return fmt.Errorf("scalestore: %s: writing the new tree: %w", db.dir, err)
	}
	if err := db.rt.SyncStore(); err != nil {
		return fmt.Errorf("scalestore: %s: persisting the new tree's catalog: %w", db.dir, err)
	}
	return nil
}

// meta is the metadata a clean close persists: the allocator and the
// catalog.
func (db *DB) meta() []byte {
	meta := make([]byte, 24)
	binary.LittleEndian.PutUint64(meta, metaMagic)
	db.rt.Locked(func() { binary.LittleEndian.PutUint64(meta[8:], db.rt.Node().Directory().Allocated()) })
	binary.LittleEndian.PutUint64(meta[16:], uint64(db.tree.Catalog()))
	return meta
}

func (db *DB) session(w *bufmgr.Worker) btree.Session {
	return btree.Session{Cache: db.rt.Node().Cache(), Worker: w, Allocate: db.allocate}
}

// Get appends the value of key to dst; ok is false when the key is absent.
func (db *DB) Get(key, dst []byte) (val []byte, ok bool, err error) {
	s := db.borrow()
	defer s.Close()
	return s.Get(key, dst)
}

// borrow is a session for one call on the DB: its worker comes from the
// pool and goes back at Close.
func (db *DB) borrow() Session { return Session{db: db, w: db.rt.Worker()} }

// GetBatch looks up several keys in one call: found[i] tells whether
// keys[i] is there, and vals[i] is its value appended to vals[i][:0]. The
// three slices must have the same length. The answers are those of a Get
// per key. A key whose page is unreadable fails alone: the error is then a
// *BatchError that names the keys left unanswered (and wraps
// ErrUnreadable), and every other key is answered. The lookups walk the
// tree together so that their cache misses overlap (btree.Tree.GetBatch),
// which makes a batch of point reads much faster than the same reads one
// by one when the data outgrows the CPU's caches.
func (db *DB) GetBatch(keys, vals [][]byte, found []bool) error {
	s := db.borrow()
	defer s.Close()
	return s.GetBatch(keys, vals, found)
}

// Put sets key to val.
func (db *DB) Put(key, val []byte) error {
	s := db.borrow()
	defer s.Close()
	return s.Put(key, val)
}

// Delete removes key; found reports whether it was there.
func (db *DB) Delete(key []byte) (found bool, err error) {
	s := db.borrow()
	defer s.Close()
	return s.Delete(key)
}

// Scan calls fn for every key in [from, to) in order (to nil: to the end)
// until fn returns false. key and val are valid only during the call; fn
// must not use the DB.
func (db *DB) Scan(from, to []byte, fn func(key, val []byte) bool) error {
	s := db.borrow()
	defer s.Close()
	return s.Scan(from, to, fn)
}

// Salvage is Scan for a store with pages it cannot read (a corrupt or lost
// page, ErrUnreadable): it calls fn for every key in [from, to) it can read
// (from nil: from the first), and skipped for each page it cannot, with the
// range of keys that page held, lo through hi (hi nil: to the end), and why.
// fn or skipped returning false ends it; the slices they get are valid
// only during the call, and they must not use the DB. Where Scan stops at
// the first unreadable page, Salvage reads on: it takes one descent from
// the root per leaf, so it is slower, and meant for getting data out of a
// damaged store.
func (db *DB) Salvage(from, to []byte, fn func(key, val []byte) bool, skipped func(lo, hi []byte, err error) bool) error {
	err := db.rt.Do(func(w *bufmgr.Worker) error {
		return db.tree.Salvage(db.session(w), from, to, fn, skipped)
	})
	if err != nil {
		return fmt.Errorf("scalestore: %s: %w", db.dir, err)
	}
	return nil
}

// explain adds to an operation's error which store it is and, for an
// unreadable page, what to do.
func (db *DB) explain(err error) error {
	if errors.Is(err, ErrUnreadable) {
		return fmt.Errorf("scalestore: %s: %w; the other keys still read: Salvage (kv salvage) lists them "+
			"and the key ranges that are lost", db.dir, err)
	}
	return fmt.Errorf("scalestore: %s: %w", db.dir, err)
}

// abandon releases a store without marking it clean, where the store can
// tell (the NVMe store's Abandon); others are closed.
func abandon(s Store) {
	if a, ok := s.(interface{ Abandon() error }); ok {
		a.Abandon()
		return
	}
	s.Close()
}

// ErrUnreadable is wrapped by the error of an operation that needed a page
// the store could not read (a corrupt page, an I/O error): that operation
// fails and the DB goes on; the next operation on the page reads it again.
// The error also wraps the store's own (for the O_DIRECT store, one that
// wraps nvme.ErrCorrupt for a page that fails its checksum).
var ErrUnreadable = bufmgr.ErrUnreadable

// BatchError is GetBatch's error when some of its keys need an unreadable
// page: BatchError.Keys are their indices, and every other key is
// answered.
type BatchError = btree.BatchError

// Close writes every dirty page and the metadata, and closes the store. If
// a page cannot be written (a full disk, an I/O error), the store is left
// marked unclean, so that its next Open reports ErrUnclean instead of
// trusting pages that no longer match its metadata.
//
// A store opened with OpenUnclean that was not clean stays as it was: Close
// releases it without marking it clean.
func (db *DB) Close() error {
	err := db.rt.Close()
	if db.readOnly != nil {
		abandon(db.store)
		if err != nil {
			return fmt.Errorf("scalestore: %s: closing: %w", db.dir, err)
		}
		return nil
	}
	if err != nil {
		abandon(db.store)
		return fmt.Errorf("scalestore: %s: flushing the store: %w", db.dir, err)
	}
	err = db.store.SetMeta(db.meta())
	if cerr := db.store.Close(); err == nil {
		err = cerr
	}
	return err
}
