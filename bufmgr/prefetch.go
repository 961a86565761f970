package bufmgr

import (
	"unsafe"

	"github.com/scalestore-go/scalestore/internal/prefetch"
	"github.com/scalestore-go/scalestore/protocol"
)

// Lookups that walk several trees or keys at once (a batch of point reads)
// hide the latency of one lookup's misses behind another's: for each page
// they first hint the translation table's bucket, then (once the bucket is
// in the CPU's cache) the frame and the page's first line, and only then
// take the guard. Both hints are only hints: they read without latching,
// change nothing, and a wrong guess costs a wasted prefetch, never a wrong
// answer (the guard checks everything again).

// PrefetchBucket hints the translation table's bucket of pid.
func (c *Cache) PrefetchBucket(pid protocol.PID) {
	prefetch.Line(unsafe.Pointer(c.table.bucketOf(pid)))
}

// PrefetchPage hints the frame that pid's bucket points to first and the
// first line of its page (the header a B-tree node starts with). It reads
// the bucket, so PrefetchBucket should have run some time before.
func (c *Cache) PrefetchPage(pid protocol.PID) {
	i := c.table.headHint(pid)
	if i < 0 || int(i) >= len(c.frames) {
		return
	}
	f := &c.frames[i]
	prefetch.Line(unsafe.Pointer(f))
	prefetch.Line(unsafe.Add(c.pageBase, uintptr(i)*protocol.PageSize))
}
