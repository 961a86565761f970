package nam

import (
	"sync"

	"github.com/tidwall/btree"
)

// Design names a NAM-tree design.
type Design string

const (
	CoarseGrained Design = "cg"
	FineGrained   Design = "fg"
	Hybrid        Design = "hybrid"
)

// Server is a memory server's CPU side: the coarse-grained tree of its key
// range (CG), or the separators of its range's leaves (hybrid). FG servers
// have none: they only hold registered memory. Handle is its state
// machine; it is safe for concurrent calls.
type Server struct {
	Design Design
	// Lo and Hi bound the keys this server owns: [Lo, Hi), Hi 0 for none.
	Lo, Hi uint64
	// Mutations break it on purpose (package mutation).
	Mutations ServerMutations

	mu     sync.Mutex
	data   btree.Map[uint64, uint64] // CG: key -> value
	leaves btree.Map[uint64, uint64] // hybrid: a leaf's low key -> its pointer
	late   []request                 // the reply-before-apply mutant's puts
	// Calls counts the requests handled (the server's CPU work).
	Calls uint64
}

// ServerMutations are the deliberate bugs of the servers.
type ServerMutations struct {
	// ReplyBeforeApply acknowledges a put and applies it only at the next
	// put or delete.
	ReplyBeforeApply func() bool
	// LocateNextLeaf answers a locate with the leaf after the right one.
	LocateNextLeaf func() bool
	// ScanSkipsNext makes a scan that stops at its limit resume one key
	// too far.
	ScanSkipsNext func() bool
}

func fire(f func() bool) bool { return f != nil && f() }

func (s *Server) owns(key uint64) bool { return key >= s.Lo && (s.Hi == 0 || key < s.Hi) }

// AddLeaf makes leaf, whose low key is low, known to a hybrid server (at
// format time).
func (s *Server) AddLeaf(low uint64, leaf Ptr) {
	s.mu.Lock()
	s.leaves.Set(low, uint64(leaf))
	s.mu.Unlock()
}

// Handle answers one request; the reply is appended to out. A malformed
// request gets a statusBad reply, never a panic.
func (s *Server) Handle(req []byte, out []byte) []byte {
	var rep reply
	r, err := decodeRequest(req)
	if err != nil {
		rep.status = statusBad
		return rep.encode(out)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Calls++
	if len(s.late) > 0 && (r.op == opPut || r.op == opDelete) {
		for _, p := range s.late {
			s.data.Set(p.key, p.a)
		}
		s.late = s.late[:0]
	}
	cg := s.Design == CoarseGrained
	switch {
	case !s.owns(r.key):
		rep.status = statusNotMine
	case cg && (r.op == opLocate || r.op == opRegister), !cg && r.op != opLocate && r.op != opRegister:
		rep.status = statusWrongUse
	case r.op == opGet:
		rep.value, rep.found = s.data.Get(r.key)
	case r.op == opPut:
		if fire(s.Mutations.ReplyBeforeApply) {
			s.late = append(s.late, r)
			break
		}
		s.data.Set(r.key, r.a)
	case r.op == opDelete:
		_, rep.found = s.data.Delete(r.key)
	case r.op == opScan:
		s.data.Ascend(r.key, func(k, v uint64) bool {
			if k >= r.a || (s.Hi != 0 && k >= s.Hi) {
				return false
			}
			if len(rep.keys) == int(r.b) {
				rep.next = k
				if fire(s.Mutations.ScanSkipsNext) {
					rep.next++
				}
				rep.found = true // more to come
				return false
			}
			rep.keys = append(rep.keys, k)
			rep.vals = append(rep.vals, v)
			return true
		})
	case r.op == opLocate:
		var prev, cur uint64
		ok := false
		s.leaves.Descend(r.key, func(_, v uint64) bool { cur, ok = v, true; return false })
		if ok && fire(s.Mutations.LocateNextLeaf) {
			s.leaves.Ascend(r.key+1, func(_, v uint64) bool { prev = v; return false })
			if prev != 0 {
				cur = prev
			}
		}
		rep.value, rep.found = cur, ok
	case r.op == opRegister:
		if !Ptr(r.a).Valid() {
			rep.status = statusBad
			break
		}
		s.leaves.Set(r.key, r.a)
	}
	return rep.encode(out)
}

// Len is how many keys (CG) or leaves (hybrid) the server knows.
func (s *Server) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Design == CoarseGrained {
		return s.data.Len()
	}
	return s.leaves.Len()
}
