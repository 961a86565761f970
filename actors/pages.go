package actors

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore/protocol"
)

// mapPages maps the frames' page memory with one anonymous mmap: off the Go
// heap (the garbage collector never scans or moves it), page-aligned (usable
// for O_DIRECT and, later, RDMA registration).
func mapPages(frames int) ([]byte, error) {
	if frames <= 0 {
		return nil, fmt.Errorf("actors: %d cache frames", frames)
	}
	mem, err := unix.Mmap(-1, 0, frames*protocol.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("actors: mapping %d cache frames (%d MiB): %w", frames, frames*protocol.PageSize>>20, err)
	}
	// Transparent huge pages, where the kernel offers them on request: a
	// B-tree lookup touches a few random pages of a large pool, and 2 MiB
	// pages save most of its TLB misses. Advice only; failure is harmless.
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	return mem, nil
}

func unmapPages(mem []byte) error {
	if mem == nil {
		return nil
	}
	if err := unix.Munmap(mem); err != nil {
		return fmt.Errorf("actors: unmapping the cache: %w", err)
	}
	return nil
}

// AdviseHuge asks for transparent huge pages on memory the Go heap owns
// (the frame array, the translation table). madvise works on whole pages,
// so the range is trimmed to them; it is advice, and errors are ignored.
func AdviseHuge(mem []byte) {
	const huge = 2 << 20
	start := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	end := start + uintptr(len(mem))
	first := (start + huge - 1) &^ (huge - 1)
	last := end &^ (huge - 1)
	if last <= first {
		return
	}
	off := first - start
	_ = unix.Madvise(mem[off:off+(last-first)], unix.MADV_HUGEPAGE)
}
