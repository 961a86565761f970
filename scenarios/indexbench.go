package scenarios

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/scalestore-go/scalestore/index/cell"
	"github.com/scalestore-go/scalestore/index/nam"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// IndexBench is one point of an index experiment in the simulator: a tree
// of Keys keys loaded before the clock starts, then Clients closed-loop
// clients (one per compute node) for Duration of simulated time, no
// faults. It measures; the workloads of RunSim check.
type IndexBench struct {
	Workload string // nam-cg, nam-fg, nam-hybrid or cell
	Servers  int
	Clients  int
	Keys     uint64
	// Fanout is the entries per node (default 16).
	Fanout int
	// Skewed: the NAM-tree's servers own 80/12/5/3% of the keys (the
	// paper's skewed partitions), accessed uniformly.
	Skewed bool
	// ScanLen: 0 for point gets, else scans of ScanLen keys; PutRatio the
	// share of puts (of existing keys).
	ScanLen  int
	PutRatio float64
	// HandleCost is a server's CPU time per call, VerbCost its NIC's per
	// one-sided verb (0: free).
	HandleCost, VerbCost int64
	// Search and CacheLevel: Cell's clients (see SimConfig).
	Search     string
	CacheLevel int
	// Duration is the measured simulated time (ns), after a fifth as much
	// warm-up (the selector learns, caches fill).
	Duration int64
	Seed     uint64
	// Spikes stall the servers periodically; NoDefenses turns off the
	// selector's outlier rejection and history expiry (Cell).
	Spikes     Spikes
	NoDefenses bool
	// MegaNodes: Cell's leaf meganodes split past this many nodes (0:
	// never). Writers, above 0, are more clients that put the keys the
	// load left out (it loads the even keys only), in a random order, for
	// the whole run: the tree grows under the Clients' searches, whose
	// latencies alone the result reports (Cell Fig. 8).
	MegaNodes, Writers int
	// HeadGroup, above 0, installs head nodes of that many leaves (FG,
	// hybrid) after the load, once (the bench's puts change no leaf
	// groups the pass would: they overwrite loaded keys), and scans
	// prefetch through them.
	HeadGroup int
}

// IndexBenchResult is what one point measured, per completed operation
// in the measured window.
type IndexBenchResult struct {
	Ops          int     `json:"ops"`
	OpsPerSec    float64 `json:"ops_per_sim_sec"`
	P50us        float64 `json:"p50_us"`
	P90us        float64 `json:"p90_us"`
	P99us        float64 `json:"p99_us"`
	CallsPerOp   float64 `json:"calls_per_op"`
	VerbsPerOp   float64 `json:"verbs_per_op"`
	RoundTrips   float64 `json:"round_trips_per_op"`
	BytesPerOp   float64 `json:"bytes_per_op"`
	ServerShare  float64 `json:"server_side_share"` // cell: searches done server-side
	ServerCPU    float64 `json:"server_cpu_us_per_op"`
	ServerLoad   float64 `json:"server_utilization"` // the busiest server's CPU busy share
	ErrorMessage string  `json:"error,omitempty"`
	// Waits are the round trips the client waited for: RoundTrips, less
	// the READs that went in a batch with others (head nodes' prefetch).
	Waits float64 `json:"waits_per_op"`
	// Cell with MegaNodes: the meganode splits finished in the measured
	// window, their mean time from start to end, the writers' puts.
	MegaSplits  int     `json:"meganode_splits,omitempty"`
	SplitMicros float64 `json:"meganode_split_us,omitempty"`
	WriterPuts  int     `json:"writer_puts,omitempty"`
}

