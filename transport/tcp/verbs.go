package tcp

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/scalestore-go/scalestore/transport"
)

// regionTable maps remote keys to this node's registered memory.
type regionTable struct {
	mu sync.RWMutex
	m  map[uint32][]byte
}

func (rt *regionTable) init() { rt.m = map[uint32][]byte{} }

// add registers mem under a fresh random non-zero key: keys are not
// guessable, so a stale or forged Region fails with ErrAccess rather than
// touching another region.
func (rt *regionTable) add(mem []byte) (uint32, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for range 64 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("tcp: drawing a region key: %w", err)
		}
		key := binary.LittleEndian.Uint32(b[:])
		if _, taken := rt.m[key]; key != 0 && !taken {
			rt.m[key] = mem
			return key, nil
		}
	}
	return 0, errors.New("tcp: no free region key")
}

// access returns the n bytes at off of the region with key, or the status
// that refuses it. Atomics need an 8-byte aligned offset.
func (t *Transport) access(key uint32, off, n uint64, atomicOp bool) ([]byte, uint32) {
	t.regions.mu.RLock()
	mem, ok := t.regions.m[key]
	t.regions.mu.RUnlock()
	if !ok || key == 0 {
		return nil, statusAccess
	}
	if atomicOp && off%8 != 0 {
		return nil, statusMisaligned
	}
	size := uint64(len(mem))
	if off > size || n > size-off {
		return nil, statusAccess
	}
	return mem[off : off+n : off+n], statusOK
}

// nativeLittle: the machine stores words little-endian, as the verbs
// define them; elsewhere atomics swap bytes.
var nativeLittle = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func toWire(v uint64) uint64 {
	if nativeLittle {
		return v
	}
	return bits.ReverseBytes64(v)
}

// word is the 8-byte word at the start of b, which access checked to be in
// bounds and 8-byte aligned (Register checked the region's start).
func word(b []byte) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(b)))
}

// casWord returns the word's previous value; it stores new if that was
// old. A failed compare reports the value it saw, which is linearizable
// at that load.
func casWord(w *atomic.Uint64, old, new uint64) uint64 {
	o, n := toWire(old), toWire(new)
	for {
		cur := w.Load()
		if cur != o {
			return toWire(cur)
		}
		if w.CompareAndSwap(o, n) {
			return old
		}
	}
}

func faaWord(w *atomic.Uint64, delta uint64) uint64 {
	if nativeLittle {
		return w.Add(delta) - delta
	}
	for {
		cur := w.Load()
		if w.CompareAndSwap(cur, toWire(toWire(cur)+delta)) {
			return toWire(cur)
		}
	}
}

func statusErr(s uint32) error {
	switch s {
	case statusOK:
		return nil
	case statusAccess:
		return transport.ErrAccess
	case statusMisaligned:
		return transport.ErrMisaligned
	}
	return errMalformed
}

// Register exposes mem to peers under a fresh key. mem must not move and
// must stay valid until Close (off-heap memory), and must start 8-byte
// aligned so the atomics act on aligned words.
func (t *Transport) Register(mem []byte) (transport.Region, error) {
	if t.closed.Load() {
		return transport.Region{}, fmt.Errorf("tcp: register: %w", transport.ErrClosed)
	}
	if len(mem) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%8 != 0 {
		return transport.Region{}, errors.New("tcp: register: memory does not start 8-byte aligned")
	}
	key, err := t.regions.add(mem)
	if err != nil {
		return transport.Region{}, err
	}
	return transport.Region{Node: t.self, Key: key, Len: uint64(len(mem))}, nil
}

// Read copies len(dst) bytes at off of r into dst.
func (t *Transport) Read(dst []byte, r transport.Region, off uint64) error {
	if off > r.Len || uint64(len(dst)) > r.Len-off {
		return verbErr("read", r, off, len(dst), transport.ErrAccess)
	}
	// Long verbs go as several frames of at most maxVerbData; an empty
	// one still makes one round trip, so it checks the key.
	for done := 0; ; {
		n := min(len(dst)-done, maxVerbData)
		if _, err := t.verb(r, kindRead, off+uint64(done), dst[done:done+n], 0, 0); err != nil {
			return verbErr("read", r, off, len(dst), err)
		}
		if done += n; done >= len(dst) {
			break
		}
	}
	return nil
}

