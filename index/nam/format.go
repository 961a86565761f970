package nam

import (
	"encoding/binary"
	"fmt"
)

// Format lays out empty memory servers for a design: every region's
// header (the next free slot), and the first leaves: FG one root leaf on
// server 0, hybrid one leaf per server's range, chained in key order and
// known to its server. mem[i] is server i's region (Slots*NodeSize bytes).
func Format(l *Layout, mem [][]byte, servers []*Server) error {
	if len(mem) != len(l.Regions) || len(l.Bounds) != len(mem) || l.Bounds[0] != 0 {
		return fmt.Errorf("nam: %d regions, %d memories, bounds %v", len(l.Regions), len(mem), l.Bounds)
	}
	if l.Fanout < 3 || l.Fanout > MaxFanout {
		return fmt.Errorf("nam: fanout %d: want 3 to %d", l.Fanout, MaxFanout)
	}
	for i, m := range mem {
		if uint64(len(m)) < l.Slots*NodeSize || l.Slots < 2 {
			return fmt.Errorf("nam: server %d has %d bytes for %d slots", i, len(m), l.Slots)
		}
		binary.LittleEndian.PutUint64(m[allocWord:], 1)
		if i > 0 && l.Bounds[i] <= l.Bounds[i-1] {
			return fmt.Errorf("nam: bounds %v not increasing", l.Bounds)
		}
	}
	switch l.Design {
	case FineGrained:
		Encode(mem[0][NodeSize:2*NodeSize], &Node{})
		binary.LittleEndian.PutUint64(mem[0][allocWord:], 2)
		binary.LittleEndian.PutUint64(mem[0][rootWord:], uint64(MakePtr(0, 1)))
	case Hybrid:
		for i, m := range mem {
			n := Node{Low: l.Bounds[i]}
			if i+1 < len(mem) {
				n.HasHigh, n.High, n.Sibling = true, l.Bounds[i+1], MakePtr(i+1, 1)
			}
			Encode(m[NodeSize:2*NodeSize], &n)
			binary.LittleEndian.PutUint64(m[allocWord:], 2)
			servers[i].AddLeaf(l.Bounds[i], MakePtr(i, 1))
		}
	case CoarseGrained:
	default:
		return fmt.Errorf("nam: unknown design %q", l.Design)
	}
	for i, s := range servers {
		s.Design, s.Lo = l.Design, l.Bounds[i]
		s.Hi = 0
		if i+1 < len(servers) {
			s.Hi = l.Bounds[i+1]
		}
	}
	return nil
}

// Bounds splits [0, keys) over n servers: evenly, or, skewed, with the
// paper's 80/12/5/3 shares of the keys for four servers (the first server
// gets 80%, and so on; other counts halve the share each time).
func Bounds(n int, keys uint64, skewed bool) []uint64 {
	b := make([]uint64, n)
	if !skewed {
		for i := range n {
			b[i] = keys * uint64(i) / uint64(n)
		}
		return b
	}
	shares := []float64{0.80, 0.12, 0.05, 0.03}
	acc := 0.0
	for i := range n {
		b[i] = uint64(acc * float64(keys))
		share := 0.0
		if i < len(shares) {
			share = shares[i]
		} else {
			share = shares[len(shares)-1] / float64(uint64(1)<<(i-len(shares)+1))
		}
		acc += share
		if i > 0 && b[i] <= b[i-1] {
			b[i] = b[i-1] + 1
		}
	}
	return b
}

// CheckTree walks a FG or hybrid tree's memory at rest (no client running)
// and returns its keys in order: every leaf reachable along the leaf level
// from the leftmost, keys in order within bounds, no node locked, every
// checksum right. It is the simulator's check after a run.
func CheckTree(l *Layout, mem [][]byte) (keys, vals []uint64, err error) {
	var p Ptr
	if l.Design == FineGrained {
		p = Ptr(binary.LittleEndian.Uint64(mem[0][rootWord:]))
		for {
			n, err := NodeAtRest(mem, l.Slots, p)
			if err != nil {
				return nil, nil, err
			}
			if n.Level == 0 {
				break
			}
			if len(n.Keys) == 0 || n.Keys[0] != 0 {
				return nil, nil, fmt.Errorf("leftmost inner node %v does not start at key 0", p)
			}
			p = Ptr(n.Vals[0])
		}
	} else {
		p = MakePtr(0, 1)
	}
	return LeafLevel(mem, l.Slots, p)
}

// NodeAtRest decodes the node at p from the servers' memory (slots per
// server) at rest: in range, its checksum right, unlocked, valid.
func NodeAtRest(mem [][]byte, slots uint64, p Ptr) (*Node, error) {
	if !p.Valid() || p.Server() >= len(mem) || p.Slot() == 0 || p.Slot() >= slots {
		return nil, fmt.Errorf("pointer %v out of range", p)
	}
	var n Node
	b := mem[p.Server()][p.Slot()*NodeSize : (p.Slot()+1)*NodeSize]
	if err := Decode(b, &n); err != nil {
		return nil, fmt.Errorf("node %v: %w", p, err)
	}
	if n.Locked() {
		return nil, fmt.Errorf("node %v locked at rest", p)
	}
	if n.Invalid {
		return nil, fmt.Errorf("node %v is reachable but invalid", p)
	}
	return &n, nil
}

// LeafLevel walks the leaf level at rest from its leftmost leaf p and
// returns the keys in order: every leaf at rest (NodeAtRest), of level 0,
// its low key where the leaf on its left ends, its keys within its
// bounds, its head node (if any) a head node.
func LeafLevel(mem [][]byte, slots uint64, p Ptr) (keys, vals []uint64, err error) {
	low := uint64(0)
	for steps := uint64(0); ; steps++ {
		if steps > slots*uint64(len(mem)) {
			return nil, nil, fmt.Errorf("the leaf level loops")
		}
		n, err := NodeAtRest(mem, slots, p)
		if err != nil {
			return nil, nil, err
		}
		if n.Level != 0 || n.IsHead {
			return nil, nil, fmt.Errorf("node %v on the leaf level has level %d (head node %v)", p, n.Level, n.IsHead)
		}
		if n.Low != low {
			return nil, nil, fmt.Errorf("leaf %v's low key %d, but the leaf on its left ends at %d", p, n.Low, low)
		}
		if n.Head.Valid() {
			if h, err := NodeAtRest(mem, slots, n.Head); err != nil || !h.IsHead {
				return nil, nil, fmt.Errorf("leaf %v's head node %v is none (%v)", p, n.Head, err)
			}
		}
		for i, k := range n.Keys {
			if k < low || !n.Covers(k) {
				return nil, nil, fmt.Errorf("leaf %v holds key %d outside [%d, %d)", p, k, low, n.High)
			}
			keys, vals = append(keys, k), append(vals, n.Vals[i])
		}
		if !n.HasHigh {
			return keys, vals, nil
		}
		if n.High < low {
			return nil, nil, fmt.Errorf("leaf %v's high key %d below its low %d", p, n.High, low)
		}
		low, p = n.High, n.Sibling
	}
}
