package resp

import "errors"

// store is what commands read and write through: the engine, or the
// transaction of a multi-key command or of EXEC.
type store interface {
	get(key, dst []byte) ([]byte, bool, error)
	put(key, val []byte) error
	del(key []byte) (bool, error)
	modify(key []byte, fn func(old []byte, found bool) ([]byte, bool, bool)) error
	inTx() bool
}

// engineStore is the engine; m, when set, is the client's wrapper of
// Modify's fn for a bigEngine (bigModify).
type engineStore struct {
	e Engine
	m *bigModify
}

func (s engineStore) get(key, dst []byte) ([]byte, bool, error) { return s.e.Get(key, dst) }
func (s engineStore) put(key, val []byte) error {
	if b, ok := s.e.(bigEngine); ok && s.m != nil {
		return b.putWith(s.m, key, val)
	}
	return s.e.Put(key, val)
}
func (s engineStore) del(key []byte) (bool, error) { return s.e.Delete(key) }
func (s engineStore) modify(key []byte, fn func([]byte, bool) ([]byte, bool, bool)) error {
	if b, ok := s.e.(bigEngine); ok && s.m != nil {
		return b.modifyWith(s.m, key, fn)
	}
	return s.e.Modify(key, fn)
}
func (engineStore) inTx() bool { return false }

// txStore runs commands inside a transaction: a read-modify-write is a
// read and a write of the transaction, atomic with the rest of it.
type txStore struct {
	tx  Txn
	buf *[]byte
}

func (s txStore) get(key, dst []byte) ([]byte, bool, error) { return s.tx.Get(key, dst) }
func (s txStore) put(key, val []byte) error                 { return s.tx.Put(key, val) }
func (s txStore) del(key []byte) (bool, error)              { return s.tx.Delete(key) }
func (s txStore) inTx() bool                                { return true }
func (s txStore) modify(key []byte, fn func([]byte, bool) ([]byte, bool, bool)) error {
	old, found, err := s.tx.Get(key, (*s.buf)[:0])
	if err != nil {
		return err
	}
	// old is the transaction's copy; fn's value must not alias it.
	*s.buf = old
	val, exists, write := fn(old, found)
	switch {
	case !write:
		return nil
	case exists:
		return s.tx.Put(key, val)
	case found:
		_, err := s.tx.Delete(key)
		return err
	}
	return nil
}

// atomic runs fn with c.kv a transaction (read-only if readOnly), or in
// the one already running (EXEC). fn may run more than once: it must
// write its replies only through reply, which runs once, after the
// commit.
func (c *client) atomic(readOnly bool, fn func() error) error {
	if c.kv.inTx() {
		return fn()
	}
	saved := c.kv
	defer func() { c.kv = saved }()
	return c.eng.Atomic(readOnly, func(tx Txn) error {
		c.kv = txStore{tx: tx, buf: &c.txBuf}
		return fn()
	})
}

// lookup reads key's string and expiry; an expired key reads as absent
// (and, outside a transaction, is dropped). The string aliases c.val
// until the next lookup.
func (c *client) lookup(key []byte) (payload []byte, expireAt int64, ok bool, err error) {
	raw, ok, err := c.kv.get(key, c.val[:0])
	if cap(raw) <= keepBufBytes {
		c.val = raw[:0]
	}
	if err != nil {
		return nil, 0, false, err
	}
	if len(c.tx.watch) > 0 && !c.kv.inTx() {
		c.sawWatched(key, raw, ok)
	}
	if !ok {
		return nil, 0, false, nil
	}
	payload, expireAt = decodeValue(raw)
	if expireAt != 0 && expired(expireAt, c.s.nowMs()) { // no clock read for a value without expiry
		if !c.kv.inTx() {
			if err := c.s.dropExpired(key); err != nil {
				return nil, 0, false, err
			}
		}
		return nil, 0, false, nil
	}
	return payload, expireAt, true, nil
}

// dropExpired deletes key if it is still expired.
func (s *Server) dropExpired(key []byte) error {
	now := s.nowMs()
	return s.eng.Modify(key, func(old []byte, found bool) ([]byte, bool, bool) {
		if !found {
			return nil, false, false
		}
		_, exp := decodeValue(old)
		return nil, false, expired(exp, now)
	})
}

// live decodes an old value seen by a Modify: the string and expiry, or
// found false if it expired.
func live(old []byte, found bool, now int64) (payload []byte, expireAt int64, ok bool) {
	if !found {
		return nil, 0, false
	}
	payload, expireAt = decodeValue(old)
	if expired(expireAt, now) {
		return nil, 0, false
	}
	return payload, expireAt, true
}

// cmdError is an error a command answers with, as opposed to one of the
// engine.
type cmdError string

func (e cmdError) Error() string { return string(e) }

// reply answers err: a command's own error as it is, an engine's
// prefixed with ERR.
func (c *client) replyErr(err error) {
	var ce cmdError
	if errors.As(err, &ce) {
		c.error(string(ce))
		return
	}
	c.engineError(err)
}
