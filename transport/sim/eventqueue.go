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
type eventQueue struct {
	last    int64
	buckets [65][]*event
	head    int // bucket 0's events before head are popped
	n       int
}

func (q *eventQueue) push(e *event) {
	if e.at < q.last {
		panic("sim: an event scheduled before the last one run")
	}
	// Bucket 0 stays in seq order: an event due at last is new (a held
	// back event is pushed again for a later time), so its seq is the
	// largest.
	b := bits.Len64(uint64(e.at ^ q.last))
	q.buckets[b] = append(q.buckets[b], e)
	q.n++
}

// pop removes and returns the next event; the queue must not be empty.
func (q *eventQueue) pop() *event {
	if q.head == len(q.buckets[0]) {
		q.refill()
	}
	b0 := q.buckets[0]
	e := b0[q.head]
	b0[q.head] = nil
	q.head++
	q.n--
	return e
}

// peek is the next event without removing it (nil when empty).
func (q *eventQueue) peek() *event {
	if q.head < len(q.buckets[0]) {
		return q.buckets[0][q.head]
	}
	if q.n == 0 {
		return nil
	}
	src := q.buckets[q.lowest()]
	m := src[0]
	for _, e := range src[1:] {
		if e.at < m.at || e.at == m.at && e.seq < m.seq {
			m = e
		}
	}
	return m
}

// lowest is the index of the first non-empty bucket above 0 (the queue is
// not empty and bucket 0 is used up).
func (q *eventQueue) lowest() int {
	i := 1
	for len(q.buckets[i]) == 0 {
		i++
	}
	return i
}

// refill makes the earliest time last and moves the events due then into
// bucket 0, in seq order; the lowest bucket's other events go to the
// buckets below it. Buckets above it keep their events: those differ from
// the new last in the same highest bit as from the old one.
func (q *eventQueue) refill() {
	q.buckets[0], q.head = q.buckets[0][:0], 0
	i := q.lowest()
	src := q.buckets[i]
	m := src[0].at
	for _, e := range src[1:] {
		m = min(m, e.at)
	}
	q.last = m
	for _, e := range src {
		b := bits.Len64(uint64(e.at ^ m))
		q.buckets[b] = append(q.buckets[b], e)
	}
	clear(src)
	q.buckets[i] = src[:0]
	if b0 := q.buckets[0]; len(b0) > 1 {
		slices.SortFunc(b0, func(a, b *event) int { return cmp.Compare(a.seq, b.seq) })
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
			if drop(e) {
				q.n--
				continue
			}
			kept = append(kept, e)
		}
		clear(q.buckets[b][len(kept):])
		q.buckets[b] = kept
	}
}
