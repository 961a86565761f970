package scenarios

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/gam"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/sel"
	"github.com/scalestore-go/scalestore/simrunner"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// CompareRow is what one system did on one configuration, summed over the
// seeds.
type CompareRow struct {
	Protocol string `json:"protocol"`
	Label    string `json:"label,omitempty"` // the figure's parameter, e.g. "nodes=4"
	Seeds    int    `json:"seeds"`
	Ops      int    `json:"ops"`
	// OpsPerSimSec is operations per simulated second of the workload
	// (from its first call to its last return).
	OpsPerSimSec  float64 `json:"ops_per_sim_sec"`
	MessagesPerOp float64 `json:"messages_per_op"`
	VerbsPerOp    float64 `json:"verbs_per_op"`
	// RoundTripsP50 is the median operation's latency in message round
	// trips of the latency model (2 x 2.3 us): the critical path's length.
	RoundTripsP50 float64 `json:"round_trips_p50"`
	// MemoryHandlerCalls counts the messages the nodes that hold the data
	// handled: ScaleStore's directory requests, SELCC's memory nodes'
	// (always 0).
	MemoryHandlerCalls uint64  `json:"memory_handler_calls"`
	P50us              float64 `json:"p50_us"`
	P99us              float64 `json:"p99_us"`
	// Shares is each compute node's share of the operations; Fairness
	// the least share over the largest (1: even).
	Shares   []float64 `json:"node_shares"`
	Fairness float64   `json:"fairness"`
	// WriterP50us and WriterP99us are node 0's latencies (the writer of a
	// SingleWriter run).
	WriterP50us float64 `json:"writer_p50_us"`
	WriterP99us float64 `json:"writer_p99_us"`
	Violations  int     `json:"violations"`
	// Timeline is the throughput (operations per simulated second) in
	// TimelineWindows equal windows of each seed's workload, averaged over
	// the seeds: a workload shift or a node joining shows in it.
	Timeline []float64 `json:"timeline_ops_per_sim_sec"`
}

// TimelineWindows is the number of windows of CompareRow.Timeline.
const TimelineWindows = 10

// Systems Compare runs through scenarios' own run loops: ScaleStore
// (chaining, the paper's), its conflict-handling baselines, and SELCC.
// Any other name is a plug-in protocol of the registry Compare is given,
// run by the generic runner (simrunner).
var compareSystems = []string{SystemScaleStore, SystemSELCC, "chaining", "fifo", "polling"}

// messageRTT is one message round trip of the default latency model.
var messageRTT = 2 * sim.DefaultLatency.Message

// seedRun is what one seed of one system did, as a row sums it.
type seedRun struct {
	ops            int
	msgs, verbs    uint64
	handlerCalls   uint64
	failed         bool
	workload       []checker.Op // the workload's operations (no final reads)
	clientsPerNode int
}

// Compare runs cfg with each system on seeds 1..seeds and sums what they
// did: the built-in systems only (CompareIn runs plug-ins too).
func Compare(cfg SimConfig, systems []string, seeds int, label string) ([]CompareRow, error) {
	return CompareIn(nil, cfg, systems, seeds, label)
}

// CompareIn runs cfg with each system on seeds 1..seeds and sums what they
// did. A system is a built-in (compareSystems) or a protocol registered
// in reg, which the generic runner runs on the same workload: cfg's
// compute nodes, workers, pages as keys, cache pages as cache lines,
// operations, read ratio, skew, locality, operation CPU and faults. The
// runs check as the swarm does; a violation is counted in the row, not an
// error.
func CompareIn(reg *protocolapi.Registry, cfg SimConfig, systems []string, seeds int, label string) ([]CompareRow, error) {
	return compare(reg, cfg, systems, seeds, label, CompareOptions{})
}

// CompareWith is CompareIn with opts: the plug-in protocols' own options
// and whether their invariants run after every step.
func CompareWith(reg *protocolapi.Registry, cfg SimConfig, systems []string, seeds int, label string, opts CompareOptions) ([]CompareRow, error) {
	return compare(reg, cfg, systems, seeds, label, opts)
}

