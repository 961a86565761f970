package ibverbs

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Memory the NIC reads and writes must stay put and outside the Go heap: the
// garbage collector neither knows that a device holds its address nor may it
// ever free or reuse it while registered. Everything the transport registers
// comes from mapMemory.

// mapMemory maps n bytes (rounded up to whole pages) of anonymous memory.
func mapMemory(n int) ([]byte, error) {
	page := unix.Getpagesize()
	n = (n + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("ibverbs: mmap %d bytes: %w", n, err)
	}
	return mem, nil
}

func unmapMemory(mem []byte) {
	if mem != nil {
		_ = unix.Munmap(mem)
	}
}

// addrOf is the virtual address of mem[0] (mem must not be empty).
func addrOf(mem []byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
}

// word is the aligned 8-byte word at b[0:8] as a pointer for sync/atomic.
// Callers guarantee alignment.
func word(b []byte) *uint64 {
	_ = b[7]
	return (*uint64)(unsafe.Pointer(&b[0]))
}

// loadLE atomically loads the little-endian uint64 at b[0:8] (aligned).
// Atomic because the other writer is a NIC (or the fake standing in for
// one): the load must not be torn or hoisted out of a polling loop, and it
// orders the plain reads of the message that follow it.
func loadLE(b []byte) uint64 {
	v := atomic.LoadUint64(word(b))
	var raw [8]byte
	binary.NativeEndian.PutUint64(raw[:], v)
	return binary.LittleEndian.Uint64(raw[:])
}

// storeLE atomically stores v little-endian at b[0:8] (aligned).
func storeLE(b []byte, v uint64) {
	var raw [8]byte
	binary.LittleEndian.PutUint64(raw[:], v)
	atomic.StoreUint64(word(b), binary.NativeEndian.Uint64(raw[:]))
}

// placeBytes copies src to dst front to back the way a NIC places an RDMA
// write: every naturally aligned 8-byte word of dst is stored atomically, in
// address order, so a poller that atomically loads the last word of a
// message (its doorbell) and sees it set also sees every byte before it.
// Unaligned head and tail bytes are plain stores.
func placeBytes(dst, src []byte) {
	n := len(src)
	if n == 0 {
		return
	}
	base := addrOf(dst)
	i := 0
	for i < n && (base+uint64(i))%8 != 0 {
		dst[i] = src[i]
		i++
	}
	for ; i+8 <= n; i += 8 {
		atomic.StoreUint64(word(dst[i:]), binary.NativeEndian.Uint64(src[i:]))
	}
	for ; i < n; i++ {
		dst[i] = src[i]
	}
}

// fetchBytes copies src to dst loading every aligned 8-byte word of src
// atomically, as a NIC's DMA read of memory that remote atomics or writes
// may be updating at the same time.
func fetchBytes(dst, src []byte) {
	n := len(dst)
	if n == 0 {
		return
	}
	base := addrOf(src)
	i := 0
	for i < n && (base+uint64(i))%8 != 0 {
		dst[i] = src[i]
		i++
	}
	for ; i+8 <= n; i += 8 {
		binary.NativeEndian.PutUint64(dst[i:], atomic.LoadUint64(word(src[i:])))
	}
	for ; i < n; i++ {
		dst[i] = src[i]
	}
}
