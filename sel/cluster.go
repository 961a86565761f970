package sel

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
)

var (
	_ protocolapi.KeyStater   = (*cluster)(nil)
	_ protocolapi.MemoryKeyer = (*cluster)(nil)
	_ protocolapi.Counterer   = (*cluster)(nil)
)

// cluster is a deployment: compute nodes 0..Nodes-1, memory nodes above.
type cluster struct {
	cfg      protocolapi.Config
	opts     Options
	lay      lineLayout
	computes []*compute
	mems     [][]byte // each memory node's region, 0-based
	// dirty are the keys of attempts ended since the last Check: their
	// lines are checked once more, with no attempt left on them. A key is
	// in it once (isDirty), so it stays bounded by the keys where Check
	// is never called (processes).
	dirty   []uint64
	isDirty []bool
	mark    []uint32 // per key: the Check generation that saw it
	gen     uint32
	scratch []*attempt
}

var mutantNames = []string{MutantReaderSkipsLatch, MutantReleaseBeforeWrite, MutantWriterFAA, MutantUnlockByWrite, MutantReaderKeepsLatch}

func deploy(cfg protocolapi.Config, o Options) (protocolapi.Cluster, error) {
	switch {
	case cfg.Nodes < 1 || cfg.Nodes+o.MemoryNodes > protocol.MaxNodes:
		return nil, fmt.Errorf("sel: %d compute nodes and %d memory nodes, want 1 or more compute nodes and at most %d nodes in all",
			cfg.Nodes, o.MemoryNodes, protocol.MaxNodes)
	case cfg.Workers < 1 || cfg.Workers > MaxWorkers:
		return nil, fmt.Errorf("sel: %d workers a node, want 1..%d (a latch tag's worker field)", cfg.Workers, MaxWorkers)
	case cfg.Keys < 1:
		return nil, fmt.Errorf("sel: %d keys, want at least 1", cfg.Keys)
	case cfg.CacheLines < 0:
		return nil, fmt.Errorf("sel: %d cache lines, want at least 0 (SEL caches nothing and ignores it)", cfg.CacheLines)
	}
	if cfg.Mutant != "" {
		known := false
		for _, m := range mutantNames {
			known = known || m == cfg.Mutant
		}
		if !known {
			return nil, fmt.Errorf("sel: no mutant %q (it has %s)", cfg.Mutant, strings.Join(mutantNames, ", "))
		}
	}
	return &cluster{cfg: cfg, opts: o, lay: lineLayout{computes: cfg.Nodes, memories: o.MemoryNodes, lineSize: o.LineSize},
		mems: make([][]byte, o.MemoryNodes), mark: make([]uint32, cfg.Keys), isDirty: make([]bool, cfg.Keys)}, nil
}

// Layout implements protocolapi.Cluster: registered memory on the memory
// nodes, nothing on the compute nodes (no cache), no SSD.
func (c *cluster) Layout() protocolapi.Layout {
	mem := make([]int, c.cfg.Nodes+c.opts.MemoryNodes)
	for i := range c.opts.MemoryNodes {
		mem[c.cfg.Nodes+i] = c.lay.memoryBytes(i, c.cfg.Keys)
	}
	return protocolapi.Layout{Nodes: len(mem), Memory: mem}
}

// Role implements protocolapi.Cluster.
func (c *cluster) Role(id protocol.NodeID, env protocolapi.Env) (protocolapi.Role, error) {
	if int(id) >= c.cfg.Nodes {
		i := int(id) - c.cfg.Nodes
		if i >= c.opts.MemoryNodes {
			return nil, fmt.Errorf("sel: node %d is beyond the layout's %d nodes", id, c.cfg.Nodes+c.opts.MemoryNodes)
		}
		if want := c.lay.memoryBytes(i, c.cfg.Keys); len(env.Memory()) != want {
			return nil, fmt.Errorf("sel: memory node %d has %d bytes of registered memory, want %d", id, len(env.Memory()), want)
		}
		c.mems[i] = env.Memory()
		return memory{id: id}, nil
	}
	n := &compute{c: c, env: env, id: id, accesses: make([]*access, c.cfg.Workers), slots: make([]access, c.cfg.Workers),
		byID: map[uint64]*attempt{}}
	for i := range c.opts.MemoryNodes {
		if c.lay.memoryBytes(i, c.cfg.Keys) == 0 {
			n.regions = append(n.regions, transport.Region{}) // it homes no key
			continue
		}
		rg, ok := env.Region(protocol.NodeID(c.cfg.Nodes + i))
		if !ok {
			return nil, fmt.Errorf("sel: node %d finds no registered memory on memory node %d", id, c.cfg.Nodes+i)
		}
		n.regions = append(n.regions, rg)
	}
	c.computes = append(c.computes, n)
	return n, nil
}