// Write copies src to off of r, after every earlier Send and Write of this
// node to the same peer (one queue, one connection, one receive loop).
func (t *Transport) Write(r transport.Region, off uint64, src []byte) error {
	if off > r.Len || uint64(len(src)) > r.Len-off {
		return verbErr("write", r, off, len(src), transport.ErrAccess)
	}
	// Long verbs go as several frames of at most maxVerbData; an empty
	// one still makes one round trip, so it checks the key.
	for done := 0; ; {
		n := min(len(src)-done, maxVerbData)
		if _, err := t.verb(r, kindWrite, off+uint64(done), src[done:done+n], 0, 0); err != nil {
			return verbErr("write", r, off, len(src), err)
		}
		if done += n; done >= len(src) {
			break
		}
	}
	return nil
}

// CompareAndSwap sets the word at off of r to new if it holds old.
func (t *Transport) CompareAndSwap(r transport.Region, off uint64, old, new uint64) (uint64, error) {
	prev, err := t.verb(r, kindCAS, off, nil, old, new)
	if err != nil {
		return 0, verbErr("compare-and-swap", r, off, 8, err)
	}
	return prev, nil
}

// FetchAndAdd adds delta to the word at off of r.
func (t *Transport) FetchAndAdd(r transport.Region, off uint64, delta uint64) (uint64, error) {
	prev, err := t.verb(r, kindFAA, off, nil, delta, 0)
	if err != nil {
		return 0, verbErr("fetch-and-add", r, off, 8, err)
	}
	return prev, nil
}

func verbErr(op string, r transport.Region, off uint64, n int, err error) error {
	return fmt.Errorf("tcp: %s of %d bytes at offset %d of region %#x on node %d: %w", op, n, off, r.Key, r.Node, err)
}

// verb runs one verb frame: buf is the bytes read into (Read) or written
// (Write); a, b the operands of an atomic. A region of this node is served
// in place; another node's goes out as a request.
func (t *Transport) verb(r transport.Region, k kind, off uint64, buf []byte, a, b uint64) (uint64, error) {
	if t.closed.Load() {
		return 0, transport.ErrClosed
	}
	atomicOp := k == kindCAS || k == kindFAA
	n := uint64(len(buf))
	if atomicOp {
		n = 8
	}
	// Checks the caller's Region allows, before a round trip; the owner
	// checks again against the real region.
	if atomicOp && off%8 != 0 {
		return 0, transport.ErrMisaligned
	}
	if off > r.Len || n > r.Len-off {
		return 0, transport.ErrAccess
	}
	if r.Node == t.self {
		return t.serveLocal(r.Key, k, off, buf, a, b)
	}
	p := t.peer(r.Node)
	if p == nil {
		return 0, transport.ErrUnknownPeer
	}
	if p.down.Load() {
		return 0, p.downErr()
	}
	var c *call
	var req []byte
	switch k {
	case kindRead:
		c = p.newCall(buf)
		req = appendVerbHdr(make([]byte, 0, hdrSize+verbHdrSize), k, c.id, r.Key, uint32(n), off, 0)
	case kindWrite:
		c = p.newCall(nil)
		req = appendVerbHdr(make([]byte, 0, hdrSize+verbHdrSize+len(buf)), k, c.id, r.Key, uint32(n), off, len(buf))
		req = append(req, buf...)
	case kindCAS:
		c = p.newCall(nil)
		req = appendVerbHdr(make([]byte, 0, hdrSize+verbHdrSize+16), k, c.id, r.Key, 8, off, 16)
		req = binary.LittleEndian.AppendUint64(req, a)
		req = binary.LittleEndian.AppendUint64(req, b)
	case kindFAA:
		c = p.newCall(nil)
		req = appendVerbHdr(make([]byte, 0, hdrSize+verbHdrSize+8), k, c.id, r.Key, 8, off, 8)
		req = binary.LittleEndian.AppendUint64(req, a)
	}
	if err := p.roundTrip(c, req); err != nil {
		return 0, err
	}
	return c.value, nil
}

// serveLocal runs a verb on this node's own region.
func (t *Transport) serveLocal(key uint32, k kind, off uint64, buf []byte, a, b uint64) (uint64, error) {
	atomicOp := k == kindCAS || k == kindFAA
	n := uint64(len(buf))
	if atomicOp {
		n = 8
	}
	mem, st := t.access(key, off, n, atomicOp)
	if st != statusOK {
		return 0, statusErr(st)
	}
	switch k {
	case kindRead:
		copy(buf, mem)
	case kindWrite:
		copy(mem, buf)
	case kindCAS:
		return casWord(word(mem), a, b), nil
	case kindFAA:
		return faaWord(word(mem), a), nil
	}
	return 0, nil
}
