package scalestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/wal"
)

// Transactions (docs/transactions.md says why they work this way).
//
// A transaction runs its function with reads that go to the tree (each one
// a consistent read of one key) and are remembered with the value they
// saw, and writes that are buffered. At commit, the leaves of every key it
// read or wrote are latched exclusively, in page-id order (btree.Lock),
// the reads are checked against what the leaves hold now, and the writes
// are applied to the latched leaves all together: the transaction takes
// effect at that instant, as if it had run there alone (serializable). A
// read that no longer holds is a conflict: the function runs again, up to
// TxAttempts times.

// TxAttempts bounds how often Update and View run their function again
// after a conflict.
const TxAttempts = 100

// TxMaxKeys bounds how many keys one transaction may read and write: its
// commit latches a leaf per key, and the leaves must fit in the cache.
const TxMaxKeys = 16384

// ErrTxConflict is returned by Update and View when every attempt found,
// at commit, a key it had read changed by another writer; the error names
// the last such key.
var ErrTxConflict = errors.New("scalestore: transaction conflict")

// ErrTxReadOnly is returned by Put and Delete of a View's transaction.
var ErrTxReadOnly = errors.New("scalestore: write in a read-only transaction (View)")

// ErrTxTooLarge is returned when a transaction names more than TxMaxKeys
// keys.
var ErrTxTooLarge = fmt.Errorf("scalestore: a transaction may name at most %d keys", TxMaxKeys)

// ErrTxDone is returned by a Tx used after its function returned.
var ErrTxDone = errors.New("scalestore: transaction used after its function returned")

// Tx is a transaction: Get, Put and Delete of any keys of one DB, or of
// any tables of a cluster node (Table), atomic and serializable together.
// It is valid only inside the function given to Update or View, on that
// function's goroutine.
type Tx struct {
	db  *DB // the table this handle reads and writes
	st  *txState
	gen uint64 // st.gen of the run this handle belongs to
}

// txState is a transaction's state, shared by its handles on each table.
type txState struct {
	w        *bufmgr.Worker
	readOnly bool
	done     bool
	// gen counts the runs this state served (it is reused, txStates): a
	// handle of an earlier run is done.
	gen uint64
	// keys are the keys the transaction read or wrote, each once, in the
	// order it first named them; index finds them by txKey once they are
	// more than txScan (below that, a scan of keys is quicker than
	// building the name and hashing it).
	keys  []txEntry
	index map[string]int
	// arena holds the keys and values the transaction keeps: one
	// allocation for many small ones.
	arena []byte
	// matched names (by txKey) the keys whose PutUnless's check matched
	// the old value at an earlier attempt's commit: PutUnless of them
	// declines, so that its caller reads them.
	matched map[string]bool

	// The commit's work space, kept for the next transaction.
	order   []int
	tkeys   []btree.TreeKey
	writes  []btree.Write
	writeOf []int
}

// txStates keeps transactions' states for the next ones: a commit of a
// few keys then allocates almost nothing.
var txStates = sync.Pool{New: func() any { return new(txState) }}

// reset makes st a new run's state, forgetting the last one's keys.
func (st *txState) reset(w *bufmgr.Worker, readOnly bool, matched map[string]bool) {
	clear(st.keys) // no references to old values kept alive
	st.w, st.readOnly, st.done, st.matched = w, readOnly, false, matched
	st.gen++
	st.keys, st.index, st.arena = st.keys[:0], nil, st.arena[:0]
}

// release drops what st holds before it goes back to txStates, and work
// space too large to keep.
func (st *txState) release() {
	st.reset(nil, false, nil)
	st.done = true
	if cap(st.keys) > 4*txScan {
		st.keys, st.order, st.tkeys, st.writes, st.writeOf = nil, nil, nil, nil, nil
	}
	if cap(st.arena) > 64<<10 {
		st.arena = nil
	}
	clear(st.tkeys[:cap(st.tkeys)])
	clear(st.writes[:cap(st.writes)])
}

// txScan is how many keys a transaction finds by a scan before it keeps
// an index of them.
const txScan = 16

