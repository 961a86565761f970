package cell

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tidwall/btree"

	"github.com/scalestore-go/scalestore/index/nam"
)

// Server is a memory server: its region of small nodes, which only it
// writes, and the calls it answers. Handle is its state machine; it is
// safe for concurrent calls (one lock: the paper's servers are
// single-threaded per process too).
type Server struct {
	ID     int
	Mem    []byte // the region peers READ: slot 0 the header, then nodes
	Slots  uint64
	Fanout int
	// MegaNodes: a leaf meganode that grows past this many nodes splits
	// in two (0: meganodes never split).
	MegaNodes int
	// Servers is how many servers there are (Format sets it): a split's
	// new meganode goes to them in turn.
	Servers int
	// Mutations break it on purpose (package mutation).
	Mutations ServerMutations

	mu          sync.Mutex
	megas       btree.Map[uint64, nam.Ptr] // low key -> root, of this server's leaf meganodes
	count       map[nam.Ptr]int            // leaf meganode root -> its nodes
	rootMega    nam.Ptr                    // the root meganode's root, on the server that holds it
	free        []uint64                   // slots of invalidated nodes, reused first
	msplit      *megaSplit                 // the meganode split under way, if any
	out         []Outgoing                 // calls to servers not yet taken (TakeOutgoing)
	adopting    []adoption                 // meganodes moving here from other servers
	rootServer  int                        // the root meganode's server
	bumpOnly    bool                       // alloc takes no freed slot (a root meganode split)
	rootNodes   map[uint64]bool            // the root meganode's slots (on its server): no write goes there
	noRoomUntil uint64                     // Calls before which a full server tries no meganode split
	node        nam.Node
	// Calls counts the requests handled (the server's CPU work); Splits
	// the node splits it did; MegaSplits the meganode splits it finished;
	// Adopted the meganodes other servers' splits moved here;
	// LinksRefused the links a full root meganode's server refused.
	Calls, Splits, MegaSplits, Adopted, LinksRefused uint64
}

// ServerMutations are the deliberate bugs of the servers.
type ServerMutations struct {
	// StaleHint applies a put to the leaf the client named even when a
	// split has since moved the key to a node on its right.
	StaleHint func() bool
	// SplitWritesRight lets writes into the right half of a meganode
	// that is being copied go on (into the old copy).
	SplitWritesRight func() bool
	// SplitEarlyUnlock lets writes into the new meganode go on before the
	// old copies are invalidated.
	SplitEarlyUnlock func() bool
	// SplitNoInvalidate frees the old copies for reuse without setting
	// their invalid flag.
	SplitNoInvalidate func() bool
}

func fire(f func() bool) bool { return f != nil && f() }

var errFull = errors.New("cell: server out of node slots")

func (s *Server) off(p nam.Ptr) uint64 { return p.Slot() * nam.NodeSize }

func (s *Server) alloced() uint64 { return binary.LittleEndian.Uint64(s.Mem) }

// local reports whether p is a node of this server.
func (s *Server) local(p nam.Ptr) bool {
	return p.Valid() && p.Server() == s.ID && p.Slot() > 0 && p.Slot() < s.alloced()
}

// read decodes this server's node p into n. Only the server writes its
// nodes, under s.mu, so what it reads is never torn.
func (s *Server) read(p nam.Ptr, n *nam.Node) error {
	if !s.local(p) {
		return fmt.Errorf("cell: server %d: pointer %v is not one of its nodes", s.ID, p)
	}
	o := s.off(p)
	if err := nam.Decode(s.Mem[o:o+nam.NodeSize], n); err != nil {
		return fmt.Errorf("cell: server %d: node %v: %w", s.ID, p, err)
	}
	return nil
}

// store writes n to p as a concurrent READ may see it: the lock bit set,
// the body, then the next version unlocked (a READ that overlaps sees the
// bit or a checksum that does not match, and retries).
func (s *Server) store(p nam.Ptr, n *nam.Node) {
	o := s.off(p)
	w := (*uint64)(unsafe.Pointer(&s.Mem[o]))
	v := atomic.LoadUint64(w) &^ 1
	atomic.StoreUint64(w, v|1)
	nam.Encode(s.Mem[o:o+nam.NodeSize], n)
	atomic.StoreUint64(w, v+2)
}

