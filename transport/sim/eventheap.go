package sim

// eventHeap is a 4-ary min-heap of events on (at, seq). Each slot keeps the
// two keys beside the pointer, so sifting compares without loading the
// event (a cache miss per comparison once a large world has thousands of
// events pending), and four children a level halve the levels a sift
// walks. The order is total: seq is unique, so any layout pops the same
// sequence.
type eventHeap []heapSlot

type heapSlot struct {
	at  int64
	seq uint64
	e   *event
}

func (s *heapSlot) before(o *heapSlot) bool {
	return s.at < o.at || s.at == o.at && s.seq < o.seq
}

func (h *eventHeap) push(e *event) {
	*h = append(*h, heapSlot{e.at, e.seq, e})
	q := *h
	i := len(q) - 1
	x := q[i]
	for i > 0 {
		p := (i - 1) / 4
		if !x.before(&q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = x
}

func (h *eventHeap) pop() *event {
	q := *h
	top := q[0].e
	last := len(q) - 1
	q[0] = q[last]
	q[last] = heapSlot{}
	q = q[:last]
	*h = q
	if last > 0 {
		q.down(0)
	}
	return top
}

// down sifts slot i of the heap down to its place.
func (h eventHeap) down(i int) {
	x := h[i]
	n := len(h)
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < c+4 && k < n; k++ {
			if h[k].before(&h[m]) {
				m = k
			}
		}
		if !h[m].before(&x) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = x
}
