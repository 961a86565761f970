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
// A Put or Delete that returned is durable: its record is in the redo log
// (scalestore.wal) and synced before the call returns, and writers that
// commit together share one sync (group commit). Options.NoSync hands the
// records to the operating system instead, which survives the process being
// killed but not a power failure. A checkpoint (every Options.CheckpointBytes
// of log, and at Close) writes the changed pages back and starts the log
// over. A store whose process was killed (or whose flush failed) recovers at
// the next Open: the store's undo journal puts its pages back as of the last
// checkpoint, and the log's records since then are applied again
// (Recovery). docs/durability.md says how and what it costs.
//
// A store that cannot be recovered (one written by a build without the log,
// or whose journal or log is gone) is refused by Open with ErrUnclean;
// OpenUnclean opens it read-only to get out what it still holds. A full
// disk fails the Put that needs a new page (the store reserves disk space
// before it hands a page out), not the Close.
package scalestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/wal"
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
	// a new store. A store that was closed cleanly, or that recovers from
	// its log, opens as usual.
	OpenUnclean bool
	// NoSync makes Put and Delete return once their log record is handed
	// to the operating system, without waiting for the device: they
	// survive the process being killed, not a power failure or a kernel
	// crash, which can lose the last writes (the store still recovers to
	// a consistent state, a prefix of the writes). Much faster per write.
	NoSync bool
	// CheckpointBytes is how much log (or undo journal) a checkpoint lets
	// grow before it writes the changed pages back and starts the log over
	// (default 64 MiB): it bounds the log's size and the replay at Open.
	CheckpointBytes int64
}

// LogFile is the file in the data directory that holds the redo log.
const LogFile = "scalestore.wal"

// ErrUnclean is returned by Open for a store that holds a tree but was not
// closed cleanly: its process stopped without closing it, or its last
// flush failed (a full disk, an I/O error), and it cannot be recovered: it was
// written by a build without the redo log, or its log or its store's undo
// journal is gone. Options.OpenUnclean opens it anyway, read-only.
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
	// LogBytes is the size of the redo log since the last checkpoint;
	// Checkpoints counts the checkpoints since Open.
	LogBytes    int64
	Checkpoints uint64
	// A cluster node's protocol counters (zero for a single-node DB):
	// pages fetched from other nodes, copies invalidated, pages evicted.
	RemoteFetches, Invalidations, Evictions uint64
}

// Stats reads the counters.
func (db *DB) Stats() Stats {
	var s Stats
	db.rt.Locked(func() {
		cs := db.rt.Node().Cache().Stats()
		s = Stats{CacheHits: cs.Hits, CacheMisses: cs.Misses, SlowHits: cs.SlowHits, SSDReads: db.rt.Reads, SSDWrites: db.rt.Writes,
			Pages: db.rt.Node().Directory().Allocated()}
	})
	if db.log != nil {
		s.LogBytes = db.log.Size()
	}
	s.Checkpoints = db.checkpoints.Load()
	if db.node != nil {
		s.Checkpoints = db.node.checkpoints.Load() // the node's log's
	}
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
	// allocateInner, for a cluster's table, allocates inner pages on the
	// table's home node (btree.Session.AllocateInner); nil: allocate.
	allocateInner func(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error)
	// unclean: open the store even if it was not closed cleanly.
	unclean bool
	// readOnly is why Put and Delete fail, if they do: the store was
	// opened unclean.
	readOnly error
	// dir names the store in errors.
	dir string
	// view: a table of a Cluster, whose Close closes nothing (the
	// Cluster's does).
	view bool
	// persist writes a changed page through to its directory before the
	// operation returns (a Cluster with DurabilityProcess); nil: none.
	persist func(w *bufmgr.Worker, g *bufmgr.ExclusiveGuard) error
	// persistAll writes a split's pages through together (with persist).
	persistAll func(w *bufmgr.Worker, gs ...*bufmgr.ExclusiveGuard) error

	// log is the redo log, nil for a store that keeps none (in memory, or
	// a custom store without an undo journal); logEpoch tags its records
	// (the metadata names the epoch whose records go on top of the pages).
	log *wal.Log
	// logLate is the wal-log-after-unlock mutation point (nil: off).
	logLate    func() bool
	logEpoch   uint64
	logExisted bool
	// locks order the log's records with the changes (redoLocks); a
	// cluster node's tables share the node's (nodeLog).
	locks *redoLocks
	// node is the log of the cluster node this table belongs to, when the
	// node logs its writes (a node alone, nodelog.go): its records carry
	// tag, the table's catalog page, and its checkpoints are the node's.
	node *nodeLog
	tag  []byte
	// checkpointBytes triggers a checkpoint; checkpointing: one runs;
	// checkpointErr: the last one failed (the log keeps growing, and the
	// next write tries again).
	checkpointBytes int64
	checkpointing   atomic.Bool
	checkpoints     atomic.Uint64
	checkpointErr   atomic.Pointer[error]
	recovery        Recovery
	// pins bounds the frames transaction commits latch at once; shared
	// by the tables of a cluster node (txbudget.go).
	pins *pinBudget
	// commitMutant breaks transaction commits on purpose, for the bank
	// test's mutants (tx.go); the zero value is the correct commit.
	commitMutant commitMutant
	// afterWriteThrough, when set (a test's crash point), is called after
	// each leaf a cluster commit with a record writes through.
	afterWriteThrough func(protocol.PID)
	// txFile, on a table of a cluster that writes through, keeps the
	// records of commits of several leaves on the node's disk until every
	// leaf is written through (txfile.go); members: the cluster has
	// membership (the records go to a buddy too: tx.go writeThrough).
	txFile  *txFile
	members bool
}

