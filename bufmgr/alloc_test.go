package bufmgr_test

import (
	"testing"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/storage/memfile"
)

// TestHotPathAllocatesNothing: a page cached in a sufficient mode is a
// table lookup and a latch, for every kind of guard, with no allocation
// (the requirement; the B-tree's lookups are made of these).
func TestHotPathAllocatesNothing(t *testing.T) {
	l, err := actors.NewLocal(actors.Config{CacheFrames: 16}, memfile.New(64, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := l.Node()
	c := n.Cache()
	err = l.Do(func(w *bufmgr.Worker) error {
		var g bufmgr.ExclusiveGuard
		l.Locked(func() { g, _ = n.Allocate(w, 0) })
		pid := g.PID()
		g.Release()
		// One slow-path access opens the frame's hot path.
		x := c.Exclusive(w, pid)
		x.Release()
		var before, after uint64
		l.Locked(func() { before = c.Stats().SlowHits })
		for _, tc := range []struct {
			name string
			fn   func()
		}{
			{"optimistic", func() {
				o := c.Optimistic(w, pid)
				_ = o.Data()[0]
				if o.HasChanged() {
					t.Error("optimistic read of an untouched page changed")
				}
			}},
			{"shared", func() {
				s := c.Shared(w, pid)
				_ = s.Data()[0]
				s.Release()
			}},
			{"exclusive", func() {
				x := c.Exclusive(w, pid)
				x.Data()[0]++
				x.Release()
			}},
		} {
			if a := testing.AllocsPerRun(1000, tc.fn); a != 0 {
				t.Errorf("%s guard on a cached page: %.1f allocations per access, want 0", tc.name, a)
			}
		}
		l.Locked(func() { after = c.Stats().SlowHits })
		if after != before {
			t.Errorf("%d accesses took the slow path: the test did not measure the hot path", after-before)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