// txEntry is what a transaction did with one key: read it, write it, or
// both (a read, then a write).
type txEntry struct {
	db  *DB
	key []byte

	read  bool
	rval  []byte // the value read (found)
	found bool
	// leaf is the leaf the value was read in, as it was then: a View
	// whose leaves are all unchanged at its end commits without latches.
	leaf bufmgr.OptimisticGuard

	write bool
	val   []byte
	del   bool
	// unless is PutUnless's check of the value the key holds at commit
	// (nil: none); it stays with the key when a later Put or Delete of
	// the transaction replaces the write.
	unless func(old []byte) bool
}

// txKey names key of table db in a transaction's maps.
func txKey(db *DB, key []byte) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(db.tree.Catalog()))
	return string(b[:]) + string(key)
}

// keep copies b into the transaction's arena (never nil).
func (st *txState) keep(b []byte) []byte {
	if len(b) > cap(st.arena)-len(st.arena) {
		st.arena = make([]byte, 0, max(512, 2*cap(st.arena), len(b)))
	}
	n := len(st.arena)
	st.arena = append(st.arena, b...)
	return st.arena[n:len(st.arena):len(st.arena)]
}

// find is the index of key of table db in st.keys, or -1.
func (st *txState) find(db *DB, key []byte) int {
	if st.index != nil {
		// Looked up as string(b) of a buffer on the stack: no
		// allocation for keys up to 64 bytes.
		var buf [8 + 64]byte
		b := binary.LittleEndian.AppendUint64(buf[:0], uint64(db.tree.Catalog()))
		if i, ok := st.index[string(append(b, key...))]; ok {
			return i
		}
		return -1
	}
	for i := range st.keys {
		if e := &st.keys[i]; e.db == db && bytes.Equal(e.key, key) {
			return i
		}
	}
	return -1
}

// add names a new key of table db (checked: not named yet, and room for
// it) and returns its index.
func (st *txState) add(db *DB, key []byte) int {
	i := len(st.keys)
	st.keys = append(st.keys, txEntry{db: db, key: st.keep(key)})
	switch {
	case st.index != nil:
		st.index[txKey(db, key)] = i
	case len(st.keys) > txScan:
		st.index = make(map[string]int, 2*len(st.keys))
		for j := range st.keys {
			st.index[txKey(st.keys[j].db, st.keys[j].key)] = j
		}
	}
	return i
}

// ErrTxTable is returned by Tx.Table for a KV that is not a table of the
// transaction's node.
var ErrTxTable = errors.New("scalestore: a transaction spans only the tables of its own node (Cluster.Table)")

// Table is the same transaction on another table of the node (one that
// Cluster.Table returned): its reads and writes commit together with the
// others, all or none.
func (tx *Tx) Table(kv KV) (*Tx, error) {
	db, ok := kv.(*DB)
	if c, isCluster := kv.(*Cluster); isCluster {
		db, ok = c.def, true
	}
	// Tables with logs of their own cannot commit together; a cluster
	// node's tables that share its log can (one record).
	if !ok || db.rt != tx.db.rt || (db != tx.db && (db.log != nil || tx.db.log != nil) && (db.node == nil || db.node != tx.db.node)) {
		return nil, ErrTxTable
	}
	if tx.gen != tx.st.gen {
		return nil, ErrTxDone
	}
	return &Tx{db: db, st: tx.st, gen: tx.gen}, nil
}

// commitMutant names a broken commit the bank test must catch.
type commitMutant int

const (
	// mutantSkipValidation commits without checking the reads: two
	// transfers that read the same balance both apply (a lost update).
	mutantSkipValidation commitMutant = iota + 1
	// mutantEarlyRelease releases the last leaf's latch before writing
	// it: a reader can see the other leaves' new values with its old ones.
	mutantEarlyRelease
	// mutantWriteBeforeRecord writes a cluster commit's leaves through
	// before its record exists: a crash between two of the writes leaves
	// half the transaction on the stores.
	mutantWriteBeforeRecord
	// mutantNoRecord writes a cluster commit's leaves through without a
	// record (what a record costs: BenchmarkTransferAcrossNodes).
	mutantNoRecord
	// mutantDoneBeforeLastWrite marks a commit's record on disk (a
	// cluster without membership) done before its last write-through: a
	// crash between the two leaves half the transaction on the stores.
	mutantDoneBeforeLastWrite
)

