package scalestore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
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
const TxMaxKeys = 1024

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

// Tx is a transaction: Get, Put and Delete of any keys of one DB (or a
// cluster's table), atomic and serializable together. It is valid only
// inside the function given to Update or View, on that function's
// goroutine.
type Tx struct {
	db       *DB
	s        Session
	readOnly bool
	done     bool
	reads    map[string]txRead
	writes   map[string]txWrite
}

type txRead struct {
	val   []byte
	found bool
}

type txWrite struct {
	val []byte
	del bool
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
)

// conflictError is a commit's failed validation: key changed.
type conflictError struct{ key string }

func (e *conflictError) Error() string {
	return fmt.Sprintf("key %q changed after the transaction read it", e.key)
}

func (tx *Tx) names(key string) error {
	if tx.done {
		return ErrTxDone
	}
	if _, ok := tx.reads[key]; ok {
		return nil
	}
	if _, ok := tx.writes[key]; ok {
		return nil
	}
	if len(tx.reads)+len(tx.writes) >= TxMaxKeys {
		return ErrTxTooLarge
	}
	return nil
}

// Get appends the value of key to dst, as the transaction sees it: its own
// writes, or the value the commit will check is still there.
func (tx *Tx) Get(key, dst []byte) ([]byte, bool, error) {
	if err := tx.names(string(key)); err != nil {
		return dst, false, err
	}
	if w, ok := tx.writes[string(key)]; ok {
		if w.del {
			return dst, false, nil
		}
		return append(dst, w.val...), true, nil
	}
	if r, ok := tx.reads[string(key)]; ok {
		if !r.found {
			return dst, false, nil
		}
		return append(dst, r.val...), true, nil
	}
	v, ok, err := tx.s.Get(key, nil)
	if err != nil {
		return dst, false, err
	}
	tx.reads[string(key)] = txRead{val: v, found: ok}
	return append(dst, v...), ok, nil
}

// Put sets key to val when the transaction commits (val is copied).
func (tx *Tx) Put(key, val []byte) error {
	if tx.readOnly {
		return ErrTxReadOnly
	}
	if err := tx.names(string(key)); err != nil {
		return err
	}
	if len(key) == 0 || len(key) > btree.MaxKey {
		return btree.ErrKeySize
	}
	if len(key)+len(val) > btree.MaxEntry {
		return btree.ErrEntrySize
	}
	tx.writes[string(key)] = txWrite{val: bytes.Clone(val)}
	if tx.writes[string(key)].val == nil {
		tx.writes[string(key)] = txWrite{val: []byte{}}
	}
	return nil
}

// Delete removes key when the transaction commits; found reports whether
// it is there as the transaction sees it (a read the commit checks).
func (tx *Tx) Delete(key []byte) (found bool, err error) {
	if tx.readOnly {
		return false, ErrTxReadOnly
	}
	_, found, err = tx.Get(key, nil)
	if err != nil {
		return false, err
	}
	tx.writes[string(key)] = txWrite{del: true}
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
// On a DB with a log, the commit is one log record: after a crash the
// transaction is there whole or not at all. On a cluster, each leaf the
// commit changed is written through (durability process or sync) before
// Update returns, one after another: docs/transactions.md says what a
// crash in between leaves.
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
	var last error
	for attempt := 0; attempt < TxAttempts; attempt++ {
		tx := &Tx{db: db, s: s, readOnly: readOnly, reads: map[string]txRead{}, writes: map[string]txWrite{}}
		err := fn(tx)
		tx.done = true
		if err != nil {
			return err
		}
		err = tx.commit()
		var ce *conflictError
		if !errors.As(err, &ce) {
			return err
		}
		last = err
	}
	return fmt.Errorf("%w: %d attempts, each found a key it read changed at commit; the last: %v", ErrTxConflict, TxAttempts, last)
}

