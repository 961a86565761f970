package btree

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
)

// Modify is a read-modify-write of one key that no other write of the key
// can come between: fn is called under the exclusive latch of the key's
// leaf with the key's current value (valid only during the call) and
// whether it is there, and says what the key becomes. write false leaves
// the key as it is; write with exists false deletes it; write with exists
// true sets it to val. fn may be called more than once (when the leaf is
// too full for the new value, it is released, split, and fn asked again
// with the value then current); only the last answer is applied. fn must
// be quick, must not use the tree, and must not return old or a slice of
// it as val (old lives in the page, which the write moves). It is INCR,
// APPEND and SETRANGE of Redis, on one node or across a cluster's nodes
// (the leaf's exclusive latch is cluster-wide).
func (t *Tree) Modify(s Session, key []byte, fn func(old []byte, found bool) (val []byte, exists, write bool)) error {
	if err := checkSizes(key, 0); err != nil {
		return err
	}
	vl := 0
	for {
		p, err := t.descend(s, key, true, len(key), vl)
		if err != nil {
			return err
		}
		x, err := p.current.ToExclusive(s.Worker)
		if err != nil {
			if err = notRestart(err); err != nil {
				return err
			}
			continue
		}
		n := node(x.Data())
		i, found := n.lowerBound(key)
		var old []byte
		if found {
			old = n.value(i)
		}
		val, exists, write := fn(old, found)
		if !write || (!exists && !found) {
			x.Release()
			return nil
		}
		if !exists {
			n.removeAt(i)
			x.MarkDirty()
			err := s.persist(&x)
			x.Release()
			return err
		}
		if err := checkSizes(key, len(val)); err != nil {
			x.Release()
			return err
		}
		if overlaps(val, x.Data()) {
			x.Release()
			return errors.New("btree: Modify's fn returned a slice of the page")
		}
		if found {
			if _, _, ovl := n.slot(i); ovl == len(val) {
				copy(n.value(i), val)
				x.MarkDirty()
				err := s.persist(&x)
				x.Release()
				return err
			}
		}
		if !n.roomFor(key, len(val)) {
			// The next descent splits the leaf for a value this size.
			vl = len(val)
			x.Release()
			continue
		}
		if found {
			n.removeAt(i)
		}
		n.insertAt(i, key, val)
		x.MarkDirty()
		err = s.persist(&x)
		x.Release()
		return err
	}
}

// overlaps reports whether b lies (partly) inside page.
func overlaps(b, page []byte) bool {
	if len(b) == 0 || len(page) == 0 {
		return false
	}
	b0, p0 := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&page[0]))
	return b0 < p0+uintptr(len(page)) && p0 < b0+uintptr(len(b))
}

// ErrBusy is returned by Lock when the leaves of its keys kept changing
// between finding them and latching them, for every attempt it made.
var ErrBusy = errors.New("btree: the keys' leaves kept changing while they were latched")

// ErrLeafFull is returned by Locked.Apply when a leaf has no room for the
// writes meant for it: nothing was applied; release, call MakeRoom for
// the key the error names, and lock again.
var ErrLeafFull = errors.New("btree: a leaf is too full for the writes")

// LeafFullError names the key whose leaf is too full, and the value size
// it needs room for (wraps ErrLeafFull).
type LeafFullError struct {
	Tree *Tree // the key's tree
	Key  []byte
	Len  int
	// Sep, when several writes go to the leaf, is the middle one's key:
	// MakeRoom splits the leaf there.
	Sep []byte
	// Keys are the keys of the writes that go to the leaf, in order, and
	// Sizes their entries' bytes (key and value): a caller that inserts
	// many into one leaf splits it at several of them at once (SplitAt)
	// instead of one split per try.
	Keys  [][]byte
	Sizes []int
}

func (e *LeafFullError) Error() string {
	return fmt.Sprintf("%v: key %q with a value of %d bytes", ErrLeafFull, e.Key, e.Len)
}

func (e *LeafFullError) Unwrap() error { return ErrLeafFull }

// Locked holds the leaves of a set of keys latched exclusively, so that
// reads and writes of those keys through it are one atomic step: the
// commit of a transaction. Lock takes the leaves in page-id order, the
// one order every holder of more than one leaf follows, so two Locked
// sets never wait for each other in a cycle; the tree's other operations
// hold at most one leaf (a split holds a parent, never a leaf, while it
// waits), so they cannot close a cycle either.
type Locked struct {
	s      Session
	tree   *Tree                   // the tree of Get and of a Write without one
	leaves []bufmgr.ExclusiveGuard // in page-id order
	free   []int                   // Apply's room, growth and writes per leaf
	// keys are the locked keys (the caller's), and leafOf[i] the index in
	// leaves of keys[i]'s leaf; of finds a key's index in keys by
	// ofKey(tree, key), made at the first look-up of more than lockScan
	// keys (fewer are scanned).
	keys   []TreeKey
	leafOf []int
	of     map[string]int
	dirty  []bool
}

