// Package linetree is a B-link tree (Lehman and Yao) of uint64 keys and
// values over SELCC's line cache: every node is one global cache line, and
// every access to it goes through linecache.Access, so the tree is as
// coherent as the lines are. It is the B-tree workload of `sim --protocol
// selcc`: small, so that its own correctness is easy to see and the
// checks test the cache underneath.
//
// Concurrency: a lookup or an insert that fits holds one line at a time and
// moves right when its key is at or past a node's high key (the node split
// after its parent was read). A split runs under the exclusive latch of
// the catalog line (which holds the root), so splits are serialized
// cluster-wide and the inner nodes only change under it; inside, the
// splitter latches the full node, then the fresh line of its new right
// sibling (nobody else can hold a fresh line, so this nesting cannot wait
// in a cycle), then the parent. Latches are taken catalog first, then
// nodes top down, then fresh lines: no cycle.
//
// It imports linecache, protocol and protocol/selcc only.
package linetree

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/linecache"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
)

// Node layout in a line (little endian):
//
//	0 kind (1 leaf, 2 inner)  2-3 count  8-15 high key (exclusive; ^0: none)
//	16-23 right sibling (line number + 1; 0: none)  32.. entries of 16 bytes
//
// A leaf's entries are (key, value) sorted by key; an inner node's are
// (low key, child line number), sorted, the first low key 0. The catalog
// line holds the root's line number + 1 at offset 0.
const (
	kindLeaf  = 1
	kindInner = 2
	hdr       = 32
	noHigh    = ^uint64(0)
)

// MaxFanout bounds the entries of a node by the line's size.
const MaxFanout = (linecache.LineSize - hdr) / 16

// ErrFull: the tree's allocator ran out of lines.
var ErrFull = errors.New("linetree: no free line")

// Tree is a B-link tree whose lines are Line(0) (the catalog), Line(1)
// (the first root) and the lines Alloc hands out.
type Tree struct {
	Cache  *linecache.Cache
	Line   func(i uint64) protocol.PID // line number to global line
	Alloc  func() (uint64, bool)       // a fresh line number of this node
	Fanout int                         // entries per node, 3..MaxFanout
}

// Format is the initial content of lines 0 and 1 (the catalog and an empty
// root leaf), for the memory node that holds them.
func Format(catalog, root []byte) {
	clear(catalog)
	binary.LittleEndian.PutUint64(catalog, 1+1)
	clear(root)
	root[0] = kindLeaf
	binary.LittleEndian.PutUint64(root[8:], noHigh)
}

type node []byte

func (n node) kind() byte       { return n[0] }
func (n node) count() int       { return int(binary.LittleEndian.Uint16(n[2:])) }
func (n node) setCount(c int)   { binary.LittleEndian.PutUint16(n[2:], uint16(c)) }
func (n node) high() uint64     { return binary.LittleEndian.Uint64(n[8:]) }
func (n node) right() uint64    { return binary.LittleEndian.Uint64(n[16:]) }
func (n node) key(i int) uint64 { return binary.LittleEndian.Uint64(n[hdr+16*i:]) }
func (n node) val(i int) uint64 { return binary.LittleEndian.Uint64(n[hdr+16*i+8:]) }
func (n node) put(i int, k, v uint64) {
	binary.LittleEndian.PutUint64(n[hdr+16*i:], k)
	binary.LittleEndian.PutUint64(n[hdr+16*i+8:], v)
}

// check reports a node that is not one: a corrupt or torn line.
func (n node) check(f int) error {
	if k := n.kind(); k != kindLeaf && k != kindInner {
		return fmt.Errorf("linetree: a line of kind %d", k)
	}
	if c := n.count(); c > f {
		return fmt.Errorf("linetree: a node of %d entries (fanout %d)", c, f)
	}
	return nil
}

