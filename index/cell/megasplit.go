package cell

import (
	"fmt"

	"github.com/scalestore-go/scalestore/index/nam"
)

// A meganode split (Cell §2.2): a leaf meganode X that grew past
// MegaNodes nodes is cut at the middle separator of its root into X_left
// and X_right, and X_right moves to a new meganode Y, on another server
// (the target) or on X's own. Writes into X_right's key range wait
// (StatusRetry) for the whole split; writes into X_left go on, except one
// that would split X's root. The server, between requests (Step), then
//
//  1. copies X_right's nodes, a few per step, their pointers remapped to
//     the copies, under a new root: Y, not yet reachable. On another
//     server the copy is three kinds of calls from X's server to the
//     target's: reserve (slots for Y, and the range's writes wait there
//     too), adopt (one node each), and at the end unlock;
//  2. relinks in one step: X_left's boundary node of each level gets the
//     copy of X_right's leftmost node of that level as its right link, X's
//     root drops the entries of X_right, takes the separator as its high
//     key and Y's root as its right link; the separator and Y's root go to
//     the root meganode's server (a link);
//  3. invalidates the old X_right nodes, a few per step, and frees their
//     slots for reuse;
//
// and only then lets writes into Y's range go on (the target's unlock).
// Clients' one-sided READs run throughout: before the relink they reach
// the old copies, which are whole and unchanging because writes wait;
// after it they reach Y; an old copy read after its invalidation makes the
// search start again, and a slot reused since is recognised by its low
// and high keys. Writes wait until every old copy is invalid because a
// READ of a still-valid old copy after a write to Y would return what the
// write replaced.
//
// Where Y goes: the servers in turn, X's own among them (the paper's
// footnote 2 balances spreading the tree against the network's cost),
// skipping a server whose region cannot hold Y (it refuses the reserve).
// So a full region does not stop the tree from growing while another
// server has room.
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
	// target is Y's server; tried counts the servers asked to reserve;
	// acked the target's adopts answered.
	target, tried, acked int
}

type splitPhase uint8

const (
	phaseReserve    splitPhase = iota // waiting for the target's reserve
	phaseCopy                         // copying (or sending adopts)
	phaseCopyWait                     // waiting for the target's adopts
	phaseRelink                       // relink at the next step
	phaseInvalidate                   // invalidating the old copies
	phaseUnlock                       // waiting for the target's unlock
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

// Outgoing is a call a server makes to a server (itself included): the
// runtime delivers Req to server To's Handle and the reply to the
// sender's HandleReply.
type Outgoing struct {
	To  int
	Req []byte
}

// adoption is the target's side of a split moving a meganode to it: the
// reserved slots [first, first+n), the last for Y's root, and the key
// range whose writes wait until the unlock.
type adoption struct {
	sep, high   uint64
	hasHigh     bool
	first       uint64
	n, received int
}

// Pending reports whether a meganode split is under way on this server
// as its source or its target.
func (s *Server) Pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msplit != nil || len(s.adopting) > 0
}

// Splitting reports whether this server is splitting one of its
// meganodes (as the source).
func (s *Server) Splitting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msplit != nil
}

// Ready reports whether Step has work now (a split under way that is not
// waiting for a reply).
func (s *Server) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msplit
	return m != nil && (m.phase == phaseCopy || m.phase == phaseRelink || m.phase == phaseInvalidate)
}

// TakeOutgoing returns the calls to servers made since the last call:
// links for the root meganode, a split's reserve, adopts and unlock.
func (s *Server) TakeOutgoing() []Outgoing {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.out
	s.out = nil
	return o
}

// Done is how many meganode splits the server finished.
func (s *Server) Done() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.MegaSplits
}

// SplitCounts are the meganode splits the server finished and the
// meganodes other servers' splits moved here.
func (s *Server) SplitCounts() (splits, adopted uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.MegaSplits, s.Adopted
}

// blocked reports whether a write of key must wait for a meganode split
// under way, as its source or its target.
func (s *Server) blocked(key uint64) bool {
	in := func(sep, high uint64, hasHigh bool) bool { return key >= sep && (!hasHigh || key < high) }
	for _, a := range s.adopting {
		if in(a.sep, a.high, a.hasHigh) && !(a.received == a.n && fire(s.Mutations.SplitEarlyUnlock)) {
			return true
		}
	}
	m := s.msplit
	if m == nil || !in(m.sep, m.high, m.hasHigh) {
		return false
	}
	switch m.phase {
	case phaseCopy, phaseCopyWait:
		return !fire(s.Mutations.SplitWritesRight)
	case phaseInvalidate, phaseUnlock:
		return !fire(s.Mutations.SplitEarlyUnlock)
	}
	return true
}