// unlessMatched is a commit that found the old values of keys (by txKey),
// written by PutUnless, matching their checks: nothing was applied.
type unlessMatched struct{ keys []string }

func (e *unlessMatched) Error() string {
	return fmt.Sprintf("%d keys written blind held values their writes must read first", len(e.keys))
}

// conflictError is a commit's failed validation: key changed.
type conflictError struct{ key string }

func (e *conflictError) Error() string {
	return fmt.Sprintf("key %q changed after the transaction read it", e.key)
}

// entry is the index of key in the transaction (-1: not named yet), or
// an error if the transaction is over or a new key is one too many.
func (tx *Tx) entry(key []byte) (int, error) {
	st := tx.st
	if st.done || tx.gen != st.gen {
		return -1, ErrTxDone
	}
	i := st.find(tx.db, key)
	if i < 0 && len(st.keys) >= TxMaxKeys {
		return -1, ErrTxTooLarge
	}
	return i, nil
}

// Get appends the value of key to dst, as the transaction sees it: its own
// writes, or the value the commit will check is still there.
func (tx *Tx) Get(key, dst []byte) ([]byte, bool, error) {
	i, err := tx.entry(key)
	if err != nil {
		return dst, false, err
	}
	st := tx.st
	if i >= 0 {
		e := &st.keys[i]
		if e.write {
			if e.del {
				return dst, false, nil
			}
			return append(dst, e.val...), true, nil
		}
		if e.read {
			if !e.found {
				return dst, false, nil
			}
			return append(dst, e.rval...), true, nil
		}
	}
	s := Session{db: tx.db, w: st.w}
	var v []byte
	var ok bool
	var leaf bufmgr.OptimisticGuard
	err = s.do(func(w *bufmgr.Worker) error {
		var err error
		v, ok, leaf, err = tx.db.tree.GetGuarded(tx.db.session(w), key, nil)
		return err
	})
	if err != nil {
		return dst, false, err
	}
	if i < 0 {
		i = st.add(tx.db, key)
	}
	e := &st.keys[i]
	e.read, e.rval, e.found, e.leaf = true, v, ok, leaf
	return append(dst, v...), ok, nil
}

// checkPut checks the sizes of a write of key and val.
func checkPut(key, val []byte) error {
	if len(key) == 0 || len(key) > btree.MaxKey {
		return btree.ErrKeySize
	}
	if len(key)+len(val) > btree.MaxEntry {
		return btree.ErrEntrySize
	}
	return nil
}

// Put sets key to val when the transaction commits (val is copied).
func (tx *Tx) Put(key, val []byte) error {
	if tx.st.readOnly {
		return ErrTxReadOnly
	}
	i, err := tx.entry(key)
	if err != nil {
		return err
	}
	if err := checkPut(key, val); err != nil {
		return err
	}
	st := tx.st
	if i < 0 {
		i = st.add(tx.db, key)
	}
	e := &st.keys[i]
	e.write, e.val, e.del = true, st.keep(val), false
	return nil
}

// PutUnless is Put of a key the transaction has not read, without reading
// it: the commit looks at the value key holds then, under its leaf's
// latch, and if unless reports true of it, applies nothing and runs the
// function again, when PutUnless of that key declines (done false,
// nothing written) so that its caller reads the key (Get) and writes what
// such an old value needs. It declines too for a key the transaction
// already read or wrote. unless must be quick and must not keep old. It
// is the blind write of a value over an old one that needs no care but
// rarely (a large value's chunks to drop: resp's MSET), without the read
// and its validation that Get and Put would cost.
func (tx *Tx) PutUnless(key, val []byte, unless func(old []byte) bool) (done bool, err error) {
	if tx.st.readOnly {
		return false, ErrTxReadOnly
	}
	i, err := tx.entry(key)
	if err != nil || i >= 0 {
		return false, err
	}
	st := tx.st
	if st.matched != nil && st.matched[txKey(tx.db, key)] {
		return false, nil
	}
	if err := checkPut(key, val); err != nil {
		return false, err
	}
	e := &st.keys[st.add(tx.db, key)]
	e.write, e.val, e.unless = true, st.keep(val), unless
	return true, nil
}

