package cell

import (
	"fmt"

	"github.com/scalestore-go/scalestore/index/nam"
)

// A meganode split (Cell §2.2): a leaf meganode X that grew past
// MegaNodes nodes is cut at the middle separator of its root into X_left
// and X_right. Writes into X_right's key range wait (StatusRetry) for the
// whole split; writes into X_left go on, except one that would split X's
// root. The server, between requests (Step), then
//
//  1. copies X_right's nodes, a few per step, into fresh slots, their
//     pointers remapped to the copies, under a new root: the new meganode
//     Y, not yet reachable;
//  2. relinks in one step: X_left's boundary node of each level gets the
//     copy of X_right's leftmost node of that level as its right link, X's
//     root drops the entries of X_right, takes the separator as its high
//     key and Y's root as its right link; the separator and Y's root go to
//     the root meganode's server (a Link);
//  3. invalidates the old X_right nodes, a few per step, and frees their
//     slots for reuse;
//
// and only then lets writes into Y's range go on. Clients' one-sided READs
// run throughout: before the relink they reach the old copies, which are
// whole and unchanging because writes wait; after it they reach Y; an old
// copy read after its invalidation makes the search start again, and a
// slot reused since is recognised by its low and high keys. Writes wait
// until every old copy is invalid because a READ of a still-valid old copy
// after a write to Y would return what the write replaced.
//
// Y lives on X's server: the paper lets a split place it on another
// server; here the new meganode stays local (docs/indexes.md).
type megaSplit struct {
	root      nam.Ptr // X's root
	sep       uint64  // the first key of X_right
	high      uint64  // X's high key, if hasHigh
	hasHigh   bool
	level     uint8     // X's root level
	old, copy []nam.Ptr // X_right's nodes, level by level from the top, and their copies
	leftmost  []nam.Ptr // per level below the root: X_right's leftmost node (old)
	remap     map[nam.Ptr]nam.Ptr
	newRoot   nam.Ptr
	phase     splitPhase
	next      int // the next node of old to copy or invalidate
}

type splitPhase uint8

const (
	phaseCopy splitPhase = iota
	phaseRelink
	phaseInvalidate
)

// stepNodes is how many nodes one Step copies or invalidates: the
// server's other requests wait no longer than that for a step.
const stepNodes = 4

// Link is the separator of a finished meganode split for the root
// meganode: keys from Low on are in the meganode whose root is Root.
type Link struct {
	Low  uint64
	Root nam.Ptr
}

// LinkRequest is the request that inserts l into the root meganode, for
// its server (Layout.Root's).
func LinkRequest(l Link, out []byte) []byte {
	r := request{op: opLink, key: l.Low, a: uint64(l.Root)}
	return r.encode(out)
}

// CheckLinkReply reports whether a reply to a LinkRequest says done.
func CheckLinkReply(b []byte) error {
	var r reply
	if err := decodeReply(b, &r); err != nil {
		return err
	}
	if r.status != StatusOK {
		return fmt.Errorf("cell: root meganode refused a link (status %d)", r.status)
	}
	return nil
}

// Pending reports whether a meganode split is under way: the runtime
// calls Step until it is not.
func (s *Server) Pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msplit != nil
}

// TakeLinks returns the links for the root meganode made since the last
// call; the runtime sends each as a LinkRequest to the root meganode's
// server. Until one arrives, searches reach the new meganode by right
// links, a step longer.
func (s *Server) TakeLinks() []Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.links
	s.links = nil
	return l
}

// Done is how many meganode splits the server finished.
func (s *Server) Done() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.MegaSplits
}

// blocked reports whether a write of key must wait for the meganode split
// under way.
func (s *Server) blocked(key uint64) bool {
	m := s.msplit
	if m == nil || key < m.sep || m.hasHigh && key >= m.high {
		return false
	}
	switch m.phase {
	case phaseCopy:
		return !fire(s.Mutations.SplitWritesRight)
	case phaseInvalidate:
		return !fire(s.Mutations.SplitEarlyUnlock)
	}
	return true
}