// word and line are key's latch word and data in memory.
func (c *cluster) word(key uint64) Word {
	home, _ := c.lay.home(key)
	return Word(binary.LittleEndian.Uint64(c.mems[int(home)-c.cfg.Nodes][c.lay.wordOff(key):]))
}

func (c *cluster) line(key uint64) []byte {
	home, _ := c.lay.home(key)
	off := c.lay.dataOff(key)
	return c.mems[int(home)-c.cfg.Nodes][off : off+uint64(c.lay.lineSize)]
}

// Check implements protocolapi.Cluster. After every step it checks the
// lines that attempts are at or just left; at rest every line.
func (c *cluster) Check(atRest bool) []error {
	var errs []error
	if atRest {
		for _, n := range c.computes {
			for _, a := range n.live {
				errs = append(errs, fmt.Errorf("at rest, node %d still has %s", n.id, a.describe()))
			}
			for _, acc := range n.accesses {
				if acc != nil {
					errs = append(errs, fmt.Errorf("at rest, node %d worker %d still waits for %v of key %d", n.id, acc.op.Worker, acc.op.Kind, acc.op.Key))
				}
			}
		}
		for key := range uint64(c.cfg.Keys) {
			errs = append(errs, c.checkLine(key, nil)...)
			if w := c.word(key); w != 0 {
				errs = append(errs, fmt.Errorf("key %d: at rest, its latch word is %v, not free", key, w))
			}
		}
		c.clearDirty()
		return errs
	}
	c.gen++
	c.scratch = c.scratch[:0]
	for _, n := range c.computes {
		c.scratch = append(c.scratch, n.live...)
	}
	// Grouped by key, each line is checked once against its attempts.
	slices.SortStableFunc(c.scratch, func(a, b *attempt) int { return cmp.Compare(a.key, b.key) })
	for i := 0; i < len(c.scratch); {
		j := i + 1
		for j < len(c.scratch) && c.scratch[j].key == c.scratch[i].key {
			j++
		}
		key := c.scratch[i].key
		c.mark[key] = c.gen
		errs = append(errs, c.checkLine(key, c.scratch[i:j])...)
		i = j
	}
	for _, key := range c.dirty {
		if c.mark[key] != c.gen {
			c.mark[key] = c.gen
			errs = append(errs, c.checkLine(key, nil)...)
		}
	}
	c.clearDirty()
	return errs
}

// markDirty notes that an attempt on key ended.
func (c *cluster) markDirty(key uint64) {
	if !c.isDirty[key] {
		c.isDirty[key] = true
		c.dirty = append(c.dirty, key)
	}
}

func (c *cluster) clearDirty() {
	for _, key := range c.dirty {
		c.isDirty[key] = false
	}
	c.dirty = c.dirty[:0]
}

