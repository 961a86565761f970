package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Every pop returns the least pending event on (at, seq), whatever the
// interleaving of pushes (never before the last event popped, as simulated
// time goes), pops, peeks and removals, and an event held back is pushed
// again with its old seq for a later time, as Step does for a stalled node.
func TestEventQueueOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	least := func(pending []*event) int {
		m := 0
		for i, e := range pending {
			if e.at < pending[m].at || e.at == pending[m].at && e.seq < pending[m].seq {
				m = i
			}
		}
		return m
	}
	seq := uint64(0)
	for round := range 300 {
		var q eventQueue
		var pending []*event
		now := int64(0)
		spread := []int64{1, 20, 1 << 10, 1 << 40}[round%4]
		pop := func() *event {
			m := least(pending)
			if p := q.peek(); p != pending[m] {
				t.Fatalf("round %d: peek (%d,%d), the least pending is (%d,%d)", round, p.at, p.seq, pending[m].at, pending[m].seq)
			}
			got := q.pop()
			if got != pending[m] {
				t.Fatalf("round %d: popped (%d,%d), the least pending is (%d,%d)", round, got.at, got.seq, pending[m].at, pending[m].seq)
			}
			pending = slices.Delete(pending, m, m+1)
			now = got.at
			return got
		}
		for step := range r.IntN(600) {
			switch k := r.IntN(10); {
			case len(pending) > 0 && k < 3:
				pop()
			case len(pending) > 0 && k == 3:
				// held back: pushed again later, keeping its seq
				e := pop()
				e.at = now + 1 + r.Int64N(spread)
				q.push(e)
				pending = append(pending, e)
			case step == 300:
				q.removeIf(func(e *event) bool {
					if e.seq%3 == 0 {
						pending = slices.DeleteFunc(pending, func(p *event) bool { return p == e })
						return true
					}
					return false
				})
			default:
				seq++
				e := &event{at: now + r.Int64N(spread), seq: seq}
				if r.IntN(4) == 0 {
					e.at = now
				}
				q.push(e)
				pending = append(pending, e)
			}
			if q.n != len(pending) {
				t.Fatalf("round %d: %d events counted, %d pending", round, q.n, len(pending))
			}
		}
		for len(pending) > 0 {
			pop()
		}
		if q.peek() != nil {
			t.Fatalf("round %d: peek on an empty queue", round)
		}
	}
}