// startMegaSplit begins splitting the meganode of root if it has grown
// past MegaNodes and the server has the slots for the copy.
func (s *Server) startMegaSplit(root nam.Ptr) {
	if s.MegaNodes == 0 || s.msplit != nil || s.count[root] <= s.MegaNodes {
		return
	}
	var top nam.Node
	if s.read(root, &top) != nil || top.Level == 0 || len(top.Keys) < 2 {
		return
	}
	mid := len(top.Keys) / 2
	m := &megaSplit{root: root, sep: top.Keys[mid], high: top.High, hasHigh: top.HasHigh, level: top.Level,
		remap: map[nam.Ptr]nam.Ptr{}}
	// X_right, level by level: the children of the root's right half,
	// then theirs.
	level := ptrsOf(top.Vals[mid:])
	var n nam.Node
	for l := int(top.Level) - 1; l >= 0; l-- {
		m.leftmost = append(m.leftmost, level[0])
		m.old = append(m.old, level...)
		if l == 0 {
			break
		}
		var below []nam.Ptr
		for _, p := range level {
			if s.read(p, &n) != nil || int(n.Level) != l {
				return
			}
			below = append(below, ptrsOf(n.Vals)...)
		}
		level = below
	}
	if s.available() < uint64(len(m.old))+1+uint64(top.Level)+2 {
		return // not now: the region cannot hold the copy
	}
	for _, p := range m.old {
		if !s.local(p) {
			return
		}
	}
	for _, p := range m.old {
		c, _ := s.alloc()
		m.copy = append(m.copy, c)
		m.remap[p] = c
	}
	m.newRoot, _ = s.alloc()
	s.msplit = m
}

// Step does the next part of the meganode split under way and reports
// whether more remains. An error is a broken invariant of the server's
// own memory.
func (s *Server) Step() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msplit
	if m == nil {
		return false, nil
	}
	var n nam.Node
	switch m.phase {
	case phaseCopy:
		for k := 0; k < stepNodes && m.next < len(m.old); k++ {
			if err := s.read(m.old[m.next], &n); err != nil {
				return false, err
			}
			s.remapNode(m, &n)
			s.store(m.copy[m.next], &n)
			m.next++
		}
		if m.next < len(m.old) {
			return true, nil
		}
		if err := s.read(m.root, &n); err != nil {
			return false, err
		}
		i, _ := n.Find(m.sep)
		y := nam.Node{Level: n.Level, Low: m.sep, HasHigh: n.HasHigh, High: n.High, Sibling: n.Sibling,
			Keys: append([]uint64(nil), n.Keys[i:]...), Vals: append([]uint64(nil), n.Vals[i:]...)}
		s.remapNode(m, &y)
		if n.Level != m.level || len(y.Keys) == 0 || y.Keys[0] != m.sep {
			return false, fmt.Errorf("cell: server %d: meganode %v's root changed under its split", s.ID, m.root)
		}
		s.store(m.newRoot, &y)
		m.phase = phaseRelink
		return true, nil
	case phaseRelink:
		if err := s.relink(m); err != nil {
			return false, err
		}
		m.phase, m.next = phaseInvalidate, 0
		return true, nil
	}
	for k := 0; k < stepNodes && m.next < len(m.old); k++ {
		p := m.old[m.next]
		if err := s.read(p, &n); err != nil {
			return false, err
		}
		n.Invalid = !fire(s.Mutations.SplitNoInvalidate)
		s.store(p, &n)
		s.free = append(s.free, p.Slot())
		m.next++
	}
	if m.next < len(m.old) {
		return true, nil
	}
	s.msplit = nil
	s.MegaSplits++
	return false, nil
}

// remapNode points n's children and right link at their copies, where
// they have one.
func (s *Server) remapNode(m *megaSplit, n *nam.Node) {
	if n.Level > 0 {
		for i, v := range n.Vals {
			if c, ok := m.remap[nam.Ptr(v)]; ok {
				n.Vals[i] = uint64(c)
			}
		}
	}
	if c, ok := m.remap[n.Sibling]; ok {
		n.Sibling = c
	}
}