// startMegaSplit begins splitting the meganode of root if it has grown
// past MegaNodes, or, full, if the server's region is.
func (s *Server) startMegaSplit(root nam.Ptr, full bool) {
	if s.MegaNodes == 0 || s.msplit != nil || s.count[root] <= s.MegaNodes && !full {
		return
	}
	if full && s.Calls < s.noRoomUntil {
		return // every server refused lately: the writes fail (StatusFull) for a while
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
	for _, p := range m.old {
		if !s.local(p) {
			return
		}
	}
	s.msplit = m
	s.nextTarget(m)
}

// nextTarget asks the next server in turn to take Y (X's own among
// them: the servers from the one after X's, shifted by each finished
// split, so that the tree spreads over all of them), skipping a server
// that refuses (its region cannot hold Y). When none can, the split is
// dropped (a later write tries again).
func (s *Server) nextTarget(m *megaSplit) {
	servers := max(1, s.Servers)
	for ; m.tried < servers; m.tried++ {
		t := (s.ID + 1 + int(s.MegaSplits) + m.tried) % servers
		if t != s.ID {
			m.target, m.phase = t, phaseReserve
			m.tried++
			r := request{op: opReserve, key: m.sep, a: uint64(len(m.old) + 1), b: m.high}
			if m.hasHigh {
				r.c = 1
			}
			s.out = append(s.out, Outgoing{To: t, Req: r.encode(nil)})
			return
		}
		// Here: Y's slots from this region, the room for X_left's
		// splits meanwhile kept.
		if s.available() < uint64(len(m.old))+1+uint64(m.level)+2 {
			continue
		}
		m.target, m.phase = s.ID, phaseCopy
		for _, p := range m.old {
			c, _ := s.alloc()
			m.copy = append(m.copy, c)
			m.remap[p] = c
		}
		m.newRoot, _ = s.alloc()
		return
	}
	s.msplit = nil // no room anywhere now
	s.noRoomUntil = s.Calls + noRoomCalls
}

// noRoomCalls is how many calls a server lets pass before it tries again
// to move a meganode away, when no server had room for one.
const noRoomCalls = 256

// Step does the next part of the meganode split under way and reports
// whether more remains that Step can do now (Ready). An error is a broken
// invariant of the server's own memory.
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
			s.put(m, m.copy[m.next], &n)
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
		s.put(m, m.newRoot, &y)
		if m.target != s.ID {
			m.phase = phaseCopyWait
			return false, nil
		}
		m.phase = phaseRelink
		return true, nil
	case phaseRelink:
		if err := s.relink(m); err != nil {
			return false, err
		}
		m.phase, m.next = phaseInvalidate, 0
		return true, nil
	case phaseInvalidate:
	default:
		return false, nil // waiting for a reply
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
	if m.target != s.ID {
		m.phase = phaseUnlock
		r := request{op: opUnlock, key: m.sep}
		s.out = append(s.out, Outgoing{To: m.target, Req: r.encode(nil)})
		return false, nil
	}
	s.finish()
	return false, nil
}

func (s *Server) finish() {
	s.msplit = nil
	s.MegaSplits++
}

// put writes Y's node n to p: here, or in an adopt call to the target.
func (s *Server) put(m *megaSplit, p nam.Ptr, n *nam.Node) {
	if m.target == s.ID {
		s.store(p, n)
		return
	}
	r := request{op: opAdopt, key: p.Slot(), a: m.sep}
	b := r.encode(make([]byte, 0, requestSize+nam.NodeSize))
	b = b[:requestSize+nam.NodeSize]
	nam.Encode(b[requestSize:], n)
	s.out = append(s.out, Outgoing{To: m.target, Req: b})
}