// commit checks the reads and applies the writes under the latches of
// their leaves.
func (tx *Tx) commit() error {
	if len(tx.reads)+len(tx.writes) == 0 {
		return nil
	}
	keys := make([][]byte, 0, len(tx.reads)+len(tx.writes))
	for k := range tx.reads {
		keys = append(keys, []byte(k))
	}
	for k := range tx.writes {
		if _, ok := tx.reads[k]; !ok {
			keys = append(keys, []byte(k))
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	writes := make([]btree.Write, 0, len(tx.writes))
	for _, k := range keys {
		if w, ok := tx.writes[string(k)]; ok {
			writes = append(writes, btree.Write{Key: k, Val: w.val, Delete: w.del})
		}
	}
	db := tx.db
	// At most a leaf per key is latched: take that many frames of the
	// node's budget first.
	if !db.pins.take(len(keys)) {
		return fmt.Errorf("%w: %d keys, and the cache lets commits latch %d leaves at once", ErrTxTooLarge, len(keys), db.pins.total)
	}
	defer db.pins.give(len(keys))
	for range btree.LockAttempts {
		err := db.commitOnce(tx.s, keys, tx.reads, writes)
		var full *btree.LeafFullError
		if !errors.As(err, &full) {
			return err
		}
		// A leaf needs a split first: made outside the latches, then the
		// commit tries again (its reads are checked again too).
		if err := tx.s.do(func(w *bufmgr.Worker) error {
			return db.tree.MakeRoom(db.session(w), full)
		}); err != nil {
			return err
		}
	}
	return fmt.Errorf("scalestore: %s: a transaction's leaves kept filling up before its commit", db.dir)
}

// commitOnce is one try of a commit: nil, a *conflictError, a
// *btree.LeafFullError (nothing applied) or another error.
func (db *DB) commitOnce(s Session, keys [][]byte, reads map[string]txRead, writes []btree.Write) error {
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
			stripes = append(stripes, &db.stripes[i])
		}
		db.ckpt.RLock()
		for _, mu := range stripes {
			mu.Lock()
		}
	}
	unlock := func() {
		if stripes != nil {
			for _, mu := range stripes {
				mu.Unlock()
			}
			db.ckpt.RUnlock()
			stripes = nil
		}
	}
	defer unlock()
	var lsn uint64
	err := s.do(func(w *bufmgr.Worker) error {
		l, err := db.tree.Lock(db.session(w), keys)
		if err != nil {
			return err
		}
		defer l.Release()
		var buf []byte
		for _, k := range keys {
			r, ok := reads[string(k)]
			if !ok || db.commitMutant == mutantSkipValidation {
				continue
			}
			var found bool
			buf, found = l.Get(k, buf[:0])
			if found != r.found || !bytes.Equal(buf, r.val) {
				return &conflictError{key: string(k)}
			}
		}
		if len(writes) == 0 {
			return nil
		}
		if db.commitMutant == mutantEarlyRelease {
			if err := l.ApplyReleasingLastEarly(writes); err != nil {
				return err
			}
		} else if err := l.Apply(writes); err != nil {
			return err
		}
		if err := l.Persist(); err != nil {
			return err
		}
		if db.log != nil {
			batch := make([]wal.BatchWrite, len(writes))
			for i, w := range writes {
				batch[i] = wal.BatchWrite{Op: wal.Put, Key: w.Key, Val: w.Val}
				if w.Delete {
					batch[i] = wal.BatchWrite{Op: wal.Delete, Key: w.Key}
				}
			}
			lsn, err = db.log.AppendBatch(batch)
		}
		return err
	})
	unlock()
	if err != nil || lsn == 0 {
		var ce *conflictError
		var full *btree.LeafFullError
		if err != nil && !errors.As(err, &ce) && !errors.As(err, &full) {
			err = fmt.Errorf("scalestore: transaction commit: %w", err)
		}
		return err
	}
	if err := db.log.Commit(lsn); err != nil {
		return fmt.Errorf("scalestore: %s: %w", db.dir, err)
	}
	db.maybeCheckpoint()
	return nil
}

// Update is DB.Update on the default table.
func (c *Cluster) Update(fn func(tx *Tx) error) error { return c.def.Update(fn) }

// View is DB.View on the default table.
func (c *Cluster) View(fn func(tx *Tx) error) error { return c.def.View(fn) }