// alloc takes a free slot: an invalidated node's first, except for the
// root meganode (bumpOnly), whose nodes must never sit in a slot a client
// may have cached as a node of a leaf meganode: levels count from 0 in
// each meganode, so such a stale copy would end the root meganode's walk
// at a leaf meganode's leaf.
func (s *Server) alloc() (nam.Ptr, error) {
	if n := len(s.free); n > 0 && !s.bumpOnly {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return nam.MakePtr(s.ID, slot), nil
	}
	p, err := s.bump()
	if err == nil && s.bumpOnly {
		if s.rootNodes == nil {
			s.rootNodes = map[uint64]bool{}
		}
		s.rootNodes[p.Slot()] = true
	}
	return p, err
}

// bump takes the next slot never used.
func (s *Server) bump() (nam.Ptr, error) {
	next := s.alloced()
	if next >= s.Slots {
		return 0, errFull
	}
	binary.LittleEndian.PutUint64(s.Mem, next+1)
	return nam.MakePtr(s.ID, next), nil
}

// AddMeganode makes the leaf meganode whose root is root, and whose keys
// start at low, known to its server (at Format).
func (s *Server) AddMeganode(low uint64, root nam.Ptr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addMeganode(low, root, 2)
}

func (s *Server) addMeganode(low uint64, root nam.Ptr, nodes int) {
	s.megas.Set(low, root)
	if s.count == nil {
		s.count = map[nam.Ptr]int{}
	}
	s.count[root] = nodes
}

// SetRootMeganode tells the server that holds the root meganode where its
// root is: the separators of meganode splits are inserted there.
func (s *Server) SetRootMeganode(root nam.Ptr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rootMega = root
}

