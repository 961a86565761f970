//go:build linux

package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Segment layout (see doc.go): one control page, then the data of the four
// rings: messages dialer -> acceptor, messages acceptor -> dialer, verb
// responses dialer -> acceptor, verb responses acceptor -> dialer.
const (
	pageSize = 4096
	// lineSize separates words written by different sides. 128 rather than
	// 64 bytes: x86's adjacent-line prefetcher pulls cache lines in pairs,
	// so two words 64 bytes apart still bounce together.
	lineSize = 128

	hdrOff   = 0                      // segment header, written by the creator
	ctlOff   = lineSize               // control block of ring 0; ring i's is i*ctlSize further
	ctlSize  = 5 * lineSize           // tail, head, consWaiting, prodWaiting, consCPU
	numRings = 4                      // see ringMsgA and friends
	segMagic = 0x31_4d_48_53_47_53_53 // "SSGSHM1" little endian, in the header

	// RespRingSize is the size of each verb-response ring: responses are
	// drained by the callers waiting for them, so a few in flight suffice.
	RespRingSize = 64 << 10
)

// Ring indices in the segment. The dialer produces on ringMsgA and ringRespA
// and consumes ringMsgB and ringRespB; the acceptor the other way round.
const (
	ringMsgA  = 0 // messages and verb requests, dialer -> acceptor
	ringMsgB  = 1 // messages and verb requests, acceptor -> dialer
	ringRespA = 2 // verb responses, dialer -> acceptor
	ringRespB = 3 // verb responses, acceptor -> dialer
)

// MinRingSize and MaxRingSize bound Config.RingSize. The minimum keeps a
// largest record (a page, or a verb chunk, with its header) at about a
// quarter of a ring or less, so a full-size record never waits for the ring
// to drain completely.
const (
	MinRingSize = 64 << 10
	MaxRingSize = 1 << 30
)

// ringSizes are the four rings' sizes for message rings of ringSize bytes.
func ringSizes(ringSize uint64) [numRings]uint64 {
	return [numRings]uint64{ringSize, ringSize, RespRingSize, RespRingSize}
}

// segmentSize is the memfd size for message rings of ringSize bytes.
func segmentSize(ringSize uint64) uint64 { return pageSize + 2*ringSize + 2*RespRingSize }

// ringCtl is one ring's control block in shared memory. Each word is
// written by one side only (except the waiting flags, which the waker
// clears), and each sits in its own line pair, so a producer publishing
// tail does not steal the line the consumer writes head to.
type ringCtl struct {
	// tail: bytes published by the producer (monotonic; position = tail
	// mod size). Written by the producer with a release store after the
	// record's bytes.
	tail atomic.Uint64
	_    [lineSize - 8]byte
	// head: bytes consumed and released by the consumer.
	head atomic.Uint64
	_    [lineSize - 8]byte
	// consWaiting is 1 while the consumer is (about to be) parked on it
	// waiting for data; the producer clears it and wakes.
	consWaiting atomic.Uint32
	_           [lineSize - 4]byte
	// prodWaiting is 1 while a producer is (about to be) parked on it
	// waiting for space; the consumer clears it and wakes.
	prodWaiting atomic.Uint32
	_           [lineSize - 4]byte
	// consCPU is the CPU (plus one) the consumer's reader last waited on
	// for long (see wait.go); the peer's reader compares it with its own.
	consCPU cpuWord
	_       [lineSize - 4]byte
}

func init() {
	// The layout constants and the struct must agree; a compile-time size
	// check would need a constant expression unsafe.Sizeof allows.
	var c ringCtl
	if unsafe.Sizeof(c) != ctlSize || ctlOff+numRings*ctlSize > pageSize {
		panic("shm: ring control block does not fit its layout") // programming error, not input
	}
}

// segment is one pair's shared memory as mapped by this process: the
// control page and the four rings, each ring's data mapped twice back to
// back so a record that wraps around the end is contiguous in memory.
type segment struct {
	ringSize uint64 // of the message rings
	sizes    [numRings]uint64
	ctlPage  unsafe.Pointer           // pageSize bytes
	ringMem  [numRings]unsafe.Pointer // 2*sizes[i] bytes each
}

// createSegment makes a new memfd for rings of ringSize bytes, sizes it,
// seals it against shrinking (the acceptor seals it too, but sealing here
// protects this side before the handshake completes) and maps it. The
// caller closes the returned fd after passing it on.
func createSegment(name string, ringSize uint64) (fd int, seg *segment, err error) {
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("memfd_create: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
			fd = -1
		}
	}()
	size := segmentSize(ringSize)
	if err = unix.Ftruncate(fd, int64(size)); err != nil {
		return -1, nil, fmt.Errorf("sizing the segment to %d bytes: %w", size, err)
	}
	if _, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		return -1, nil, fmt.Errorf("sealing the segment: %w", err)
	}
	seg, err = mapSegment(fd, ringSize)
	return fd, seg, err
}

