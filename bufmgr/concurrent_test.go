package bufmgr_test

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/memfile"
)

// fill writes v into every word of a page's first half, so a reader that
// sees a page while it is written (a torn read) finds words that differ.
func fill(page []byte, v uint64) {
	for i := 0; i < protocol.PageSize/2; i += 8 {
		binary.LittleEndian.PutUint64(page[i:], v)
	}
}

// uniform reports the page's value if all its words agree.
func uniform(page []byte) (uint64, bool) {
	v := binary.LittleEndian.Uint64(page)
	for i := 8; i < protocol.PageSize/2; i += 8 {
		if binary.LittleEndian.Uint64(page[i:]) != v {
			return 0, false
		}
	}
	return v, true
}

// TestConcurrentGuards runs workers on the real-world runtime in parallel:
// exclusive increments, shared and optimistic reads, upgrades, with 4x more
// pages than frames so the page provider evicts and reloads all the time.
// No increment may be lost, no latched read may be torn, and a validated
// optimistic read must be whole. Run it with -race.
func TestConcurrentGuards(t *testing.T) {
	t.Run("pressure", func(t *testing.T) { concurrentGuards(t, 32) })    // 4x more pages than frames
	t.Run("mostly-hot", func(t *testing.T) { concurrentGuards(t, 120) }) // the hot path, with some eviction
}

func concurrentGuards(t *testing.T, frames int) {
	const pages, workers = 128, 6
	ops := 3000
	if testing.Short() {
		ops = 500
	}
	store := memfile.New(1024, nil)
	l, err := actors.NewLocal(actors.Config{CacheFrames: frames}, store)
	if err != nil {
		t.Fatal(err)
	}
	n := l.Node()
	c := n.Cache()
	pids := make([]protocol.PID, pages)
	for i := range pids {
		err := l.Do(func(w *bufmgr.Worker) error {
			var g bufmgr.ExclusiveGuard
			l.Locked(func() { g, _ = n.Allocate(w, 0) })
			pids[i] = g.PID()
			fill(g.Data(), 0)
			g.MarkDirty()
			g.Release()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var increments [pages]atomic.Uint64
	var torn, optimisticOK atomic.Int64
	var wg sync.WaitGroup
	for id := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(id), 7))
			for range ops {
				i := r.IntN(pages)
				err := l.Do(func(w *bufmgr.Worker) error {
					switch op := r.IntN(10); {
					case op < 3: // exclusive increment
						g := c.Exclusive(w, pids[i])
						v, ok := uniform(g.Data())
						if !ok {
							torn.Add(1)
						}
						fill(g.Data(), v+1)
						g.MarkDirty()
						increments[i].Add(1)
						g.Release()
					case op < 6: // shared read
						g := c.Shared(w, pids[i])
						if _, ok := uniform(g.Data()); !ok {
							torn.Add(1)
						}
						g.Release()
					case op < 8: // upgrade: increment through a shared guard
						for {
							s := c.Shared(w, pids[i])
							v, _ := uniform(s.Data())
							x, err := s.Upgrade(w)
							if err != nil {
								continue // the page changed: read it again
							}
							if got, ok := uniform(x.Data()); !ok || got != v {
								torn.Add(1)
							}
							fill(x.Data(), v+1)
							x.MarkDirty()
							increments[i].Add(1)
							x.Release()
							break
						}
					default: // optimistic read
						for {
							g := c.Optimistic(w, pids[i])
							_, ok := uniform(g.Data())
							if g.HasChanged() {
								continue
							}
							if !ok {
								torn.Add(1)
							}
							optimisticOK.Add(1)
							break
						}
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if torn.Load() != 0 {
		t.Errorf("%d torn reads", torn.Load())
	}
	if optimisticOK.Load() == 0 {
		t.Error("no optimistic read validated")
	}
	for i, pid := range pids {
		err := l.Do(func(w *bufmgr.Worker) error {
			g := c.Shared(w, pid)
			defer g.Release()
			if v, ok := uniform(g.Data()); !ok || v != increments[i].Load() {
				t.Errorf("page %d: value %d (uniform %v), want %d increments", i, v, ok, increments[i].Load())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var st bufmgr.Stats
	l.Locked(func() { st = c.Stats() })
	if st.Misses == 0 || l.Reads == 0 {
		t.Errorf("no eviction pressure: %d misses, %d reads", st.Misses, l.Reads)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("hits %d misses %d restarts %d reads %d writes %d", st.Hits, st.Misses, st.Restarts, l.Reads, l.Writes)
}