// RunIndexBench runs one point.
func RunIndexBench(b IndexBench) (IndexBenchResult, error) {
	var res IndexBenchResult
	if b.Fanout == 0 {
		b.Fanout = 16
	}
	if b.Clients < 1 || b.Servers < 1 || b.Keys < 1 || b.Duration <= 0 {
		return res, fmt.Errorf("index bench: %d clients, %d servers, %d keys, %d ns: want each at least 1", b.Clients, b.Servers, b.Keys, b.Duration)
	}
	cfg := DefaultSimConfig()
	cfg.Workload, cfg.Nodes, cfg.Keys, cfg.Seed = b.Workload, b.Clients+b.Writers, int(b.Keys), b.Seed
	cfg.CellMegaNodes = b.MegaNodes
	cfg.HandleCost, cfg.CellSearch, cfg.CellCacheLevel, cfg.Ops = b.HandleCost, b.Search, b.CacheLevel, 0
	cfg.CellSpikes, cfg.CellNoDefenses = b.Spikes, b.NoDefenses
	cfg.NAMHeadGroup = b.HeadGroup
	r, err := newNAMRun(cfg, b.Servers, sim.FaultPlan{}, b.Fanout, 0, b.Skewed)
	if err != nil {
		return res, err
	}
	w := r.w
	nodes := b.Clients + b.Writers
	for i := range b.Servers {
		if b.VerbCost > 0 {
			w.SetVerbCost(protocol.NodeID(nodes+i), b.VerbCost)
		}
	}
	// Load directly through the servers' state machines and memory, in a
	// random order, outside simulated time.
	loader := r.newClient(directFabric{r}, nodes)
	rng := rand.New(rand.NewPCG(b.Seed, 0x10AD))
	for _, k := range rng.Perm(int(b.Keys)) {
		if b.Writers > 0 && k%2 == 1 {
			continue
		}
		if err := loader.Put(uint64(k), uint64(k)+1); err != nil {
			return res, fmt.Errorf("index bench: loading key %d: %w", k, err)
		}
	}
	if r.headGroup > 0 {
		pass := &nam.Client{L: r.layout, F: directFabric{r}, Alloc: nodes + 1}
		if _, err := pass.RefreshHeads(r.headGroup); err != nil {
			return res, fmt.Errorf("index bench: head pass: %w", err)
		}
	}
	r.cellClients = nil
	warm := b.Duration / 5
	end := warm + b.Duration
	var lat []int64
	var calls0, msgs0, verbs0, bytes0, waits0 uint64
	var cpu0 []int64
	splits := func() (n uint64) {
		for _, s := range r.cellServers {
			n += s.MegaSplits
		}
		return n
	}
	var splits0 uint64
	var splitNanos0 int64
	var timed0, puts, putsEnd int
	snap := func() {
		calls0, msgs0, waits0 = r.calls(), w.Messages, r.waits
		verbs0, bytes0 = w.VerbStats()
		bytes0 += w.PageBytes
		cpu0 = w.BusyTimes(nodes, b.Servers)
		splits0, splitNanos0, timed0 = splits(), r.cellSplitNanos, r.cellSplitsTimed
		puts = 0
	}
	w.At(0, warm, snap)
	w.At(0, end, func() {
		putsEnd = puts
		res.MegaSplits = int(splits() - splits0)
		if n := r.cellSplitsTimed - timed0; n > 0 {
			res.SplitMicros = float64(r.cellSplitNanos-splitNanos0) / float64(n) / 1e3
		}
	})
	var cos []*sim.Coroutine
	var searchers []*cell.Client // the Clients' (not the writers')
	odd := rng.Perm(int(b.Keys / 2))
	for k := range b.Writers {
		cos = append(cos, w.Spawn(protocol.NodeID(b.Clients+k), w.Intn(1000), func(co *sim.Coroutine) {
			c := r.newClient(&simFabric{r: r, node: protocol.NodeID(b.Clients + k), co: co}, b.Clients+k)
			for i := k; i < len(odd) && w.Now() < end; i += b.Writers {
				key := uint64(2*odd[i] + 1)
				if err := c.Put(key, key+1); err != nil {
					r.fail("writer %d, key %d: %v", k, key, err)
					return
				}
				puts++
			}
		}))
	}
	for k := range b.Clients {
		cos = append(cos, w.Spawn(protocol.NodeID(k), w.Intn(1000), func(co *sim.Coroutine) {
			c := r.newClient(&simFabric{r: r, node: protocol.NodeID(k), co: co}, k)
			if cc, ok := c.(*cell.Client); ok {
				searchers = append(searchers, cc)
			}
			for w.Now() < end {
				start := w.Now()
				key := w.Rand() % b.Keys
				var err error
				switch {
				case b.PutRatio > 0 && w.Chance(b.PutRatio):
					err = c.Put(key, key+2)
				case b.ScanLen > 0:
					err = c.Scan(key, key+uint64(b.ScanLen), func(uint64, uint64) bool { return true })
				default:
					_, _, err = c.Get(key)
				}
				if err != nil {
					r.fail("client %d, key %d: %v", k, key, err)
					return
				}
				if start >= warm && w.Now() <= end {
					lat = append(lat, w.Now()-start)
				}
			}
		}))
	}
	for !allDone(cos) && r.viol.Count() == 0 {
		if !w.Step() {
			break
		}
	}
	if r.viol.Count() > 0 {
		return res, fmt.Errorf("index bench %s: %s", b.Workload, r.viol.List()[0])
	}
	res.Ops = len(lat)
	if res.Ops == 0 {
		return res, fmt.Errorf("index bench %s: no operation completed in %d ns", b.Workload, b.Duration)
	}
	ops := float64(res.Ops)
	res.OpsPerSec = ops / (float64(b.Duration) / 1e9)
	slices.Sort(lat)
	res.P50us, res.P99us = float64(lat[len(lat)/2])/1e3, float64(lat[len(lat)*99/100])/1e3
	res.P90us = float64(lat[len(lat)*9/10]) / 1e3
	verbs, bytes := w.VerbStats()
	// Operations that straddle the window's ends make these approximate
	// by at most Clients operations' worth.
	res.CallsPerOp = float64(r.calls()-calls0) / ops
	res.VerbsPerOp = float64(verbs-verbs0) / ops
	res.RoundTrips = float64(w.Messages-msgs0)/2/ops + res.VerbsPerOp
	res.BytesPerOp = float64(bytes+w.PageBytes-bytes0) / ops
	res.Waits = float64(r.waits-waits0) / ops
	res.ServerCPU = res.CallsPerOp * float64(b.HandleCost) / 1e3
	res.WriterPuts = putsEnd
	for i, busy := range w.BusyTimes(nodes, b.Servers) {
		res.ServerLoad = max(res.ServerLoad, float64(busy-cpu0[i])/float64(b.Duration))
	}
	var ss, cs uint64
	for _, c := range searchers {
		ss, cs = ss+c.Stats.ServerSearches, cs+c.Stats.ClientSearches
	}
	if ss+cs > 0 {
		res.ServerShare = float64(ss) / float64(ss+cs)
	}
	return res, nil
}