// Delete removes key when the transaction commits; found reports whether
// it is there as the transaction sees it (a read the commit checks).
func (tx *Tx) Delete(key []byte) (found bool, err error) {
	if tx.st.readOnly {
		return false, ErrTxReadOnly
	}
	_, found, err = tx.Get(key, nil)
	if err != nil {
		return false, err
	}
	e := &tx.st.keys[tx.st.find(tx.db, key)]
	e.write, e.val, e.del = true, nil, true
	return found, nil
}

// Update runs fn in a transaction and commits its writes, all or none:
// no other reader sees some of them without the others, and its reads
// and writes take effect together, as if no other operation ran
// concurrently (serializable), on one node or across a cluster's nodes.
// When a key fn read was changed by another writer before the commit, fn
// runs again, up to TxAttempts times, then Update returns an error that
// wraps ErrTxConflict and names the key. An error from fn aborts: nothing
// is written and Update returns it. fn must not keep the Tx.
//
// fn may run more than once, so it must do nothing outside the
// transaction that cannot be repeated. The values it reads are checked
// only at the commit: during a run that is then retried, two of them may
// come from different instants (a sum of balances may be off), so fn
// must not fail or loop on what it reads; only what a run that commits
// read is consistent.
//
// On a DB with a log, the commit is one log record: after a crash the
// transaction is there whole or not at all. On a cluster, each leaf the
// commit changed is written through (durability process or sync) before
// Update returns, several behind a record that rolls them forward if a
// node dies in between: with membership, kept in the memory of two nodes
// and rolled in the view change (whole after the death of any one node);
// without, kept on the committer's disk and rolled at the cluster's next
// start (whole after kill -9 of any nodes) (docs/transactions.md,
// "Durability").
func (db *DB) Update(fn func(tx *Tx) error) error { return db.run(false, fn) }

// View runs fn in a read-only transaction: the values it reads of
// several keys were all current together at one instant (the commit
// checks them with the keys' leaves latched), whichever nodes changed
// them. Put and Delete fail with ErrTxReadOnly. Conflicts are retried as
// Update's are.
func (db *DB) View(fn func(tx *Tx) error) error { return db.run(true, fn) }

func (db *DB) run(readOnly bool, fn func(tx *Tx) error) error {
	if !readOnly && db.readOnly != nil {
		return db.readOnly
	}
	s := db.borrow()
	defer s.Close()
	return db.runIn(s, readOnly, fn)
}

// runIn is run in session s.
func (db *DB) runIn(s Session, readOnly bool, fn func(tx *Tx) error) error {
	if !readOnly && db.readOnly != nil {
		return db.readOnly
	}
	var last error
	var matched map[string]bool
	st := txStates.Get().(*txState)
	defer func() {
		st.release()
		txStates.Put(st)
	}()
	for attempt := 0; attempt < TxAttempts; attempt++ {
		st.reset(s.w, readOnly, matched)
		err := fn(&Tx{db: db, st: st, gen: st.gen})
		st.done = true
		if err != nil {
			return err
		}
		if readOnly && st.unchanged() {
			// Every leaf it read is as it read it, now: a snapshot.
			return db.settleTxReads(s, st)
		}
		err = db.commit(s, st)
		if err == nil {
			return db.settleTxReads(s, st)
		}
		if um, ok := err.(*unlessMatched); ok {
			// Not a conflict: the function runs again and reads those
			// keys, which it wrote blind.
			if matched == nil {
				matched = map[string]bool{}
			}
			for _, k := range um.keys {
				matched[k] = true
			}
			last = um
			continue
		}
		var ce *conflictError
		if !errors.As(err, &ce) {
			return err
		}
		last = err
	}
	return fmt.Errorf("%w: %d attempts, each found a key it read changed at commit; the last: %v", ErrTxConflict, TxAttempts, last)
}