// redoLocks order a log's records as the tree applied their changes:
// writers hold ckpt shared while they apply a change and append its
// record; a checkpoint holds it exclusively. stripes order the records of
// one key as the tree applied them.
type redoLocks struct {
	ckpt    sync.RWMutex
	stripes [64]sync.Mutex
	seed    maphash.Seed
}

func newRedoLocks() *redoLocks { return &redoLocks{seed: maphash.MakeSeed()} }

// Recovery is what Open did to a store that was not closed cleanly.
type Recovery struct {
	// Recovered: the store was not closed cleanly and was recovered.
	Recovered bool
	// RolledBack is how many pages the undo journal put back as of the
	// last checkpoint.
	RolledBack int
	// Replayed is how many log records were applied again, LogBytes their
	// size, and LogEnd why the log ends where it does.
	Replayed int
	LogBytes int64
	LogEnd   string
}

// Recovery reports what Open did to recover the store (zero: it was closed
// cleanly, or is new).
func (db *DB) Recovery() Recovery { return db.recovery }

// recoverable is a store with an undo journal (storage/nvme's).
type recoverable interface {
	Recovered() bool
	JournalBytes() int64
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
	db := &DB{rt: rt, store: store, allocate: rt.Allocate, unclean: opts.OpenUnclean, dir: dir,
		locks: newRedoLocks(), checkpointBytes: opts.CheckpointBytes, pins: newPinBudget(opts.CachePages)}
	db.logLate = mutation.Point(mutation.WALLogAfterUnlock, func() bool { return true })
	if db.checkpointBytes <= 0 {
		db.checkpointBytes = 64 << 20
	}
	path := filepath.Join(dir, LogFile)
	_, serr := os.Stat(path)
	db.logExisted = serr == nil
	// A store that was not closed cleanly and has no log is not given one:
	// it cannot be recovered, and a new, empty log would say it could.
	if _, ok := store.(recoverable); ok && dir != "" && (db.logExisted || db.wasClean()) {
		if db.log, err = wal.Open(path, wal.Options{NoSync: opts.NoSync}); err != nil {
			abandon(store)
			rt.Close()
			return nil, fmt.Errorf("scalestore: opening %s: %w", dir, err)
		}
	}
	if err := db.load(); err != nil {
		if db.log != nil {
			db.log.Close()
		}
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
		if r, ok := db.store.(recoverable); ok && !db.wasClean() && r.Recovered() && !db.unclean {
			// Killed while create wrote the new tree's pages, before it
			// persisted the catalog: the journal put the pages back as
			// they were (never written), Open never returned, and nothing
			// was written to the store. Start over.
			return db.create()
		}
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
	db.logEpoch = 1
	if len(meta) >= 32 {
		db.logEpoch = max(binary.LittleEndian.Uint64(meta[24:]), 1)
	}
	replay := false
	if !db.wasClean() {
		r, ok := db.store.(recoverable)
		replay = ok && r.Recovered() && db.log != nil && db.logExisted && len(meta) >= 32
	}
	if !db.wasClean() && !replay {
		if !db.unclean {
			return fmt.Errorf("scalestore: %s: %w (its process stopped without closing it, or its last flush failed): "+
				"writes since its last clean close may be missing and its pages may not match its catalog; "+
				"open it with Options.OpenUnclean (kv --unclean) to read what is there, or remove %s to start over",
				db.dir, ErrUnclean, StoreFile)
		}
		db.readOnly = fmt.Errorf("%w: %s was opened with OpenUnclean (not closed cleanly); "+
			"copy what it holds into a new store", ErrReadOnly, db.dir)
	}
	err := db.rt.Do(func(w *bufmgr.Worker) error {
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
		if replay {
			return db.replay(w)
		}
		return nil
	})
	if err != nil || db.log == nil || db.readOnly != nil {
		return err
	}
	if replay {
		// The replayed changes become the new rollback point, and the log
		// starts over: a crash from here on replays nothing twice.
		if err := db.checkpoint(); err != nil {
			return fmt.Errorf("scalestore: %s: checkpoint after recovery: %w", db.dir, err)
		}
		return nil
	}
	db.log.Start(db.logEpoch)
	return nil
}

// replay applies the log's records of the current epoch over the pages the
// store rolled back to.
func (db *DB) replay(w *bufmgr.Worker) error {
	sess := db.session(w)
	r, err := db.log.Replay(db.logEpoch, func(op wal.Op, key, val []byte) error {
		if op == wal.Delete {
			_, err := db.tree.Delete(sess, key)
			return err
		}
		return db.tree.Put(sess, key, val)
	})
	if err != nil {
		return fmt.Errorf("scalestore: %s: replaying the log after record %d: %w", db.dir, r.Records, err)
	}
	rb := 0
	if s, ok := db.store.(interface{ RolledBack() int }); ok {
		rb = s.RolledBack()
	}
	db.recovery = Recovery{Recovered: true, RolledBack: rb, Replayed: r.Records, LogBytes: r.Bytes, LogEnd: r.Stop}
	return nil
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
	// The empty tree's pages first (the first write marks the store in
	// use, with no catalog yet), then the catalog with the commit point
	// (SyncStore). Killed in between, the store is in use without a
	// catalog, and its journal puts the pages back: load starts over.
	// (The catalog first would leave, after that rollback, a catalog that
	// names a root page the journal had put back to never written.)
	db.logEpoch = 1
	if err := db.rt.Flush(); err != nil {
		return fmt.Errorf("scalestore: %s: writing the new tree: %w", db.dir, err)
	}
	if err := db.store.SetMeta(db.meta(db.logEpoch)); err != nil {
		return fmt.Errorf("scalestore: %s: recording the new tree: %w", db.dir, err)
	}
	if err := db.rt.SyncStore(); err != nil {
		return fmt.Errorf("scalestore: %s: persisting the new tree's catalog: %w", db.dir, err)
	}
	if db.log != nil {
		db.log.Start(db.logEpoch)
	}
	return nil
}

// meta is the metadata a checkpoint persists: the allocator, the catalog
// and the epoch of the log records that go on top of the pages.
func (db *DB) meta(logEpoch uint64) []byte {
	meta := make([]byte, 32)
	binary.LittleEndian.PutUint64(meta, metaMagic)
	db.rt.Locked(func() { binary.LittleEndian.PutUint64(meta[8:], db.rt.Node().Directory().Allocated()) })
	binary.LittleEndian.PutUint64(meta[16:], uint64(db.tree.Catalog()))
	binary.LittleEndian.PutUint64(meta[24:], logEpoch)
	return meta
}

// Checkpoint writes every changed page back, persists the catalog, and
// starts the log over: what a crash then replays begins here. Writes wait
// while the pages changed since its start are written. Open and Close
// checkpoint, and so does a write after which the log (or the store's undo
// journal) has grown past Options.CheckpointBytes.
func (db *DB) Checkpoint() error {
	if db.node != nil {
		return db.node.Checkpoint()
	}
	if db.log == nil {
		return nil
	}
	if db.readOnly != nil {
		return db.readOnly
	}
	// Most of the pages, while writers go on (actors.Local.PrepareCheckpoint).
	if err := db.rt.PrepareCheckpoint(false); err != nil {
		return fmt.Errorf("scalestore: %s: checkpoint: %w", db.dir, err)
	}
	db.locks.ckpt.Lock()
	defer db.locks.ckpt.Unlock()
	if err := db.checkpoint(); err != nil {
		return fmt.Errorf("scalestore: %s: checkpoint: %w", db.dir, err)
	}
	return nil
}

// checkpoint is Checkpoint with writers kept out (or none yet).
func (db *DB) checkpoint() error {
	if err := db.log.Sync(); err != nil {
		return err
	}
	if err := db.rt.ProtectStale(); err != nil {
		return fmt.Errorf("journaling the changed pages' old images: %w", err)
	}
	if err := db.rt.WriteBack(); err != nil {
		return fmt.Errorf("writing the changed pages: %w", err)
	}
	next := db.logEpoch + 1
	if err := db.store.SetMeta(db.meta(next)); err != nil {
		return err
	}
	// The commit point: the store's superblock names the next epoch with
	// the pages now on disk, and starts a new rollback point.
	if err := db.rt.SyncStore(); err != nil {
		return fmt.Errorf("persisting the catalog: %w", err)
	}
	db.logEpoch = next
	db.log.Start(next)
	db.checkpoints.Add(1)
	return nil
}

// maybeCheckpoint runs a checkpoint, in the calling writer, when the log
// or the undo journal has grown past the bound and no other is running.
func (db *DB) maybeCheckpoint() {
	if db.node != nil {
		db.node.maybeCheckpoint()
		return
	}
	big := db.log.Size() > db.checkpointBytes
	if r, ok := db.store.(recoverable); ok && !big {
		// The journal is read without the ring's lock: a stale size only
		// delays the checkpoint to the next write.
		big = r.JournalBytes() > db.checkpointBytes
	}
	if !big || !db.checkpointing.CompareAndSwap(false, true) {
		return
	}
	defer db.checkpointing.Store(false)
	if err := db.Checkpoint(); err != nil {
		db.checkpointErr.Store(&err)
	} else {
		db.checkpointErr.Store(nil)
	}
}

// SetNoSync changes Options.NoSync for the writes that follow: a bulk load
// can run unsynced and turn syncing on after it, which first makes every
// write so far durable. A store without a log (in memory) ignores it.
func (db *DB) SetNoSync(noSync bool) error {
	if db.log == nil {
		return nil
	}
	if err := db.log.SetNoSync(noSync); err != nil {
		return fmt.Errorf("scalestore: %s: %w", db.dir, err)
	}
	return nil
}

// CheckpointErr is why the last checkpoint failed, nil if it did not. A
// failed checkpoint loses nothing (the log still holds every write since
// the one before) and is tried again by the next write.
func (db *DB) CheckpointErr() error {
	if p := db.checkpointErr.Load(); p != nil {
		return *p
	}
	return nil
}

// stripe orders the log records of key's changes as the tree made them.
func (db *DB) stripe(key []byte) *sync.Mutex { return &db.locks.stripes[db.stripeIndex(key)] }

func (db *DB) stripeIndex(key []byte) int {
	return int(maphash.Bytes(db.locks.seed, key) % uint64(len(db.locks.stripes)))
}

// logged applies a change with apply and logs it as op (unless apply says
// it changed nothing), then waits for the record to be durable, or, with
// hold set, raises *hold to the record's LSN for the caller to wait for
// (a RESP connection's loop turn: connEngine).
func (db *DB) logged(hold *uint64, op wal.Op, key, val []byte, apply func() (changed bool, err error)) error {
	if db.log == nil {
		_, err := apply()
		return err
	}
	if n := len(key) + len(val) + 16; n > wal.MaxRecord {
		return fmt.Errorf("scalestore: %s: a record of %d bytes exceeds the log's %d", db.dir, n, wal.MaxRecord)
	}
	db.locks.ckpt.RLock()
	mu := db.stripe(key)
	mu.Lock()
	changed, err := apply()
	var lsn uint64
	if late := db.logLate; late != nil && late() && err == nil && changed {
		// Mutation: logged after the key's lock is released, so another
		// write of the key may be applied after this one and logged
		// before it; replay then ends on the older value.
		mu.Unlock()
		time.Sleep(20 * time.Microsecond) // let the next writer of the key in
		lsn, err = db.log.AppendPrefixed(op, db.tag, key, val)
		db.locks.ckpt.RUnlock()
	} else {
		if err == nil && changed {
			lsn, err = db.log.AppendPrefixed(op, db.tag, key, val)
		} else if err == nil && db.node != nil {
			// It changed nothing but read the key (SET NX, DEL of a
			// missing key): its answer waits for the key's last record,
			// appended before the stripe was ours.
			lsn = db.log.Appended()
		}
		mu.Unlock()
		db.locks.ckpt.RUnlock()
	}
	if err != nil || lsn == 0 {
		return err
	}
	return db.durable(hold, lsn, changed)
}

// durable waits until the log is durable up to lsn (with hold: raises
// *hold to it instead); wrote: the call appended a record, after which
// the log may need a checkpoint.
func (db *DB) durable(hold *uint64, lsn uint64, wrote bool) error {
	if hold != nil {
		*hold = max(*hold, lsn)
	} else if err := db.log.Commit(lsn); err != nil {
		return fmt.Errorf("scalestore: %s: %w", db.dir, err)
	}
	if wrote {
		db.maybeCheckpoint()
	}
	return nil
}

// loggedModify is logged for a change whose record is known only once it
// is applied: apply calls record with the op and value its last attempt
// wrote (op 0: it changed nothing).
func (db *DB) loggedModify(hold *uint64, key []byte, apply func(record func(op wal.Op, val []byte)) error) error {
	var op wal.Op
	var val []byte
	record := func(o wal.Op, v []byte) { op, val = o, v }
	if db.log == nil {
		return apply(record)
	}
	db.locks.ckpt.RLock()
	mu := db.stripe(key)
	mu.Lock()
	err := apply(record)
	var lsn uint64
	if err == nil && op != 0 {
		lsn, err = db.log.AppendPrefixed(op, db.tag, key, val)
	} else if err == nil && db.node != nil {
		lsn = db.log.Appended() // it read the key (logged says why)
	}
	mu.Unlock()
	db.locks.ckpt.RUnlock()
	if err != nil || lsn == 0 {
		return err
	}
	return db.durable(hold, lsn, op != 0)
}

func (db *DB) session(w *bufmgr.Worker) btree.Session {
	return btree.Session{Cache: db.rt.Node().Cache(), Worker: w, Allocate: db.allocate, AllocateInner: db.allocateInner, Persist: db.persist, PersistAll: db.persistAll}
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

// PutIf sets key to val if cond, called with the key's current value
// (valid only during the call; nil when absent) and whether it is there,
// returns true; applied reports whether it wrote. No other write of the
// key comes between cond and the write: it is Redis's SET NX (cond: not
// found) and XX (cond: found). cond must be quick and must not use the DB:
// it runs under the latch of the key's leaf.
func (db *DB) PutIf(key, val []byte, cond func(old []byte, found bool) bool) (applied bool, err error) {
	s := db.borrow()
	defer s.Close()
	return s.PutIf(key, val, cond)
}

// Modify is an atomic read-modify-write of key: fn gets the key's
// current value (valid only during the call; nil when absent) and whether
// it is there, and says what the key becomes: write false leaves it as it
// is, write with exists false deletes it, write with exists true sets it
// to val. No other write of the key comes between the read and the write,
// on this node or any other of a cluster: it is Redis's INCR, APPEND and
// SETRANGE. fn runs under the latch of the key's leaf, so it must be
// quick and must not use the DB; it may be called more than once (only
// its last answer counts), and it must not return old, or a slice of it,
// as val.
func (db *DB) Modify(key []byte, fn func(old []byte, found bool) (val []byte, exists, write bool)) error {
	s := db.borrow()
	defer s.Close()
	return s.Modify(key, fn)
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
	if db.view {
		return nil
	}
	if db.log != nil && db.readOnly == nil {
		return db.closeLogged()
	}
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
	err = db.store.SetMeta(db.meta(db.logEpoch))
	if cerr := db.store.Close(); err == nil {
		err = cerr
	}
	return err
}

// closeLogged is Close of a store with a log: a last checkpoint, marked
// clean. If it fails, the store stays unclean and the next Open recovers
// from the log, which still holds every acknowledged write.
func (db *DB) closeLogged() error {
	db.locks.ckpt.Lock()
	defer db.locks.ckpt.Unlock()
	err := db.log.Sync()
	if err == nil {
		err = db.rt.Close()
	} else {
		db.rt.Close()
	}
	if err != nil {
		abandon(db.store)
		db.log.Close()
		return fmt.Errorf("scalestore: %s: closing (the next Open recovers from the log): %w", db.dir, err)
	}
	next := db.logEpoch + 1
	err = db.store.SetMeta(db.meta(next))
	if cerr := db.store.Close(); err == nil {
		err = cerr
	}
	if cerr := db.log.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("scalestore: %s: closing: %w", db.dir, err)
	}
	return nil
}