// checkSegment vets a memfd received from a peer before mapping it: it must
// be a regular (memfd) file that accepts a shrink seal, carries it
// afterwards, and is large enough for the rings. With the seal in place the
// peer can never shrink the file under our mapping, so no access to the
// mapping can raise SIGBUS.
func checkSegment(fd int, ringSize uint64) error {
	if err := sealedMemfd(fd, segmentSize(ringSize)); err != nil {
		return fmt.Errorf("the passed segment (rings of %d bytes): %w", ringSize, err)
	}
	return nil
}

// sealedMemfd checks that fd is a regular (memfd) file, seals it against
// shrinking, checks that the seal holds, and that the file has at least
// want bytes. With the seal in place no mapping of it can raise SIGBUS.
func sealedMemfd(fd int, want uint64) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("not a memfd (mode %#o)", st.Mode)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		return fmt.Errorf("sealing the memfd against shrinking: %w", err)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return fmt.Errorf("reading the memfd's seals: %w", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return fmt.Errorf("memfd seals %#x lack F_SEAL_SHRINK", seals)
	}
	// Fstat again: the size can only have grown since the seal.
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	if st.Size < 0 || uint64(st.Size) < want {
		return fmt.Errorf("memfd too small: %d bytes, %d needed", st.Size, want)
	}
	return nil
}

// mapSegment maps the control page and both rings of fd. For each ring it
// reserves 2*ringSize bytes of address space with PROT_NONE, then maps the
// ring's file range over both halves with MAP_FIXED: byte i and byte
// i+ringSize of the ring are the same memory.
func mapSegment(fd int, ringSize uint64) (seg *segment, err error) {
	seg = &segment{ringSize: ringSize, sizes: ringSizes(ringSize)}
	defer func() {
		if err != nil {
			seg.unmap()
			seg = nil
		}
	}()
	const rw = unix.PROT_READ | unix.PROT_WRITE
	seg.ctlPage, err = unix.MmapPtr(fd, 0, nil, pageSize, rw, unix.MAP_SHARED)
	if err != nil {
		seg.ctlPage = nil
		return nil, fmt.Errorf("mapping the control page: %w", err)
	}
	off := uint64(pageSize)
	for i, size := range seg.sizes {
		res, err := unix.MmapPtr(-1, 0, nil, uintptr(2*size), unix.PROT_NONE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			return nil, fmt.Errorf("reserving address space for ring %d: %w", i, err)
		}
		seg.ringMem[i] = res
		for half := range uint64(2) {
			at := unsafe.Add(res, half*size)
			got, err := unix.MmapPtr(fd, int64(off), at, uintptr(size), rw, unix.MAP_SHARED|unix.MAP_FIXED)
			if err != nil {
				return nil, fmt.Errorf("mapping ring %d (copy %d): %w", i, half, err)
			}
			if got != at {
				return nil, errors.New("mmap with MAP_FIXED moved the mapping")
			}
		}
		off += size
	}
	return seg, nil
}

// unmap releases every mapping; safe on a partly mapped segment.
func (s *segment) unmap() {
	if s.ctlPage != nil {
		unix.MunmapPtr(s.ctlPage, pageSize)
		s.ctlPage = nil
	}
	for i, p := range s.ringMem {
		if p != nil {
			unix.MunmapPtr(p, uintptr(2*s.sizes[i]))
			s.ringMem[i] = nil
		}
	}
}

// ctl returns the control block of ring i.
func (s *segment) ctl(i int) *ringCtl {
	return (*ringCtl)(unsafe.Add(s.ctlPage, ctlOff+i*ctlSize))
}

// data returns ring i's doubly mapped data, 2*ringSize bytes.
func (s *segment) data(i int) []byte {
	return unsafe.Slice((*byte)(s.ringMem[i]), 2*s.sizes[i])
}

// header is the segment header's 64 bytes; the creator fills it so a
// debugger (or the acceptor's check) can tell what the segment is.
func (s *segment) header() []byte {
	return unsafe.Slice((*byte)(unsafe.Add(s.ctlPage, hdrOff)), 64)
}

func (s *segment) writeHeader(cluster uint64, dialer, acceptor uint8) {
	h := s.header()
	binary.LittleEndian.PutUint64(h[0:], segMagic)
	binary.LittleEndian.PutUint32(h[8:], protoVersion)
	binary.LittleEndian.PutUint64(h[16:], s.ringSize)
	binary.LittleEndian.PutUint64(h[24:], cluster)
	h[32], h[33] = dialer, acceptor
}

// checkFresh compares the creator's header with the handshake and checks
// that no ring has been used: both sides start at position 0.
func (s *segment) checkFresh(cluster uint64, dialer, acceptor uint8) error {
	h := s.header()
	if binary.LittleEndian.Uint64(h[0:]) != segMagic || binary.LittleEndian.Uint32(h[8:]) != protoVersion ||
		binary.LittleEndian.Uint64(h[16:]) != s.ringSize || binary.LittleEndian.Uint64(h[24:]) != cluster ||
		h[32] != dialer || h[33] != acceptor {
		return errors.New("segment header does not match the handshake")
	}
	for i := range numRings {
		c := s.ctl(i)
		if c.tail.Load() != 0 || c.head.Load() != 0 {
			return fmt.Errorf("ring %d of a new segment is not empty", i)
		}
	}
	return nil
}
