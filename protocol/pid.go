package protocol

import "fmt"

// NodeID names a node of the cluster. Eight bits: a cluster has at most
// MaxNodes nodes (paper §3.3: the directory id lives in the PID's top byte).
type NodeID uint8

// MaxNodes is the largest cluster the protocol addresses.
const MaxNodes = 256

// PageSize is the unit of coherence and of storage.
const PageSize = 4096

// PID identifies a page cluster-wide: the top 8 bits name the directory node
// (where the page was allocated and where it is persisted), the low 56 bits
// its slot on that node's SSD.
type PID uint64

// MaxSlot is the largest SSD slot a PID can name.
const MaxSlot = 1<<56 - 1

// MakePID builds the PID of slot on directory node dir. It panics on a slot
// wider than 56 bits: slots are produced by our own allocator, never by input.
func MakePID(dir NodeID, slot uint64) PID {
	if slot > MaxSlot {
		panic(fmt.Sprintf("protocol: slot %d does not fit in 56 bits", slot))
	}
	return PID(uint64(dir)<<56 | slot)
}

// Dir is the directory node of the page.
func (p PID) Dir() NodeID { return NodeID(p >> 56) }

// Slot is the page's slot on its directory's SSD.
func (p PID) Slot() uint64 { return uint64(p) & MaxSlot }

func (p PID) String() string { return fmt.Sprintf("%d:%d", p.Dir(), p.Slot()) }

// NodeSet is a set of nodes, sized for MaxNodes (sharer sets, invalidation
// lists). The zero value is empty. It is a value type: copying is cheap.
type NodeSet [MaxNodes / 64]uint64

// Add puts n in the set.
func (s *NodeSet) Add(n NodeID) { s[n>>6] |= 1 << (n & 63) }

// Remove takes n out of the set.
func (s *NodeSet) Remove(n NodeID) { s[n>>6] &^= 1 << (n & 63) }

// Has reports whether n is in the set.
func (s *NodeSet) Has(n NodeID) bool { return s[n>>6]&(1<<(n&63)) != 0 }

// Empty reports whether the set has no member.
func (s *NodeSet) Empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }

// Len counts the members.
func (s *NodeSet) Len() int {
	n := 0
	for _, w := range s {
		n += popcount(w)
	}
	return n
}

// Nth returns the i-th member in ascending order (0-based); ok is false when
// the set has i or fewer members.
func (s *NodeSet) Nth(i int) (NodeID, bool) {
	for w, word := range s {
		for word != 0 {
			b := trailingZeros(word)
			if i == 0 {
				return NodeID(w*64 + b), true
			}
			i--
			word &= word - 1
		}
	}
	return 0, false
}

// Each calls fn for every member in ascending order.
func (s *NodeSet) Each(fn func(NodeID)) {
	for w, word := range s {
		for word != 0 {
			b := trailingZeros(word)
			fn(NodeID(w*64 + b))
			word &= word - 1
		}
	}
}

// String lists the members, e.g. "{1,2}".
func (s NodeSet) String() string {
	out := []byte{'{'}
	first := true
	s.Each(func(n NodeID) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = fmt.Appendf(out, "%d", n)
	})
	return string(append(out, '}'))
}
