// Package peers runs the project's YCSB driver (package ycsb) on ScaleStore
// and on two peers, tidwall/btree in memory and cockroachdb/pebble on disk,
// so that one run yields numbers measured side by side on the same machine,
// with the same keys, values, mixes and latency histograms.
//
// It lives in its own module (bench/go.mod) so that pebble's dependencies
// never reach the main module.
package peers

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/scalestore-go/scalestore"
	"github.com/scalestore-go/scalestore/ycsb"
)

// Engine is a store under test: the driver's interface plus Close, which
// releases memory and removes any temporary directory.
type Engine interface {
	ycsb.Engine
	Close() error
}

// settler is implemented by engines that do background work after a load
// (pebble's flushes and compactions). Settling before the measured runs
// keeps that work from landing in whichever mix happens to run first.
type settler interface {
	Settle() error
}

// EngineNames are the engines Open knows, in the order a run uses them.
var EngineNames = []string{"scalestore", "btree", "pebble"}

// EngineOptions are what Open needs beyond the engine's name.
type EngineOptions struct {
	// Records is the number of records that will be loaded (sizes
	// scalestore's store).
	Records int
	// Cache is scalestore's buffer pool and pebble's block cache, in bytes.
	Cache int64
	// TempDir is where on-disk engines create their directory (empty: the
	// system default).
	TempDir string
	// ScalestoreOnDisk puts scalestore's pages in a directory (the O_DIRECT
	// NVMe store) instead of in memory.
	ScalestoreOnDisk bool
	// PebbleWAL keeps pebble's write-ahead log (written, never synced).
	// Without it the WAL is disabled, which matches scalestore, whose pages
	// reach the store only on eviction or Close.
	PebbleWAL bool
	// Sync makes every update of the measured runs durable before it
	// returns: scalestore on disk with its redo log synced (its default),
	// pebble with its WAL and pebble.Sync. The load runs unsynced on both
	// and is made durable before the runs.
	Sync bool
}

// loadFinisher is an engine that changes its write mode after the load
// (Sync: unsynced load, synced runs).
type loadFinisher interface {
	LoadDone() error
}

// Open opens the engine called name.
func Open(name string, o EngineOptions) (Engine, error) {
	switch name {
	case "scalestore":
		return openScalestore(o)
	case "btree":
		return NewBTree(), nil
	case "pebble":
		return openPebble(o)
	default:
		return nil, fmt.Errorf("engine %q: want one of %v", name, EngineNames)
	}
}

// scalestoreEngine is the embedded API, plus the directory to remove when
// it is on disk.
type scalestoreEngine struct {
	*scalestore.DB
	dir  string
	sync bool
}

func openScalestore(o EngineOptions) (Engine, error) {
	// The same sizing as the CLI's ycsb command: the store gets room for
	// the records with plenty of slack for splits.
	opts := scalestore.Options{
		CachePages: int(o.Cache / 4096),
		Slots:      uint64(o.Records/8 + 4096),
		InMemory:   !o.ScalestoreOnDisk && !o.Sync,
		NoSync:     true, // the load; LoadDone sets the runs' mode
	}
	var dir string
	if !opts.InMemory {
		var err error
		if dir, err = os.MkdirTemp(o.TempDir, "ycsbpeers-scalestore-"); err != nil {
			return nil, fmt.Errorf("scalestore: temporary directory: %w", err)
		}
	}
	db, err := scalestore.Open(dir, opts)
	if err != nil {
		if dir != "" {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("scalestore: %w", err)
	}
	return &scalestoreEngine{DB: db, dir: dir, sync: o.Sync}, nil
}

// LoadDone syncs the updates of the runs if the options ask for it (and
// makes the load durable).
func (e *scalestoreEngine) LoadDone() error { return e.DB.SetNoSync(!e.sync) }

func (e *scalestoreEngine) Close() error {
	err := e.DB.Close()
	if e.dir != "" {
		err = errors.Join(err, os.RemoveAll(e.dir))
	}
	if err != nil {
		return fmt.Errorf("scalestore: close: %w", err)
	}
	return nil
}

// BTree is the in-memory baseline, the same engine as the CLI's `ycsb
// --engine btree` (tidwall/btree under a reader-writer lock), so the numbers
// here and there are comparable.
type BTree struct{ *ycsb.Baseline }

// NewBTree returns an empty baseline engine.
func NewBTree() *BTree { return &BTree{ycsb.NewBaseline()} }

// Close drops the tree.
func (e *BTree) Close() error {
	e.Baseline = nil
	return nil
}

// pebbleEngine is pebble in a temporary directory.
type pebbleEngine struct {
	db  *pebble.DB
	dir string
	// sync: the runs' updates wait for the WAL's sync (EngineOptions.Sync);
	// syncing: the load is done and they do.
	sync, syncing bool
}

// pebbleMemTable is CockroachDB's memtable size; pebble's 4 MiB default is
// meant for many small stores in one process and would make the load a
// long series of tiny flushes.
const pebbleMemTable = 64 << 20

func openPebble(o EngineOptions) (Engine, error) {
	dir, err := os.MkdirTemp(o.TempDir, "ycsbpeers-pebble-")
	if err != nil {
		return nil, fmt.Errorf("pebble: temporary directory: %w", err)
	}
	cache := pebble.NewCache(o.Cache)
	// The DB takes its own reference; ours is released whatever happens.
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:        cache,
		DisableWAL:   !o.PebbleWAL && !o.Sync,
		MemTableSize: pebbleMemTable,
		Logger:       quietLogger{},
		// Bloom filters on every level, as CockroachDB configures pebble:
		// without them a point lookup probes every L0 file it overlaps.
		Levels: make([]pebble.LevelOptions, 7),
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	return &pebbleEngine{db: db, dir: dir, sync: o.Sync}, nil
}

func (e *pebbleEngine) Get(key, dst []byte) ([]byte, bool, error) {
	v, closer, err := e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, false, nil
	}
	if err != nil {
		return dst, false, fmt.Errorf("pebble: get: %w", err)
	}
	// v is valid only until closer.Close, so copy it out first.
	dst = append(dst, v...)
	if err := closer.Close(); err != nil {
		return dst, false, fmt.Errorf("pebble: get: %w", err)
	}
	return dst, true, nil
}

func (e *pebbleEngine) Put(key, val []byte) error {
	// NoSync unless the runs are synced (EngineOptions.Sync): with the WAL
	// on, the log is then written but left to the OS.
	wo := pebble.NoSync
	if e.syncing {
		wo = pebble.Sync
	}
	if err := e.db.Set(key, val, wo); err != nil {
		return fmt.Errorf("pebble: set: %w", err)
	}
	return nil
}

// Settle flushes the memtable and waits (up to a minute) for the
// compactions the load started, so that the measured runs see a store at
// rest, as a long-running one would be between bursts.
func (e *pebbleEngine) Settle() error {
	if err := e.db.Flush(); err != nil {
		return fmt.Errorf("pebble: flush: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		m := e.db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// LoadDone makes the load durable and syncs the runs' updates if the
// options ask for it.
func (e *pebbleEngine) LoadDone() error {
	if !e.sync {
		return nil
	}
	if err := e.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("pebble: syncing the load: %w", err)
	}
	e.syncing = true
	return nil
}

func (e *pebbleEngine) Close() error {
	err := errors.Join(e.db.Close(), os.RemoveAll(e.dir))
	if err != nil {
		return fmt.Errorf("pebble: close: %w", err)
	}
	return nil
}

// quietLogger drops pebble's informational lines (they would interleave
// with the progress lines on stderr) but still stops on a fatal error.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
	os.Exit(1)
}