// lockScan is how many keys Locked finds by a scan before it makes a map.
const lockScan = 16

// TreeKey is a key of a tree: Locks can span the trees (tables) of one
// node's cache.
type TreeKey struct {
	Tree *Tree
	Key  []byte
}

// ofKey names key of tree t in Locked.of.
func ofKey(t *Tree, key []byte) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(t.catalog))
	return string(b[:]) + string(key)
}

// LockAttempts bounds how often Lock finds and latches the leaves again
// when one changed in between.
const LockAttempts = 1000

// Lock latches exclusively the leaves that hold (or would hold) keys, in
// page-id order. Release it when done.
func (t *Tree) Lock(s Session, keys [][]byte) (*Locked, error) {
	tk := make([]TreeKey, len(keys))
	for i, k := range keys {
		tk[i] = TreeKey{t, k}
	}
	return LockKeys(s, t, tk)
}

// LockKeys is Lock for keys of several trees of one cache (the tables of a
// node): their leaves are latched in page-id order all together. def is
// the tree of Get and of Writes that name none.
func LockKeys(s Session, def *Tree, keys []TreeKey) (*Locked, error) {
	for _, k := range keys {
		if err := checkSizes(k.Key, 0); err != nil {
			return nil, err
		}
	}
	type leafOf struct {
		g   bufmgr.OptimisticGuard
		key int
	}
	found := make([]leafOf, len(keys))
	for attempt := 0; attempt < LockAttempts; attempt++ {
		for i, k := range keys {
			p, err := k.Tree.descend(s, k.Key, false, 0, 0)
			if err != nil {
				return nil, err
			}
			found[i] = leafOf{p.current, i}
		}
		slices.SortStableFunc(found, func(a, b leafOf) int {
			switch {
			case a.g.PID() < b.g.PID():
				return -1
			case a.g.PID() > b.g.PID():
				return 1
			}
			return 0
		})
		l := &Locked{s: s, tree: def, keys: keys, leafOf: make([]int, len(keys)), leaves: make([]bufmgr.ExclusiveGuard, 0, len(keys))}
		restart := false
		for i := 0; i < len(found) && !restart; {
			pid := found[i].g.PID()
			j := i + 1
			for j < len(found) && found[j].g.PID() == pid {
				j++
			}
			// Several keys in one leaf: one latch, through the first
			// guard. The others must have seen the same version: each
			// is unchanged now, and ToExclusive checks the first still
			// is once latched.
			for k := i + 1; k < j; k++ {
				if found[k].g.HasChanged() {
					restart = true
				}
			}
			if restart {
				break
			}
			x, err := found[i].g.ToExclusive(s.Worker)
			if err != nil {
				if err = notRestart(err); err != nil {
					l.Release()
					return nil, err
				}
				restart = true
				break
			}
			if !node(x.Data()).isLeaf() {
				x.Release()
				l.Release()
				return nil, corruptNode(pid)
			}
			l.leaves = append(l.leaves, x)
			for k := i; k < j; k++ {
				l.leafOf[found[k].key] = len(l.leaves) - 1
			}
			i = j
		}
		if restart {
			if len(l.leaves) > 0 {
				l.Release()
			}
			continue
		}
		l.dirty = make([]bool, len(l.leaves))
		return l, nil
	}
	return nil, fmt.Errorf("%w: %d keys, %d attempts", ErrBusy, len(keys), LockAttempts)
}

// PIDs lists the latched leaves in the order they were latched.
func (l *Locked) PIDs() []protocol.PID {
	out := make([]protocol.PID, len(l.leaves))
	for i := range l.leaves {
		out[i] = l.leaves[i].PID()
	}
	return out
}

func (l *Locked) leaf(t *Tree, key []byte) (int, node) {
	if t == nil {
		t = l.tree
	}
	k := -1
	if len(l.keys) <= lockScan {
		for j := range l.keys {
			if kt := l.keys[j].Tree; (kt == t || kt == nil && t == l.tree) && bytes.Equal(l.keys[j].Key, key) {
				k = j
				break
			}
		}
	} else {
		if l.of == nil {
			l.of = make(map[string]int, len(l.keys))
			for j, tk := range l.keys {
				kt := tk.Tree
				if kt == nil {
					kt = l.tree
				}
				l.of[ofKey(kt, tk.Key)] = j
			}
		}
		// The name is built in a buffer on the stack and looked up as
		// string(b), which does not allocate (ofKey's concatenation would).
		var buf [8 + 64]byte
		b := binary.LittleEndian.AppendUint64(buf[:0], uint64(t.catalog))
		if j, ok := l.of[string(append(b, key...))]; ok {
			k = j
		}
	}
	if k < 0 {
		panic(fmt.Sprintf("btree: key %q was not locked", key))
	}
	i := l.leafOf[k]
	return i, node(l.leaves[i].Data())
}

