package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Every pop returns the least pending event on (at, seq), whatever the
// interleaving of pushes and pops, also after slots were removed and the
// heap rebuilt bottom-up as DropMessages does.
func TestEventHeapOrder(t *testing.T) {
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
		var h eventHeap
		var pending []*event
		pop := func() {
			m := least(pending)
			if got := h.pop(); got != pending[m] {
				t.Fatalf("round %d: popped (%d,%d), the least pending is (%d,%d)", round, got.at, got.seq, pending[m].at, pending[m].seq)
			}
			pending = slices.Delete(pending, m, m+1)
		}
		for step := range r.IntN(400) {
			switch {
			case len(h) > 0 && r.IntN(3) == 0:
				pop()
			case step == 200 && round%2 == 1:
				kept := h[:0]
				for i, s := range h {
					if i%3 == 0 {
						pending = slices.DeleteFunc(pending, func(e *event) bool { return e == s.e })
						continue
					}
					kept = append(kept, s)
				}
				h = kept
				if n := len(h); n > 1 {
					for i := (n - 2) / 4; i >= 0; i-- {
						h.down(i)
					}
				}
			default:
				seq++
				e := &event{at: int64(r.IntN(20)), seq: seq}
				h.push(e)
				pending = append(pending, e)
			}
		}
		for len(h) > 0 {
			pop()
		}
		if len(pending) != 0 {
			t.Fatalf("round %d: heap empty with %d events pending", round, len(pending))
		}
	}
}
