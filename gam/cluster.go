package gam

import (
	"fmt"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// cluster is one deployment: every node a home and a cache.
type cluster struct {
	cfg   protocolapi.Config
	opts  Options
	mut   flags
	total int // nodes in the deployment: cfg.Nodes and the memory nodes
	homes stripes
	nodes []*node
	// owners and readers are Check's scratch space (Check allocates
	// nothing unless it finds a violation).
	owners, readers []protocol.NodeID
	// last is, per key, the value of the last write that became visible
	// (a ghost the invariants compare the copies and the memory with; the
	// roles never read it).
	last []uint64
}

func newCluster(opts Options, cfg protocolapi.Config) (*cluster, error) {
	switch {
	case opts.MemoryNodes < 0:
		return nil, fmt.Errorf("gam: %d memory nodes", opts.MemoryNodes)
	case cfg.Nodes < 1 || cfg.Nodes+opts.MemoryNodes > protocol.MaxNodes:
		return nil, fmt.Errorf("gam: %d nodes and %d memory nodes, want 1..%d in all", cfg.Nodes, opts.MemoryNodes, protocol.MaxNodes)
	case cfg.Workers < 1:
		return nil, fmt.Errorf("gam: %d workers a node, want at least 1", cfg.Workers)
	case cfg.Keys < 1:
		return nil, fmt.Errorf("gam: %d keys, want at least 1", cfg.Keys)
	case cfg.CacheLines < 0:
		return nil, fmt.Errorf("gam: %d cache lines, want at least 1 (0: one for every key)", cfg.CacheLines)
	case opts.Cost.Service < 0:
		return nil, fmt.Errorf("gam: a service time of %d ns", opts.Cost.Service)
	case opts.Mode == TSO && opts.WriteBuffer < 1:
		return nil, fmt.Errorf("gam: a write buffer of %d writes, want at least 1", opts.WriteBuffer)
	}
	c := &cluster{cfg: cfg, opts: opts, last: make([]uint64, cfg.Keys), total: cfg.Nodes, homes: stripes{0, cfg.Nodes}}
	if opts.MemoryNodes > 0 {
		c.total, c.homes = cfg.Nodes+opts.MemoryNodes, stripes{cfg.Nodes, opts.MemoryNodes}
	}
	switch cfg.Mutant {
	case "":
	case MutantGrantWithoutInvalidation:
		c.mut.grantWithoutInvalidation = true
	case MutantLoseWriteBack:
		c.mut.loseWriteBack = true
	case MutantEarlyAck:
		c.mut.earlyAck = opts.Mode == SEQ
	case MutantDrainOutOfOrder:
		c.mut.drainOutOfOrder = opts.Mode == TSO
	case MutantReadSkipsBuffer:
		c.mut.readSkipsBuffer = opts.Mode == TSO
	default:
		return nil, fmt.Errorf("gam: no mutant %q", cfg.Mutant)
	}
	if c.mut == (flags{}) && cfg.Mutant != "" {
		return nil, fmt.Errorf("gam: mutant %q is not one of %s's", cfg.Mutant, opts.Mode)
	}
	return c, nil
}

// Layout implements protocolapi.Cluster: the memory nodes above the
// compute nodes, if any; no memory for verbs, no SSD.
func (c *cluster) Layout() protocolapi.Layout { return protocolapi.Layout{Nodes: c.total} }

// Role implements protocolapi.Cluster.
func (c *cluster) Role(id protocol.NodeID, env protocolapi.Env) (protocolapi.Role, error) {
	if int(id) != len(c.nodes) || int(id) >= c.total {
		return nil, fmt.Errorf("gam: role of node %d asked after %d of %d nodes", id, len(c.nodes), c.total)
	}
	n := &node{env: env, id: id, nodes: c.total, homes: c.homes, keys: uint64(c.cfg.Keys), mode: c.opts.Mode,
		cost: c.opts.Cost, mut: c.mut, cl: c, sent: make([]uint32, c.total), got: make([]uint32, c.total),
		early: make([][]Msg, c.total)}
	n.dir = directory{n: n, entries: make([]entry, c.homes.homed(id, c.cfg.Keys))}
	lines := c.cfg.CacheLines
	if lines == 0 || lines > c.cfg.Keys {
		lines = c.cfg.Keys
	}
	n.cache = cache{n: n, lines: make([]line, c.cfg.Keys), cap: lines}
	n.wb = writeBuffer{n: n, cap: c.opts.WriteBuffer}
	c.nodes = append(c.nodes, n)
	return n, nil
}

// wrote records that value became key's visible value.
func (c *cluster) wrote(key, value uint64) { c.last[key] = value }

func (c *cluster) entry(key uint64) *entry {
	return c.nodes[c.homes.of(key)].dir.entry(key)
}

// Check implements protocolapi.Cluster. At every instant, per key: one
// dirty copy and no shared one, or no dirty copy (single writer, many
// readers); every copy, shared or dirty, holds the last visible write;
// and when no cache owns the key and no write-back is due, the home's
// memory holds it (a write-back was not lost). At rest also: nothing
// queued, in transit or buffered, and the directory agrees with the
// caches.
func (c *cluster) Check(atRest bool) []error {
	if len(c.nodes) < c.total {
		return nil // the roles are still being built
	}
	var errs []error
	for key := range uint64(c.cfg.Keys) {
		e := c.entry(key)
		owners, readers := c.owners[:0], c.readers[:0]
		holder := false
		for _, n := range c.nodes {
			l := &n.cache.lines[key]
			// An evicting line still owns the key until its home took the
			// Evict (or a fetch took the value).
			owns := l.state == lineDirty || l.state == lineEvicting && e.state == dirDirty && e.owner == n.id && !e.fetch
			switch {
			case l.state == lineDirty:
				owners = append(owners, n.id)
			case l.readable():
				readers = append(readers, n.id)
			}
			if (owns || l.readable()) && l.value != c.last[key] {
				errs = append(errs, fmt.Errorf("key %d: node %d's %s copy holds %d, the last visible write is %d", key, n.id, lineNames[l.state], l.value, c.last[key]))
			}
			holder = holder || owns
		}
		c.owners, c.readers = owners, readers
		if len(owners) > 1 || len(owners) == 1 && len(readers) > 0 {
			errs = append(errs, fmt.Errorf("key %d: single writer broken: dirty at nodes %v, shared at nodes %v", key, owners, readers))
		}
		if !holder && !e.fetch && e.mem != c.last[key] {
			errs = append(errs, fmt.Errorf("key %d: no cache owns it and no write-back is due, but its home's memory holds %d, the last visible write %d", key, e.mem, c.last[key]))
		}
		if atRest {
			errs = append(errs, c.checkRest(key, e, owners, readers)...)
		}
	}
	if atRest {
		for _, n := range c.nodes {
			early := 0
			for _, e := range n.early {
				early += len(e)
			}
			if len(n.queue) > 0 || n.busy || n.wb.pending() > 0 || len(n.cache.blocked) > 0 || early > 0 {
				errs = append(errs, fmt.Errorf("node %d: at rest, %s", n.id, n.Describe()))
			}
		}
	}
	return errs
}

func (c *cluster) checkRest(key uint64, e *entry, owners, readers []protocol.NodeID) []error {
	var errs []error
	for _, n := range c.nodes {
		if l := &n.cache.lines[key]; !l.stable() || len(l.waiting) > 0 {
			errs = append(errs, fmt.Errorf("key %d: at rest, node %d's line is %s with %d accesses waiting", key, n.id, lineNames[l.state], len(l.waiting)))
		}
	}
	if e.busy || len(e.queue) > 0 {
		errs = append(errs, fmt.Errorf("key %d: at rest, its home is busy (%v) or has %d requests queued", key, e.busy, len(e.queue)))
	}
	switch e.state {
	case dirDirty:
		if len(owners) != 1 || owners[0] != e.owner {
			errs = append(errs, fmt.Errorf("key %d: its home says node %d owns it, the caches say %v", key, e.owner, owners))
		}
	case dirShared:
		for _, id := range readers {
			if !e.sharers.Has(id) {
				errs = append(errs, fmt.Errorf("key %d: node %d holds a shared copy its home does not list (%v)", key, id, e.sharers))
			}
		}
		if len(owners) > 0 {
			errs = append(errs, fmt.Errorf("key %d: its home says shared, nodes %v hold it dirty", key, owners))
		}
	case dirUnshared:
		if len(owners)+len(readers) > 0 {
			errs = append(errs, fmt.Errorf("key %d: its home says no copy, the caches hold it dirty at %v, shared at %v", key, owners, readers))
		}
	}
	return errs
}

// KeyState implements protocolapi.KeyStater, on one line: the home's
// entry, every other node's line, and the writes buffered for the key.
func (c *cluster) KeyState(key uint64) string {
	if key >= uint64(c.cfg.Keys) || len(c.nodes) < c.total {
		return fmt.Sprintf("key %d: none", key)
	}
	var b strings.Builder
	home := c.homes.of(key)
	e := c.entry(key)
	fmt.Fprintf(&b, "home node %d: %s", home, dirNames[e.state])
	switch e.state {
	case dirShared:
		fmt.Fprintf(&b, " %v", e.sharers)
	case dirDirty:
		fmt.Fprintf(&b, " owner=%d", e.owner)
	}
	fmt.Fprintf(&b, " mem=%d", e.mem)
	if e.busy {
		fmt.Fprintf(&b, " busy for node %d", e.cur.from)
	}
	b.WriteString(" |")
	for _, n := range c.nodes {
		if n.id == home || int(n.id) >= c.cfg.Nodes {
			continue
		}
		l := &n.cache.lines[key]
		fmt.Fprintf(&b, " n%d:%s", n.id, lineNames[l.state])
		if l.readable() || l.state == lineEvicting {
			fmt.Fprintf(&b, "=%d", l.value)
		}
	}
	// What the nodes' workers have not served yet: a message is in the
	// chart when it arrives, its effect only once its node served it.
	for _, n := range c.nodes {
		first := true
		for _, it := range n.queue {
			name := ""
			switch {
			case it.access && it.r.op.Key == key:
				name = it.r.op.Kind.String()
			case !it.access && it.msg.Key == key:
				name = typeNames[it.msg.T-1]
			default:
				continue
			}
			if first {
				fmt.Fprintf(&b, " | n%d queues", n.id)
				first = false
			}
			b.WriteString(" " + name)
		}
	}
	for _, n := range c.nodes {
		if vs := n.wb.buffered(key); len(vs) > 0 {
			fmt.Fprintf(&b, " | n%d buffers %v", n.id, vs)
		}
	}
	return b.String()
}

// Counters implements protocolapi.Counterer, summed over the nodes: what
// the homes did (grants, invalidations, fetches), the owners' evictions,
// the items the nodes' workers served (each Cost.Service ns of a
// worker's time), TSO's reads served from a thread's own buffer and
// writes that waited for room, and the messages that overtook one on
// their link (see node.arrive).
func (c *cluster) Counters() []protocolapi.Counter {
	var sum counts
	for _, n := range c.nodes {
		sum.add(n.count)
	}
	return []protocolapi.Counter{{Name: "grants", Value: sum.grants}, {Name: "invalidations", Value: sum.invalidations},
		{Name: "fetches", Value: sum.fetches}, {Name: "evictions", Value: sum.evictions}, {Name: "served", Value: sum.served},
		{Name: "forwarded", Value: sum.forwarded}, {Name: "held-writes", Value: sum.held}, {Name: "overtaken", Value: sum.overtaken}}
}