// Get appends key's value (of the default tree) to dst; key must be one
// of the locked keys.
func (l *Locked) Get(key, dst []byte) ([]byte, bool) { return l.GetIn(nil, key, dst) }

// GetIn is Get of tree t's key (nil: the default tree).
func (l *Locked) GetIn(t *Tree, key, dst []byte) ([]byte, bool) {
	_, n := l.leaf(t, key)
	i, found := n.lowerBound(key)
	if !found {
		return dst, false
	}
	return append(dst, n.value(i)...), true
}

// Write is one write of Apply: Delete, or set Key to Val, in Tree (nil:
// the Locked's default tree).
type Write struct {
	Tree   *Tree
	Key    []byte
	Val    []byte
	Delete bool
	// Unless, when not nil, is asked about the value Key holds (if it
	// holds one) before anything is written: true fails the Apply with an
	// *UnlessError, and nothing changes. It must not keep old.
	Unless func(old []byte) bool
}

// UnlessError is Apply's answer when the old values of some writes
// matched their Unless: nothing was applied.
type UnlessError struct {
	Writes []int // the indexes of those writes, in order
}

func (e *UnlessError) Error() string {
	return fmt.Sprintf("btree: the old values of %d writes matched their Unless", len(e.Writes))
}

// Apply makes every write, all or none: a write whose Unless matches the
// key's old value gets an *UnlessError, a leaf without room for the
// writes meant for it a *LeafFullError, and nothing changes. Every
// key must be one of the locked keys. Room is counted before anything is
// written (what each leaf frees by its deletes, against what its other
// writes grow), so that no leaf need be copied to be put back.
func (l *Locked) Apply(writes []Write) error {
	for _, w := range writes {
		if !w.Delete {
			if err := checkSizes(w.Key, len(w.Val)); err != nil {
				return err
			}
		}
	}
	nl := len(l.leaves)
	if len(l.free) < 3*nl {
		l.free = make([]int, 3*nl)
	}
	free, grow, count := l.free[:nl], l.free[nl:2*nl], l.free[2*nl:3*nl]
	for i := range free {
		free[i], grow[i], count[i] = -1, 0, 0 // -1: not counted yet
	}
	// Where each write goes, found by the room count: the write applies
	// there too, unless another write of the same leaf moved its slots
	// first (count > 1), when it searches again. A transaction's keys are
	// mostly in leaves of their own.
	type place struct {
		li, i int
		found bool
	}
	var few [16]place
	places := few[:0]
	if len(writes) > len(few) {
		places = make([]place, len(writes))
	}
	places = places[:len(writes)]
	var unless *UnlessError
	for k, w := range writes {
		li, n := l.leaf(w.Tree, w.Key)
		if free[li] < 0 {
			free[li] = usable - headerSize - n.live()
		}
		i, found := n.lowerBound(w.Key)
		places[k] = place{li, i, found}
		count[li]++
		if w.Unless != nil && found && w.Unless(n.value(i)) {
			if unless == nil {
				unless = &UnlessError{}
			}
			unless.Writes = append(unless.Writes, k)
		}
		var old int
		if found {
			_, okl, ovl := n.slot(i)
			old = n.heapKey(okl) + ovl
		}
		switch {
		case w.Delete && found:
			free[li] += old + slotSize
		case w.Delete:
		case found:
			grow[li] += max(0, n.heapKey(len(w.Key))+len(w.Val)-old)
		default:
			grow[li] += n.heapKey(len(w.Key)) + len(w.Val) + slotSize
		}
	}
	if unless != nil {
		return unless
	}
	for li := range l.leaves {
		if free[li] >= 0 && grow[li] > free[li] {
			return l.leafFull(li, writes)
		}
	}
	// Deletes first, so that every write after them finds the room
	// counted above whatever its order.
	for pass := range 2 {
		for k, w := range writes {
			if w.Delete != (pass == 0) {
				continue
			}
			li, i, found := places[k].li, places[k].i, places[k].found
			n := node(l.leaves[li].Data())
			if count[li] > 1 {
				i, found = n.lowerBound(w.Key)
			}
			l.dirty[li] = true
			switch {
			case w.Delete:
				if found {
					n.removeAt(i)
				}
				continue
			case found:
				if _, _, ovl := n.slot(i); ovl == len(w.Val) {
					copy(n.value(i), w.Val)
					continue
				}
				n.removeAt(i)
			}
			n.insertAt(i, w.Key, w.Val)
		}
	}
	for i := range l.leaves {
		if l.dirty[i] {
			l.leaves[i].MarkDirty()
		}
	}
	return nil
}

