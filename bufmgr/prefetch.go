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