// relink makes Y reachable and X_right unreachable: X_left's boundary
// nodes, bottom up, then X's root.
func (s *Server) relink(m *megaSplit) error {
	var n nam.Node
	key := m.sep - 1
	for l := 0; l < int(m.level); l++ {
		// The node of level l that covers sep-1, from X's root.
		p := m.root
		for steps := uint64(0); ; steps++ {
			if steps > s.Slots {
				return fmt.Errorf("cell: server %d: X_left's boundary at level %d not found", s.ID, l)
			}
			if err := s.read(p, &n); err != nil {
				return err
			}
			if !n.Covers(key) {
				p = n.Sibling
				continue
			}
			if int(n.Level) == l {
				break
			}
			p = n.Child(key)
		}
		want := m.leftmost[int(m.level)-1-l]
		if !n.HasHigh || n.High != m.sep || n.Sibling != want {
			return fmt.Errorf("cell: server %d: boundary node %v of level %d ends at %d -> %v, want %d -> %v",
				s.ID, p, l, n.High, n.Sibling, m.sep, want)
		}
		n.Sibling = m.remap[want]
		s.store(p, &n)
	}
	if err := s.read(m.root, &n); err != nil {
		return err
	}
	i, _ := n.Find(m.sep)
	n.Keys, n.Vals = n.Keys[:i], n.Vals[:i]
	n.HasHigh, n.High, n.Sibling = true, m.sep, m.newRoot
	s.store(m.root, &n)
	s.addMeganode(m.sep, m.newRoot, len(m.old)+1)
	s.count[m.root] -= len(m.old)
	s.links = append(s.links, Link{Low: m.sep, Root: m.newRoot})
	return nil
}

// link inserts a meganode split's separator into the root meganode
// (r.key from r.a on), on the server that holds it.
func (s *Server) link(r request, rep *reply) {
	if !s.rootMega.Valid() || !nam.Ptr(r.a).Valid() {
		rep.status = StatusBad
		return
	}
	p := s.rootMega
	for {
		var ok bool
		if p, ok = s.moveTo(r.key, p, rep); !ok {
			rep.status = StatusBad
			return
		}
		if s.node.Level == 0 {
			break
		}
		p = s.node.Child(r.key)
	}
	rep.stale = false
	s.node.Insert(r.key, r.a)
	if len(s.node.Keys) <= s.Fanout {
		s.store(p, &s.node)
		return
	}
	var top nam.Node
	if s.read(s.rootMega, &top) != nil {
		rep.status = StatusBad
		return
	}
	if s.available() < uint64(top.Level)+2 {
		rep.status = StatusFull
		return
	}
	s.bumpOnly = true
	defer func() { s.bumpOnly = false }()
	if s.Slots-min(s.Slots, s.alloced()) < uint64(top.Level)+2 {
		rep.status = StatusFull
		return
	}
	if err := s.split(p, &s.node, s.rootMega); err != nil {
		rep.status = StatusBad
	}
}

// CheckFree reports a freed slot that does not hold an invalid node (at
// rest: the simulator's check after a run).
func (s *Server) CheckFree() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n nam.Node
	for _, slot := range s.free {
		p := nam.MakePtr(s.ID, slot)
		if err := s.read(p, &n); err != nil {
			return err
		}
		if !n.Invalid {
			return fmt.Errorf("cell: server %d: free slot %d holds a valid node", s.ID, slot)
		}
	}
	if s.msplit != nil {
		return fmt.Errorf("cell: server %d: a meganode split of %v is still under way", s.ID, s.msplit.root)
	}
	return nil
}

func ptrsOf(vals []uint64) []nam.Ptr {
	p := make([]nam.Ptr, len(vals))
	for i, v := range vals {
		p[i] = nam.Ptr(v)
	}
	return p
}