// unchanged reports whether every leaf the transaction read a key in is
// still as it was when it read it. Each was unchanged from its read to
// this check, so at the check every value read was there, all together:
// a read-only transaction whose leaves are unchanged needs no latch.
func (st *txState) unchanged() bool {
	for i := range st.keys {
		if e := &st.keys[i]; e.read && e.leaf.HasChanged() {
			return false
		}
	}
	return true
}

// commit checks the reads and applies the writes under the latches of
// their leaves.
func (db *DB) commit(s Session, st *txState) error {
	if len(st.keys) == 0 {
		return nil
	}
	// In the order of their tables and keys (their leaves are latched in
	// page-id order whatever this order is: it makes the writes' order,
	// and so the log's, independent of the function's).
	order := st.order[:0]
	for i := range st.keys {
		order = append(order, i)
	}
	st.order = order
	slices.SortFunc(order, func(a, b int) int {
		ea, eb := &st.keys[a], &st.keys[b]
		if ca, cb := ea.db.tree.Catalog(), eb.db.tree.Catalog(); ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		return bytes.Compare(ea.key, eb.key)
	})
	keys := st.tkeys[:0]
	writes := st.writes[:0]
	writeOf := st.writeOf[:0] // the entry of each write
	for _, j := range order {
		e := &st.keys[j]
		keys = append(keys, btree.TreeKey{Tree: e.db.tree, Key: e.key})
		if e.write {
			writes = append(writes, btree.Write{Tree: e.db.tree, Key: e.key, Val: e.val, Delete: e.del, Unless: e.unless})
			writeOf = append(writeOf, j)
		}
	}
	st.tkeys, st.writes, st.writeOf = keys, writes, writeOf
	// At most a leaf per key is latched: take that many frames of the
	// node's budget first.
	if !db.pins.take(len(keys)) {
		return fmt.Errorf("%w: %d keys, and the cache lets commits latch %d leaves at once", ErrTxTooLarge, len(keys), db.pins.total)
	}
	defer db.pins.give(len(keys))
	for range btree.LockAttempts {
		err := db.commitOnce(s, keys, st, writes)
		if err == nil {
			return nil
		}
		var um *btree.UnlessError
		if errors.As(err, &um) {
			m := &unlessMatched{}
			for _, i := range um.Writes {
				e := &st.keys[writeOf[i]]
				m.keys = append(m.keys, txKey(e.db, e.key))
			}
			return m
		}
		var full *btree.LeafFullError
		if !errors.As(err, &full) {
			return err
		}
		// A leaf needs a split first: made outside the latches, then the
		// commit tries again (its reads are checked again too). Many
		// writes into one leaf (a large value's chunks) split it into
		// pieces of about two entries' worth at once.
		var table *DB
		for i := range st.keys {
			if st.keys[i].db.tree == full.Tree {
				table = st.keys[i].db
				break
			}
		}
		if err := s.do(func(w *bufmgr.Worker) error {
			seps := pieceSeps(full.Keys, full.Sizes)
			if len(seps) == 0 {
				return full.Tree.MakeRoom(table.session(w), full)
			}
			for _, sep := range seps {
				if err := full.Tree.SplitAt(table.session(w), sep); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return fmt.Errorf("scalestore: %s: a transaction's leaves kept filling up before its commit", db.dir)
}

// pieceSeps are the keys at which to split a leaf that the sorted writes
// keys (of entries sizes bytes) do not fit, so that each piece takes
// about 2*btree.MaxEntry bytes of them, the first split at the first key
// (above it, nothing the leaf held before): none when they are that few.
func pieceSeps(keys [][]byte, sizes []int) [][]byte {
	var seps [][]byte
	acc := 0
	for i, k := range keys {
		if acc > 2*btree.MaxEntry {
			seps = append(seps, k)
			acc = 0
		}
		acc += sizes[i] + 16 // and its slot
	}
	if len(seps) > 0 {
		seps = append([][]byte{keys[0]}, seps...)
	}
	return seps
}

// commitOnce is one try of a commit: nil, a *conflictError, a
// *btree.LeafFullError or a *btree.UnlessError (nothing applied), or
// another error.
func (db *DB) commitOnce(s Session, keys []btree.TreeKey, st *txState, writes []btree.Write) error {
	var stripes []*sync.Mutex
	if db.log != nil && len(writes) > 0 {
		// The log's records of a key must be in the order the tree
		// applied them: the stripes of every written key, in address
		// order (the one order of every holder of several).
		idx := make([]int, len(writes))
		for i, w := range writes {
			idx[i] = db.stripeIndex(w.Key)
		}
		sort.Ints(idx)
		for _, i := range slices.Compact(idx) {
			stripes = append(stripes, &db.locks.stripes[i])
		}
		db.locks.ckpt.RLock()
		for _, mu := range stripes {
			mu.Lock()
		}
	}
	unlock := func() {
		if stripes != nil {
			for _, mu := range stripes {
				mu.Unlock()
			}
			db.locks.ckpt.RUnlock()
			stripes = nil
		}
	}
	defer unlock()
	var lsn uint64
	err := s.do(func(w *bufmgr.Worker) error {
		l, err := btree.LockKeys(db.session(w), db.tree, keys)
		if err != nil {
			return err
		}
		defer l.Release()
		var buf []byte
		for i := range st.keys {
			r := &st.keys[i]
			if !r.read {
				continue
			}
			if db.commitMutant == mutantSkipValidation {
				break
			}
			var found bool
			buf, found = l.GetIn(r.db.tree, r.key, buf[:0])
			if found != r.found || !bytes.Equal(buf, r.rval) {
				return &conflictError{key: string(r.key)}
			}
		}
		if len(writes) == 0 {
			return nil
		}
		if db.txFile != nil && txRecordBytes(len(keys)) > txFileMax-txFileHeader {
			// Before anything is applied: a record of every leaf it
			// could change must fit the node's file of records.
			if n := len(l.PIDs()); txRecordBytes(n) > txFileMax-txFileHeader {
				return fmt.Errorf("its commit latches %d leaves, and a record of them (%d bytes) would not fit %s (%d bytes): %w",
					n, txRecordBytes(n), db.txFile.path, txFileMax, ErrTxTooLarge)
			}
		}
		if db.commitMutant == mutantEarlyRelease {
			if err := l.ApplyReleasingLastEarly(writes); err != nil {
				return err
			}
		} else if err := l.Apply(writes); err != nil {
			return err
		}
		if err := db.writeThrough(w, l); err != nil {
			return err
		}
		if db.log != nil {
			batch := make([]wal.BatchWrite, len(writes))
			for i, w := range writes {
				key := w.Key
				if db.node != nil {
					key = tagKey(w.Tree, key) // a node's log: the write's table
				}
				batch[i] = wal.BatchWrite{Op: wal.Put, Key: key, Val: w.Val}
				if w.Delete {
					batch[i] = wal.BatchWrite{Op: wal.Delete, Key: key}
				}
			}
			lsn, err = db.log.AppendBatch(batch)
		}
		return err
	})
	unlock()
	if err == nil && lsn == 0 {
		return nil
	}
	if err != nil || lsn == 0 {
		var ce *conflictError
		var full *btree.LeafFullError
		var um *btree.UnlessError
		if err != nil && !errors.As(err, &ce) && !errors.As(err, &full) && !errors.As(err, &um) {
			err = fmt.Errorf("scalestore: transaction commit: %w", err)
		}
		return err
	}
	return db.durable(s.hold, lsn, true)
}

// writeThrough writes the leaves a commit changed through to their
// directories' stores (a cluster with write-through). Several leaves go
// behind a record of the commit: without membership on this node's disk
// (writeThroughOnDisk); with membership on this node's disk and in its
// memory, and on a buddy node, before the first of them is written: if
// this node, the buddy or a directory dies in between, the record rolls
// the rest forward during the view change, before the pages are served
// again (actors/txrecord.go); if every node dies, the disk record rolls
// at the committer's restart (membership.Restart, docs/transactions.md).
// The record is marked done and dropped before the latches are released:
// no later write of these pages can be rolled over.
func (db *DB) writeThrough(w *bufmgr.Worker, l *btree.Locked) error {
	if !db.view || db.persist == nil || db.commitMutant == mutantNoRecord {
		return l.Persist()
	}
	dirty := l.Dirty()
	if len(dirty) < 2 {
		return l.Persist()
	}
	if db.txFile != nil && !db.members {
		return db.writeThroughOnDisk(w, l, dirty)
	}
	if db.commitMutant == mutantWriteBeforeRecord {
		err := l.PersistEach(db.afterWriteThrough)
		id, buddy, ok := db.rt.TxRecord(w, dirty)
		db.rt.TxFinish(w, id, buddy, ok)
		return err
	}
	// With membership the record is on this node's disk too, for a crash
	// of every node at once (membership.Restart): appended before the
	// buddy's copy, marked done after the write-throughs whatever they
	// did (a failed one rolls from memory in a view change) and before
	// the buddy drops its copy, so that a disk record that is not done
	// always has a live copy at the buddy or names pages still latched.
	off := int64(-1)
	if db.txFile != nil {
		var err error
		if off, err = txBegin(db.txFile, dirty); err != nil {
			err = fmt.Errorf("scalestore: %s: %w", db.dir, err)
			db.rt.Fail(err)
			return err
		}
	}
	id, buddy, ok := db.rt.TxRecord(w, dirty)
	err := l.PersistEach(db.afterWriteThrough)
	if off >= 0 {
		if derr := db.txFile.done(off); derr != nil {
			derr = fmt.Errorf("scalestore: %s: %w", db.dir, derr)
			db.rt.Fail(derr)
			err = errors.Join(err, derr)
		}
	}
	db.rt.TxFinish(w, id, buddy, ok)
	return err
}

// writeThroughOnDisk is writeThrough in a cluster without membership: the
// record goes to this node's file of transaction records (txfile.go)
// before the first leaf is written through, and is marked done after the
// last one is acknowledged, before the latches are released. A record
// whose write-through failed stays open: its pages roll forward at the
// node's next start (actors/txstart.go). A record that cannot be written
// fails the node: the leaves are changed in its cache, and must not be
// served without it.
func (db *DB) writeThroughOnDisk(w *bufmgr.Worker, l *btree.Locked, dirty []*bufmgr.ExclusiveGuard) error {
	if db.commitMutant == mutantWriteBeforeRecord {
		err := l.PersistEach(db.afterWriteThrough)
		if off, rerr := txBegin(db.txFile, dirty); rerr == nil {
			_ = db.txFile.done(off)
		}
		return err
	}
	off, err := txBegin(db.txFile, dirty)
	if err != nil {
		err = fmt.Errorf("scalestore: %s: %w", db.dir, err)
		db.rt.Fail(err)
		return err
	}
	after := db.afterWriteThrough
	if db.commitMutant == mutantDoneBeforeLastWrite {
		written := 0
		after = func(pid protocol.PID) {
			if written++; written == len(dirty)-1 {
				_ = db.txFile.done(off)
			}
			if db.afterWriteThrough != nil {
				db.afterWriteThrough(pid)
			}
		}
	}
	err = l.PersistEach(after)
	if db.commitMutant == mutantDoneBeforeLastWrite {
		return err
	}
	if err != nil {
		db.txFile.end(false)
		return err
	}
	if err := db.txFile.done(off); err != nil {
		err = fmt.Errorf("scalestore: %s: %w", db.dir, err)
		db.rt.Fail(err)
		return err
	}
	return nil
}

// Update is DB.Update on the default table.
func (c *Cluster) Update(fn func(tx *Tx) error) error { return c.def.Update(fn) }

// View is DB.View on the default table.
func (c *Cluster) View(fn func(tx *Tx) error) error { return c.def.View(fn) }
