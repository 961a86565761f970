package bufmgr

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/scalestore-go/scalestore/protocol"
)

// The free list against a set: push, pop and take keep exactly the free
// frames, and take finds any free frame.
func TestFreeListIsASet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const n = 16
		l := newFreeList(n)
		free := map[int32]bool{}
		for range rapid.IntRange(0, 200).Draw(t, "steps") {
			i := int32(rapid.IntRange(0, n-1).Draw(t, "frame"))
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				if !free[i] {
					l.push(i)
					free[i] = true
				}
			case 1:
				got := l.pop()
				if len(free) == 0 {
					if got != -1 {
						t.Fatalf("pop of an empty list gave %d", got)
					}
					continue
				}
				if !free[got] {
					t.Fatalf("pop gave %d, which is not free", got)
				}
				delete(free, got)
			case 2:
				if got := l.take(i); got != free[i] {
					t.Fatalf("take(%d) = %v, free = %v", i, got, free[i])
				}
				delete(free, i)
			}
			if l.len() != len(free) {
				t.Fatalf("len %d, want %d", l.len(), len(free))
			}
			for j := range int32(n) {
				if (l.pos[j] >= 0) != free[j] || (free[j] && l.stack[l.pos[j]] != j) {
					t.Fatalf("frame %d: pos %d, free %v", j, l.pos[j], free[j])
				}
			}
		}
	})
}

// A page goes to its home frame when that is free, elsewhere when not, and
// the table finds it either way (the hot path looks at home first).
func TestInsertPrefersHome(t *testing.T) {
	const n = 8
	c := NewCache(n, make([]byte, n*protocol.PageSize), nil, nil)
	a := protocol.MakePID(0, 3)
	fa := c.Insert(a)
	if int(fa.index) != c.table.home(a) {
		t.Fatalf("%v went to frame %d, its home is %d", a, fa.index, c.table.home(a))
	}
	// Slot 3+n has the same home, which is taken: it goes elsewhere.
	b := protocol.MakePID(0, 3+n)
	fb := c.Insert(b)
	if fb == fa || c.table.home(b) != c.table.home(a) {
		t.Fatalf("%v: frame %d, home %d (a's frame %d)", b, fb.index, c.table.home(b), fa.index)
	}
	for _, e := range []struct {
		pid protocol.PID
		f   *Frame
	}{{a, fa}, {b, fb}} {
		if got := c.table.get(e.pid); got != e.f {
			t.Fatalf("get(%v) = %v, want frame %d", e.pid, got, e.f.index)
		}
	}
	// The same slot on another directory has another home.
	if o := protocol.MakePID(1, 3); c.table.home(o) == c.table.home(a) {
		t.Fatalf("%v and %v share a home", o, a)
	}
	// Once a's frame is free again and b is gone, b moves home on reinsertion.
	c.table.remove(fb, b)
	fb.inTable = false
	c.free.push(fb.index)
	c.table.remove(fa, a)
	fa.inTable = false
	c.free.push(fa.index)
	if f := c.Insert(b); int(f.index) != c.table.home(b) {
		t.Fatalf("%v went to %d, not home %d", b, f.index, c.table.home(b))
	}
	if c.table.get(a) != nil {
		t.Fatalf("%v still found after removal", a)
	}
	// Bind takes the home frame over the frame reserved with Take.
	reserved := c.Take()
	d := protocol.MakePID(0, 5)
	if int(reserved.index) == c.table.home(d) {
		t.Fatalf("test setup: the reserved frame is d's home")
	}
	if f := c.Bind(reserved, d); int(f.index) != c.table.home(d) {
		t.Fatalf("Bind put %v in %d, not home %d", d, f.index, c.table.home(d))
	}
	if c.FreeFrames() != n-2 {
		t.Fatalf("%d free frames, want %d", c.FreeFrames(), n-2)
	}
}

// The lookup stops reading home frames first when most pages live away
// from home (a store larger than the cache), and starts again when most
// are back; it finds every page either way.
func TestHomeFirstFollowsTheShareAtHome(t *testing.T) {
	const n = 8
	c := NewCache(n, make([]byte, n*protocol.PageSize), nil, nil)
	first := func() bool { return c.table.homeFirst == 1 }
	var frames []*Frame
	for k := range uint64(n) {
		pid := protocol.MakePID(0, k*n) // all share home 0
		frames = append(frames, c.Insert(pid))
		if k == 0 && !first() {
			t.Fatal("one page, at home, and the lookup does not look there first")
		}
	}
	if first() {
		t.Fatalf("1 of %d pages at home, and the lookup still looks there first", n)
	}
	for k, f := range frames {
		if got := c.table.get(protocol.MakePID(0, uint64(k)*n)); got != f {
			t.Fatalf("page %d: got %v, want frame %d", k, got, f.index)
		}
	}
	for k := 2; k < n; k++ { // 1 of 2 left at home: not yet 60%
		c.table.remove(frames[k], protocol.MakePID(0, uint64(k)*n))
	}
	if first() {
		t.Fatal("the flag flipped back at 50%")
	}
	c.table.remove(frames[1], protocol.MakePID(0, n))
	if !first() {
		t.Fatal("all pages at home, and the lookup does not look there first")
	}
}

// home's remainder by multiplication is the remainder: against the
// division it replaces, for any dividend and any table size up to 2^32-1
// (one frame, where the rounded-up reciprocal wraps to 0, included).
func TestFastmodIsTheRemainder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.OneOf(rapid.Uint64Range(1, 1<<20), rapid.Uint64Range(1<<32-1<<20, 1<<32-1)).Draw(t, "frames")
		a := rapid.Uint32().Draw(t, "a")
		if got, want := fastmod(a, math.MaxUint64/n+1, n), int(uint64(a)%n); got != want {
			t.Fatalf("%d mod %d: %d, want %d", a, n, got, want)
		}
	})
}