// HandleReply takes a server's reply to one of this server's calls
// (TakeOutgoing). A reply it did not expect is an error.
func (s *Server) HandleReply(b []byte) error {
	var r reply
	if err := decodeReply(b, &r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msplit
	switch op(r.leaf) {
	case opLink:
		switch r.status {
		case StatusOK:
		case StatusFull:
			// The root meganode's server has no room: the new meganode
			// stays reachable by right links, a step longer.
			s.LinksRefused++
		default:
			return fmt.Errorf("cell: server %d: the root meganode refused a link (status %d)", s.ID, r.status)
		}
		return nil
	case opReserve:
		if m == nil || m.phase != phaseReserve || r.value != m.sep {
			return fmt.Errorf("cell: server %d: a reserve reply for key %d it did not ask for", s.ID, r.value)
		}
		if r.status == StatusFull {
			s.nextTarget(m)
			return nil
		}
		if r.status != StatusOK {
			return fmt.Errorf("cell: server %d: server %d refused a reserve (status %d)", s.ID, m.target, r.status)
		}
		for i, p := range m.old {
			c := nam.MakePtr(m.target, r.next+uint64(i))
			m.copy = append(m.copy, c)
			m.remap[p] = c
		}
		m.newRoot = nam.MakePtr(m.target, r.next+uint64(len(m.old)))
		m.phase = phaseCopy
		return nil
	case opAdopt:
		if m == nil || m.phase != phaseCopy && m.phase != phaseCopyWait || r.status != StatusOK {
			return fmt.Errorf("cell: server %d: an adopt reply (status %d) it did not wait for", s.ID, r.status)
		}
		if m.acked++; m.acked == len(m.old)+1 && m.phase == phaseCopyWait {
			m.phase = phaseRelink
		}
		return nil
	case opUnlock:
		if m == nil || m.phase != phaseUnlock || r.value != m.sep || r.status != StatusOK {
			return fmt.Errorf("cell: server %d: an unlock reply for key %d (status %d) it did not wait for", s.ID, r.value, r.status)
		}
		s.finish()
		return nil
	}
	return fmt.Errorf("cell: server %d: a reply to op %d", s.ID, r.leaf)
}

// reserve takes slots for a meganode another server moves here (r.key
// its first key, r.a its nodes, r.b its high key if r.c): contiguous
// fresh slots, so that the source can name them all from the first.
func (s *Server) reserve(r request, rep *reply) {
	rep.value = r.key
	n := r.a
	if n == 0 || n > s.Slots || r.c > 1 {
		rep.status = StatusBad
		return
	}
	for _, a := range s.adopting {
		if a.sep == r.key {
			rep.status = StatusBad
			return
		}
	}
	if s.Slots-min(s.Slots, s.alloced()) < n+uint64(s.Fanout) {
		rep.status = StatusFull
		return
	}
	first := s.alloced()
	for range n {
		if _, err := s.bump(); err != nil {
			rep.status = StatusFull
			return
		}
	}
	s.adopting = append(s.adopting, adoption{sep: r.key, high: r.b, hasHigh: r.c == 1, first: first, n: int(n)})
	rep.next = first
}

// adopt writes one node of a meganode moving here into its reserved slot.
func (s *Server) adopt(r request, tail []byte, rep *reply) {
	rep.value = r.key
	for i := range s.adopting {
		a := &s.adopting[i]
		if a.sep != r.a || r.key < a.first || r.key >= a.first+uint64(a.n) {
			continue
		}
		var n nam.Node
		if nam.Decode(tail, &n) != nil || n.Invalid || n.Locked() {
			break
		}
		s.store(nam.MakePtr(s.ID, r.key), &n)
		a.received++
		return
	}
	rep.status = StatusBad
}

// unlock ends a meganode's move here: it becomes one of this server's
// meganodes, and writes into its range go on.
func (s *Server) unlock(r request, rep *reply) {
	rep.value = r.key
	for i, a := range s.adopting {
		if a.sep != r.key {
			continue
		}
		if a.received != a.n {
			break
		}
		s.addMeganode(a.sep, nam.MakePtr(s.ID, a.first+uint64(a.n)-1), a.n)
		s.adopting = append(s.adopting[:i], s.adopting[i+1:]...)
		s.Adopted++
		return
	}
	rep.status = StatusBad
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
	s.count[m.root] -= len(m.old)
	if m.target == s.ID {
		s.addMeganode(m.sep, m.newRoot, len(m.old)+1)
	}
	lr := request{op: opLink, key: m.sep, a: uint64(m.newRoot)}
	s.out = append(s.out, Outgoing{To: s.rootServer, Req: lr.encode(nil)})
	return nil
}

// link inserts a meganode split's separator into the root meganode
// (r.key from r.a on), on the server that holds it.
func (s *Server) link(r request, rep *reply) {
	root := nam.Ptr(r.a)
	if !s.rootMega.Valid() || !root.Valid() || root.Server() >= max(1, s.Servers) || root.Slot() == 0 || root.Slot() >= s.Slots {
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
	if i, found := s.node.Find(r.key); found {
		// A link sent twice is answered twice; one that would repoint
		// a meganode's entry is a lie.
		if s.node.Vals[i] != r.a {
			rep.status = StatusBad
		}
		return
	}
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
	if len(s.adopting) > 0 {
		return fmt.Errorf("cell: server %d: a meganode from key %d is still moving here", s.ID, s.adopting[0].sep)
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
