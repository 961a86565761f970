package msi

import (
	"fmt"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// cluster is a deployment: every node a home and a cache.
type cluster struct {
	cfg   protocolapi.Config
	nodes []*node
	// owners and readers are Check's scratch space (it runs after every
	// simulated step: it allocates nothing).
	owners, readers []protocol.NodeID
}

func deploy(cfg protocolapi.Config) (protocolapi.Cluster, error) {
	switch {
	case cfg.Nodes < 1 || cfg.Nodes > protocol.MaxNodes:
		return nil, fmt.Errorf("msi: %d nodes, want 1..%d", cfg.Nodes, protocol.MaxNodes)
	case cfg.Keys < 1:
		return nil, fmt.Errorf("msi: %d keys, want at least 1", cfg.Keys)
	case cfg.CacheLines < 0:
		return nil, fmt.Errorf("msi: %d cache lines, want at least 1 (0: one for every key)", cfg.CacheLines)
	}
	return &cluster{cfg: cfg}, nil
}

// Layout implements protocolapi.Cluster: no memory for verbs, no SSD.
func (c *cluster) Layout() protocolapi.Layout { return protocolapi.Layout{Nodes: c.cfg.Nodes} }

// Role implements protocolapi.Cluster.
func (c *cluster) Role(id protocol.NodeID, env protocolapi.Env) (protocolapi.Role, error) {
	n := &node{env: env, id: id, nodes: c.cfg.Nodes}
	switch c.cfg.Mutant {
	case "":
	case MutantGrantWithoutInvalidation:
		n.mutant.grantWithoutInvalidation = true
	case MutantForgetWriteBack:
		n.mutant.forgetWriteBack = true
	default:
		return nil, fmt.Errorf("msi: no mutant %q", c.cfg.Mutant)
	}
	// Node id homes keys id, id+nodes, id+2*nodes, ...
	homed := (c.cfg.Keys - int(id) + c.cfg.Nodes - 1) / c.cfg.Nodes
	n.home = home{n: n, entries: make([]entry, homed)}
	lines := c.cfg.CacheLines
	if lines == 0 || lines > c.cfg.Keys {
		lines = c.cfg.Keys
	}
	n.cache = cache{n: n, lines: make([]line, c.cfg.Keys), cap: lines}
	c.nodes = append(c.nodes, n)
	return n, nil
}

func (c *cluster) entry(key uint64) *entry {
	return c.nodes[key%uint64(len(c.nodes))].home.entry(key)
}

// Check implements protocolapi.Cluster. At every instant, per key: one
// cache in M and none in S, or none in M (single writer or many readers);
// the shared copies equal each other, and memory too while the home is
// idle. At rest: nothing in transit or waiting, and the home's entry
// agrees with the caches.
func (c *cluster) Check(atRest bool) []error {
	var errs []error
	for key := range uint64(c.cfg.Keys) {
		owners, readers := c.owners[:0], c.readers[:0]
		for _, n := range c.nodes {
			switch n.cache.lines[key].state {
			case stM:
				owners = append(owners, n.id)
			case stS, stSM:
				readers = append(readers, n.id)
			}
		}
		c.owners, c.readers = owners, readers
		if len(owners) > 1 || len(owners) == 1 && len(readers) > 0 {
			errs = append(errs, fmt.Errorf("key %d: single writer broken: M at nodes %v, S at nodes %v", key, owners, readers))
			continue
		}
		e := c.entry(key)
		for _, id := range readers {
			v := c.nodes[id].cache.lines[key].value
			if first := c.nodes[readers[0]].cache.lines[key].value; v != first {
				errs = append(errs, fmt.Errorf("key %d: node %d's shared copy holds %d, node %d's %d", key, id, v, readers[0], first))
			} else if !e.busy && e.state == dirS && v != e.mem {
				errs = append(errs, fmt.Errorf("key %d: node %d's shared copy holds %d, its home's memory %d", key, id, v, e.mem))
			}
		}
		if atRest {
			errs = append(errs, c.checkRest(key, e, owners, readers)...)
		}
	}
	return errs
}

func (c *cluster) checkRest(key uint64, e *entry, owners, readers []protocol.NodeID) []error {
	var errs []error
	for _, n := range c.nodes {
		if l := &n.cache.lines[key]; l.state > stM || len(l.waiting) > 0 {
			errs = append(errs, fmt.Errorf("key %d: at rest, node %d's line is %s with %d accesses waiting", key, n.id, stateNames[l.state], len(l.waiting)))
		}
	}
	if e.busy || len(e.queue) > 0 {
		errs = append(errs, fmt.Errorf("key %d: at rest, its home is busy or has %d requests queued", key, len(e.queue)))
	}
	switch e.state {
	case dirM:
		if len(owners) != 1 || owners[0] != e.owner {
			errs = append(errs, fmt.Errorf("key %d: its home says node %d owns it, the caches say %v", key, e.owner, owners))
		}
	case dirS:
		for _, id := range readers {
			if !e.sharers.Has(id) {
				errs = append(errs, fmt.Errorf("key %d: node %d holds a shared copy its home does not list (%v)", key, id, e.sharers))
			}
		}
		if len(owners) > 0 {
			errs = append(errs, fmt.Errorf("key %d: its home says shared, node %v holds it in M", key, owners))
		}
	case dirI:
		if len(owners)+len(readers) > 0 {
			errs = append(errs, fmt.Errorf("key %d: its home says no copy, the caches hold M %v S %v", key, owners, readers))
		}
	}
	return errs
}

// Counters implements protocolapi.Counterer: the homes' grants,
// invalidations and fetches, and the owners' evictions (PutM), summed.
func (c *cluster) Counters() []protocolapi.Counter {
	var sum counts
	for _, n := range c.nodes {
		sum.grants += n.count.grants
		sum.invalidations += n.count.invalidations
		sum.fetches += n.count.fetches
		sum.evictions += n.count.evictions
	}
	return []protocolapi.Counter{{Name: "grants", Value: sum.grants}, {Name: "invalidations", Value: sum.invalidations},
		{Name: "fetches", Value: sum.fetches}, {Name: "evictions", Value: sum.evictions}}
}

// KeyState implements protocolapi.KeyStater: the home's entry and every
// node's line, on one line.
func (c *cluster) KeyState(key uint64) string {
	if key >= uint64(c.cfg.Keys) {
		return fmt.Sprintf("key %d: none", key)
	}
	var b strings.Builder
	home := key % uint64(len(c.nodes))
	e := c.entry(key)
	st := "I"
	switch e.state {
	case dirS:
		st = "S " + e.sharers.String()
	case dirM:
		st = fmt.Sprintf("M owner=%d", e.owner)
	}
	fmt.Fprintf(&b, "home node %d: %s mem=%d", home, st, e.mem)
	if e.busy {
		fmt.Fprintf(&b, " busy for node %d", e.requester)
	}
	b.WriteString(" |")
	for _, n := range c.nodes {
		l := &n.cache.lines[key]
		fmt.Fprintf(&b, " n%d:%s", n.id, stateNames[l.state])
		if l.state != stI && l.state != stIS && l.state != stIM {
			fmt.Fprintf(&b, "=%d", l.value)
		}
	}
	return b.String()
}
