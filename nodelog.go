package scalestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/nvme"
	"github.com/scalestore-go/scalestore/wal"
)

// The redo log of a node alone (docs/durability.md, "A node alone").
//
// A cluster of one node (one peer, no membership) that writes through
// keeps, instead of writing each changed page through to its store's write
// log, a redo log of records, as the embedded DB does: a SET appends its
// key and value (a few bytes over them, where a page image is 4 KiB), and
// its reply waits until the record is durable (handed to the OS under
// durability process, fdatasync'ed under sync; callers that wait together
// share one write: wal.Log.Commit). Pages reach the store when they are
// evicted and at checkpoints; the store's undo journal (nvme
// Options.Journal) puts them back as of the last checkpoint after a kill,
// and the log's records since are replayed over them at the next Join.
// Every table of the node logs into the one log, each record's key
// prefixed with its table's catalog page (tagKey).
//
// Nobody may hear of a value before its record is durable. A writer of a
// key holds the key's stripe from before its change to after its record
// is appended; a reader takes, after its read, the stripe of every key it
// read (and lets it go at once), so any change it saw has its record in
// the log by then, and it waits until the log is durable up to where it
// ends (settleRead).

// LogFileOf is node id's redo log in its data directory, kept when it runs
// alone (a cluster of one node that writes through).
func LogFileOf(id int) string { return fmt.Sprintf("node-%d.wal", id) }

// nodeLogCheckpointBytes is how much log (or undo journal) a node lets
// grow before it checkpoints.
const nodeLogCheckpointBytes = 64 << 20

// nodeLog is a node's redo log, shared by its tables.
type nodeLog struct {
	c     *Cluster
	log   *wal.Log
	locks *redoLocks
	// epoch tags the records that go on top of the store's pages as of
	// the last checkpoint (nodeMeta.logEpoch).
	epoch         uint64
	bound         int64
	checkpointing atomic.Bool
	// bg counts the checkpoints running in the background
	// (maybeCheckpoint); stopping (under bgMu) keeps new ones from
	// starting once the node is closing or being killed.
	bgMu          sync.Mutex
	stopping      bool
	bg            sync.WaitGroup
	checkpoints   atomic.Uint64
	checkpointErr atomic.Pointer[error]
	recovery      Recovery
	// failAt, a test's crash point, fails the checkpoint at the stage it
	// names (as a kill there would stop it).
	failAt func(stage string) error
}

// logsAlone reports whether the node keeps a redo log of records instead
// of writing pages through: one peer, no membership, write-through, a
// store on disk.
func (o ClusterOptions) logsAlone() bool {
	return o.writesThrough() && len(o.Peers) == 1 && len(o.Etcd) == 0 && o.Data != ""
}

func (o ClusterOptions) logPath() string { return filepath.Join(o.Data, LogFileOf(o.ID)) }

// openNodeLog opens the node's log. recover: the store was killed and its
// journal put its pages back as of the checkpoint of epoch, whose records
// are then replayed (replayNodeLog).
func openNodeLog(c *Cluster, epoch uint64, recover bool) (*nodeLog, error) {
	path := c.opts.logPath()
	if recover {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("scalestore: node %d: %w: its store was killed and its log %s is gone (%v): "+
				"the writes since its last checkpoint cannot be replayed; start with --reformat to discard it", c.opts.ID, ErrUnclean, path, err)
		}
	}
	l, err := wal.Open(path, wal.Options{NoSync: c.opts.Durability != DurabilitySync})
	if err != nil {
		return nil, fmt.Errorf("scalestore: node %d: %w", c.opts.ID, err)
	}
	return &nodeLog{c: c, log: l, locks: newRedoLocks(), epoch: max(epoch, 1), bound: nodeLogCheckpointBytes}, nil
}

// tagKey is key prefixed with its tree's catalog page: a record's key in
// a node's log.
func tagKey(t *btree.Tree, key []byte) []byte {
	b := make([]byte, 8, 8+len(key))
	binary.LittleEndian.PutUint64(b, uint64(t.Catalog()))
	return append(b, key...)
}

// tableTag is the prefix of a table's records.
func tableTag(t *btree.Tree) []byte { return tagKey(t, nil) }