// CompareOptions are what a figure or the command line adds to a
// comparison of plug-in protocols.
type CompareOptions struct {
	// Options are a protocol's own options (protocolapi.Option) by
	// protocol name: Options["gam-seq"]["memory-nodes"] = "2" (a
	// built-in's too: SimConfig.Options). An option the protocol does not
	// declare is an error.
	Options map[string]map[string]string
	// SkipStepChecks leaves out the plug-ins' invariants after every step
	// (simrunner.Config.SkipStepChecks): a key space of thousands, which
	// GAM's check walks at every step. At rest, the final reads and the
	// history are still checked.
	SkipStepChecks bool
}

// compare is CompareWith.
func compare(reg *protocolapi.Registry, cfg SimConfig, systems []string, seeds int, label string, opts CompareOptions) ([]CompareRow, error) {
	for name := range opts.Options {
		if !slices.Contains(systems, name) {
			return nil, fmt.Errorf("options for %s, which is not among the protocols compared (%s)", name, strings.Join(systems, ", "))
		}
	}
	var rows []CompareRow
	for _, sys := range systems {
		run, err := systemRunner(reg, sys, cfg, opts)
		if err != nil {
			return nil, err
		}
		nodes := cfg.Nodes + cfg.ComputeNodes
		row := CompareRow{Protocol: sys, Label: label, Seeds: seeds, Shares: make([]float64, nodes),
			Timeline: make([]float64, TimelineWindows)}
		var counted int
		var lat, wlat []int64
		var simNanos int64
		var msgs, verbs uint64
		perNode := make([]int, nodes)
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			sr, err := run(seed)
			if err != nil {
				return nil, err
			}
			if sr.failed {
				row.Violations++
			}
			row.Ops += sr.ops
			msgs += sr.msgs
			verbs += sr.verbs
			row.MemoryHandlerCalls += sr.handlerCalls
			var spans []checker.Op
			for _, op := range sr.workload {
				node := op.Client / sr.clientsPerNode
				if node >= nodes {
					continue // the final reads
				}
				spans = append(spans, op)
				perNode[node]++
				lat = append(lat, op.Return-op.Call)
				if node == 0 {
					wlat = append(wlat, op.Return-op.Call)
				}
			}
			n, span := throughputSpan(spans, cfg.Warmup)
			counted += n
			simNanos += span
			addTimeline(row.Timeline, spans, seeds)
		}
		if row.Ops > 0 {
			row.MessagesPerOp = float64(msgs) / float64(row.Ops)
			row.VerbsPerOp = float64(verbs) / float64(row.Ops)
		}
		if simNanos > 0 {
			row.OpsPerSimSec = float64(counted) / (float64(simNanos) / 1e9)
		}
		row.P50us, row.P99us = pct(lat, 0.5)/1e3, pct(lat, 0.99)/1e3
		row.WriterP50us, row.WriterP99us = pct(wlat, 0.5)/1e3, pct(wlat, 0.99)/1e3
		row.RoundTripsP50 = pct(lat, 0.5) / float64(messageRTT)
		total := 0
		for _, n := range perNode {
			total += n
		}
		if total > 0 {
			for i, n := range perNode {
				row.Shares[i] = float64(n) / float64(total)
			}
			if m := slices.Max(row.Shares); m > 0 {
				row.Fairness = slices.Min(row.Shares) / m
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// systemRunner returns the function that runs one seed of sys on cfg, or
// why sys cannot run it.
func systemRunner(reg *protocolapi.Registry, sys string, cfg SimConfig, opts CompareOptions) (func(seed uint64) (seedRun, error), error) {
	if slices.Contains(compareSystems, sys) {
		if _, ok := opts.Options[sys][OptionComputeNodes]; ok {
			// A row counts the nodes of cfg (Nodes, ComputeNodes).
			return nil, fmt.Errorf("%s: option %s: a comparison's compute nodes are its --nodes", sys, OptionComputeNodes)
		}
		c := cfg
		c.Options = opts.Options[sys]
		return func(seed uint64) (seedRun, error) { return runBuiltIn(sys, c, seed) }, nil
	}
	var p protocolapi.Protocol
	ok := false
	if reg != nil {
		p, ok = reg.Lookup(sys)
	}
	if !ok || p.Deploy == nil {
		names := slices.Clone(compareSystems)
		if reg != nil {
			for _, q := range reg.All() {
				if q.Deploy != nil {
					names = append(names, q.Name)
				}
			}
		}
		return nil, fmt.Errorf("--protocols: %q is none of %s", sys, strings.Join(names, ", "))
	}
	base, err := plugInConfig(p, cfg, opts.Options[sys])
	if err != nil {
		return nil, err
	}
	base.SkipStepChecks = opts.SkipStepChecks
	return func(seed uint64) (seedRun, error) {
		c := base
		c.Seed = seed
		res, err := simrunner.Run(p, c)
		if err != nil {
			return seedRun{}, err
		}
		ops := res.History.Ops()[:res.WorkloadOps]
		// Every message a plug-in sends is handled by a role's CPU (its
		// verbs by none): SEL's count is 0 as SELCC's, GAM's is every
		// request, forward and invalidation its serial queues served.
		return seedRun{ops: res.WorkloadOps, msgs: res.WorkloadMessages, verbs: res.WorkloadVerbs,
			handlerCalls: res.WorkloadMessages, failed: res.Failed(), workload: ops, clientsPerNode: cfg.Workers}, nil
	}, nil
}

// runBuiltIn runs one seed of a system of scenarios' own run loops.
func runBuiltIn(sys string, cfg SimConfig, seed uint64) (seedRun, error) {
	c := cfg
	c.Seed, c.System = seed, sys
	switch sys {
	case SystemScaleStore:
		c.System = ""
	case "chaining", "fifo", "polling":
		v, err := protocol.ParseVariant(sys)
		if err != nil {
			return seedRun{}, err
		}
		c.System, c.Protocol = "", v
	}
	res, err := RunSim(c)
	if err != nil {
		return seedRun{}, err
	}
	// The messages a node's CPU handled: SELCC's memory nodes' (none by
	// design), ScaleStore's directories' (each run loop counts only its
	// own kind, the other is 0).
	return seedRun{ops: res.Ops, msgs: res.Messages, verbs: res.Verbs, failed: res.Failed(),
		workload: res.History.Ops(), clientsPerNode: cfg.Workers, handlerCalls: res.MemoryHandlerCalls + res.DirectoryMessages}, nil
}

// plugInConfig is cfg for the generic runner, or why a plug-in protocol
// cannot run it: the settings that only scenarios' own run loops model
// are refused, never dropped.
func plugInConfig(p protocolapi.Protocol, cfg SimConfig, options map[string]string) (simrunner.Config, error) {
	var not []string
	for _, f := range []struct {
		set  bool
		name string
	}{
		{cfg.ComputeNodes > 0, "compute nodes"}, {cfg.Elastic, "elastic membership"},
		{cfg.SingleWriter, "a single writer"}, {cfg.Partitioned || cfg.ShiftAt > 0, "partitioned accesses"},
		{cfg.HandleCost > 0, "a CPU cost per handled message"}, {cfg.HoldNanos > 0, "a local latch hold time"},
		{cfg.DirectWrites, "direct writes"}, {cfg.Mutate != "", "a built-in mutant"},
	} {
		if f.set {
			not = append(not, f.name)
		}
	}
	if len(not) > 0 {
		return simrunner.Config{}, fmt.Errorf("protocol %s runs on the generic runner, which does not model %s", p.Name, strings.Join(not, ", "))
	}
	c := simrunner.Config{Nodes: cfg.Nodes, Workers: cfg.Workers, Keys: cfg.Pages, CacheLines: cfg.CachePages,
		Ops: cfg.Ops, ReadRatio: cfg.ReadRatio, Zipf: cfg.Zipf, Workload: cfg.Workload, Faults: cfg.Faults,
		Locality: cfg.Locality, OpNanos: cfg.OpNanos, WriteNanos: cfg.WriteNanos, Watch: -1, CheckTimeout: cfg.CheckTimeout,
		Options: options}
	if err := simrunner.Check(p, c); err != nil {
		return simrunner.Config{}, err
	}
	return c, nil
}

// throughputSpan is what a seed's throughput counts: the operations after
// the warm-up share (by call), and the simulated time from the first of
// them to the last return (set-up and final checks left out).
func throughputSpan(ops []checker.Op, warmup float64) (n int, span int64) {
	if len(ops) == 0 {
		return 0, 0
	}
	slices.SortFunc(ops, func(a, b checker.Op) int { return cmp.Compare(a.Call, b.Call) })
	ops = ops[int(warmup*float64(len(ops))):]
	if len(ops) == 0 {
		return 0, 0
	}
	last := int64(0)
	for _, op := range ops {
		last = max(last, op.Return)
	}
	return len(ops), last - ops[0].Call
}

// addTimeline adds one seed's throughput in TimelineWindows windows of its
// workload (ops sorted by call; each counted in the window of its return)
// to timeline, as one of seeds.
func addTimeline(timeline []float64, ops []checker.Op, seeds int) {
	if len(ops) == 0 {
		return
	}
	first, last := ops[0].Call, int64(0)
	for _, op := range ops {
		last = max(last, op.Return)
	}
	width := (last - first + int64(len(timeline)) - 1) / int64(len(timeline))
	if width <= 0 {
		return
	}
	for _, op := range ops {
		i := min(int((op.Return-first)/width), len(timeline)-1)
		timeline[i] += 1 / (float64(width) / 1e9) / float64(seeds)
	}
}

func pct(xs []int64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	return float64(xs[int(p*float64(len(xs)-1))])
}

// Figure is a named run of SELCC's evaluation: configurations side by
// side, one table.
type Figure struct {
	Name  string
	Paper string
	About string
	// Points are the configurations, each with its label; Systems the
	// systems each runs.
	Points  func(base SimConfig) []FigurePoint
	Systems []string
	// Base is the configuration Points starts from (nil: figureBase).
	Base func() SimConfig
	// Nodes, for the figures that take --nodes, are the node counts of
	// Points: NodePoints builds them from the counts given.
	Nodes      []int
	NodePoints func(base SimConfig, nodes []int) []FigurePoint
	// XKey names the label's key the plot puts on its x axis (the rest of
	// the label and the protocol name a line); Timeline plots throughput
	// over the windows of the run instead (CompareRow.Timeline).
	XKey     string
	Timeline bool
	// SkipStepChecks runs the plug-in protocols without their invariants
	// after every step (at rest, the final reads and the history are
	// still checked): a figure of thousands of keys, which GAM's check
	// walks at every step.
	SkipStepChecks bool
	// Options are the plug-in protocols' own options, by protocol name
	// (GAM's memory nodes, as SELCC's evaluation runs it).
	Options map[string]map[string]string
}

// FigurePoint is one configuration of a figure.
type FigurePoint struct {
	Label string
	Cfg   SimConfig
}

// figureBase is the shape every figure starts from: 4 compute nodes of 3
// workers, 48 lines cached in 12 frames a node, 2,000 operations, no
// faults (a figure measures; the swarm checks).
func figureBase() SimConfig {
	c := DefaultSimConfig()
	c.Nodes, c.Workers, c.Pages, c.CachePages, c.Ops, c.ReadRatio, c.Zipf, c.Faults = 4, 3, 48, 48, 2000, 0.5, 0, "none"
	return c
}

// Figures are SELCC's figures this simulator reproduces (trends, not its
// hardware's absolute figures).
var Figures = []Figure{
	{Name: "selcc-fig12", Paper: "SELCC Fig. 12", About: "scalability: compute nodes 1, 2, 4, 8 at 50% and 95% reads, uniform (the paper shows SELCC alone; SEL and GAM beside it here)",
		Systems: []string{SystemScaleStore, SystemSELCC, sel.Name, gam.NameTSO, gam.NameSEQ}, Options: baselineOptions,
		Points: func(b SimConfig) []FigurePoint {
			var ps []FigurePoint
			for _, rr := range []float64{0.5, 0.95} {
				for _, n := range []int{1, 2, 4, 8} {
					c := b
					c.Nodes, c.ReadRatio = n, rr
					ps = append(ps, FigurePoint{fmt.Sprintf("reads=%.0f%% nodes=%d", rr*100, n), c})
				}
			}
			return ps
		}},
	{Name: "selcc-fig13", Paper: "SELCC Fig. 13",
		About:   "locality: an access goes to its thread's previous line with probability 0.5, else uniformly to 8,192 lines; 8 compute nodes of 1, 2, 4, 8 threads; 95%, 50%, 0% reads",
		Systems: baselineSystems, Options: baselineOptions, SkipStepChecks: true, XKey: "threads",
		Base: func() SimConfig {
			c := selccThreadsBase()
			// Far more lines than the run touches: as on the paper's 24M
			// lines, a cache hits only what locality brings back.
			c.Pages, c.CachePages, c.Locality = 8192, 2048, 0.5
			return c
		},
		Points: selccThreadPoints},
	{Name: "selcc-fig14", Paper: "SELCC Fig. 14",
		About:   "skew: zipf 0.99 over 128 lines; 8 compute nodes of 1, 2, 4, 8 threads; 95%, 50%, 0% reads",
		Systems: baselineSystems, Options: baselineOptions, SkipStepChecks: true, XKey: "threads",
		Base: func() SimConfig {
			c := selccThreadsBase()
			// zipf 0.99 over 128 lines: the hot set the paper's skew puts
			// on 24M lines, small enough that a run of 8,000 operations
			// finds it cached.
			c.Pages, c.CachePages, c.Zipf = 128, 128, 0.99
			return c
		},
		Points: selccThreadPoints},
	{Name: "selcc-fig15", Paper: "SELCC Fig. 15", About: "fairness: node 0 only writes, nodes 1-3 only read 4 hot lines (6 workers a node, 1 us in each access); the lease (gamma) and the priority on and off",
		Systems: []string{SystemSELCC},
		Points: func(b SimConfig) []FigurePoint {
			var ps []FigurePoint
			for _, v := range []struct {
				gamma float64
				prio  bool
			}{{-1, false}, {-1, true}, {DefaultGamma, false}, {DefaultGamma, true}} {
				c := b
				c.Pages, c.SingleWriter, c.Gamma, c.NoPriority = 4, true, v.gamma, !v.prio
				c.Workers, c.HoldNanos = 6, 1_000 // local threads queue for the latch: the lease has work
				g := "off"
				if v.gamma > 0 {
					g = fmt.Sprint(v.gamma)
				}
				ps = append(ps, FigurePoint{fmt.Sprintf("gamma=%s priority=%v", g, v.prio), c})
			}
			return ps
		}},
	{Name: "selcc-fig16", Paper: "SELCC Fig. 16", About: "less CPU where the data lives: each handled message costs the data's node 0, 2, 10, 50 us of CPU (SELCC's memory nodes handle none)",
		Systems: []string{SystemScaleStore, SystemSELCC},
		Points: func(b SimConfig) []FigurePoint {
			var ps []FigurePoint
			for _, us := range []int64{0, 2, 10, 50} {
				c := b
				c.HandleCost = us * 1000
				ps = append(ps, FigurePoint{fmt.Sprintf("cpu/msg=%dus", us), c})
			}
			return ps
		}},
}

// baselineSystems are every system SELCC's Fig. 13 and 14 compare: SELCC,
// SEL, GAM in TSO and SEQ mode, and ScaleStore.
var baselineSystems = []string{SystemSELCC, sel.Name, gam.NameTSO, gam.NameSEQ, SystemScaleStore}

// baselineOptions run GAM as SELCC's evaluation does, on disaggregated
// memory: memory nodes (as many as SELCC's and SEL's) home every line,
// each with GAM's one serial worker, and the compute nodes only cache.
var baselineOptions = map[string]map[string]string{
	gam.NameTSO: {"memory-nodes": fmt.Sprint(DefaultMemoryNodes)},
	gam.NameSEQ: {"memory-nodes": fmt.Sprint(DefaultMemoryNodes)},
}

// selccThreadsBase is SELCC Fig. 13's and 14's deployment: 8 compute
// nodes, 8,000 operations, no faults.
func selccThreadsBase() SimConfig {
	c := figureBase()
	c.Nodes, c.Ops = 8, 8000
	return c
}

// selccThreadPoints are Fig. 13's and 14's x axis, threads across the 8
// compute nodes (1, 2, 4, 8 a node), at 95%, 50% and 0% reads.
func selccThreadPoints(b SimConfig) []FigurePoint {
	var ps []FigurePoint
	for _, rr := range []float64{0.95, 0.5, 0} {
		for _, w := range []int{1, 2, 4, 8} {
			c := b
			c.ReadRatio, c.Workers = rr, w
			ps = append(ps, FigurePoint{fmt.Sprintf("reads=%.0f%% threads=%d", rr*100, w*c.Nodes), c})
		}
	}
	return ps
}

// FigureByName finds a figure.
func FigureByName(name string) (*Figure, error) {
	for i := range Figures {
		if Figures[i].Name == name {
			return &Figures[i], nil
		}
	}
	for i := range ScaleStoreFigures {
		if ScaleStoreFigures[i].Name == name {
			return &ScaleStoreFigures[i], nil
		}
	}

	return nil, fmt.Errorf("unknown figure %q ('scalestore figure list' names them)", name)
}

// RunFigure runs every point of f on its systems over seeds seeds; nodes,
// when set, replaces the node counts of a figure that has them (Nodes).
// It runs the built-in systems only: RunFigureIn finds plug-ins.
func RunFigure(f *Figure, seeds int, nodes []int, progress func(label string)) ([]CompareRow, error) {
	return RunFigureIn(nil, f, seeds, nodes, progress)
}

// RunFigureIn is RunFigure with the plug-in protocols of reg (SEL, GAM):
// a figure that names a protocol reg does not hold is an error that says
// which.
func RunFigureIn(reg *protocolapi.Registry, f *Figure, seeds int, nodes []int, progress func(label string)) ([]CompareRow, error) {
	base := figureBase()
	if f.Base != nil {
		base = f.Base()
	}
	var points []FigurePoint
	switch {
	case f.NodePoints != nil:
		if len(nodes) == 0 {
			nodes = f.Nodes
		}
		for _, n := range nodes {
			if n < 1 || n > 256 {
				return nil, fmt.Errorf("--nodes %d: want 1..256", n)
			}
		}
		points = f.NodePoints(base, nodes)
	case len(nodes) > 0:
		return nil, fmt.Errorf("%s has no --nodes (its node counts are its subject)", f.Name)
	default:
		points = f.Points(base)
	}
	var rows []CompareRow
	for _, p := range points {
		if progress != nil {
			progress(p.Label)
		}
		rs, err := compare(reg, p.Cfg, f.Systems, seeds, p.Label, CompareOptions{Options: f.Options, SkipStepChecks: f.SkipStepChecks})
		if err != nil {
			return nil, err
		}
		rows = append(rows, rs...)
	}
	return rows, nil
}