// Handle answers one request; the reply is appended to out. A malformed
// request, or one naming something that is not a node of this server,
// gets StatusBad, never a panic.
func (s *Server) Handle(req []byte, out []byte) []byte {
	var rep reply
	var tail []byte
	if len(req) == requestSize+nam.NodeSize && req[0] == byte(opAdopt) {
		req, tail = req[:requestSize], req[requestSize:]
	}
	r, err := decodeRequest(req)
	if err != nil || (r.op == opAdopt) != (tail != nil) {
		rep.status = StatusBad
		return rep.encode(out)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Calls++
	switch r.op {
	case opSearch:
		s.search(r, &rep)
	case opPut, opDelete:
		s.write(r, &rep)
	case opScan:
		s.scan(r, &rep)
	case opLink:
		s.link(r, &rep)
	case opReserve:
		s.reserve(r, &rep)
	case opAdopt:
		s.adopt(r, tail, &rep)
	case opUnlock:
		s.unlock(r, &rep)
	}
	if r.op >= opLink {
		rep.leaf, rep.stale = uint64(r.op), false // a server's call: the reply names it
		if r.op == opLink {
			rep.value = r.key
		}
	}
	return rep.encode(out)
}

// moveTo reads the node of key's level from p on, moving right while the
// node does not cover key and the next one is local. It returns the node's
// pointer (in s.node), or sets a Moved, Retry or Bad reply and returns
// false. A node that is invalid, or whose low key is above key, was
// reached by a pointer a meganode split made stale (the client's hint):
// StatusRetry sends the client back to the top.
func (s *Server) moveTo(key uint64, p nam.Ptr, rep *reply) (nam.Ptr, bool) {
	for steps := uint64(0); ; steps++ {
		if steps > s.Slots {
			rep.status = StatusBad
			return 0, false
		}
		if err := s.read(p, &s.node); err != nil {
			rep.status = StatusBad
			return 0, false
		}
		if s.node.Invalid || key < s.node.Low {
			rep.status = StatusRetry
			return 0, false
		}
		if s.node.Covers(key) {
			return p, true
		}
		rep.stale = true
		next := s.node.Sibling
		if !next.Valid() {
			rep.status = StatusBad // a key beyond the whole tree
			return 0, false
		}
		if next.Server() != s.ID {
			rep.status, rep.next = StatusMoved, uint64(next)
			return 0, false
		}
		p = next
	}
}

// search descends from r.a to the leaf of r.key: one call for what a
// client-side search does in one READ per level. The reply is marked
// stale when the start node no longer covered the key (a meganode split
// moved it right), so that the client drops the cached entry that sent it.
func (s *Server) search(r request, rep *reply) {
	if a := nam.Ptr(r.a); s.rootNodes[a.Slot()] && a.Server() == s.ID {
		rep.status = StatusBad // the root meganode: clients walk it themselves
		return
	}
	p, ok := s.moveTo(r.key, nam.Ptr(r.a), rep)
	stale := rep.stale
	defer func() { rep.stale = stale }()
	for ok {
		if s.node.Level == 0 {
			i, found := s.node.Find(r.key)
			rep.found, rep.leaf = found, uint64(p)
			if found {
				rep.value = s.node.Vals[i]
			}
			return
		}
		p = s.node.Child(r.key)
		if p.Server() != s.ID {
			rep.status, rep.next = StatusMoved, uint64(p)
			return
		}
		p, ok = s.moveTo(r.key, p, rep)
	}
}

// write puts or deletes r.key in the leaf that covers it, starting at the
// client's hint r.b (a split may have moved the key right since).
func (s *Server) write(r request, rep *reply) {
	if s.blocked(r.key) {
		rep.status = StatusRetry
		return
	}
	hint := nam.Ptr(r.b)
	if s.rootNodes[hint.Slot()] && hint.Server() == s.ID {
		rep.status = StatusBad // a hint into the root meganode
		return
	}
	var p nam.Ptr
	if fire(s.Mutations.StaleHint) && s.local(hint) {
		p = hint
		if s.read(p, &s.node) != nil {
			rep.status = StatusBad
			return
		}
	} else {
		var ok bool
		if p, ok = s.moveTo(r.key, hint, rep); !ok {
			return
		}
	}
	rep.stale = false
	if s.node.Level != 0 {
		// A hint to a slot that a meganode split freed and a split
		// reused for an inner node.
		rep.status = StatusRetry
		return
	}
	if r.op == opDelete {
		if rep.found = s.node.Remove(r.key); rep.found {
			s.store(p, &s.node)
		}
		return
	}
	s.node.Insert(r.key, r.a)
	if len(s.node.Keys) <= s.Fanout {
		s.store(p, &s.node)
		return
	}
	// A split may climb to the meganode's root and split it too: make
	// sure the slots are there before changing anything.
	root, ok := s.megaRoot(r.key)
	var top nam.Node
	if !ok || s.read(root, &top) != nil {
		rep.status = StatusBad
		return
	}
	if s.available() < uint64(top.Level)+2 {
		// Full: a meganode split moving a half elsewhere frees room, so
		// the write waits for one rather than fail.
		s.startMegaSplit(root, true)
		if s.msplit != nil {
			rep.status = StatusRetry
			return
		}
		rep.status = StatusFull
		return
	}
	if m := s.msplit; m != nil && m.root == root && s.reachesRoot(r.key, root) {
		// The root of a meganode being split keeps its level until the
		// split is done (its right half is being copied).
		rep.status = StatusRetry
		return
	}
	if err := s.split(p, &s.node, root); err != nil {
		rep.status = StatusBad
		return
	}
	s.startMegaSplit(root, false)
}

// available is how many nodes the server can still allocate.
func (s *Server) available() uint64 {
	return s.Slots - min(s.Slots, s.alloced()) + uint64(len(s.free))
}

// reachesRoot reports whether an insert into key's (full) leaf would
// split every node up to the meganode's root: every node on the way down
// is full.
func (s *Server) reachesRoot(key uint64, root nam.Ptr) bool {
	var n nam.Node
	p := root
	for {
		if s.read(p, &n) != nil {
			return true
		}
		if !n.Covers(key) {
			p = n.Sibling
			if !s.local(p) {
				return true
			}
			continue
		}
		if n.Level == 0 {
			return true
		}
		if len(n.Keys) < s.Fanout {
			return false
		}
		p = n.Child(key)
	}
}

// megaRoot is the root of this server's leaf meganode that holds key.
func (s *Server) megaRoot(key uint64) (nam.Ptr, bool) {
	var root nam.Ptr
	ok := false
	s.megas.Descend(key, func(_ uint64, r nam.Ptr) bool { root, ok = r, true; return false })
	return root, ok
}

// split splits the overflowing node n at p (Sagiv's order: the new right
// node first, then the left one linked to it, then the separator in the
// parent), climbing while the parent overflows. A meganode's root splits
// in place, so pointers to it stay valid.
func (s *Server) split(p nam.Ptr, n *nam.Node, root nam.Ptr) error {
	for {
		s.Splits++
		if p == root {
			return s.splitRoot(p, n)
		}
		var right nam.Node
		sep := n.Split(&right)
		rp, err := s.alloc()
		if err != nil {
			return err
		}
		s.count[root]++
		s.store(rp, &right)
		n.Sibling = rp
		s.store(p, n)
		// The parent: the node one level up that covers sep, found from
		// the meganode's root.
		level := n.Level + 1
		pp := root
		var parent nam.Node
		for {
			if err := s.read(pp, &parent); err != nil {
				return err
			}
			if !parent.Covers(sep) {
				pp = parent.Sibling
				continue
			}
			if parent.Level == level {
				break
			}
			pp = parent.Child(sep)
		}
		parent.Insert(sep, uint64(rp))
		if len(parent.Keys) <= s.Fanout {
			s.store(pp, &parent)
			return nil
		}
		p, n = pp, &parent
	}
}

// splitRoot moves the root's entries into two new nodes and makes the
// root their parent, one level up.
func (s *Server) splitRoot(p nam.Ptr, n *nam.Node) error {
	left := nam.Node{Level: n.Level, Keys: append([]uint64(nil), n.Keys...), Vals: append([]uint64(nil), n.Vals...),
		HasHigh: n.HasHigh, High: n.High, Low: n.Low, Sibling: n.Sibling}
	var right nam.Node
	sep := left.Split(&right)
	lp, err := s.alloc()
	if err != nil {
		return err
	}
	rp, err := s.alloc()
	if err != nil {
		return err
	}
	s.count[p] += 2
	left.Sibling = rp
	s.store(rp, &right)
	s.store(lp, &left)
	top := nam.Node{Level: n.Level + 1, HasHigh: n.HasHigh, High: n.High, Low: n.Low, Sibling: n.Sibling,
		Keys: []uint64{left.Keys[0], sep}, Vals: []uint64{uint64(lp), uint64(rp)}}
	s.store(p, &top)
	return nil
}

// scan collects the entries of [r.key, r.a) from the leaf at the hint r.c
// on, along local leaves, at most r.b of them.
func (s *Server) scan(r request, rep *reply) {
	if h := nam.Ptr(r.c); s.rootNodes[h.Slot()] && h.Server() == s.ID {
		rep.status = StatusBad // a hint into the root meganode
		return
	}
	p, ok := s.moveTo(r.key, nam.Ptr(r.c), rep)
	if !ok {
		return
	}
	rep.stale = false
	if s.node.Level != 0 {
		rep.status = StatusRetry // a hint to a slot a meganode split freed, since reused
		return
	}
	for {
		if s.node.Level != 0 {
			rep.status = StatusBad
			return
		}
		for i, k := range s.node.Keys {
			if k < r.key || k >= r.a {
				continue
			}
			if len(rep.keys) == int(r.b) {
				rep.found, rep.value, rep.next = true, k, uint64(p)
				return
			}
			rep.keys, rep.vals = append(rep.keys, k), append(rep.vals, s.node.Vals[i])
		}
		if !s.node.HasHigh || s.node.High >= r.a {
			return
		}
		next := s.node.Sibling
		if next.Server() != s.ID {
			rep.found, rep.value, rep.next = true, s.node.High, uint64(next)
			return
		}
		p = next
		if err := s.read(p, &s.node); err != nil {
			rep.status = StatusBad
			return
		}
	}
}
