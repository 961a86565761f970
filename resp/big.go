package resp

import (
	"bytes"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Large values (docs/resp.md, "Large values"). The engine keeps a key and
// its value in one entry of at most Config.MaxEntry bytes (a B-tree leaf's
// entry). A value whose entry would be longer is stored in chunks: the key
// holds a manifest, and each chunk is an entry of its own under a key of
// the reserved chunk space, written, overwritten and deleted with the
// manifest in one transaction of the engine, so a reader sees the whole
// value or none of it, on any node, with the durability of any other
// transaction. A value that fits is stored as before: the manifest is a
// value header of a new version (3), which no value written before
// carries (value.go), so existing stores read as they did.
//
//	manifest: 0xff 'S' 'x' 3, expiry (8 bytes, big-endian Unix ms, 0:
//	none; the stored value's own), the stored value's length (4), its
//	chunk set's id (8)
//	chunk i:  key 0xff 'S' 'x' 3, id (8), i (4, big-endian); value: the
//	stored value's bytes [i*size, (i+1)*size), size = MaxEntry - 16
//
// A chunk set is written once and deleted whole: its id is new for every
// write (a random start per process, then a counter), so a manifest and
// the chunks it names never change while they exist. Keys that start
// with the chunk space's 4 bytes are refused (ErrReservedKey) and hidden
// from scans.

const (
	bigVersion  = 3
	manifestLen = 4 + 8 + 4 + 8
	chunkKeyLen = 4 + 8 + 4
)

var chunkSpace = [4]byte{hdrMagic[0], hdrMagic[1], hdrMagic[2], bigVersion}

// ErrReservedKey is the error of a write of a key in the chunk space.
var ErrReservedKey = errors.New("keys starting with \\xffSx\\x03 are reserved for the chunks of large values")

// ErrBrokenValue is a manifest whose chunks are not all there (a store
// damaged outside the engine's transactions).
var ErrBrokenValue = errors.New("a large value's chunks are missing")

func isManifest(v []byte) bool {
	return len(v) == manifestLen && hasMagic(v) && v[3] == bigVersion
}

func isChunkKey(k []byte) bool { return len(k) >= 4 && [4]byte(k[:4]) == chunkSpace }

// chunkIDs hands out chunk set ids (as watchTags does tags).
var chunkIDs atomic.Uint64

func init() {
	var b [8]byte
	if _, err := crand.Read(b[:]); err == nil {
		chunkIDs.Store(binary.LittleEndian.Uint64(b[:]))
	} else {
		chunkIDs.Store(uint64(time.Now().UnixNano()) << 20)
	}
}

func chunkKey(dst []byte, id uint64, i int) []byte {
	dst = append(dst[:0], chunkSpace[:]...)
	dst = binary.BigEndian.AppendUint64(dst, id)
	return binary.BigEndian.AppendUint32(dst, uint32(i))
}

// bigEngine is the engine with large values in chunks; every command
// goes through it (Server.eng), and raw is the engine itself.
type bigEngine struct {
	raw   Engine
	entry int // the engine's longest entry (Config.MaxEntry)
}

func (b bigEngine) chunkSize() int { return b.entry - chunkKeyLen }

// fits reports whether key and val fit one entry of the engine.
func (b bigEngine) fits(key, val []byte) bool { return len(key)+len(val) <= b.entry }

func (b bigEngine) Get(key, dst []byte) ([]byte, bool, error) {
	if isChunkKey(key) {
		return dst, false, nil
	}
	v, ok, err := b.raw.Get(key, dst)
	if err != nil || !ok || !isManifest(v[len(dst):]) {
		return v, ok, err
	}
	err = b.raw.Atomic(true, func(tx Txn) error {
		var err error
		v, ok, err = bigTxn{b, tx}.Get(key, dst)
		return err
	})
	return v, ok, err
}

func (b bigEngine) GetBatch(keys, vals [][]byte, found []bool) error {
	if err := b.raw.GetBatch(keys, vals, found); err != nil {
		return err
	}
	for i, k := range keys {
		switch {
		case isChunkKey(k):
			vals[i], found[i] = vals[i][:0], false
		case found[i] && isManifest(vals[i]):
			var err error
			if vals[i], found[i], err = b.Get(k, vals[i][:0]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Put sets key to val. Over an old value in chunks, or with val too long
// for an entry, it is a transaction that writes the chunks and drops the
// old ones; else one Modify that finds the old value is not in chunks.
func (b bigEngine) Put(key, val []byte) error { return b.putWith(new(bigModify), key, val) }

// putWith is Put through m (as modifyWith).
func (b bigEngine) putWith(m *bigModify, key, val []byte) error {
	if isChunkKey(key) {
		return ErrReservedKey
	}
	if b.fits(key, val) {
		if m.putWrap == nil {
			m.putWrap = m.put
		}
		m.val, m.inChunks = val, false
		err := b.raw.Modify(key, m.putWrap)
		inChunks := m.inChunks
		m.val = nil
		if err != nil || !inChunks {
			return err
		}
	}
	return b.raw.Atomic(false, func(tx Txn) error { return bigTxn{b, tx}.Put(key, val) })
}

func (b bigEngine) Delete(key []byte) (bool, error) {
	if isChunkKey(key) {
		return false, nil
	}
	var existed, inChunks bool
	err := b.raw.Modify(key, func(old []byte, found bool) ([]byte, bool, bool) {
		existed, inChunks = found, found && isManifest(old)
		return nil, false, found && !inChunks
	})
	if err != nil || !inChunks {
		return existed, err
	}
	err = b.raw.Atomic(false, func(tx Txn) error {
		var err error
		existed, err = bigTxn{b, tx}.Delete(key)
		return err
	})
	return existed, err
}

// Modify is the engine's Modify while neither the old value nor the new
// one is in chunks; else a transaction that reads the old value whole and
// writes the new one.
func (b bigEngine) Modify(key []byte, fn func(old []byte, found bool) ([]byte, bool, bool)) error {
	return b.modifyWith(new(bigModify), key, fn)
}

// bigModify is Modify's wrapper of a fn for the engine's Modify (and
// Put's fn), which sees whether the old value is in chunks. A client keeps one
// (engineStore.m), so that its INCRs allocate nothing: a closure handed
// to the engine's Modify (an interface's method) would be allocated for
// every call.
type bigModify struct {
	b        bigEngine
	key      []byte
	fn       func(old []byte, found bool) ([]byte, bool, bool)
	inChunks bool
	wrap     func(old []byte, found bool) ([]byte, bool, bool) // call, made once
	val      []byte                                            // Put's value
	putWrap  func(old []byte, found bool) ([]byte, bool, bool) // put, made once
}

// put is Put's fn: val, unless the old value is in chunks.
func (m *bigModify) put(old []byte, found bool) ([]byte, bool, bool) {
	m.inChunks = found && isManifest(old)
	return m.val, true, !m.inChunks
}

func (m *bigModify) call(old []byte, found bool) ([]byte, bool, bool) {
	if m.inChunks = found && isManifest(old); m.inChunks {
		return nil, false, false
	}
	val, exists, write := m.fn(old, found)
	if m.inChunks = write && exists && !m.b.fits(m.key, val); m.inChunks {
		return nil, false, false
	}
	return val, exists, write
}

// modifyWith is Modify through m.
func (b bigEngine) modifyWith(m *bigModify, key []byte, fn func(old []byte, found bool) ([]byte, bool, bool)) error {
	if isChunkKey(key) {
		return ErrReservedKey
	}
	if m.wrap == nil {
		m.wrap = m.call
	}
	m.b, m.key, m.fn, m.inChunks = b, key, fn, false
	err := b.raw.Modify(key, m.wrap)
	inChunks := m.inChunks
	m.key, m.fn = nil, nil
	if err != nil || !inChunks {
		return err
	}
	return b.raw.Atomic(false, func(tx Txn) error {
		t := bigTxn{b, tx}
		old, found, err := t.Get(key, nil)
		if err != nil {
			return err
		}
		val, exists, write := fn(old, found)
		switch {
		case !write:
			return nil
		case exists:
			return t.Put(key, val)
		case found:
			_, err := t.Delete(key)
			return err
		}
		return nil
	})
}

func (b bigEngine) Atomic(readOnly bool, fn func(tx Txn) error) error {
	return b.raw.Atomic(readOnly, func(tx Txn) error { return fn(bigTxn{b, tx}) })
}

// Scan skips the chunk space.
func (b bigEngine) Scan(from, to []byte, fn func(key, val []byte) bool) error {
	space, end := chunkSpace[:], prefixEnd(chunkSpace[:])
	stopped := false
	visit := func(k, v []byte) bool {
		if !fn(k, v) {
			stopped = true
			return false
		}
		return true
	}
	if bytes.Compare(from, space) < 0 {
		upTo := to
		if to == nil || bytes.Compare(to, space) > 0 {
			upTo = space
		}
		if err := b.raw.Scan(from, upTo, visit); err != nil || stopped {
			return err
		}
	}
	if to != nil && bytes.Compare(to, end) <= 0 {
		return nil
	}
	if bytes.Compare(from, end) < 0 {
		from = end
	}
	return b.raw.Scan(from, to, visit)
}

// bigTxn is a transaction of the engine with large values in chunks.
type bigTxn struct {
	b  bigEngine
	tx Txn
}

func (t bigTxn) Get(key, dst []byte) ([]byte, bool, error) {
	if isChunkKey(key) {
		return dst, false, nil
	}
	n := len(dst)
	v, ok, err := t.tx.Get(key, dst)
	if err != nil || !ok || !isManifest(v[n:]) {
		return v, ok, err
	}
	var man [manifestLen]byte
	copy(man[:], v[n:])
	size := int(binary.BigEndian.Uint32(man[12:]))
	id := binary.BigEndian.Uint64(man[16:])
	out := v[:n]
	var ck [chunkKeyLen]byte
	for i := 0; len(out)-n < size; i++ {
		before := len(out)
		var found bool
		if out, found, err = t.tx.Get(chunkKey(ck[:0], id, i), out); err != nil {
			return dst, false, err
		}
		if !found || len(out) == before {
			return dst, false, fmt.Errorf("%w: key %q, chunk %d of %d bytes", ErrBrokenValue, key, i, size)
		}
	}
	if len(out)-n != size {
		return dst, false, fmt.Errorf("%w: key %q: %d bytes in its chunks, want %d", ErrBrokenValue, key, len(out)-n, size)
	}
	return out, true, nil
}

// dropChunks deletes the chunks of the value in chunks at key, if it is.
func (t bigTxn) dropChunks(key []byte) (found bool, err error) {
	old, found, err := t.tx.Get(key, nil)
	if err != nil || !found || !isManifest(old) {
		return found, err
	}
	size := int(binary.BigEndian.Uint32(old[12:]))
	id := binary.BigEndian.Uint64(old[16:])
	var ck [chunkKeyLen]byte
	for i := 0; i*t.b.chunkSize() < size; i++ {
		if _, err := t.tx.Delete(chunkKey(ck[:0], id, i)); err != nil {
			return true, err
		}
	}
	return true, nil
}

// UnlessTxn is a Txn that can write a key without reading it: the commit
// checks the key's old value with unless under its latch, and when that
// matches, runs the transaction's function again, when PutUnless of that
// key declines (done false, nothing written) and its caller reads it.
// (scalestore's *Tx is one.) A value that fits an entry is written so
// over an old value that is not a manifest, which is all but always: an
// MSET then reads none of its keys.
type UnlessTxn interface {
	PutUnless(key, val []byte, unless func(old []byte) bool) (done bool, err error)
}

func (t bigTxn) Put(key, val []byte) error {
	if isChunkKey(key) {
		return ErrReservedKey
	}
	if u, ok := t.tx.(UnlessTxn); ok && t.b.fits(key, val) {
		if done, err := u.PutUnless(key, val, isManifest); err != nil || done {
			return err
		}
	}
	if _, err := t.dropChunks(key); err != nil {
		return err
	}
	if t.b.fits(key, val) {
		return t.tx.Put(key, val)
	}
	id := chunkIDs.Add(1)
	var ck [chunkKeyLen]byte
	size := t.b.chunkSize()
	for i := 0; i*size < len(val); i++ {
		if err := t.tx.Put(chunkKey(ck[:0], id, i), val[i*size:min(len(val), (i+1)*size)]); err != nil {
			return err
		}
	}
	_, exp := decodeValue(val)
	var man [manifestLen]byte
	copy(man[:], chunkSpace[:])
	binary.BigEndian.PutUint64(man[4:], uint64(exp))
	binary.BigEndian.PutUint32(man[12:], uint32(len(val)))
	binary.BigEndian.PutUint64(man[16:], id)
	return t.tx.Put(key, man[:])
}

func (t bigTxn) Delete(key []byte) (bool, error) {
	if isChunkKey(key) {
		return false, nil
	}
	if _, err := t.dropChunks(key); err != nil {
		return false, err
	}
	return t.tx.Delete(key)
}
