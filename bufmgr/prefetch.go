package bufmgr

import (
	"unsafe"

	"github.com/scalestore-go/scalestore/internal/prefetch"
	"github.com/scalestore-go/scalestore/protocol"
)

// Lookups that walk several trees or keys at once (a batch of point reads)
// hide the latency of one lookup's misses behind another's: for each page
// they first hint the lines a lookup reads first (PrefetchLookup), then,
// once those are in the CPU's cache, the frame and page they point to
// (PrefetchPage), and only then take the guard. Both hints are only hints:
// they read without latching, change nothing, and a wrong guess costs a
// wasted prefetch, never a wrong answer (the guard checks everything again).

// PrefetchLookup hints pid's home frame and the first line of its page
// (where a page that lives at home is found at once, see table.home) and
// the translation table's bucket (where a page that does not is found).
func (c *Cache) PrefetchLookup(pid protocol.PID) {
	i := c.table.home(pid)
	prefetch.Line(unsafe.Pointer(&c.frames[i]))
	prefetch.Line(unsafe.Add(c.pageBase, uintptr(i)*protocol.PageSize))
	prefetch.Line(unsafe.Pointer(c.table.bucketOf(pid)))
}

// TransferHint hints what a protocol message about a page touches first
// on its way to a frame: the home frame, the translation table's bucket,
// and the frame's queue of transfers and its waiters. It holds copies of
// the addresses it needs, so that a holder of many (the simulator keeps
// one per node in an array) reaches the lines to hint without first
// missing on the cache and its table. Valid as long as the cache is.
type TransferHint struct {
	frames, queues, waiters, buckets unsafe.Pointer
	n, homeDiv, mask                 uint64
}

// TransferHint returns the cache's TransferHint.
func (c *Cache) TransferHint() TransferHint {
	return TransferHint{
		frames:  unsafe.Pointer(unsafe.SliceData(c.frames)),
		queues:  unsafe.Pointer(unsafe.SliceData(c.queues)),
		waiters: unsafe.Pointer(unsafe.SliceData(c.waiters)),
		buckets: unsafe.Pointer(unsafe.SliceData(c.table.buckets)),
		n:       uint64(len(c.frames)), homeDiv: c.table.homeDiv, mask: c.table.mask,
	}
}

// PrefetchFrame hints the lines a message reads first (see TransferHint),
// given the message's encoded frame (protocol.FramePID).
func (h *TransferHint) PrefetchFrame(frame []byte) {
	if h.n == 0 {
		return
	}
	pid := protocol.FramePID(frame)
	i := uintptr(homeIndex(pid, h.homeDiv, h.n))
	prefetch.Line(unsafe.Add(h.frames, i*unsafe.Sizeof(Frame{})))
	prefetch.Line(unsafe.Add(h.queues, i*unsafe.Sizeof([]Transfer{})))
	prefetch.Line(unsafe.Add(h.waiters, i*unsafe.Sizeof([]*Worker{})))
	prefetch.Line(unsafe.Add(h.buckets, uintptr(bucketIndex(pid, h.mask))*unsafe.Sizeof(bucket{})))
}

// PrefetchPage hints, for a page that does not live at home, the frame
// that pid's bucket points to first and the first line of its page (the
// header a B-tree node starts with). It reads the home frame and the
// bucket, so PrefetchLookup should have run some time before.
func (c *Cache) PrefetchPage(pid protocol.PID) {
	if c.frames[c.table.home(pid)].key.Load() == tableKey(pid) {
		return // at home: PrefetchLookup hinted it
	}
	i := c.table.headHint(pid)
	if i < 0 || int(i) >= len(c.frames) {
		return
	}
	f := &c.frames[i]
	prefetch.Line(unsafe.Pointer(f))
	prefetch.Line(unsafe.Add(c.pageBase, uintptr(i)*protocol.PageSize))
}
