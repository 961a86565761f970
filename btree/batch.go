package btree

import (
	"errors"
	"fmt"
	"strings"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/internal/prefetch"
	"github.com/scalestore-go/scalestore/protocol"
)

// MaxBatch is the most keys GetBatch walks together (it takes longer
// batches in pieces of this size): its state lives on the stack.
const MaxBatch = 32

// ErrBatchShape is returned when GetBatch's slices differ in length.
var ErrBatchShape = errors.New("btree: GetBatch needs as many vals and found as keys")

// A lookup's state in a batch.
const (
	lookupDescending = iota // on an inner node (or about to read the next one)
	lookupDone
	lookupAlone // something changed under it: it is done again on its own with Get
)

type lookup struct {
	parent, current bufmgr.OptimisticGuard
	pid             protocol.PID
	slot            int
	found           bool
	state           uint8
}

// GetBatch looks up every key of keys: found[i] tells whether keys[i] is
// there, and vals[i] is its value appended to vals[i][:0] (left empty when
// absent).
//
// It gives the same answers as a Get per key, and it is faster when the
// tree does not fit in the CPU's caches: one lookup is a chain of cache
// misses (on every level the frame and the page's first lines, then the
// rest of the slot array, then the value or child PID), each waiting for
// the one before. GetBatch
// walks the keys level by level in rounds, and in each round it first
// hints (prefetches) every key's next line and only then reads them, so
// the misses of all keys overlap. Each read is still an optimistic read
// validated as in Get (paper §5.2); a key whose page changed under it is
// looked up again on its own with Get.
//
// A page the store cannot read (a guard's *bufmgr.PageError) fails only
// the keys that need it: the batch is then looked up again key by key,
// every other key is answered, and the error is a *BatchError naming the
// keys left unanswered. On any other error (a key of a wrong size, a
// corrupt page) the results are incomplete.
func (t *Tree) GetBatch(s Session, keys, vals [][]byte, found []bool) (err error) {
	if len(vals) != len(keys) || len(found) != len(keys) {
		return ErrBatchShape
	}
	perr := bufmgr.Catch(func() {
		ks, vs, fs := keys, vals, found
		for len(ks) > MaxBatch && err == nil {
			err = t.getBatch(s, ks[:MaxBatch], vs[:MaxBatch], fs[:MaxBatch])
			ks, vs, fs = ks[MaxBatch:], vs[MaxBatch:], fs[MaxBatch:]
		}
		if err == nil {
			err = t.getBatch(s, ks, vs, fs)
		}
	})
	if perr == nil {
		return err
	}
	return t.getEach(s, keys, vals, found)
}

// BatchError is GetBatch's error when some keys could not be looked up
// because a page on their way is unreadable: every other key of the batch
// is answered. errors.Is(err, bufmgr.ErrUnreadable) holds for it.
type BatchError struct {
	Keys []int   // the unanswered keys' indices in the batch, ascending
	Errs []error // why, for each (a *bufmgr.PageError)
}

func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "btree: %d key(s) of the batch unanswered", len(e.Keys))
	for i, k := range e.Keys[:min(len(e.Keys), 3)] {
		fmt.Fprintf(&b, "; key %d: %v", k, e.Errs[i])
	}
	if len(e.Keys) > 3 {
		b.WriteString("; ...")
	}
	return b.String()
}

// Unwrap returns the keys' errors.
func (e *BatchError) Unwrap() []error { return e.Errs }

// getEach answers a batch key by key (after a page of it was unreadable),
// so that an unreadable page fails only the keys that need it.
func (t *Tree) getEach(s Session, keys, vals [][]byte, found []bool) error {
	var be BatchError
	for i, k := range keys {
		var err error
		vals[i], found[i] = vals[i][:0], false
		v := vals[i]
		ok := false
		if perr := bufmgr.Catch(func() { v, ok, err = t.Get(s, k, v) }); perr != nil {
			be.Keys, be.Errs = append(be.Keys, i), append(be.Errs, perr)
			continue
		}
		if err != nil {
			return err
		}
		vals[i], found[i] = v, ok
	}
	if len(be.Keys) == 0 {
		return nil // the page is readable again (a transient I/O error)
	}
	return &be
}

func (t *Tree) getBatch(s Session, keys, vals [][]byte, found []bool) error {
	for i, k := range keys {
		if err := checkSizes(k, 0); err != nil {
			return err
		}
		vals[i], found[i] = vals[i][:0], false
	}
	var st [MaxBatch]lookup
	var active [MaxBatch]int
	n := 0
	cat := s.Cache.Optimistic(s.Worker, t.catalog)
	root, ok := rootOf(cat.Data())
	if !cat.HasChanged() && ok {
		for i := range keys {
			st[i] = lookup{parent: cat, pid: root}
			active[n] = i
			n++
		}
	} else {
		for i := range keys {
			st[i].state = lookupAlone
		}
	}
	for n > 0 {
		// Round 1: where every key's next page is (its home, its bucket).
		for _, i := range active[:n] {
			s.Cache.PrefetchLookup(st[i].pid)
		}
		// Round 2: the frames and page headers of pages away from home.
		for _, i := range active[:n] {
			s.Cache.PrefetchPage(st[i].pid)
		}
		// Round 3: the guards (all in cache now, unless a miss takes the
		// slow path), then the slot lines each search will read first.
		for _, i := range active[:n] {
			l := &st[i]
			l.current = s.Cache.Optimistic(s.Worker, l.pid)
			if l.parent.HasChanged() {
				l.state = lookupAlone
				continue
			}
			nd := node(l.current.Data())
			if !nd.valid() {
				l.state = lookupAlone // Get reports a corrupt page, or restarts
				continue
			}
			nd.prefetchSlots()
		}
		// Round 4: the searches, and hints for the entries they end at
		// (a leaf's value, an inner node's child PID).
		for _, i := range active[:n] {
			l := &st[i]
			if l.state != lookupDescending {
				continue
			}
			nd := node(l.current.Data())
			l.slot, l.found = nd.lowerBound(keys[i])
			if lo, hi, _, ok := nd.span(l.slot); ok && l.slot < nd.count() {
				prefetch.Range(nd, lo, hi, 16)
			}
		}
		// Round 5: the values and the next level's PIDs, each validated.
		m := 0
		for _, i := range active[:n] {
			l := &st[i]
			if l.state != lookupDescending {
				continue
			}
			nd := node(l.current.Data())
			if nd.isLeaf() {
				if l.found {
					vals[i] = append(vals[i], nd.value(l.slot)...)
				}
				if l.current.HasChanged() {
					vals[i] = vals[i][:0]
					l.state = lookupAlone
					continue
				}
				found[i] = l.found
				l.state = lookupDone
				continue
			}
			var next uint64
			if l.slot == nd.count() {
				next = nd.upper()
			} else {
				next = nd.child(l.slot)
			}
			if l.current.HasChanged() {
				l.state = lookupAlone
				continue
			}
			l.parent, l.pid = l.current, protocol.PID(next)
			active[m] = i
			m++
		}
		n = m
	}
	for i := range keys {
		if st[i].state != lookupAlone {
			continue
		}
		v, ok, err := t.Get(s, keys[i], vals[i][:0])
		if err != nil {
			return err
		}
		vals[i], found[i] = v, ok
	}
	return nil
}
