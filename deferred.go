package scalestore

import "github.com/scalestore-go/scalestore/resp"

// connEngine is the RESP engine of one connection to a node alone that
// writes through: its calls return without waiting for what they wrote or
// read to be durable, and record how far that must be (ticket, an LSN of
// the node's log: nodelog.go); the server calls Settle before it sends
// their replies. A pipeline of writes then shares one log write instead of
// waiting for one each, as redis-server writes its AOF once an event-loop
// pass.
type connEngine struct {
	c      *Cluster
	db     *DB
	ticket uint64
}

// ForConn implements resp.PerConn: an engine for one connection to a node
// that logs alone, nil elsewhere (each call then waits).
func (e respEngine) ForConn() resp.ConnEngine {
	if !e.defersDurable() {
		return nil
	}
	return &connEngine{c: e.Cluster, db: e.def}
}

// session is a borrowed session whose calls add to e's ticket.
func (e *connEngine) session() Session {
	s := e.db.borrow()
	s.hold = &e.ticket
	return s
}

// Settle waits until everything the connection's calls wrote or read is
// durable: the node's log up to the ticket, an LSN (nodelog.go); the
// loops' turns that settle together share one log write.
func (e *connEngine) Settle() error {
	if e.ticket == 0 {
		return nil
	}
	t := e.ticket
	e.ticket = 0
	if err := e.db.log.Commit(t); err != nil {
		return e.db.explain(err)
	}
	return nil
}

func (e *connEngine) Get(key, dst []byte) ([]byte, bool, error) {
	s := e.session()
	defer s.Close()
	return s.Get(key, dst)
}

func (e *connEngine) GetBatch(keys, vals [][]byte, found []bool) error {
	s := e.session()
	defer s.Close()
	return s.GetBatch(keys, vals, found)
}

func (e *connEngine) Put(key, val []byte) error {
	s := e.session()
	defer s.Close()
	return s.Put(key, val)
}

func (e *connEngine) Modify(key []byte, fn func(old []byte, found bool) (val []byte, exists, write bool)) error {
	s := e.session()
	defer s.Close()
	return s.Modify(key, fn)
}

func (e *connEngine) Delete(key []byte) (bool, error) {
	s := e.session()
	defer s.Close()
	return s.Delete(key)
}

func (e *connEngine) Scan(from, to []byte, fn func(key, val []byte) bool) error {
	s := e.session()
	defer s.Close()
	return s.Scan(from, to, fn)
}

func (e *connEngine) Atomic(readOnly bool, fn func(tx resp.Txn) error) error {
	s := e.session()
	defer s.Close()
	return e.db.runIn(s, readOnly, func(tx *Tx) error { return fn(tx) })
}
