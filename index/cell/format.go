package cell

import (
	"encoding/binary"
	"fmt"

	"github.com/scalestore-go/scalestore/index/nam"
)

// Format lays out empty servers: leaf meganode j holds the keys from
// lows[j] (lows[0] is 0) to lows[j+1] and lives on server j mod the server
// count, as a root node (level 1) over one empty leaf, the leaves linked
// across meganodes; the root meganode, on server 0, maps every low key to
// its meganode's root and becomes l.Root. mem[i] is server i's region
// (l.Slots*nam.NodeSize bytes); servers[i] is set up to serve it.
func Format(l *Layout, mem [][]byte, servers []*Server, lows []uint64, fanout int) error {
	if len(mem) == 0 || len(mem) != len(l.Regions) || len(servers) != len(mem) {
		return fmt.Errorf("cell: %d regions, %d memories, %d servers", len(l.Regions), len(mem), len(servers))
	}
	if fanout < 3 || fanout >= nam.MaxFanout {
		return fmt.Errorf("cell: fanout %d: want 3 to %d", fanout, nam.MaxFanout-1)
	}
	if len(lows) == 0 || lows[0] != 0 {
		return fmt.Errorf("cell: meganode low keys %v: want the first to be 0", lows)
	}
	for j := 1; j < len(lows); j++ {
		if lows[j] <= lows[j-1] {
			return fmt.Errorf("cell: meganode low keys %v not increasing", lows)
		}
	}
	for i, m := range mem {
		if l.Slots < 4 || uint64(len(m)) < l.Slots*nam.NodeSize {
			return fmt.Errorf("cell: server %d has %d bytes for %d slots", i, len(m), l.Slots)
		}
		binary.LittleEndian.PutUint64(m, 1)
		*servers[i] = Server{ID: i, Mem: m, Slots: l.Slots, Fanout: fanout, MegaNodes: servers[i].MegaNodes, Servers: len(mem),
			Mutations: servers[i].Mutations, count: map[nam.Ptr]int{}}
	}
	put := func(p nam.Ptr, n *nam.Node) {
		b := mem[p.Server()][p.Slot()*nam.NodeSize : (p.Slot()+1)*nam.NodeSize]
		nam.Encode(b, n)
		binary.LittleEndian.PutUint64(b, 2) // version 1, unlocked
	}
	alloc := func(server int) (nam.Ptr, error) {
		p, err := servers[server].alloc()
		if err != nil {
			return 0, fmt.Errorf("cell: formatting: server %d: %w", server, err)
		}
		return p, nil
	}
	roots := make([]nam.Ptr, len(lows))
	leaves := make([]nam.Ptr, len(lows))
	for j := range lows {
		var err error
		if roots[j], err = alloc(j % len(mem)); err != nil {
			return err
		}
		if leaves[j], err = alloc(j % len(mem)); err != nil {
			return err
		}
	}
	for j, low := range lows {
		// The meganodes are level-linked: leaves to the next meganode's
		// first leaf, roots to its root.
		leaf := nam.Node{Low: low}
		root := nam.Node{Level: 1, Low: low, Keys: []uint64{low}, Vals: []uint64{uint64(leaves[j])}}
		if j+1 < len(lows) {
			leaf.HasHigh, leaf.High, leaf.Sibling = true, lows[j+1], leaves[j+1]
			root.HasHigh, root.High, root.Sibling = true, lows[j+1], roots[j+1]
		}
		put(leaves[j], &leaf)
		put(roots[j], &root)
		servers[j%len(mem)].AddMeganode(low, roots[j])
	}
	// The root meganode, bottom-up: a level of nodes of up to fanout
	// entries, then their parents, until one node.
	keys, vals := lows, make([]uint64, len(roots))
	for j, r := range roots {
		vals[j] = uint64(r)
	}
	for level := uint8(0); ; level++ {
		var nk, nv []uint64
		var nodes []nam.Node
		for i := 0; i < len(keys); i += fanout {
			e := min(i+fanout, len(keys))
			nodes = append(nodes, nam.Node{Level: level, Low: keys[i], Keys: keys[i:e], Vals: vals[i:e]})
		}
		ptrs := make([]nam.Ptr, len(nodes))
		servers[0].bumpOnly = true // the root meganode's slots are known as such
		for i := range nodes {
			var err error
			if ptrs[i], err = alloc(0); err != nil {
				return err
			}
		}
		servers[0].bumpOnly = false
		for i := range nodes {
			if i+1 < len(nodes) {
				nodes[i].HasHigh, nodes[i].High, nodes[i].Sibling = true, nodes[i+1].Keys[0], ptrs[i+1]
			}
			put(ptrs[i], &nodes[i])
			nk, nv = append(nk, nodes[i].Keys[0]), append(nv, uint64(ptrs[i]))
		}
		if len(nodes) == 1 {
			l.Root = ptrs[0]
			servers[0].rootMega = l.Root
			return nil
		}
		keys, vals = nk, nv
	}
}

// Lows splits [0, keys) into n meganodes of equal key ranges.
func Lows(n int, keys uint64) []uint64 {
	n = max(1, min(n, int(max(keys, 1))))
	b := make([]uint64, n)
	for i := range n {
		b[i] = keys * uint64(i) / uint64(n)
	}
	return b
}

// CheckTree walks the servers' memory at rest (no call or READ under
// way) and returns the keys in order: the leaf level from the leftmost
// leaf through every meganode, each node decoding with its checksum,
// unlocked, its keys in order within its bounds; and every leaf meganode
// reached from the root meganode covering its range. It is the
// simulator's check after a run.
func CheckTree(l *Layout, mem [][]byte) (keys, vals []uint64, err error) {
	node := func(p nam.Ptr) (*nam.Node, error) { return nam.NodeAtRest(mem, l.Slots, p) }
	// Down the leftmost path: the root meganode, then meganode 0.
	p := l.Root
	for inMega := false; ; {
		n, err := node(p)
		if err != nil {
			return nil, nil, err
		}
		if n.Level > 0 && (len(n.Keys) == 0 || n.Keys[0] != 0) {
			return nil, nil, fmt.Errorf("leftmost node %v does not start at key 0", p)
		}
		if n.Level == 0 && inMega {
			break
		}
		if n.Level == 0 {
			inMega = true
		}
		p = nam.Ptr(n.Vals[0])
	}
	if keys, vals, err = nam.LeafLevel(mem, l.Slots, p); err != nil {
		return nil, nil, err
	}
	// Every key is found by a search from the root, through nodes that
	// hold it: what a client does, at rest.
	for _, k := range keys {
		p := l.Root
		inMega := false
		for steps := uint64(0); ; steps++ {
			if steps > l.Slots*uint64(len(mem)) {
				return nil, nil, fmt.Errorf("the search for key %d does not end", k)
			}
			n, err := node(p)
			if err != nil {
				return nil, nil, fmt.Errorf("the search for key %d: %w", k, err)
			}
			if k < n.Low {
				return nil, nil, fmt.Errorf("the search for key %d reached node %v, whose keys start at %d", k, p, n.Low)
			}
			if !n.Covers(k) {
				p = n.Sibling
				continue
			}
			if n.Level > 0 || !inMega {
				p, inMega = n.Child(k), inMega || n.Level == 0
				continue
			}
			if _, ok := n.Find(k); !ok {
				return nil, nil, fmt.Errorf("the search for key %d ends at leaf %v, which does not hold it", k, p)
			}
			break
		}
	}
	return keys, vals, nil
}
