//go:build linux

package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/scalestore-go/scalestore/transport"
	"golang.org/x/sys/unix"
)

// Direct one-sided verbs: the calling thread accesses the peer's memory
// itself, as an RDMA NIC would, instead of asking the peer's reader.
//
// A verb through the ring costs a hand-off to the peer's reader and one
// back (a futex wake-up each when either side parked, and on a machine
// with few cores a trip through two schedulers): tens of microseconds where
// the memory access itself takes tens of nanoseconds. Memory a node
// allocates with AllocMemory lives in a memfd of its own; once it is
// registered, the transport passes the memfd to every peer over the
// bootstrap socket (SCM_RIGHTS, a regionMsg) and each peer maps it. A verb
// on a region the caller has mapped is done on the caller's goroutine:
// Read and Write copy, CompareAndSwap and FetchAndAdd are sync/atomic
// operations on the shared word, atomic with the owner's own atomics and
// with every other node's, through the ring or direct (same instructions
// on the same memory).
//
// Ordering. A Write must be ordered after every earlier Write and Send of
// this node to the peer, and those may still sit in the ring. So a verb
// goes direct only when the ring to the peer is empty: the peer consumed
// (and handled, or served) every record we published, because its
// consumer releases a record only afterwards. Otherwise it takes the ring,
// behind them. A direct verb completes before it returns, so later Sends
// and verbs are ordered after it either way.
//
// Safety. A mapping is sealed against shrinking (the receiver adds
// F_SEAL_SHRINK and checks it, as for the segment), so no access can raise
// SIGBUS whatever the owner does. The mappings of a link are unmapped at its
// teardown under remoteMu, which every direct verb holds for reading. A
// region message that does not check out is logged and ignored: the verbs
// on that region keep using the ring.
//
// Memory registered without AllocMemory (a Go slice, an anonymous mmap) is
// served through the ring as before.

// regionMsgSize is the size of a region message on the bootstrap socket:
//
//	[0,8)   magic "SSGSHMRG"
//	[8,12)  region key
//	[16,24) region length in bytes
//
// with the region's memfd attached.
const (
	regionMsgSize = 64
	regionMagic   = 0x47_52_4d_48_53_47_53_53 // "SSGSHMRG" little endian
)

// allocation is memory AllocMemory made: a memfd mapped shared.
type allocation struct {
	fd  int
	mem []byte
}

// AllocMemory returns size bytes of zeroed memory in a memfd of this
// transport, its pages allocated at once (as an RDMA registration pins
// them), valid until Close (which unmaps it). Registered, it is mapped
// by every peer, whose verbs on it then skip the ring (see direct.go).
func (t *Transport) AllocMemory(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shm: allocating %d bytes", size)
	}
	if t.closed.Load() {
		return nil, fmt.Errorf("shm: allocating on node %d: %w", t.self, transport.ErrClosed)
	}
	fd, err := unix.MemfdCreate(fmt.Sprintf("scalestore-shm-mem-%d", t.self), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	fail := func(err error) ([]byte, error) {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail(fmt.Errorf("shm: sizing memory to %d bytes: %w", size, err))
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		return fail(fmt.Errorf("shm: sealing memory: %w", err))
	}
	// Populated, as RDMA registration pins its pages: a verb never waits
	// for the owner's first touch of a page.
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fail(fmt.Errorf("shm: mapping %d bytes: %w", size, err))
	}
	t.regMu.Lock()
	t.allocs = append(t.allocs, &allocation{fd: fd, mem: mem})
	t.regMu.Unlock()
	return mem, nil
}

// exportable returns the allocation mem is, nil if it is not one (the
// caller holds regMu).
func (t *Transport) exportable(mem []byte) *allocation {
	for _, a := range t.allocs {
		if len(mem) > 0 && len(mem) <= len(a.mem) && unsafe.SliceData(mem) == unsafe.SliceData(a.mem) {
			return a
		}
	}
	return nil
}

// exported is a registered region peers may map.
type exported struct {
	key uint32
	fd  int
	len uint64
}

// offerAll passes every exported region to l's peer (a new link).
func (t *Transport) offerAll(l *link) {
	t.regMu.RLock()
	ex := append([]exported(nil), t.exports...)
	t.regMu.RUnlock()
	for _, e := range ex {
		l.offer(e)
	}
}

// offerLive passes a newly exported region to every live link.
func (t *Transport) offerLive(e exported) {
	for _, p := range t.members {
		p.mu.Lock()
		l := p.cur
		p.mu.Unlock()
		if l != nil {
			l.offer(e)
		}
	}
}

// offer sends one region message; a failure is the link's (its watcher
// sees the socket fail) and leaves the peer using the ring.
func (l *link) offer(e exported) {
	var b [regionMsgSize]byte
	binary.LittleEndian.PutUint64(b[0:], regionMagic)
	binary.LittleEndian.PutUint32(b[8:], e.key)
	binary.LittleEndian.PutUint64(b[16:], e.len)
	l.sockMu.Lock()
	defer l.sockMu.Unlock()
	if l.dead.Load() {
		return
	}
	if err := l.conn.SetWriteDeadline(time.Now().Add(l.t.cfg.HandshakeTimeout)); err == nil {
		_, _, err = l.conn.WriteMsgUnix(b[:], unix.UnixRights(e.fd), nil)
		if err != nil {
			l.t.log.Debug("shm: passing a region failed", "peer", l.peer.id, "err", err)
		}
	}
}

