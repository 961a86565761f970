package sim

import (
	"cmp"
	"math/bits"
	"slices"
)

// eventQueue is the world's agenda: events in (at, seq) order, as a radix
// heap. Simulated time never runs backwards, so every event is due no
// earlier than the last one popped (last), and an event lives in the
// bucket of the highest bit in which its time differs from last. Pushing
// is an append; popping takes bucket 0 (due at last, in seq order) and,
// when it is empty, spreads the lowest bucket over the buckets below it
// around its earliest time. An event moves down at most 64 times, and at
// 256 nodes (hundreds of events a microsecond) a few: cheaper than a
// heap's sift through hundreds of pending events, and sequential in
// memory.
//
// The buckets hold entries, not pointers: an event's (at, seq) and its
// number in all. Spreading and sorting a bucket then read no event (no
// cache miss on a cold event at 256 nodes), and moving an entry is no
// pointer store (no GC write barrier while a collection runs, which the
// swarm's many short seeds make frequent).
type eventQueue struct {
	last    int64
	buckets [64][]qentry // at >= last >= 0, so at^last < 2^63: 64 buckets
	used    uint64       // bit b: bucket b (b > 0) is not empty
	head    int          // bucket 0's events before head are popped
	n       int
	// next caches peek's answer while bucket 0 is used up: the least
	// entry of the lowest bucket (nextOK), kept up to date by push, so
	// that a peek and the refill after it do not scan that bucket again.
	next   qentry
	nextB  int
	nextOK bool
	// all is every event the queue has seen, by number (event.id - 1):
	// the world recycles events, so it grows to the most ever pending.
	all []*event
}

// qentry is a pending event in a bucket.
type qentry struct {
	at  int64
	seq uint64
	id  uint32 // the event's id (its index in all, plus one)
}

func (q *eventQueue) push(e *event) {
	if e.at < q.last {
		panic("sim: an event scheduled before the last one run")
	}
	if e.id == 0 {
		q.all = append(q.all, e)
		e.id = uint32(len(q.all))
	}
	// Bucket 0 stays in seq order: an event due at last is new (a held
	// back event is pushed again for a later time), so its seq is the
	// largest.
	b := bits.Len64(uint64(e.at ^ q.last))
	x := qentry{at: e.at, seq: e.seq, id: e.id}
	q.buckets[b] = append(q.buckets[b], x)
	q.used |= 1 << b
	q.n++
	if q.nextOK {
		switch {
		case b == 0:
			q.nextOK = false // bucket 0 is next again
		case b < q.nextB || b == q.nextB && less(x, q.next):
			q.next, q.nextB = x, b
		}
	}
}

// less orders entries by (at, seq).
func less(a, b qentry) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

// pop removes and returns the next event; the queue must not be empty.
func (q *eventQueue) pop() *event {
	if q.head == len(q.buckets[0]) {
		q.refill()
	}
	id := q.buckets[0][q.head].id
	q.head++
	q.n--
	q.nextOK = false
	return q.all[id-1]
}

// peek is the next event without removing it (nil when empty).
func (q *eventQueue) peek() *event {
	if q.head < len(q.buckets[0]) {
		return q.all[q.buckets[0][q.head].id-1]
	}
	if q.n == 0 {
		return nil
	}
	if !q.nextOK {
		i := q.lowest()
		src := q.buckets[i]
		m := src[0]
		for _, e := range src[1:] {
			if less(e, m) {
				m = e
			}
		}
		q.next, q.nextB, q.nextOK = m, i, true
	}
	return q.all[q.next.id-1]
}

// lowest is the index of the first non-empty bucket above 0 (the queue is
// not empty and bucket 0 is used up).
func (q *eventQueue) lowest() int {
	return bits.TrailingZeros64(q.used &^ 1)
}

// refill makes the earliest time last and moves the events due then into
// bucket 0, in seq order; the lowest bucket's other events go to the
// buckets below it. Buckets above it keep their events: those differ from
// the new last in the same highest bit as from the old one.
func (q *eventQueue) refill() {
	q.buckets[0], q.head = q.buckets[0][:0], 0
	i := q.lowest()
	src := q.buckets[i]
	var m int64
	if q.nextOK {
		m = q.next.at
	} else {
		m = src[0].at
		for _, e := range src[1:] {
			m = min(m, e.at)
		}
	}
	q.nextOK = false
	q.last = m
	for _, e := range src {
		b := bits.Len64(uint64(e.at ^ m))
		q.buckets[b] = append(q.buckets[b], e)
		q.used |= 1 << b
	}
	q.buckets[i] = src[:0]
	q.used &^= 1 << i
	if b0 := q.buckets[0]; len(b0) > 1 {
		slices.SortFunc(b0, func(a, b qentry) int { return cmp.Compare(a.seq, b.seq) })
	}
}

// removeIf removes every pending event for which drop reports true; the
// others keep their order.
func (q *eventQueue) removeIf(drop func(*event) bool) {
	for b := range q.buckets {
		from := 0
		if b == 0 {
			from = q.head
		}
		kept := q.buckets[b][:from]
		for _, e := range q.buckets[b][from:] {
			if drop(q.all[e.id-1]) {
				q.n--
				continue
			}
			kept = append(kept, e)
		}
		q.buckets[b] = kept
		if b > 0 && len(kept) == 0 {
			q.used &^= 1 << b
		}
	}
	q.nextOK = false
}

// each calls fn with every pending event.
func (q *eventQueue) each(fn func(*event)) {
	for b := range q.buckets {
		from := 0
		if b == 0 {
			from = q.head
		}
		for _, e := range q.buckets[b][from:] {
			fn(q.all[e.id-1])
		}
	}
}
