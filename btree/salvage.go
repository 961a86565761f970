package btree

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
)

// Salvage calls fn with every key in [from, to) it can read, in order (from
// nil: from the first key; to nil: to the last), like Scan, but goes on past
// the pages it cannot read. For each such page it calls skipped with the
// keys the page held or led to, lo through hi (hi nil: to the end), and the
// page's error; skipped or fn returning false ends the salvage. The slices
// passed to fn and skipped are valid only during the call. It returns
// an error only for what it cannot go past (a catalog that names no root, a
// descent that does not settle); a node whose header is not a node's is a
// page it cannot read.
//
// It does not follow the leaves' links as Scan does, since the link out of
// an unreadable leaf is lost with it: it descends from the root for every
// leaf, keeping the tightest separator above the key on the way down (the
// leaf's upper fence), and starts the next descent just past that fence. A
// page that cannot be read skips exactly the keys under it, and a descent
// per leaf is a price a salvage can pay.
func (t *Tree) Salvage(s Session, from, to []byte, fn func(key, val []byte) bool, skipped func(lo, hi []byte, err error) bool) error {
	k := append([]byte(nil), from...)
	var f upperFence
	var kbuf []byte
	for {
		if to != nil && bytes.Compare(k, to) >= 0 {
			return nil
		}
		var sg bufmgr.SharedGuard
		var err error
		perr := bufmgr.Catch(func() { sg, err = t.leafFor(s, k, &f) })
		switch {
		case perr != nil || errors.As(err, &perr):
			var hi []byte
			if f.set {
				hi = f.key
			}
			if !skipped(k, hi, perr) {
				return nil
			}
		case err != nil:
			return err
		default:
			n := node(sg.Data())
			i, _ := n.lowerBound(k)
			for ; i < n.count(); i++ {
				kbuf = n.appendKey(kbuf[:0], i)
				if (to != nil && bytes.Compare(kbuf, to) >= 0) || !fn(kbuf, n.value(i)) {
					sg.Release()
					return nil
				}
			}
			sg.Release()
		}
		if !f.set {
			return nil // the last leaf
		}
		if k = successor(k[:0], f.key); k == nil {
			return nil // the fence is the largest key there can be
		}
	}
}

// upperFence is the tightest separator above a key seen on a descent: the
// key, when set, is the largest its subtree holds.
type upperFence struct {
	key []byte
	set bool
}

// leafFor latches shared the leaf that holds key and sets *f to its upper
// fence. A guard on an unreadable page panics with its *PageError (see
// bufmgr.Catch); *f is then the fence of that page's subtree, set before
// the guard was taken.
func (t *Tree) leafFor(s Session, key []byte, f *upperFence) (bufmgr.SharedGuard, error) {
	for range 1_000_000 {
		f.key, f.set = f.key[:0], false
		parent := s.Cache.Optimistic(s.Worker, t.catalog)
		root, ok := rootOf(parent.Data())
		if parent.HasChanged() {
			continue
		}
		if !ok {
			return bufmgr.SharedGuard{}, t.badCatalog()
		}
		next := root
		for {
			g := s.Cache.Optimistic(s.Worker, next)
			if parent.HasChanged() {
				break
			}
			n := node(g.Data())
			valid := n.valid()
			if valid && n.isLeaf() {
				sg, err := g.ToShared()
				if err != nil {
					break // changed: restart
				}
				return sg, nil
			}
			var child uint64
			if valid {
				i, _ := n.lowerBound(key)
				if i == n.count() {
					child = n.upper() // bounded by the parent's fence
				} else {
					// Copied before the check below: a restart resets it.
					child = n.child(i)
					f.key, f.set = n.appendKey(f.key[:0], i), true
				}
			}
			if g.HasChanged() {
				break
			}
			if !valid {
				return bufmgr.SharedGuard{}, corruptNode(g.PID())
			}
			parent, next = g, protocol.PID(child)
		}
	}
	return bufmgr.SharedGuard{}, fmt.Errorf("btree: descent did not settle: %w", ErrCorrupt)
}

// successor appends to dst the smallest key after b: b and a zero byte, or,
// for a key of MaxKey bytes, b without its trailing 0xff bytes and its last
// byte one up. Nil when b is the largest key there is.
func successor(dst, b []byte) []byte {
	if len(b) < MaxKey {
		return append(append(dst, b...), 0)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0xff {
		end--
	}
	if end == 0 {
		return nil
	}
	dst = append(dst, b[:end]...)
	dst[len(dst)-1]++
	return dst
}
