//go:build linux

package nvme

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI of io_uring (include/uapi/linux/io_uring.h).
const (
	sysIOUringSetup = 425
	sysIOUringEnter = 426

	ioringOpNop   = 0
	ioringOpRead  = 22
	ioringOpWrite = 23

	ioringOffSQRing = 0
	ioringOffCQRing = 0x8000000
	ioringOffSQEs   = 0x10000000

	ioringFeatSingleMmap   = 1 << 0
	ioringFeatNoDrop       = 1 << 1
	ioringFeatSubmitStable = 1 << 2
	ioringFeatRWCurPos     = 1 << 3 // with IORING_OP_READ/WRITE (Linux 5.6)

	ioringEnterGetEvents = 1 << 0
)

// sqringOffsets is struct io_sqring_offsets (40 bytes).
type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqringOffsets is struct io_cqring_offsets (40 bytes).
type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// uringParams is struct io_uring_params (120 bytes).
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is struct io_uring_sqe (64 bytes) with the unions flattened to the
// members a plain read or write uses.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	rwFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad         uint64
}

// cqe is struct io_uring_cqe (16 bytes, without the CQE32 extension).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Compile-time checks of the ABI sizes.
var (
	_ [120 - unsafe.Sizeof(uringParams{})]struct{}
	_ [unsafe.Sizeof(uringParams{}) - 120]struct{}
	_ [64 - unsafe.Sizeof(sqe{})]struct{}
	_ [unsafe.Sizeof(sqe{}) - 64]struct{}
	_ [16 - unsafe.Sizeof(cqe{})]struct{}
	_ [unsafe.Sizeof(cqe{}) - 16]struct{}
)

// ring is one io_uring instance: the shared submission and completion rings
// and the SQE array, all mapped from the ring's file descriptor. Only one
// goroutine at a time uses it.
type ring struct {
	fd int

	sqMem, cqMem, sqeMem []byte // cqMem aliases sqMem with IORING_FEAT_SINGLE_MMAP

	sqHead, sqTail *uint32
	sqMask         uint32
	sqEntries      uint32
	sqArray        []uint32
	sqes           []sqe
	sqTailLocal    uint32 // our copy of *sqTail (only we write it)

	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []cqe
}

// newRing sets up an io_uring with at least entries submission entries.
func newRing(entries uint32) (*ring, error) {
	var p uringParams
	fd, _, errno := unix.Syscall(sysIOUringSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	const need = ioringFeatNoDrop | ioringFeatSubmitStable | ioringFeatRWCurPos
	if p.features&need != need {
		r.close()
		return nil, fmt.Errorf("io_uring: kernel too old (features %#x lack %#x)", p.features, need)
	}

	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*int(unsafe.Sizeof(cqe{}))
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const flags = unix.MAP_SHARED | unix.MAP_POPULATE
	var err error
	if p.features&ioringFeatSingleMmap != 0 {
		r.sqMem, err = unix.Mmap(r.fd, ioringOffSQRing, max(sqSize, cqSize), prot, flags)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("io_uring: mmap rings: %w", err)
		}
		r.cqMem = r.sqMem
	} else {
		if r.sqMem, err = unix.Mmap(r.fd, ioringOffSQRing, sqSize, prot, flags); err != nil {
			r.close()
			return nil, fmt.Errorf("io_uring: mmap SQ ring: %w", err)
		}
		if r.cqMem, err = unix.Mmap(r.fd, ioringOffCQRing, cqSize, prot, flags); err != nil {
			r.close()
			return nil, fmt.Errorf("io_uring: mmap CQ ring: %w", err)
		}
	}
	sqeSize := int(p.sqEntries) * int(unsafe.Sizeof(sqe{}))
	if r.sqeMem, err = unix.Mmap(r.fd, ioringOffSQEs, sqeSize, prot, flags); err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring: mmap SQEs: %w", err)
	}

	u32 := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead = u32(r.sqMem, p.sqOff.head)
	r.sqTail = u32(r.sqMem, p.sqOff.tail)
	r.sqMask = *u32(r.sqMem, p.sqOff.ringMask)
	r.sqEntries = *u32(r.sqMem, p.sqOff.ringEntries)
	r.sqArray = unsafe.Slice(u32(r.sqMem, p.sqOff.array), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.sqTailLocal = atomic.LoadUint32(r.sqTail)

	r.cqHead = u32(r.cqMem, p.cqOff.head)
	r.cqTail = u32(r.cqMem, p.cqOff.tail)
	r.cqMask = *u32(r.cqMem, p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&r.cqMem[p.cqOff.cqes])), p.cqEntries)
	return r, nil
}

// push queues one read or write SQE; it reports false when the submission
// ring is full (the caller then submits and retries).
func (r *ring) push(op uint8, fd int, off, addr uint64, n uint32, userData uint64) bool {
	tail := r.sqTailLocal
	if tail-atomic.LoadUint32(r.sqHead) >= r.sqEntries {
		return false
	}
	idx := tail & r.sqMask
	r.sqes[idx] = sqe{opcode: op, fd: int32(fd), off: off, addr: addr, len: n, userData: userData}
	r.sqArray[idx] = idx
	r.sqTailLocal = tail + 1
	atomic.StoreUint32(r.sqTail, tail+1) // release: publishes the SQE
	return true
}

// unsubmitted counts queued SQEs the kernel has not consumed yet.
func (r *ring) unsubmitted() uint32 {
	return r.sqTailLocal - atomic.LoadUint32(r.sqHead)
}

// enter submits the queued SQEs and, if minComplete > 0, waits until the
// completion ring holds at least minComplete entries. Interrupted waits are
// restarted.
func (r *ring) enter(minComplete uint32) error {
	for {
		toSubmit := r.unsubmitted()
		var flags uintptr
		if minComplete > 0 {
			flags = ioringEnterGetEvents
		}
		if toSubmit == 0 && minComplete == 0 {
			return nil
		}
		_, _, errno := unix.Syscall6(sysIOUringEnter, uintptr(r.fd), uintptr(toSubmit),
			uintptr(minComplete), flags, 0, 0)
		switch errno {
		case 0:
			if minComplete > 0 || r.unsubmitted() == 0 {
				return nil
			}
			// Partially consumed submissions: go round again.
		case unix.EINTR:
			// A signal (the Go runtime preempts with SIGURG); the ring
			// state tells what is left to do.
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// waitCQ blocks until the completion ring holds an entry. It submits
// nothing and reads only the ring's atomics and fd, so it may run while
// another goroutine pushes, submits or reaps.
func (r *ring) waitCQ() error {
	for atomic.LoadUint32(r.cqHead) == atomic.LoadUint32(r.cqTail) {
		_, _, errno := unix.Syscall6(sysIOUringEnter, uintptr(r.fd), 0, 1, ioringEnterGetEvents, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
	return nil
}

// peek takes the next completion, if any, off the completion ring.
func (r *ring) peek() (userData uint64, res int32, ok bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) { // acquire: the CQE is visible
		return 0, 0, false
	}
	c := &r.cqes[head&r.cqMask]
	userData, res = c.userData, c.res
	atomic.StoreUint32(r.cqHead, head+1) // release the CQE slot to the kernel
	return userData, res, true
}

// close unmaps the rings and closes the ring; the kernel cancels whatever
// is still in flight.
func (r *ring) close() {
	if r.sqeMem != nil {
		_ = unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && unsafe.SliceData(r.cqMem) != unsafe.SliceData(r.sqMem) {
		_ = unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		_ = unix.Munmap(r.sqMem)
	}
	_ = unix.Close(r.fd)
	*r = ring{fd: -1}
}