// leafFull is the error for leaf li, too full for its writes.
func (l *Locked) leafFull(li int, writes []Write) error {
	var mine []Write
	for _, w := range writes {
		if oi, _ := l.leaf(w.Tree, w.Key); oi == li && !w.Delete {
			mine = append(mine, w)
		}
	}
	first := mine[0]
	t := first.Tree
	if t == nil {
		t = l.tree
	}
	e := &LeafFullError{Tree: t, Key: append([]byte(nil), first.Key...), Len: len(first.Val)}
	if len(mine) > 1 {
		slices.SortFunc(mine, func(a, b Write) int { return bytes.Compare(a.Key, b.Key) })
		e.Sep = append([]byte(nil), mine[(len(mine)-1)/2].Key...)
		for _, w := range mine {
			e.Keys = append(e.Keys, append([]byte(nil), w.Key...))
			e.Sizes = append(e.Sizes, len(w.Key)+len(w.Val))
		}
	}
	return e
}

// SplitAt splits the leaf that holds (or would hold) sep there: its keys
// above sep move to a new leaf.
func (t *Tree) SplitAt(s Session, sep []byte) error {
	return t.MakeRoom(s, &LeafFullError{Tree: t, Key: sep, Sep: sep})
}

// Persist writes every leaf Apply changed through to its durable home (a
// cluster with write-through), in page-id order.
func (l *Locked) Persist() error {
	for i := range l.leaves {
		if l.dirty[i] {
			if err := l.s.persist(&l.leaves[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Dirty lists the guards of the leaves Apply changed, in page-id order.
func (l *Locked) Dirty() []*bufmgr.ExclusiveGuard {
	var out []*bufmgr.ExclusiveGuard
	for i := range l.leaves {
		if l.dirty[i] {
			out = append(out, &l.leaves[i])
		}
	}
	return out
}

// PersistEach is Persist that goes on after a failed write-through (its
// directory died): every other leaf is still written through, so that a
// transaction's record has to roll forward only the failed ones. after,
// when not nil, is called after each write-through with its page (a
// test's crash point). It returns the first error.
func (l *Locked) PersistEach(after func(protocol.PID)) error {
	var first error
	for i := range l.leaves {
		if !l.dirty[i] {
			continue
		}
		if err := l.s.persist(&l.leaves[i]); err != nil && first == nil {
			first = err
		}
		if after != nil {
			after(l.leaves[i].PID())
		}
	}
	return first
}

// Release unlatches every leaf.
func (l *Locked) Release() {
	for i := range l.leaves {
		l.leaves[i].Release()
	}
	l.leaves = nil
}

// MakeRoom makes room in the leaf of a LeafFullError's key so that a
// commit whose writes did not fit finds more when it tries again: with one
// write for that leaf, the split a write of that size would make; with
// several, a split at the middle one of them (the leaf may hold none yet).
func (t *Tree) MakeRoom(s Session, e *LeafFullError) error {
	if e.Sep == nil {
		if err := checkSizes(e.Key, e.Len); err != nil {
			return err
		}
		_, err := t.descend(s, e.Key, true, len(e.Key), e.Len)
		return err
	}
	if err := checkSizes(e.Sep, 0); err != nil {
		return err
	}
	p, err := t.descend(s, e.Sep, true, len(e.Sep), 0)
	if err != nil {
		return err
	}
	return t.splitAt(s, p, e.Sep, e.Sep)
}

// ApplyReleasingLastEarly is Apply broken on purpose (a mutant of the
// bank test): the last leaf's latch is released before its writes are
// made, so a reader may see the other leaves' writes without them.
func (l *Locked) ApplyReleasingLastEarly(writes []Write) error {
	if len(l.leaves) < 2 {
		return l.Apply(writes)
	}
	last := len(l.leaves) - 1
	var first, rest []Write
	for _, w := range writes {
		if li, _ := l.leaf(w.Tree, w.Key); li == last {
			rest = append(rest, w)
		} else {
			first = append(first, w)
		}
	}
	if err := l.Apply(first); err != nil {
		return err
	}
	pid := l.leaves[last].PID()
	l.leaves[last].Release()
	l.leaves = l.leaves[:last]
	time.Sleep(time.Millisecond) // let another transaction in
	x := l.s.Cache.Exclusive(l.s.Worker, pid)
	l.leaves = append(l.leaves, x)
	l.dirty = append(l.dirty[:last], false)
	return l.Apply(rest)
}