// search finds the first entry with key >= k (leaf) or the child covering
// k (inner).
func (n node) search(k uint64) int {
	lo, hi := 0, n.count()
	for lo < hi {
		m := (lo + hi) / 2
		if n.key(m) < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if n.kind() == kindInner && (lo == n.count() || n.key(lo) > k) {
		lo-- // the child whose low key is the last <= k
	}
	return lo
}

// root reads the catalog.
func (t *Tree) root(th *linecache.Thread) (uint64, error) {
	var r uint64
	err := t.Cache.Access(th, t.Line(0), selcc.Read, func(d []byte) { r = binary.LittleEndian.Uint64(d) })
	if err == nil && r == 0 {
		err = errors.New("linetree: an empty catalog")
	}
	return r - 1, err
}

// step reads one node for key k: the next line to visit (a right sibling
// or a child), or the leaf's value when done.
func (t *Tree) step(th *linecache.Thread, line, k uint64) (next uint64, leaf bool, val uint64, found bool, err error) {
	next, _, leaf, val, found, err = t.stepRight(th, line, k)
	return
}

// stepRight is step that also says whether next is a right sibling.
func (t *Tree) stepRight(th *linecache.Thread, line, k uint64) (next uint64, sideways, leaf bool, val uint64, found bool, err error) {
	aerr := t.Cache.Access(th, t.Line(line), selcc.Read, func(d []byte) {
		n := node(d)
		if err = n.check(t.Fanout); err != nil {
			return
		}
		if k >= n.high() {
			if n.right() == 0 {
				err = fmt.Errorf("linetree: key %d at or past the high key %d of the rightmost node", k, n.high())
				return
			}
			next, sideways = n.right()-1, true
			return
		}
		i := n.search(k)
		if n.kind() == kindInner {
			next = n.val(i)
			return
		}
		leaf, next = true, line
		if i < n.count() && n.key(i) == k {
			val, found = n.val(i), true
		}
	})
	if aerr != nil {
		err = aerr
	}
	return
}

// Get returns the value of key k.
func (t *Tree) Get(th *linecache.Thread, k uint64) (uint64, bool, error) {
	line, err := t.root(th)
	for err == nil {
		var leaf, found bool
		var v uint64
		if line, leaf, v, found, err = t.step(th, line, k); leaf && err == nil {
			return v, found, nil
		}
	}
	return 0, false, err
}

// leafOf descends to the leaf that covered k when it was read.
func (t *Tree) leafOf(th *linecache.Thread, k uint64) (uint64, error) {
	line, err := t.root(th)
	for err == nil {
		var leaf bool
		if line, leaf, _, _, err = t.step(th, line, k); leaf {
			return line, err
		}
	}
	return 0, err
}

// Put sets key k to v.
func (t *Tree) Put(th *linecache.Thread, k, v uint64) error {
	if k == noHigh {
		return errors.New("linetree: key 2^64-1 is reserved")
	}
	if t.Fanout < 3 || t.Fanout > MaxFanout {
		return fmt.Errorf("linetree: fanout %d: want 3..%d", t.Fanout, MaxFanout)
	}
	line, err := t.leafOf(th, k)
	for err == nil {
		var right uint64
		done, full := false, false
		err = t.Cache.Access(th, t.Line(line), selcc.Write, func(d []byte) {
			n := node(d)
			if err = n.check(t.Fanout); err != nil {
				return
			}
			if k >= n.high() {
				if right = n.right() - 1; n.right() == 0 {
					err = fmt.Errorf("linetree: key %d past the rightmost leaf", k)
				}
				return
			}
			done, full = insert(n, k, v, t.Fanout)
		})
		switch {
		case err != nil || done:
			return err
		case full:
			return t.split(th, k, v)
		}
		line = right
	}
	return err
}

// insert puts (k, v) into a node with room, or updates k; it reports false,
// true when the node is full.
func insert(n node, k, v uint64, fanout int) (done, full bool) {
	i := n.search(k)
	if n.kind() == kindLeaf && i < n.count() && n.key(i) == k {
		n.put(i, k, v)
		return true, false
	}
	if n.kind() == kindInner {
		i++ // after the child that covers k
	}
	c := n.count()
	if c == fanout {
		return false, true
	}
	copy(n[hdr+16*(i+1):hdr+16*(c+1)], n[hdr+16*i:hdr+16*c])
	n.put(i, k, v)
	n.setCount(c + 1)
	return true, false
}

// split inserts (k, v) into its full leaf under the catalog's exclusive
// latch, splitting nodes bottom up as far as needed.
func (t *Tree) split(th *linecache.Thread, k, v uint64) error {
	var err error
	cerr := t.Cache.Access(th, t.Line(0), selcc.Write, func(cat []byte) {
		root := binary.LittleEndian.Uint64(cat) - 1
		// The inner nodes are stable while we hold the catalog: record the
		// path from the root to k's leaf.
		var path []uint64
		line := root
		for {
			next, sideways, leaf, _, _, serr := t.stepRight(th, line, k)
			if err = serr; err != nil {
				return
			}
			if leaf {
				path = append(path, line)
				break
			}
			if !sideways {
				path = append(path, line)
			}
			line = next
		}
		// Insert bottom up: (k, v) into the leaf, then each separator.
		key, val := k, v
		for level := len(path) - 1; level >= 0; level-- {
			var sep, fresh uint64
			var split bool
			if sep, fresh, split, err = t.insertOrSplit(th, path[level], key, val); err != nil || !split {
				return
			}
			key, val = sep, fresh
			if level == 0 {
				// The root split: a new root above it.
				nr, ok := t.Alloc()
				if !ok {
					err = ErrFull
					return
				}
				old := path[0]
				if err = t.Cache.Access(th, t.Line(nr), selcc.Write, func(d []byte) {
					clear(d)
					n := node(d)
					n[0] = kindInner
					binary.LittleEndian.PutUint64(d[8:], noHigh)
					n.put(0, 0, old)
					n.put(1, sep, fresh)
					n.setCount(2)
				}); err != nil {
					return
				}
				binary.LittleEndian.PutUint64(cat, nr+1)
			}
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// insertOrSplit inserts (k, v) into the node at line, moving right if k
// moved on; when the node is full it moves its upper half to a fresh line
// first, and returns the separator and the fresh line for the parent.
func (t *Tree) insertOrSplit(th *linecache.Thread, line, k, v uint64) (sep, fresh uint64, split bool, err error) {
	for {
		var right uint64
		done := false
		aerr := t.Cache.Access(th, t.Line(line), selcc.Write, func(d []byte) {
			n := node(d)
			if err = n.check(t.Fanout); err != nil {
				return
			}
			if k >= n.high() {
				if right = n.right() - 1; n.right() == 0 {
					err = fmt.Errorf("linetree: key %d past the rightmost node", k)
				}
				return
			}
			var full bool
			if done, full = insert(n, k, v, t.Fanout); done || !full {
				return
			}
			nl, ok := t.Alloc()
			if !ok {
				err = ErrFull
				return
			}
			c := n.count()
			half := c / 2
			sep = n.key(half)
			// The fresh line is nobody's yet: latching it while holding
			// this node cannot wait in a cycle.
			err = t.Cache.Access(th, t.Line(nl), selcc.Write, func(r []byte) {
				clear(r)
				m := node(r)
				m[0] = n.kind()
				binary.LittleEndian.PutUint64(r[8:], n.high())
				binary.LittleEndian.PutUint64(r[16:], n.right())
				copy(r[hdr:], n[hdr+16*half:hdr+16*c])
				m.setCount(c - half)
				if k >= sep {
					insert(m, k, v, t.Fanout)
				}
			})
			if err != nil {
				return
			}
			n.setCount(half)
			binary.LittleEndian.PutUint64(d[8:], sep)
			binary.LittleEndian.PutUint64(d[16:], nl+1)
			if k < sep {
				insert(n, k, v, t.Fanout)
			}
			fresh, split, done = nl, true, true
		})
		if aerr != nil {
			return 0, 0, false, aerr
		}
		if err != nil || done {
			return sep, fresh, split, err
		}
		line = right
	}
}
