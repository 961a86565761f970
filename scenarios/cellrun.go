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
		servers[i] = &cell.Server{Mutations: cell.ServerMutations{
			StaleHint: mutation.Point(mutation.CellStaleHint, func() bool { return true }),
		}}
	}
	if err := cell.Format(layout, r.mem, servers, cell.Lows(CellMeganodesPerServer*m, keys), r.fanout); err != nil {
		return err
	}
	for i, s := range servers {
		id := protocol.NodeID(cfg.Nodes + i)
		r.servers = append(r.servers, s)
		w.Attach(id, namServerReceiver{r, s, id})
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
			}}
		r.cellClients = append(r.cellClients, c)
		return c
	}
	return nil
}
