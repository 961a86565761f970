package scenarios

import (
	"github.com/scalestore-go/scalestore/index/cell"
	"github.com/scalestore-go/scalestore/index/nam"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// CellMeganodesPerServer is how many leaf meganodes the cell workload lays
// out per memory server (the key range split evenly, round-robin).
const CellMeganodesPerServer = 2

// setupCell lays out m Cell servers for the cell workload: the root
// meganode on the first, leaf meganodes round-robin over all, nodes of
// fanout 4 so that a few hundred keys split nodes and meganode roots.
func (r *namRun) setupCell(m int) error {
	cfg, w := r.cfg, r.w
	how, err := cell.ParseSearch(cfg.CellSearch)
	if err != nil {
		return err
	}
	keys := uint64(cfg.Keys)
	slots := 32 + 4*keys/uint64(m)
	layout := &cell.Layout{Slots: slots, CacheLevel: cfg.CellCacheLevel, ScanBatch: r.scanBatch}
	servers := make([]*cell.Server, m)
	for i := range m {
		id := protocol.NodeID(cfg.Nodes + i)
		mem := alignedBytes(int(slots) * cell.NodeSize)
		r.mem = append(r.mem, mem)
		layout.Regions = append(layout.Regions, w.Register(id, mem))
		servers[i] = &cell.Server{MegaNodes: cfg.CellMegaNodes, Mutations: cell.ServerMutations{
			StaleHint:         mutation.Point(mutation.CellStaleHint, func() bool { return true }),
			SplitWritesRight:  mutation.Point(mutation.CellSplitWritesRight, func() bool { return true }),
			SplitEarlyUnlock:  mutation.Point(mutation.CellSplitEarlyUnlock, func() bool { return true }),
			SplitNoInvalidate: mutation.Point(mutation.CellSplitNoInvalidate, func() bool { return true }),
		}}
	}
	if err := cell.Format(layout, r.mem, servers, cell.Lows(CellMeganodesPerServer*m, keys), r.fanout); err != nil {
		return err
	}
	for i, s := range servers {
		id := protocol.NodeID(cfg.Nodes + i)
		r.servers = append(r.servers, s)
		w.Attach(id, &cellServerReceiver{namServerReceiver: namServerReceiver{r, s, id}, s: s, servers: m, splitAt: -1})
		if cfg.HandleCost > 0 {
			w.SetHandleCost(id, cfg.HandleCost)
		}
		if sp := cfg.CellSpikes; sp.Every > 0 && cfg.HandleCost > 0 {
			var spike func()
			spike = func() {
				w.SetHandleCost(id, cfg.HandleCost*sp.Factor)
				w.After(id, sp.Len, func() {
					w.SetHandleCost(id, cfg.HandleCost)
					w.After(id, sp.Every-sp.Len, spike)
				})
			}
			w.After(id, sp.Every-sp.Len, spike)
		}
	}
	r.calls = func() (n uint64) {
		for _, s := range servers {
			n += s.Calls
		}
		return n
	}
	r.cellLayout, r.cellServers = layout, servers
	r.atRest = func() error {
		for _, s := range servers {
			if err := s.CheckFree(); err != nil {
				return err
			}
		}
		_, _, err := cell.CheckTree(layout, r.mem)
		return err
	}
	w.SetVerbTrace(func(at int64, v *sim.Verb) {
		if v.Kind != sim.VerbRead && int(v.From) < cfg.Nodes {
			r.fail("client node %d issued a %v to server %d: Cell's servers do every write", v.From, v.Kind, int(v.Region.Node)-cfg.Nodes)
		}
	})
	r.newClient = func(f nam.Fabric, client int) indexClient {
		c := &cell.Client{L: layout, F: f, Search: how, Now: w.Now, Rand: w.Rand,
			NoOutlierRejection: cfg.CellNoDefenses, NoHistoryExpiry: cfg.CellNoDefenses,
			Mut: cell.Mutations{
				NoMoveRight: mutation.Point(mutation.CellNoMoveRight, func() bool { return true }),
				CacheLeaves: mutation.Point(mutation.CellCacheLeaves, func() bool { return true }),
				NoLowCheck:  mutation.Point(mutation.CellNoLowCheck, func() bool { return true }),
			}}
		r.cellClients = append(r.cellClients, c)
		return c
	}
	return nil
}

// cellServerReceiver is a Cell server in the world: it answers calls, and
// between them runs the meganode split under way one step at a time (each
// a server event, so that clients' READs and other calls interleave with
// the split's copies, relink and invalidations), and sends the calls its
// server makes to servers (a split's reserve, adopts and unlock, its link
// to the root meganode's server), whose replies come back here.
type cellServerReceiver struct {
	namServerReceiver
	s        *cell.Server
	servers  int
	stepping bool
	// splitAt is when the split under way started (-1: none), done the
	// splits finished so far: for the splits' mean time.
	splitAt int64
	done    uint64
}

// cellStepNanos is the CPU time of one step of a meganode split when the
// servers' handling is free (HandleCost 0).
const cellStepNanos = 500

func (c *cellServerReceiver) Deliver(m *protocol.Message, payload []byte) {
	if m.Type == protocol.TIndexReply {
		// A server's reply to this server's call.
		if int(m.From) < c.r.cfg.Nodes {
			c.r.fail("memory server %d received %v from a compute node", c.id, m)
			return
		}
		if err := c.s.HandleReply(payload); err != nil {
			c.r.fail("memory server %d: %v", c.id, err)
			return
		}
	} else {
		c.namServerReceiver.Deliver(m, payload)
	}
	c.flush()
	c.kick()
}

// flush sends the calls the server made to servers; a call to itself is
// answered at once. It also times the splits.
func (c *cellServerReceiver) flush() {
	for out := c.s.TakeOutgoing(); len(out) > 0; out = c.s.TakeOutgoing() {
		for _, o := range out {
			to := protocol.NodeID(c.r.cfg.Nodes + o.To)
			if to == c.id {
				if err := c.s.HandleReply(c.s.Handle(o.Req, nil)); err != nil {
					c.r.fail("memory server %d: %v", c.id, err)
				}
				continue
			}
			msg := protocol.Message{Type: protocol.TIndexCall, From: c.id, To: to, Count: uint16(len(o.Req))}
			c.r.w.Send(&msg, o.Req)
		}
	}
	if d := c.s.Done(); d > c.done {
		c.done = d
		if c.splitAt >= 0 {
			c.r.cellSplitNanos += c.r.w.Now() - c.splitAt
			c.r.cellSplitsTimed++
		}
		c.splitAt = -1
	}
	if c.splitAt < 0 && c.s.Splitting() {
		c.splitAt = c.r.w.Now()
	}
}

// kick schedules the next step of a meganode split if it can step.
func (c *cellServerReceiver) kick() {
	if c.stepping || !c.s.Ready() {
		return
	}
	c.stepping = true
	cost := c.r.cfg.HandleCost
	if cost <= 0 {
		cost = cellStepNanos
	}
	c.r.w.After(c.id, cost, func() {
		c.stepping = false
		if _, err := c.s.Step(); err != nil {
			c.r.fail("memory server %d: %v", c.id, err)
			return
		}
		// A step takes the server's CPU as a call does (its calls wait).
		c.r.w.Spend(c.id, c.r.cfg.HandleCost)
		c.flush()
		c.kick()
	})
}