// replay applies the log's records of the current epoch to the trees they
// name, over the pages the store's journal put back.
func (n *nodeLog) replay() error {
	c := n.c
	trees := map[protocol.PID]*btree.Tree{}
	var r wal.Replayed
	err := c.node.RT.Do(func(w *bufmgr.Worker) error {
		s := c.session(w)
		var err error
		r, err = n.log.Replay(n.epoch, func(op wal.Op, key, val []byte) error {
			if len(key) < 8 {
				return fmt.Errorf("a record's key of %d bytes has no table", len(key))
			}
			pid := protocol.PID(binary.LittleEndian.Uint64(key))
			t := trees[pid]
			if t == nil {
				t = btree.Open(pid)
				trees[pid] = t
			}
			if op == wal.Delete {
				_, err := t.Delete(s, key[8:])
				return err
			}
			return t.Put(s, key[8:], val)
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("scalestore: node %d: replaying its log after record %d: %w", c.opts.ID, r.Records, err)
	}
	rb := 0
	if s, ok := c.store.(interface{ RolledBack() int }); ok {
		rb = s.RolledBack()
	}
	n.recovery = Recovery{Recovered: true, RolledBack: rb, Replayed: r.Records, LogBytes: r.Bytes, LogEnd: r.Stop}
	c.opts.Logger.Warn("recovered a store whose node was killed: its log replayed over its last checkpoint",
		"node", c.opts.ID, "pages_rolled_back", rb, "records", r.Records, "log_bytes", r.Bytes, "log_end", r.Stop)
	return nil
}

// Checkpoint writes every changed page back and starts a new log epoch.
// Most of the pages are journaled and written while writers go on
// (PrepareCheckpoint); writers wait while the pages changed since are, and
// while the new epoch starts.
func (n *nodeLog) Checkpoint() error { return n.checkpointPaced(false) }

// checkpointPaced is Checkpoint, its first part paced for a checkpoint in
// the background (actors.Local.PrepareCheckpoint).
func (n *nodeLog) checkpointPaced(paced bool) error {
	if err := n.c.node.RT.PrepareCheckpoint(paced); err != nil {
		return fmt.Errorf("scalestore: node %d: checkpoint: %w", n.c.opts.ID, err)
	}
	if err := n.fail("prepared"); err != nil {
		return fmt.Errorf("scalestore: node %d: checkpoint: %w", n.c.opts.ID, err)
	}
	n.locks.ckpt.Lock()
	defer n.locks.ckpt.Unlock()
	if err := n.checkpoint(); err != nil {
		return fmt.Errorf("scalestore: node %d: checkpoint: %w", n.c.opts.ID, err)
	}
	return nil
}

// checkpoint is Checkpoint with writers kept out. It is DB.checkpoint on
// the node's store: the old images of the changed pages go to the undo
// journal first (ProtectStale), the pages are written in place
// (WriteBack), and the store's metadata naming the next epoch is the
// commit point (SyncStore, which also starts the journal's new epoch).
// Killed before the commit point, the store rolls back to the last one
// and the log, whose records are still of its epoch, is replayed over it;
// killed after, the log's old records are of another epoch and ignored.
func (n *nodeLog) checkpoint() error {
	c := n.c
	if err := n.log.Sync(); err != nil {
		return err
	}
	if err := n.fail("synced"); err != nil {
		return err
	}
	if err := c.node.RT.ProtectStale(); err != nil {
		return fmt.Errorf("journaling the changed pages' old images: %w", err)
	}
	if err := c.node.RT.WriteBack(); err != nil {
		return fmt.Errorf("writing the changed pages: %w", err)
	}
	if err := n.fail("written"); err != nil {
		return err
	}
	next := n.epoch + 1
	if err := c.store.SetMeta(c.meta(next).encode()); err != nil {
		return err
	}
	if err := n.fail("meta"); err != nil {
		return err
	}
	if err := c.node.RT.SyncStore(); err != nil {
		return fmt.Errorf("persisting the metadata: %w", err)
	}
	n.epoch = next
	n.log.Start(next)
	n.checkpoints.Add(1)
	return n.fail("done")
}

func (n *nodeLog) fail(stage string) error {
	if n.failAt == nil {
		return nil
	}
	return n.failAt(stage)
}

// maybeCheckpoint starts a checkpoint in the background when the log or
// the store's undo journal has grown past the bound and no other
// checkpoint runs. Not in the calling writer: a RESP connection's writer
// runs on an event loop, whose other connections would wait the whole
// checkpoint with it.
func (n *nodeLog) maybeCheckpoint() {
	big := n.log.Size() > n.bound
	if r, ok := n.c.store.(recoverable); ok && !big {
		big = r.JournalBytes() > n.bound
	}
	if !big || !n.checkpointing.CompareAndSwap(false, true) {
		return
	}
	n.bgMu.Lock()
	if n.stopping {
		n.bgMu.Unlock()
		n.checkpointing.Store(false)
		return
	}
	n.bg.Add(1)
	n.bgMu.Unlock()
	go func() {
		defer n.bg.Done()
		defer n.checkpointing.Store(false)
		if err := n.checkpointPaced(true); err != nil {
			n.checkpointErr.Store(&err)
			n.c.opts.Logger.Error("checkpoint failed (the log keeps every write; the next write tries again)", "node", n.c.opts.ID, "err", err)
		} else {
			n.checkpointErr.Store(nil)
		}
	}()
}

// stopBackground lets a checkpoint running in the background finish and
// starts none after it: the node is closing or being killed.
func (n *nodeLog) stopBackground() {
	if n == nil {
		return
	}
	n.bgMu.Lock()
	n.stopping = true
	n.bgMu.Unlock()
	n.bg.Wait()
}

// settleRead makes a call that read keys (nil with all: every key) wait
// until every value it may have read is durable (with hold: raises *hold
// to it), on every DB with a log: the embedded DB's and a node alone's. A change is applied before its record is appended, both under
// the key's stripe: taking each key's stripe after the read waits out the
// writer of any value it saw, whose record is then in the log.
func (db *DB) settleRead(hold *uint64, all bool, keys ...[]byte) error {
	if db.log == nil {
		return nil // nothing is logged: a write is durable when it returns
	}
	if all {
		for i := range db.locks.stripes {
			waitOut(&db.locks.stripes[i])
		}
	}
	for _, k := range keys {
		waitOut(db.stripe(k))
	}
	lsn := db.log.Appended()
	if lsn == 0 {
		return nil
	}
	return db.durable(hold, lsn, false)
}

// waitOut returns once nobody holds mu, which it held at the call.
func waitOut(mu *sync.Mutex) {
	mu.Lock()
	//lint:ignore SA2001 the empty critical section waits out a stripe's writer
	mu.Unlock()
}

// settleTxReads is settleRead of the keys a transaction read.
func (db *DB) settleTxReads(s Session, st *txState) error {
	if db.log == nil {
		return nil
	}
	for i := range st.keys {
		if e := &st.keys[i]; e.read {
			waitOut(db.stripe(e.key))
		}
	}
	return db.settleRead(s.hold, false)
}

// openLoggedStore is openClusterStore for a node that logs alone: its
// store keeps an undo journal (nvme Options.Journal) instead of a write
// log of page images. A store last run with the write log (a build
// before the node's log) is first opened that way, which writes its log's
// pages back, and closed cleanly.
func openLoggedStore(o ClusterOptions) (s Store, fresh bool, err error) {
	if err := os.MkdirAll(o.Data, 0o755); err != nil {
		return nil, false, fmt.Errorf("scalestore: %w", err)
	}
	path := o.storePath()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) || o.Reformat {
		fresh = true
	} else if err != nil {
		return nil, false, fmt.Errorf("scalestore: %w", err)
	}
	if !fresh {
		if err := leaveWriteLog(o); err != nil {
			return nil, false, err
		}
	}
	opts := nvme.Options{Slots: clusterStoreSlots, Journal: true, Create: fresh}
	st, err := openNVMe(path, opts)
	if err != nil {
		return nil, false, fmt.Errorf("scalestore: node %d: opening %s: %w", o.ID, path, err)
	}
	if !fresh && len(st.Meta()) == 0 {
		// Created, then stopped (or killed) before Join returned: it
		// holds nothing anybody was told of.
		st.Abandon()
		opts.Create, fresh = true, true
		if st, err = openNVMe(path, opts); err != nil {
			return nil, false, fmt.Errorf("scalestore: node %d: opening %s: %w", o.ID, path, err)
		}
	}
	if fresh {
		os.Remove(o.logPath()) // an old store's records must not meet the new one
		return st, true, nil
	}
	if !st.WasClean() {
		m, err := decodeNodeMeta(st.Meta())
		why := ""
		switch {
		case err != nil:
			why = err.Error()
		case !m.logged:
			why = "it ran without the node's log, so its pages may not be those of any checkpoint"
		case !st.Recovered():
			why = "its undo journal " + path + nvme.JournalSuffix + " is gone, so its pages cannot be put back to its last checkpoint"
		}
		if why != "" {
			st.Abandon()
			return nil, false, fmt.Errorf("scalestore: node %d: %s: %w: its node was killed or failed, and %s; "+
				"remove it, or start with --reformat to discard it", o.ID, path, ErrUnclean, why)
		}
	}
	return st, false, nil
}

func openNVMe(path string, opts nvme.Options) (*nvme.Store, error) {
	st, err := nvme.Open(path, opts)
	if errors.Is(err, nvme.ErrDirectUnsupported) {
		opts.NoDirect = true
		st, err = nvme.Open(path, opts)
	}
	return st, err
}

// leaveWriteLog opens a store that has a write log of page images the way
// it was written (recovering it if its node was killed: every acknowledged
// write is in that log), closes it cleanly, and removes the log.
func leaveWriteLog(o ClusterOptions) error {
	path := o.storePath()
	wl := path + nvme.WriteLogSuffix
	if _, err := os.Stat(wl); err != nil {
		return nil
	}
	st, err := openNVMe(path, nvme.Options{Slots: clusterStoreSlots, WriteLog: true, WriteLogCached: true})
	if err != nil {
		return fmt.Errorf("scalestore: node %d: opening %s with its write log: %w", o.ID, path, err)
	}
	if !st.WasClean() {
		m, err := decodeNodeMeta(st.Meta())
		if err != nil || !m.writeThrough {
			st.Abandon()
			return fmt.Errorf("scalestore: node %d: %s: %w: its node was killed or failed, and it ran without write-through; "+
				"remove it, or start with --reformat to discard it", o.ID, path, ErrUnclean)
		}
		written, err := st.WrittenSlots()
		if err != nil {
			st.Abandon()
			return fmt.Errorf("scalestore: node %d: %s: finding its written pages: %w", o.ID, path, err)
		}
		m.allocated = max(m.allocated, min(written, st.Slots()))
		if err := st.SetMeta(m.encode()); err != nil {
			st.Abandon()
			return err
		}
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("scalestore: node %d: closing %s with its write log: %w", o.ID, path, err)
	}
	if err := os.Remove(wl); err != nil {
		return fmt.Errorf("scalestore: node %d: %w", o.ID, err)
	}
	return nil
}

// meta is the node's store metadata as a checkpoint of the node's log
// persists it: the next records go on top of the pages in logEpoch.
func (c *Cluster) meta(logEpoch uint64) nodeMeta {
	m := nodeMeta{id: c.id, node: uint64(c.opts.ID), logged: true, logEpoch: logEpoch}
	c.node.RT.Locked(func() { m.allocated = c.node.RT.Node().Directory().Allocated() })
	return m
}

// startLog finishes Join of a node that logs alone, before it serves:
// a store whose node was killed (recover) gets its log replayed; then a
// checkpoint makes the pages in memory the new starting point and writes
// the metadata that names the log's epoch.
func (c *Cluster) startLog(recover bool) error {
	n := c.nlog
	if recover {
		if err := n.replay(); err != nil {
			return err
		}
	}
	return n.Checkpoint()
}

// quiesce keeps writers out for a clean close and makes the log durable;
// the caller lets them in again with reopen. A nil log does nothing.
func (n *nodeLog) quiesce() error {
	if n == nil {
		return nil
	}
	n.stopBackground()
	n.locks.ckpt.Lock()
	return n.log.Sync()
}

// close closes the log after a close that kept writers out (quiesce).
func (n *nodeLog) close() error {
	if n == nil {
		return nil
	}
	defer n.locks.ckpt.Unlock()
	return n.log.Close()
}

// abandon closes the log as a killed process would leave it.
func (n *nodeLog) abandon() {
	if n != nil {
		n.log.Abandon()
	}
}

// closingMeta is the metadata a clean close writes.
func (c *Cluster) closingMeta() nodeMeta {
	if c.nlog != nil {
		return c.meta(c.nlog.epoch + 1)
	}
	meta := nodeMeta{id: c.id, node: uint64(c.opts.ID), writeThrough: c.opts.writesThrough()}
	c.node.RT.Locked(func() { meta.allocated = c.node.RT.Node().Directory().Allocated() })
	return meta
}