// readRegionMsg reads one message of the bootstrap socket: after the
// handshake only region messages travel there. It returns the region and
// its fd (-1 if the message is unusable; then why says why).
func (l *link) readRegionMsg() (key uint32, size uint64, fd int, why, err error) {
	b := make([]byte, regionMsgSize)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := l.conn.ReadMsgUnix(b, oob)
	if err != nil {
		return 0, 0, -1, nil, err
	}
	fds, perr := parseRights(oob[:oobn])
	if n < regionMsgSize {
		if _, err := io.ReadFull(l.conn, b[n:]); err != nil {
			closeAll(fds)
			return 0, 0, -1, nil, err
		}
	}
	if binary.LittleEndian.Uint64(b[0:]) != regionMagic {
		closeAll(fds)
		return 0, 0, -1, nil, errors.New("unexpected bytes on the bootstrap socket")
	}
	switch {
	case perr != nil:
		why = fmt.Errorf("control message: %v", perr)
	case flags&unix.MSG_CTRUNC != 0:
		why = errors.New("control message truncated")
	case len(fds) != 1:
		why = fmt.Errorf("%d fds, want one memfd", len(fds))
	}
	if why != nil {
		closeAll(fds)
		return 0, 0, -1, why, nil
	}
	return binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint64(b[16:]), fds[0], nil, nil
}

// mapRemote maps the peer's region key of size bytes from fd (and closes
// fd): the verbs on it go direct from now on.
func (l *link) mapRemote(key uint32, size uint64, fd int) error {
	defer unix.Close(fd)
	if size == 0 || size > 1<<46 {
		return fmt.Errorf("a region of %d bytes", size)
	}
	if err := sealedMemfd(fd, size); err != nil {
		return fmt.Errorf("the region's memory: %w", err)
	}
	// Populated: the page tables are filled now, not by the verbs.
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mapping %d bytes: %w", size, err)
	}
	l.remoteMu.Lock()
	defer l.remoteMu.Unlock()
	old := l.remote.Load()
	if l.dead.Load() || (old != nil && (*old)[key] != nil) {
		unix.Munmap(mem) // torn down meanwhile, or a duplicate offer
		return nil
	}
	m := make(map[uint32][]byte, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[key] = mem
	l.remote.Store(&m)
	return nil
}

// unmapRemote releases the peer's regions (teardown).
func (l *link) unmapRemote() {
	l.remoteMu.Lock()
	defer l.remoteMu.Unlock()
	if m := l.remote.Load(); m != nil {
		for _, mem := range *m {
			unix.Munmap(mem)
		}
	}
	l.remote.Store(nil)
}

// idle reports whether the peer consumed every record we sent it.
func (l *link) idle() bool {
	c := l.msgOut.ctl
	return c.head.Load() == c.tail.Load()
}

// direct performs a verb on the peer's region key itself, if it has that
// region mapped and the ring to the peer is empty; ok false means: take
// the ring. A read's bytes go to dst.
func (l *link) direct(key uint32, op byte, off, n, old, arg uint64, src, dst []byte) (value uint64, st byte, ok bool) {
	m := l.remote.Load()
	if m == nil {
		return 0, 0, false
	}
	mem := (*m)[key]
	if mem == nil || !l.idle() {
		return 0, 0, false
	}
	l.remoteMu.RLock()
	defer l.remoteMu.RUnlock()
	if l.dead.Load() || l.remote.Load() == nil {
		return 0, 0, false // the ring path reports the failure
	}
	raceAcquire()
	data, value, st := applyMem(mem, op, off, n, old, arg, src)
	copy(dst, data)
	raceRelease()
	return value, st, true
}

// applyMem performs one verb on mem; a read returns the bytes (aliasing
// mem). Alignment first, then bounds, so a misaligned atomic is
// ErrMisaligned even near the end.
func applyMem(mem []byte, op byte, off, n, old, arg uint64, src []byte) (data []byte, value uint64, st byte) {
	inBounds := func(n uint64) bool { return off <= uint64(len(mem)) && n <= uint64(len(mem))-off }
	switch op {
	case opRead:
		if !inBounds(n) {
			return nil, 0, stAccess
		}
		return mem[off : off+n], 0, stOK
	case opWrite:
		if uint64(len(src)) != n {
			return nil, 0, stBad
		}
		if !inBounds(n) {
			return nil, 0, stAccess
		}
		copy(mem[off:], src)
		return nil, 0, stOK
	case opCAS, opFAA:
		if off%8 != 0 {
			return nil, 0, stMisaligned
		}
		if !inBounds(8) {
			return nil, 0, stAccess
		}
		p := unsafe.Pointer(&mem[off])
		if uintptr(p)%8 != 0 {
			return nil, 0, stMisaligned // the region itself starts misaligned
		}
		// The owner's own sync/atomic accesses of the word are atomic with
		// these: same instructions on the same memory.
		w := (*atomic.Uint64)(p)
		if op == opFAA {
			return nil, w.Add(arg) - arg, stOK
		}
		for {
			// A failed CAS reports the value it saw; the load is its
			// linearization point.
			cur := w.Load()
			if cur != old {
				return nil, cur, stOK
			}
			if w.CompareAndSwap(old, arg) {
				return nil, old, stOK
			}
		}
	}
	return nil, 0, stBad
}

// Direct reports whether this node has mapped region r of its peer, so
// that verbs on it are done by the calling thread (while the ring to the
// peer is empty).
func (t *Transport) Direct(r transport.Region) bool {
	if r.Node == t.self || t.peers[r.Node] == nil {
		return false
	}
	l := t.peers[r.Node].live.Load()
	if l == nil || l.dead.Load() {
		return false
	}
	m := l.remote.Load()
	return m != nil && (*m)[r.Key] != nil
}
