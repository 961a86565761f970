package bufmgr

import (
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/scalestore-go/scalestore/protocol"
)

// table is the translation table from PID to frame (paper §3.2). It is
// partitioned into buckets, each a chain of frames through Frame.next, and
// each with its own optimistic latch: a version that is odd while a writer
// changes the chain. Readers never write to it: they read the version, walk
// the chain, and trust a hit only if the version did not move (paper §6.2:
// a single-latched table was the first bottleneck). Writers are serialised
// by the node runtime's lock (inserts and removals happen only on the slow
// path), so the bucket latch only has to protect readers.
type table struct {
	buckets []bucket
	mask    uint64
	frames  []Frame
	// homeFirst (an atomic 0 or 1) tells get to read the home frame before
	// the bucket: most pages in the table live at home. Stored only when
	// it flips, so the hot path reads a line nobody writes.
	homeFirst uint32
	// homeDiv is 2^64 / len(frames), rounded up: home's remainder by a
	// multiplication instead of a division (Lemire's fastmod), since a
	// lookup computes a home at every level of a tree.
	homeDiv uint64

	_ [64]byte // the counts below change on every insert and removal
	// Pages in the table, and how many of them are at home (under the node
	// runtime's lock).
	entries, atHome int
}

type bucket struct {
	version atomic.Uint64
	head    atomic.Int32 // frame index + 1; 0 = empty
}

// maxChain bounds a lock-free walk: a chain that changes under a reader can
// send it through frames of other buckets; past the bound it gives up and
// the caller takes the slow path.
const maxChain = 64

func newTable(frames []Frame) table {
	n := 1
	for n < 2*len(frames) {
		n <<= 1
	}
	t := table{buckets: make([]bucket, n), mask: uint64(n - 1), frames: frames, homeFirst: 1}
	if len(frames) > 0 {
		t.homeDiv = math.MaxUint64/uint64(len(frames)) + 1
	}
	return t
}

// countHome follows the share of pages at home after an insert (d = 1) or
// a removal (d = -1) of frame f as pid. get reads the home frame first
// while at least 60% of the pages are at home and stops below 40% (a
// store larger than the cache, whose homes are mostly taken: there the
// read of the home frame would be a wasted miss before every bucket's).
// The gap keeps the flag from flipping at every insert near one bound.
func (t *table) countHome(f *Frame, pid protocol.PID, d int) {
	t.entries += d
	if int(f.index) == t.home(pid) {
		t.atHome += d
	}
	on := atomic.LoadUint32(&t.homeFirst) == 1
	switch {
	case !on && 10*t.atHome >= 6*t.entries:
		atomic.StoreUint32(&t.homeFirst, 1)
	case on && 10*t.atHome < 4*t.entries:
		atomic.StoreUint32(&t.homeFirst, 0)
	}
}

// tableKey is the value Frame.key holds for pid (0 means not in the table).
func tableKey(pid protocol.PID) uint64 { return uint64(pid) + 1 }

func (t *table) bucketOf(pid protocol.PID) *bucket {
	return &t.buckets[bucketIndex(pid, t.mask)]
}

// bucketIndex is pid's bucket in a table of mask+1 buckets.
func bucketIndex(pid protocol.PID, mask uint64) uint64 {
	h := uint64(pid) * 0x9E3779B97F4A7C15 // Fibonacci hashing spreads slots
	return (h >> 17) & mask
}

// homeSpread offsets the homes of different directories' pages, so that
// the same slot on two nodes does not mean the same home.
const homeSpread = 0x9E3779B9

// home is the frame pid is put in when that frame is free (Cache.Insert),
// and the first place get looks. Consecutive slots of a directory have
// consecutive homes, so the pages of a store that fits in the cache mostly
// live at home, and a lookup reads the frame first instead of the bucket
// and then the frame: one cache miss less in a chain of dependent misses
// (both are cold when the pages outnumber the CPU's cache lines).
//
// The slot and the spread are taken modulo 2^32 (a cache of 2^32 frames
// would be 16 TiB of pages), which makes the remainder exact with one
// 64-bit and one 128-bit multiplication (fastmod: for a < 2^32 and
// d < 2^32, a mod d = hi64(lo64(a·⌈2^64/d⌉)·d)).
func (t *table) home(pid protocol.PID) int {
	return homeIndex(pid, t.homeDiv, uint64(len(t.frames)))
}

// homeIndex is pid's home in n frames, given div = ⌈2^64/n⌉ (see home).
func homeIndex(pid protocol.PID, div, n uint64) int {
	return fastmod(uint32(pid.Slot())+uint32(pid.Dir())*homeSpread, div, n)
}

// fastmod is a mod n, given div = ⌈2^64/n⌉ (0 for n = 1), for n < 2^32.
func fastmod(a uint32, div, n uint64) int {
	hi, _ := bits.Mul64(div*uint64(a), n)
	return int(hi)
}

// get finds pid without latching anything; nil when absent or when the
// bucket changed during the walk (the caller retries on the slow path).
// A frame whose key is pid's is in the table as pid at that instant (the
// key is set before a frame is linked and cleared after it is unlinked);
// the caller validates the latch and the key again after latching, as it
// does for a frame found through the chain.
func (t *table) get(pid protocol.PID) *Frame {
	key := tableKey(pid)
	if atomic.LoadUint32(&t.homeFirst) == 1 {
		if f := &t.frames[t.home(pid)]; f.key.Load() == key {
			return f
		}
	}
	b := t.bucketOf(pid)
	v := b.version.Load()
	if v&1 != 0 {
		return nil
	}
	i := b.head.Load()
	for range maxChain {
		if i == 0 {
			return nil
		}
		f := &t.frames[i-1]
		if f.key.Load() == key {
			if b.version.Load() != v {
				return nil
			}
			return f
		}
		i = f.next.Load()
	}
	return nil
}

// insert adds f as pid. Caller holds the node lock.
func (t *table) insert(f *Frame, pid protocol.PID) {
	b := t.bucketOf(pid)
	b.version.Add(1)
	f.key.Store(tableKey(pid))
	f.next.Store(b.head.Load())
	b.head.Store(f.index + 1)
	b.version.Add(1)
	t.countHome(f, pid, 1)
}

// remove takes f (in the table as pid) out. Caller holds the node lock.
func (t *table) remove(f *Frame, pid protocol.PID) {
	b := t.bucketOf(pid)
	b.version.Add(1)
	if b.head.Load() == f.index+1 {
		b.head.Store(f.next.Load())
	} else {
		for i := b.head.Load(); i != 0; {
			g := &t.frames[i-1]
			if g.next.Load() == f.index+1 {
				g.next.Store(f.next.Load())
				break
			}
			i = g.next.Load()
		}
	}
	f.key.Store(0)
	b.version.Add(1)
	t.countHome(f, pid, -1)
}

// headHint is the first frame of pid's bucket chain as it is now, without
// any check (-1 when empty): a guess for a prefetch, never an answer.
func (t *table) headHint(pid protocol.PID) int32 {
	return t.bucketOf(pid).head.Load() - 1
}