// checkLine checks key's latch word and line against the attempts in
// flight on it. The role knows when a verb
// completed, memory changes when it lands: an attempt whose acquire,
// undo or release is due may or may not have acted yet, so the word is
// checked between what surely acted and what may have.
func (c *cluster) checkLine(key uint64, attempts []*attempt) []error {
	var errs []error
	w := c.word(key)
	head, tail, _ := lineVersions(c.line(key))
	sure, maybe := uint32(0), uint32(0) // readers that surely hold; that may count
	holderInFlight := false
	var holding []*attempt // writers that surely hold the latch
	for _, a := range attempts {
		acquireDue, releaseDue := a.due&(1<<vAcquire) != 0, a.due&(1<<vRelease) != 0
		switch a.phase {
		case readHolding:
			sure++
		case readAcquiring:
			maybe++
		case readUndoing, readReleasing:
			if releaseDue {
				maybe++
			}
		case writeAcquiring:
			holderInFlight = holderInFlight || acquireDue && a.tag == w.Holder()
		case writeHolding:
			holding = append(holding, a)
			holderInFlight = holderInFlight || a.tag == w.Holder()
		case writeUndoing, writeReleasing:
			holderInFlight = holderInFlight || releaseDue && a.tag == w.Holder()
		}
		if a.phase == writeReleasing && a.due&writesDue != 0 {
			// A WRITE lands before the release behind it: until it has
			// landed (memory's version reached its own), the word still
			// names its writer.
			headDue, tailDue := a.due&(1<<vWriteHead) != 0 && head < a.version, a.due&(1<<vWriteTail) != 0 && tail < a.version
			if (headDue || tailDue) && w.Holder() != a.tag {
				errs = append(errs, fmt.Errorf("key %d: %v's WRITE of version %d has not landed (memory's versions %d/%d), but the word is %v: its latch is gone",
					key, a.tag, a.version, head, tail, w))
			}
		}
	}
	if h := w.Holder(); h != 0 && !holderInFlight {
		errs = append(errs, fmt.Errorf("key %d: the word %v names holder %v, which no writer in flight can be", key, w, h))
	}
	if len(holding) > 1 {
		errs = append(errs, fmt.Errorf("key %d: one writer alone broken: %v and %v both hold the exclusive latch", key, holding[0].tag, holding[1].tag))
	}
	for _, a := range holding {
		if w.Holder() != a.tag {
			errs = append(errs, fmt.Errorf("key %d: %v holds the exclusive latch by its acquire, but the word is %v", key, a.tag, w))
		}
	}
	if r := w.Readers(); r < sure || r > sure+maybe {
		errs = append(errs, fmt.Errorf("key %d: readers counted wrong: the word %v counts %d, but %d surely hold the shared latch and at most %d more may count",
			key, w, r, sure, maybe))
	}
	if w.Holder() != 0 && sure > 0 {
		errs = append(errs, fmt.Errorf("key %d: one writer alone broken: the word %v names a writer while %d readers hold the shared latch", key, w, sure))
	}
	if w.Holder() == 0 && head != tail {
		errs = append(errs, fmt.Errorf("key %d: no writer holds the latch (word %v), but memory's line is torn: head version %d, tail %d", key, w, head, tail))
	}
	return errs
}

// KeyState implements protocolapi.KeyStater: key's latch word, its line in
// memory, and the attempts at it.
func (c *cluster) KeyState(key uint64) string {
	if key >= uint64(c.cfg.Keys) {
		return fmt.Sprintf("key %d: none", key)
	}
	var b strings.Builder
	home, _ := c.lay.home(key)
	head, tail, value := lineVersions(c.line(key))
	fmt.Fprintf(&b, "memory node %d: word %v, line version %d/%d value %d\n", home, c.word(key), head, tail, value)
	for _, n := range c.computes {
		for _, a := range n.live {
			if a.key == key {
				fmt.Fprintf(&b, "node %d: %s\n", n.id, a.describe())
			}
		}
	}
	return b.String()
}

// KeyAt implements protocolapi.MemoryKeyer: the key whose latch word or
// line lies at off of node's memory (charts that watch a key show the
// verbs on it).
func (c *cluster) KeyAt(node protocol.NodeID, off uint64) (uint64, bool) {
	key, ok := c.lay.keyOf(node, off)
	return key, ok && key < uint64(c.cfg.Keys)
}

// Counters implements protocolapi.Counterer: what the accesses cost in
// latch traffic, summed over the compute nodes (the contention the
// figures compare: failed CASes, readers that met a writer, back-offs).
func (c *cluster) Counters() []protocolapi.Counter {
	var sum counts
	for _, n := range c.computes {
		k := n.count
		sum.reads += k.reads
		sum.writes += k.writes
		sum.readsMetWriter += k.readsMetWriter
		sum.casFailed += k.casFailed
		sum.backoffs += k.backoffs
		sum.backoffNs += k.backoffNs
		sum.releases += k.releases
		sum.writeVerbs += k.writeVerbs
	}
	return []protocolapi.Counter{{Name: "reads", Value: sum.reads}, {Name: "writes", Value: sum.writes},
		{Name: "reads-met-writer", Value: sum.readsMetWriter}, {Name: "cas-failed", Value: sum.casFailed},
		{Name: "backoffs", Value: sum.backoffs}, {Name: "backoff-ns", Value: sum.backoffNs},
		{Name: "releases", Value: sum.releases}, {Name: "line-writes", Value: sum.writeVerbs}}
}