// directFabric reaches the servers' memory and state machines at once,
// outside simulated time: for loading a tree before a run.
type directFabric struct{ r *namRun }

func (f directFabric) mem(rg transport.Region) []byte { return f.r.mem[int(rg.Node)-f.r.computes] }

func (f directFabric) Read(dst []byte, rg transport.Region, off uint64) error {
	copy(dst, f.mem(rg)[off:])
	return nil
}

func (f directFabric) Write(rg transport.Region, off uint64, src []byte) error {
	copy(f.mem(rg)[off:], src)
	return nil
}

func (f directFabric) CompareAndSwap(rg transport.Region, off, old, new uint64) (uint64, error) {
	b := f.mem(rg)[off:]
	prev := binary.LittleEndian.Uint64(b)
	if prev == old {
		binary.LittleEndian.PutUint64(b, new)
	}
	return prev, nil
}

func (f directFabric) FetchAndAdd(rg transport.Region, off, delta uint64) (uint64, error) {
	b := f.mem(rg)[off:]
	prev := binary.LittleEndian.Uint64(b)
	binary.LittleEndian.PutUint64(b, prev+delta)
	return prev, nil
}

// Call answers at once; a Cell meganode split the call started is run to
// its end, with the calls between servers it makes, before it returns.
func (f directFabric) Call(server int, req, out []byte) ([]byte, error) {
	out = f.r.servers[server].Handle(req, out)
	for busy := true; busy; {
		busy = false
		for _, s := range f.r.cellServers {
			if s.Ready() {
				if _, err := s.Step(); err != nil {
					return out, err
				}
				busy = true
			}
			for _, o := range s.TakeOutgoing() {
				if err := s.HandleReply(f.r.cellServers[o.To].Handle(o.Req, nil)); err != nil {
					return out, err
				}
				busy = true
			}
		}
	}
	return out, nil
}

var _ nam.Fabric = directFabric{}
