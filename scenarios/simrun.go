package scenarios

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/index/indexdesign"
	"github.com/scalestore-go/scalestore/linecache"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// SimConfig configures one simulated run of the page-register workload.
type SimConfig struct {
	Seed       uint64
	Nodes      int
	Workers    int // per node
	Pages      int
	CachePages int // per node
	Ops        int // across the cluster
	ReadRatio  float64
	Zipf       float64
	Faults     string
	Protocol   protocol.Variant
	Mutate     string
	// Workload is "register" (pages as registers, blind writes), "rmw"
	// (pages as registers whose writes read first: every write is a
	// read-modify-write, so a lost update is a violation) or "btree" (the
	// B-tree of paper §5.2 over Keys keys, history per key).
	Workload string
	Keys     int
	// Trace, when set, receives one line per network message.
	Trace io.Writer
	// WatchPage, when at least 0, adds to the trace every directory decision
	// and every change of a node's copy of that page (a page index).
	WatchPage int
	// Steps, when set, receives the run's messages as chart steps (the
	// trace viewer's input): with WatchPage, only the messages about that
	// page, each with its directory's state after it; at most MaxSteps.
	Steps *[]Step
	// CheckTimeout bounds porcupine's search (0: no bound).
	CheckTimeout time.Duration
	// PorcupineOnly searches every page's history with porcupine, none
	// decided by zones (checker.CheckPorcupine): the reference verdict.
	PorcupineOnly bool
	// MessageBudget is the most network messages per completed operation
	// the run may send: 0 takes the calibrated budget of this
	// configuration if it has one (see MessageBudget), below 0 none.
	MessageBudget float64
	// SkipLinearizability skips porcupine (the invariants still run).
	SkipLinearizability bool
	// Progress, when set, is called now and then with the operations
	// completed so far (the simulation does not depend on it).
	Progress func(done, total int)

	// System is the coherence protocol under the workload: "" or
	// SystemScaleStore (directories, Protocol's conflict handling) or
	// SystemSELCC (latch words on passive memory nodes; Nodes are then
	// the compute nodes).
	System string
	// Options are the registered protocol's own options by name
	// (protocolapi.Option: SELCC's memory nodes, gamma and priority, the
	// index designs' memory servers), as the command line gives them;
	// RunSim sets the fields below from them (applyOptions). An option
	// the protocol does not have is an error.
	Options map[string]string
	// MemoryNodes is SELCC's passive memory nodes (0: DefaultMemoryNodes).
	MemoryNodes int
	// Gamma is SELCC's local-handover threshold (0: DefaultGamma, below
	// 0: off); NoPriority turns its starved-writer priority off.
	Gamma      float64
	NoPriority bool
	// HandleCost is the CPU time, in simulated ns, that a node holding the
	// data spends on each message it handles (ScaleStore: every node, each
	// a directory; SELCC: the memory nodes, which handle none). 0: free.
	HandleCost int64
	// CellSearch is how the cell workload's clients search leaf
	// meganodes: selector (default), server or client; CellCacheLevel the
	// lowest level of their nodes they cache (0: none).
	CellSearch     string
	CellCacheLevel int
	// NAMHeadGroup is the leaves a head node lists in the nam-fg and
	// nam-hybrid workloads (0: no head nodes; docs/indexes.md).
	NAMHeadGroup int
	// NAMScanLen bounds the keys a scan of the index workloads covers
	// (each scan 1 to NAMScanLen; 0: 12).
	NAMScanLen int
	// CellSpikes, when Every is above 0, stalls every server's CPU
	// periodically (a server's handling costs Factor times more for Len ns
	// every Every ns: a GC pause, an interrupt storm); CellNoDefenses turns
	// off the selector's outlier rejection and history expiry. Both for
	// the cell-selector-spikes figure.
	CellSpikes     Spikes
	CellNoDefenses bool
	// CellMegaNodes: a leaf meganode of more nodes splits in two (Cell
	// §2.2); 0: meganodes never split.
	CellMegaNodes int
	// SingleWriter makes node 0's workers only write and every other
	// node's only read (SELCC Fig. 15: a writer among readers); otherwise
	// ReadRatio decides.
	SingleWriter bool
	// HoldNanos is how long a SELCC worker keeps its local latch in each
	// access (0: no simulated time), so that local threads queue for it.
	HoldNanos int64
	// OpNanos, when above 0, is the CPU time of an operation on the
	// worker's own core before its page access (a B-tree's descent, the
	// benchmark driver), and workers run back to back without the 0-2 us
	// pause between operations they otherwise take. The paper model sets
	// it (PaperModel).
	OpNanos int64
	// Partitioned makes each node's workers use only the pages whose
	// directory is their own node (the paper's partitioned YCSB, Fig. 7):
	// the zipfian page chosen is moved to the nearest page of the node's
	// share. ShiftAt, when above 0, moves every node to the next node's
	// share once that share of the operations has started (Fig. 9's
	// workload shift).
	Partitioned bool
	ShiftAt     float64
	// WriteNanos is OpNanos for a write (0: OpNanos).
	WriteNanos int64
	// DirectWrites makes every write take the exclusive latch at once, as
	// Fig. 6's micro-benchmark does; otherwise 30% of writes read first and
	// upgrade, so that runs exercise S->X upgrades and their deadlock
	// avoidance.
	DirectWrites bool
	// ComputeNodes, when above 0, adds that many compute nodes (ids Nodes
	// and up) to the Nodes storage nodes: the decoupled architecture of
	// paper §6.6. Pages live on the storage nodes, which then run no
	// workers; the compute nodes run them, with a cache and no pages of
	// their own.
	ComputeNodes int
	// Elastic runs Fig. 10's schedule over the compute nodes: the first
	// works from the start, the others join one by one and then leave in
	// reverse order (with 3: joins at 1/5 and 2/5 of the operations,
	// leaves at 3/5 and 4/5). A leaving node's workers finish their
	// operation and stop, and the node hands back every page it holds
	// (dirty ones written to their directory) before it counts as gone;
	// the run checks that it then holds no page and no directory names it.
	Elastic bool
	// Warmup is the share of the operations that throughput figures
	// (Compare) leave out, counted from the first call.
	Warmup float64
	// Locality is the chance that a worker's operation is to the page of
	// its previous one rather than a new draw (SELCC Fig. 13: 0.5); 0
	// draws every page (and draws no random number for it).
	Locality float64
	// Crashes is how many node crashes the run has, spread evenly over
	// the workload: each kills a random node, which restarts after 20 to
	// 220 us with an empty cache (see crash.go). Writes are then written
	// through to their directory's SSD before they are acknowledged.
	Crashes int
	// Replicas is how many nodes keep every directory's pages: 1 (or 0)
	// the directory's own node only, 2 a primary and a backup, with
	// failover and re-replication (docs/replication.md). With 2, writes
	// are written through to both before they are acknowledged.
	Replicas int
	// DoubleFaults lets crashes take both copies of a directory
	// (Replicas 2, register and rmw): its pages then fail at once with
	// an error naming the nodes that held them, until one returns, and
	// the other pages serve.
	DoubleFaults bool
}

// durable reports whether writes are written through before they are
// acknowledged (crashes, or replicas to keep up to date).
func (c *SimConfig) durable() bool { return c.Crashes > 0 || c.Replicas > 1 }

// MaxSteps bounds SimConfig.Steps: a chart of more messages than this is
// not read step by step (watch a page instead).
const MaxSteps = 20_000

// PaperModel configures the simulated hardware and threads of the paper's
// evaluation (§6): Table 1's latencies are the simulator's default
// (sim.DefaultLatency: a 64-byte message 2.3 us one way, 90 ns per KiB,
// 78 us an SSD read), 20 worker threads a node, and the CPU time of one
// YCSB operation calibrated from this engine on one core here:
// `scalestore ycsb --records 2000000 --read-ratio 1 --zipf 0 --threads 1
// --cache 2GiB` does 1.22M lookups a second (820 ns each) and with
// --read-ratio 0.5 0.86M operations (1,162 ns on average, so an update
// takes about 1,500 ns). The paper's 4 message-handler threads a node are not a
// bottleneck at its loads (it measures none), so a handled message costs
// no CPU here beyond its latency.
func PaperModel(cfg SimConfig) SimConfig {
	cfg.Workers = PaperWorkers
	cfg.OpNanos, cfg.WriteNanos = PaperReadNanos, PaperWriteNanos
	return cfg
}

// The paper model's constants (PaperModel).
const (
	PaperWorkers    = 20
	PaperReadNanos  = 820
	PaperWriteNanos = 1_500
)

// Spikes are periodic server stalls (SimConfig.CellSpikes).
type Spikes struct {
	Every, Len, Factor int64
}

// DefaultSimConfig is `scalestore sim` without flags.
func DefaultSimConfig() SimConfig {
	return SimConfig{Seed: 1, Nodes: 3, Workers: 2, Pages: 64, CachePages: 16, Ops: 2000, ReadRatio: 0.5,
		Faults: "default", Protocol: protocol.Chaining, CheckTimeout: time.Minute, WatchPage: -1,
		Workload: "register", Keys: 1000, CellCacheLevel: 1, NAMHeadGroup: defaultHeadGroup}
}

// SimResult is what one run found.
type SimResult struct {
	Seed       uint64
	Plan       string
	Ops        int
	Messages   uint64
	PageBytes  uint64
	Steps      uint64
	TraceHash  uint64
	SimNanos   int64         // simulated time
	SimWall    time.Duration // wall time of the simulation loop (checking excluded)
	CheckWall  time.Duration // wall time of porcupine
	Violations []string
	Left       []LeftNode // Elastic: the compute nodes that left, and when
	Crashes    []CrashEvent
	UnknownOps int // writes of unknown outcome (a crash during their write-through)
	// Rereplications counts the directories copied to a new backup
	// (Replicas 2); CrashesWhileDown the crashes that struck while another
	// node was down.
	Rereplications, CrashesWhileDown int
	// LostOps counts the operations that failed because their page's
	// directory had lost both copies (DoubleFaults; out of the history:
	// they did not happen), LostError is the first one's error.
	LostOps         int
	LostError       string
	ViolationCount  int
	Linearizable    bool
	LinearUnknown   bool
	BadPages        []uint64
	History         *checker.History
	Info            any // porcupine.LinearizationInfo, for the visualization
	Hits, Misses    uint64
	RemoteFetches   uint64
	Evictions       uint64
	EvictDeclined   uint64
	Pulls           uint64
	IORetries       uint64
	OptimisticRetry uint64
	// UnreadableReads counts the reads a directory could not do (the
	// lossy fault plan); FailedOps the operations that failed because
	// their page was unreadable (left out of the history: they did not
	// happen).
	UnreadableReads int
	FailedOps       int
	// Verbs and VerbBytes count the one-sided verbs (SELCC);
	// MemoryHandlerCalls the messages a SELCC memory node's CPU handled
	// (0 by design); SELCC sums the compute nodes' caches' counters.
	Verbs, VerbBytes   uint64
	MemoryHandlerCalls uint64
	// DirectoryMessages counts the messages ScaleStore's directories
	// handled (requests, eviction batches and data, allocations).
	DirectoryMessages uint64
	SELCC             SELCCStats
	// NAMScans counts the index workloads' scans, NAMScanWaits the
	// round trips they waited for (a batch of READs is one).
	NAMScans     int
	NAMScanWaits uint64
	// CellMegaSplits counts the cell workload's finished meganode splits,
	// CellRestarts the operations its clients started again because of
	// one (a write that waited, a node left behind).
	CellMegaSplits, CellRestarts uint64
	// CellMoved counts the splits whose new meganode went to another
	// server than the split one's.
	CellMoved uint64
}

// SELCCStats are the summed counters of a SELCC run's caches.
type SELCCStats struct {
	Acquires, Upgrades, UpgradeFallbacks, Invalidations, Dropped uint64
	HandOvers, Releases, LeaseReleases, HoldOffs, HandlerCalls   uint64
	MaxRetries                                                   uint64
}

func (a *SELCCStats) add(s *linecache.Stats) {
	a.Acquires += s.Acquires
	a.Upgrades += s.Upgrades
	a.UpgradeFallbacks += s.UpgradeFallbacks
	a.Invalidations += s.Invalidations
	a.Dropped += s.Dropped
	a.HandOvers += s.HandOvers
	a.Releases += s.Releases
	a.LeaseReleases += s.LeaseReleases
	a.HoldOffs += s.HoldOffs
	a.HandlerCalls += s.HandlerCalls
	a.MaxRetries = max(a.MaxRetries, s.MaxWaitRetries)
}

// Failed reports whether the run found a violation. A history porcupine
// could not decide within the timeout is not a violation (Undecided).
func (r *SimResult) Failed() bool {
	return r.ViolationCount > 0 || (!r.Linearizable && !r.LinearUnknown)
}

// Undecided reports whether porcupine timed out on the history.
func (r *SimResult) Undecided() bool { return r.LinearUnknown }

// runLoop is one of this package's run loops (each the world of a
// registered protocol whose nodes own theirs: simrunner.World) and what it
// models beyond the register, rmw and btree workloads on --nodes nodes.
type runLoop struct {
	run func(SimConfig) (SimResult, error)
	// crashes, replicas, computeNodes: node crashes, replicated
	// directories and compute nodes beside storage nodes (ScaleStore's).
	crashes, replicas, computeNodes bool
	// counters are what it counts, as the runner's result reports them.
	counters func(*SimResult) []protocolapi.Counter
	// options are the names of the protocol's options (SimConfig.Options;
	// declared by its package: selcc.Option*, indexdesign.Option*, this
	// package's Option* for ScaleStore, and read by applyOptions).
	options []string
}

// loop is the run loop of the protocol cfg runs (Registered): the one
// place that tells the systems apart.
func (c *SimConfig) loop() (runLoop, error) {
	index := []string{indexdesign.OptionMemoryNodes, indexdesign.OptionScanLen}
	switch {
	case indexdesign.IsCell(c.Workload):
		return runLoop{run: runNAM, counters: indexCounters, options: append(index, indexdesign.OptionCellSearch,
			indexdesign.OptionCellCacheLevel, indexdesign.OptionCellMegaNodes)}, nil
	case indexdesign.HeadNodes(c.Workload):
		return runLoop{run: runNAM, counters: indexCounters, options: append(index, indexdesign.OptionHeadNodes, indexdesign.OptionHeadGroup)}, nil
	case IsNAMWorkload(c.Workload):
		return runLoop{run: runNAM, counters: indexCounters, options: index}, nil
	case c.System == SystemSELCC:
		return runLoop{run: runSELCC, counters: selccCounters, options: []string{selcc.OptionMemoryNodes, selcc.OptionGamma, selcc.OptionPriority}}, nil
	case c.System == "" || c.System == SystemScaleStore:
		return runLoop{run: runScaleStore, counters: scaleStoreCounters, crashes: true, replicas: true, computeNodes: true,
			options: []string{OptionConflict, OptionReplicas, OptionComputeNodes, OptionPartitioned, OptionMessageBudget, OptionDoubleFaults}}, nil
	}
	return runLoop{}, fmt.Errorf("--protocol %q: want chaining, fifo, polling or %s", c.System, SystemSELCC)
}

func (c *SimConfig) validate() error {
	l, err := c.loop()
	if err != nil {
		return err
	}
	switch {
	case c.Nodes < 1 || c.Nodes > protocol.MaxNodes:
		return fmt.Errorf("--nodes %d: want 1..%d", c.Nodes, protocol.MaxNodes)
	case c.Workers < 1:
		return fmt.Errorf("--workers %d: want at least 1", c.Workers)
	case c.Pages < 1:
		return fmt.Errorf("--pages %d: want at least 1", c.Pages)
	case c.CachePages < c.Workers+1:
		return fmt.Errorf("--cache-pages %d: want more frames than workers per node (%d)", c.CachePages, c.Workers)
	case c.Workload != "" && c.Workload != "register" && c.Workload != "rmw" && c.Workload != "btree" && !IsNAMWorkload(c.Workload):
		return fmt.Errorf("--workload %q: want register, rmw, btree or one of %s", c.Workload, namWorkloads)
	case IsNAMWorkload(c.Workload) && c.Keys < 1:
		return fmt.Errorf("--keys %d: want at least 1", c.Keys)
	case c.Workload == "btree" && c.Keys < 1:
		return fmt.Errorf("--keys %d: want at least 1", c.Keys)
	case c.Ops < 0:
		return fmt.Errorf("--ops %d: want at least 0", c.Ops)
	case c.Partitioned && c.Pages < c.Nodes:
		return fmt.Errorf("--partitioned with %d pages on %d nodes: want at least a page a node", c.Pages, c.Nodes)
	case c.Partitioned && c.Workload != "" && c.Workload != "register" && c.Workload != "rmw":
		return fmt.Errorf("--partitioned: only the register and rmw workloads have pages to partition")
	case c.ShiftAt < 0 || c.ShiftAt >= 1 || c.ShiftAt > 0 && !c.Partitioned:
		return fmt.Errorf("shift at %v: want 0 (none) or a share below 1 of a partitioned run", c.ShiftAt)
	case c.Warmup < 0 || c.Warmup >= 1:
		return fmt.Errorf("warm-up %v: want a share of the operations, 0 up to below 1", c.Warmup)
	case c.ComputeNodes < 0 || c.Nodes+c.ComputeNodes > protocol.MaxNodes:
		return fmt.Errorf("--compute-nodes %d: want 0 up to %d beside %d storage nodes", c.ComputeNodes, protocol.MaxNodes-c.Nodes, c.Nodes)
	case c.Elastic && c.ComputeNodes < 2:
		return fmt.Errorf("--elastic: want at least 2 compute nodes (--compute-nodes), got %d", c.ComputeNodes)
	case (c.ComputeNodes > 0 || c.Elastic) && (c.Partitioned || c.Workload == "btree" || !l.computeNodes):
		return fmt.Errorf("--compute-nodes: the register and rmw workloads of ScaleStore only, not partitioned")
	case c.Crashes < 0:
		return fmt.Errorf("--crashes %d: want at least 0", c.Crashes)
	case c.Crashes > 0 && (c.ComputeNodes > 0 || !l.crashes || c.Nodes < 2):
		return fmt.Errorf("--crashes: the register, rmw and btree workloads of ScaleStore on at least 2 nodes, without compute nodes")
	case c.Replicas < 0 || c.Replicas > 2:
		return fmt.Errorf("--replicas %d: want 1 or 2", c.Replicas)
	case c.Replicas == 2 && (c.ComputeNodes > 0 || !l.replicas || c.Nodes < 2):
		return fmt.Errorf("--replicas 2: the register, rmw and btree workloads of ScaleStore on at least 2 nodes, without compute nodes")
	case c.DoubleFaults && (c.Replicas != 2 || c.Workload == "btree"):
		return fmt.Errorf("double faults: with --replicas 2 and the register or rmw workload")
	case c.Locality < 0 || c.Locality > 1:
		return fmt.Errorf("locality %v: want 0..1", c.Locality)
	case c.OpNanos < 0:
		return fmt.Errorf("operation CPU %d ns: want at least 0", c.OpNanos)
	case c.ReadRatio < 0 || c.ReadRatio > 1:
		return fmt.Errorf("--read-ratio %v: want 0..1", c.ReadRatio)
	case c.Zipf < 0 || c.Zipf >= 1 && c.Zipf != 0:
		if c.Zipf >= 1 {
			return fmt.Errorf("--zipf %v: want 0 (uniform) up to below 1 (YCSB uses 0.99)", c.Zipf)
		}
		return fmt.Errorf("--zipf %v: want at least 0", c.Zipf)
	}
	return nil
}

// messageBudgets are the calibrated message budgets: the most messages per
// operation any of seeds 1..300 of the configuration sends, plus a margin of
// 5% (seeds vary by about 5% around their median, so a protocol that got
// 5% chattier shows up on some seed, and 10% on most). Recalibrate with
// `scalestore sim --seeds 300 ... --message-budget -1 --json` after a change
// that is meant to cost more, and say why in docs/protocol.md.
var messageBudgets = []struct {
	workload string
	budget   float64
}{
	{"register", 3.3415 * 1.05},
	{"rmw", 3.6970 * 1.05},
}

// MessageBudget is the calibrated messages-per-operation budget of cfg: set
// for the swarm's configuration (4 nodes, 3 workers, 48 pages, 12 frames,
// 2,000 operations, 60% reads, zipf 0.9, heavy faults, chaining), 0 (none)
// for any other.
func MessageBudget(cfg SimConfig) float64 {
	if cfg.System == SystemSELCC {
		return 0
	}
	a := acceptanceShape
	if cfg.Nodes != a.Nodes || cfg.Workers != a.Workers || cfg.Pages != a.Pages || cfg.CachePages != a.CachePages ||
		cfg.Ops != a.Ops || cfg.ReadRatio != a.ReadRatio || cfg.Zipf != a.Zipf || cfg.Faults != a.Faults || cfg.Protocol != a.Protocol {
		return 0
	}
	w := cfg.Workload
	if w == "" {
		w = "register"
	}
	for _, b := range messageBudgets {
		if b.workload == w {
			return b.budget
		}
	}
	return 0
}

// acceptanceShape is the swarm's configuration (make swarm, make mutants).
var acceptanceShape = SimConfig{Nodes: 4, Workers: 3, Pages: 48, CachePages: 12, Ops: 2000, ReadRatio: 0.6,
	Zipf: 0.9, Faults: "heavy", Protocol: protocol.Chaining}

// MutantShape adapts the swarm's configuration to a mutant: the crash
// mutations break only what happens at a crash, so their runs crash ten
// times, with eight frames a node (evictions under way when a crash comes
// are what crash-resurrect-evicting gets wrong).
func MutantShape(name string, cfg SimConfig) SimConfig {
	cfg.Workload = MutantWorkload(name)
	if mutation.Crash(name) {
		cfg.Crashes, cfg.CachePages = 10, 8
	}
	if mutation.Replica(name) {
		cfg.Crashes, cfg.CachePages, cfg.Replicas = 10, 8, 2
	}
	if cfg.Workload == "btree" && cfg.Keys == 0 {
		// Enough keys that leaves keep splitting while the nodes crash.
		cfg.Keys = 20_000
	}
	return cfg
}

// MutantWorkload is the workload whose checks a mutation breaks: a lost
// update needs writes that depend on what they read.
func MutantWorkload(name string) string {
	switch name {
	case mutation.UpgradeIgnoresVersion:
		return "rmw"
	case mutation.BTreeSplitNodeFirst:
		return "btree"
	}
	return "register"
}

type simRun struct {
	inflight []*inflight // per client
	// crash is the runner's crashes and restarts (none without
	// SimConfig.Crashes); elastic its membership schedule (Elastic only).
	crash   *simrunner.Crashes
	elastic *simrunner.Elastic
	cfg     SimConfig
	c       *cluster
	pids    []protocol.PID
	// work is the workers (simrunner's loop) and their counters and
	// history, which the B-tree's workers share.
	work   *simrunner.Workers
	failed int // operations that failed on an unreadable page
	// lostOps, lostError: operations that failed on a directory that
	// lost both copies (DoubleFaults)
	lostOps   int
	lostError string
	tree      *btree.Tree
}

// RunSim runs one seed: set-up (pages allocated through the protocol),
// workload, checks at rest, final flush, and porcupine over the history.
func RunSim(cfg SimConfig) (SimResult, error) {
	res := SimResult{Seed: cfg.Seed}
	if err := cfg.applyOptions(); err != nil {
		return res, err
	}
	if err := cfg.validate(); err != nil {
		return res, err
	}
	l, _ := cfg.loop() // (validate checked it)
	return l.run(cfg)
}

// runScaleStore is RunSim for ScaleStore.
func runScaleStore(cfg SimConfig) (SimResult, error) {
	res := SimResult{Seed: cfg.Seed}
	if cfg.Mutate != "" && mutation.NAM(cfg.Mutate) {
		return res, fmt.Errorf("--mutate %s breaks the NAM-tree: use it with --workload %s", cfg.Mutate, mutation.NAMNames[cfg.Mutate][0])
	}
	if cfg.Mutate != "" && mutation.SELCC(cfg.Mutate) {
		return res, fmt.Errorf("--mutate %s breaks SELCC: use it with --protocol selcc", cfg.Mutate)
	}
	plan, undo, err := startRun(cfg, &res)
	if err != nil {
		return res, err
	}
	defer undo()
	btreeMode := cfg.Workload == "btree"
	ssd := uint64(cfg.Pages/cfg.Nodes + 8)
	if btreeMode {
		// Any node may split any leaf: room for the whole tree on each.
		ssd = uint64(cfg.Keys/8 + 64)
	}
	var watch *pageWatch
	var obs actors.Observer
	if cfg.Trace != nil && cfg.WatchPage >= 0 && cfg.WatchPage < cfg.Pages {
		// Pages are allocated round-robin over the directories (see setup).
		watch = &pageWatch{w: cfg.Trace, pid: protocol.MakePID(protocol.NodeID(cfg.WatchPage%cfg.Nodes), uint64(cfg.WatchPage/cfg.Nodes))}
		obs = watch
	}
	c, err := newCluster(clusterConfig{seed: cfg.Seed, nodes: cfg.Nodes + cfg.ComputeNodes, cachePages: cfg.CachePages, ssdPages: ssd,
		variant: cfg.Protocol, plan: plan, latency: sim.DefaultLatency, mutate: cfg.Mutate, observer: obs,
		viewChanges: cfg.durable(), observedEnds: registerEnds(btreeMode), replicas: cfg.Replicas})
	if err != nil {
		return res, err
	}
	if watch != nil {
		watch.now = c.w.Now
	}
	c.w.OrderedIO = cfg.durable()
	if cfg.HandleCost > 0 {
		for i := range cfg.Nodes {
			c.w.SetHandleCost(protocol.NodeID(i), cfg.HandleCost)
		}
	}
	if cfg.Trace != nil || cfg.Steps != nil {
		watching := cfg.WatchPage >= 0 && cfg.WatchPage < cfg.Pages
		var watched protocol.PID
		if watching {
			// Pages are allocated round-robin over the directories (see setup).
			watched = protocol.MakePID(protocol.NodeID(cfg.WatchPage%cfg.Nodes), uint64(cfg.WatchPage/cfg.Nodes))
		}
		c.setTrace(func(at int64, m *protocol.Message, payload []byte) {
			if cfg.Trace != nil {
				fmt.Fprintf(cfg.Trace, "%d %v\n", at, m)
			}
			if cfg.Steps == nil || len(*cfg.Steps) >= MaxSteps || watching && m.PID != watched {
				return
			}
			st := Step{At: at, From: int(m.From), To: int(m.To), Message: describe(m, payload),
				PageSent: len(payload) == protocol.PageSize}
			if watching {
				st.Dir = c.dirState(watched)
			} else {
				st.Message += fmt.Sprintf(" page=%v", m.PID)
			}
			*cfg.Steps = append(*cfg.Steps, st)
		})
	}
	items := cfg.Pages
	if btreeMode {
		items = cfg.Keys
		c.checkContent()
	}
	r := &simRun{cfg: cfg, c: c, pids: make([]protocol.PID, cfg.Pages)}
	r.work = &simrunner.Workers{W: c.w, Ops: cfg.Ops, ReadRatio: cfg.ReadRatio, Locality: cfg.Locality,
		RMW: cfg.Workload == "rmw", OpNanos: cfg.OpNanos, WriteNanos: cfg.WriteNanos, StartSpread: 1000,
		SingleWriter: cfg.SingleWriter, Keys: simrunner.NewKeys(c.w, items, cfg.Zipf),
		Hist: checker.NewHistory(cfg.Ops), Fail: c.inv.Fail}
	r.crash = &simrunner.Crashes{W: c.w, Work: r.work, Cluster: r, Fail: c.inv.Fail, Nodes: len(c.nodes),
		DownMin: simrunner.CrashDownMin, DownSpan: simrunner.CrashDownSpan,
		Respawn: func(x protocol.NodeID) { r.spawnWorkers(int(x), r.c.nodes[x]) }}
	r.work.BeforeOp = r.crash.Due
	if cfg.Elastic {
		r.elastic = &simrunner.Elastic{Work: r.work, Cluster: r, Fail: c.inv.Fail, Ops: cfg.Ops,
			First: cfg.Nodes, Count: cfg.ComputeNodes}
		r.work.Window = r.elastic.Window
	}
	if cfg.Partitioned {
		r.work.MapKey = func(key int, node protocol.NodeID) int { return r.partitionPage(key, int(node)) }
	}
	actors.AdviseHuge(r.work.Hist.Storage())
	if btreeMode {
		r.pids = nil
	}

	wallStart := time.Now()
	for _, n := range c.nodes {
		n.Start()
	}
	setup, work := r.setup, r.runWorkload
	if btreeMode {
		setup, work = r.setupTree, r.runTreeWorkload
	}
	if !setup() {
		res.finish(r, wallStart)
		return res, nil
	}
	work()
	res.SimWall = time.Since(wallStart)
	_, bad := c.inv.Violations()
	c.stop()
	if bad == 0 {
		if !c.drain(50_000_000) {
			c.inv.Fail("the cluster did not come to rest after the workload")
		} else {
			if btreeMode {
				r.pids = r.allPIDs()
			}
			c.checkQuiet(r.pids)
			c.flush(r.pids)
		}
		budget := cfg.MessageBudget
		if !cfg.durable() {
			// A view change aborts requests and sends them again: the cost
			// bounds are for runs without crashes.
			c.checkCosts()
		} else if budget == 0 {
			budget = -1
		}
		if budget == 0 {
			budget = MessageBudget(cfg)
		}
		if ops := r.work.Completed + r.failed; budget > 0 && ops > 0 && float64(c.w.Messages) > budget*float64(ops) {
			c.inv.Fail("cost: %d messages for %d operations, %.3f per operation, over this configuration's budget of %.3f",
				c.w.Messages, ops, float64(c.w.Messages)/float64(ops), budget)
		}
	}
	res.finish(r, time.Time{})
	ops := r.work.Hist.Ops()
	if len(r.crash.Unknown) > 0 {
		// A write of unknown outcome may take effect at any time after its
		// call: it returns after everything else.
		end := c.w.Now()
		for _, op := range ops {
			end = max(end, op.Return)
		}
		for _, op := range r.crash.Unknown {
			op.Return = end + 1
			r.work.Hist.Add(op)
		}
		ops = r.work.Hist.Ops()
	}
	cfg.checkHistory(&res, ops)
	return res, nil
}

// registerEnds is how much of each end of a page a run's checks read: a
// page register is read at its two ends only, and a read whose ends
// disagree is torn (checker.PageValue), so poisoning the head catches
// every read of a dropped frame, at 64 bytes of stores instead of 4 KiB,
// and a page sent needs to carry only its ends; the B-tree reads whole
// pages (and digests them) and gets them whole.
func registerEnds(btree bool) int {
	if btree {
		return 0
	}
	return 64
}

// checkHistory checks a run's history the way cfg asks and puts the
// verdict and its wall time into res (with SkipLinearizability: counted as
// linearizable, unchecked).
func (cfg SimConfig) checkHistory(res *SimResult, ops []checker.Op) {
	if cfg.SkipLinearizability {
		res.Linearizable = true
		return
	}
	start := time.Now()
	check := checker.Check
	if cfg.PorcupineOnly {
		check = checker.CheckPorcupine
	}
	lin, info := check(ops, cfg.CheckTimeout)
	res.CheckWall = time.Since(start)
	res.Linearizable, res.LinearUnknown, res.BadPages, res.Info = lin.Ok, lin.Unknown, lin.BadPages, info
}

func (res *SimResult) finish(r *simRun, wallStart time.Time) {
	c := r.c
	if !wallStart.IsZero() {
		res.SimWall = time.Since(wallStart)
	}
	res.Ops = r.work.Completed
	if r.elastic != nil {
		res.Left = r.elastic.Left
	}
	res.Crashes = r.crash.Events
	res.UnknownOps = len(r.crash.Unknown)
	if c.rs != nil {
		res.Rereplications = c.rs.rereplicated
	}
	res.LostOps, res.LostError = r.lostOps, r.lostError
	for _, e := range r.crash.Events {
		if e.OthersDown > 0 {
			res.CrashesWhileDown++
		}
	}
	res.FailedOps = r.failed
	res.UnreadableReads = c.inv.UnreadableReads()
	res.Messages, res.PageBytes, res.Steps = c.w.Messages, c.w.PageBytes, c.w.Steps
	res.DirectoryMessages = c.dirMsgs
	res.TraceHash = c.w.Hash()
	res.SimNanos = c.w.Now()
	res.Violations, res.ViolationCount = c.inv.Violations()
	res.History = r.work.Hist
	for _, n := range c.nodes {
		st := n.Cache().Stats()
		res.Hits += st.Hits
		res.Misses += st.Misses
		res.OptimisticRetry += st.Restarts
		res.RemoteFetches += n.Stats.RemoteFetches
		res.Evictions += n.Stats.Evictions
		res.EvictDeclined += n.Stats.EvictDeclined
		res.Pulls += n.Stats.Pulls
		res.IORetries += n.Stats.IORetries
	}
}

// setup allocates the pages through the protocol: page i lives on directory
// i mod nodes and is created by another node, so most allocations are
// remote (paper §3.3).
func (r *simRun) setup() bool {
	n := r.cfg.Nodes // the storage nodes: compute nodes have no pages
	var cos []*sim.Coroutine
	for k := range n {
		node := r.c.nodes[k]
		cos = append(cos, r.c.w.Spawn(node.ID(), 0, func(co *sim.Coroutine) {
			bw := &bufmgr.Worker{ID: -1 - k, P: co}
			for i := range r.pids {
				if (i+i/n)%n != k {
					continue
				}
				g, ok := node.Allocate(bw, protocol.NodeID(i%n))
				if !ok {
					r.c.inv.Fail("allocating page %d on node %d: SSD full", i, i%n)
					return
				}
				r.pids[i] = g.PID()
				g.Release()
			}
		}))
	}
	return r.runUntil(cos, "set-up")
}

func (r *simRun) runWorkload() {
	var cos []*sim.Coroutine
	r.crash.At = simrunner.CrashPoints(r.cfg.Ops, r.cfg.Crashes)
	for k, node := range r.c.nodes {
		if r.cfg.ComputeNodes > 0 && k < r.cfg.Nodes {
			// A storage node of the decoupled architecture: no workers
			// (their client numbers stay unused).
			for range r.cfg.Workers {
				r.inflight = append(r.inflight, &inflight{})
			}
			continue
		}
		if r.elastic != nil {
			if co := r.elastic.SpawnLeave(node.ID()); co != nil {
				cos = append(cos, co)
			}
		}
		cos = append(cos, r.spawnWorkers(k, node)...)
	}
	r.runUntil(cos, "workload")
}

// runUntil steps the world until every coroutine returned. It stops at the
// first violation, when nothing is left to run while coroutines still wait
// (a deadlock), or when no operation completed for a long simulated time.
func (r *simRun) runUntil(cos []*sim.Coroutine, phase string) bool {
	w := r.c.w
	checkEvery := crossCheckInterval(len(r.c.nodes) * r.cfg.CachePages)
	// The cross-check runs each time the step count reaches a multiple of
	// checkEvery (a step adds at most one): a comparison a step, not a
	// division.
	nextCheck := (w.Steps/checkEvery + 1) * checkEvery
	d := sim.Drive{Phase: phase, LastOp: &r.work.LastOp, Fail: r.c.inv.Fail, Stuck: r.describeStuck,
		Violations: r.c.inv.Count, AfterStep: func() {
			if w.Steps >= nextCheck {
				nextCheck += checkEvery
				r.c.crossCheck(r.pids)
			}
		}}
	if r.cfg.Progress != nil {
		d.Progress = func() { r.cfg.Progress(r.work.Completed, r.cfg.Ops) }
	}
	if phase == "workload" {
		// Workers of restarted nodes too.
		d.Done = r.work.Done
	} else {
		d.AfterStep = nil
	}
	return d.Run(w, cos)
}

// describeStuck adds the state of every frame with work in flight to the
// violations, so a liveness failure can be read without a debugger.
func (r *simRun) describeStuck() {
	for _, n := range r.c.nodes {
		r.c.inv.Fail("node %d cache: %s", n.ID(), n.Cache().Describe())
		for i := range n.Cache().Frames() {
			f := n.Cache().Frame(i)
			if f.Pending != protocol.ModeNone || len(*n.Cache().Queue(f)) > 0 || f.Evicting {
				r.c.inv.Fail("in flight: %s", n.DescribeFrame(f.PID))
			}
		}
	}
}

// Leave hands back every page node x holds (evictions to their
// directories, dirty pages written back) once its workers stopped, and
// checks that it is gone: no frame used, no directory naming it as owner
// or sharer.
func (r *simRun) Leave(x protocol.NodeID, on protocolapi.Waiter) (int, error) {
	node := r.c.nodes[x]
	held := node.Cache().Frames() - node.Cache().FreeFrames()
	for round := 0; ; round++ {
		if node.Cache().Frames() == node.Cache().FreeFrames() {
			break
		}
		if round == 10_000 {
			return held, fmt.Errorf("%d frames still used after %d rounds of evictions",
				node.Cache().Frames()-node.Cache().FreeFrames(), round)
		}
		node.EvictAll()
		on.Sleep(10_000)
	}
	var errs []error
	for _, pid := range r.pids {
		meta := r.c.dirOf(pid).Meta(pid)
		if meta == nil {
			continue
		}
		if meta.Mode == protocol.ModeExclusive && meta.Owner == x || meta.Mode == protocol.ModeShared && meta.Sharers.Has(x) {
			errs = append(errs, fmt.Errorf("it left, but page %v's directory still names it: %v", pid, r.c.dirState(pid)))
		}
	}
	return held, errors.Join(errs...)
}

var _ protocolapi.Leaver = (*simRun)(nil)

// LeftNode is a compute node that left an elastic run.
type LeftNode = simrunner.LeftNode

// Worker is a ScaleStore worker's blocking access entry
// (protocolapi.Blocking): the buffer manager's guards on its node, the
// node the cluster has under that id when the worker is spawned (a
// restarted node's workers are new ones, with new clients).
func (r *simRun) Worker(id protocolapi.Worker, on protocolapi.Waiter) protocolapi.Accessor {
	a := &pageWorker{r: r, node: r.c.nodes[id.Node], on: on, bw: &bufmgr.Worker{ID: id.Client, P: on}}
	if r.tree != nil {
		a.s = r.session(a.node, a.bw)
	}
	return a
}

var _ protocolapi.Blocking = (*simRun)(nil)

// pageWorker reads and writes pages as registers: a page holds its value
// at both ends (checker.PageValue).
type pageWorker struct {
	r    *simRun
	node *actors.Node
	on   protocolapi.Waiter
	bw   *bufmgr.Worker
	// the B-tree workload's (treerun.go): its session, key and value
	// buffers
	s      btree.Session
	kb, vb [8]byte
	val    []byte
}

func (a *pageWorker) Access(op protocolapi.Op) protocolapi.Result {
	r := a.r
	pid := r.pids[op.Key]
	*r.inflight[a.bw.ID] = inflight{pid: pid}
	var res protocolapi.Result
	perr := bufmgr.Catch(func() {
		switch op.Kind {
		case protocolapi.OpRead:
			res.Value = r.read(a.on, a.bw, a.node.Cache(), pid)
		case protocolapi.OpRMW:
			res.Value = r.readModifyWrite(a.on, a.bw, a.node, pid, op.Value)
		default:
			r.write(a.on, a.bw, a.node, pid, op.Value)
		}
	})
	if perr == nil || !r.work.InFlight(a.bw.ID) {
		return res // (abandoned: the crash records it)
	}
	if r.unavailable(perr) {
		res.Err = fmt.Errorf("page %v: %w: %w", pid, protocolapi.ErrUnavailable, perr)
	} else {
		res.Err = fmt.Errorf("page %v: %w", pid, perr)
	}
	return res
}

// partitionPage moves page index i to the nearest page of node's share
// (pages are allocated round-robin, so page i's directory is node
// i%Nodes); after ShiftAt of the operations, to the next node's share.
func (r *simRun) partitionPage(i, node int) int {
	n := r.cfg.Nodes
	if r.cfg.ShiftAt > 0 && float64(r.work.Started) > r.cfg.ShiftAt*float64(r.cfg.Ops) {
		node = (node + 1) % n
	}
	i = i/n*n + node
	if i >= r.cfg.Pages {
		i -= n
	}
	return i
}

// unavailable reports whether err failed an operation for the fault
// plan's reason (its page unreadable, or both copies of its directory
// lost), and counts it.
func (r *simRun) unavailable(err error) bool {
	if r.cfg.DoubleFaults && errors.Is(err, actors.ErrDirectoryDown) {
		// Its guard failed before it read or wrote: it did not happen.
		if r.lostOps == 0 {
			r.lostError = err.Error()
		}
		r.lostOps++
		return true
	}
	if !errors.Is(err, bufmgr.ErrUnreadable) {
		return false
	}
	r.failed++
	return true
}

func (r *simRun) read(co protocolapi.Waiter, bw *bufmgr.Worker, c *bufmgr.Cache, pid protocol.PID) uint64 {
	if r.c.w.Chance(0.5) {
		// Optimistic read (paper §3.2): read, then validate; after a few
		// restarts fall back to a shared latch for progress.
		for range 3 {
			g := c.Optimistic(bw, pid)
			head := bufmgr.Value(g.Data())
			co.MaybeYield()
			_, whole := checker.PageValue(g.Data())
			if !g.HasChanged() {
				if !whole || bufmgr.Value(g.Data()) != head {
					return checker.TornValue
				}
				return head
			}
		}
	}
	g := c.Shared(bw, pid)
	head := bufmgr.Value(g.Data())
	co.MaybeYield()
	v, whole := checker.PageValue(g.Data())
	g.Release()
	if !whole || v != head {
		r.c.inv.Fail("page %v: torn page under a shared latch", pid)
		return checker.TornValue
	}
	return v
}

func (r *simRun) write(co protocolapi.Waiter, bw *bufmgr.Worker, node *actors.Node, pid protocol.PID, v uint64) {
	c := node.Cache()
	var x bufmgr.ExclusiveGuard
	if !r.cfg.DirectWrites && r.c.w.Chance(0.3) {
		// Read, then upgrade (paper §5.1): exercises S->X upgrades and their
		// deadlock avoidance.
		s := c.Shared(bw, pid)
		co.MaybeYield()
		var err error
		if x, err = s.Upgrade(bw); err != nil {
			if !errors.Is(err, bufmgr.ErrRestart) {
				panic(err) // unreadable: fail the operation like Exclusive would
			}
			x = c.Exclusive(bw, pid)
		}
	} else {
		x = c.Exclusive(bw, pid)
	}
	r.writeValue(co, bw, node, x, pid, v)
}

// writeValue writes v into both ends of the latched page, yielding between
// the two (a reader that does not validate sees it torn), and releases it.
func (r *simRun) writeValue(co protocolapi.Waiter, bw *bufmgr.Worker, node *actors.Node, x bufmgr.ExclusiveGuard, pid protocol.PID, v uint64) {
	in := r.inflight[bw.ID]
	in.writing = true
	checker.PutPageValue(x.Data(), v, false)
	co.MaybeYield()
	checker.PutPageValue(x.Data(), v, true)
	x.MarkDirty()
	if r.cfg.durable() {
		// Durable when acknowledged: the checker learns of it then, not
		// when this worker next runs (a view change may come between).
		// If the page's directory crashes first, the fence abandons the
		// operation as one of unknown outcome.
		if !node.Persist(bw, x.Frame(), func() { r.c.inv.Wrote(pid, v) }) {
			r.crash.Abandon(bw.ID) // (once: the fence may have done it)
		}
		x.Release()
		return
	}
	r.c.inv.Wrote(pid, v)
	x.Release()
}

// readModifyWrite writes v over what it read, and returns what it read:
// through a shared guard and an upgrade, an optimistic guard and
// ToExclusive, or an exclusive guard. The first two may lose the page
// between the read and the write; they must then restart (ErrRestart), or
// the write would overwrite a value it never saw (a lost update, which the
// history's rmw model rejects).
func (r *simRun) readModifyWrite(co protocolapi.Waiter, bw *bufmgr.Worker, node *actors.Node, pid protocol.PID, v uint64) uint64 {
	w := r.c.w
	c := node.Cache()
	for attempt := 0; ; attempt++ {
		var x bufmgr.ExclusiveGuard
		var old uint64
		var err error
		switch k := w.Intn(3); {
		case attempt >= 3 || k == 0:
			x = c.Exclusive(bw, pid)
			old = r.wholeValue(pid, x.Data())
		case k == 1:
			s := c.Shared(bw, pid)
			old = r.wholeValue(pid, s.Data())
			co.MaybeYield()
			x, err = s.Upgrade(bw)
		default:
			g := c.Optimistic(bw, pid)
			old = bufmgr.Value(g.Data())
			co.MaybeYield()
			if _, whole := checker.PageValue(g.Data()); !whole || bufmgr.Value(g.Data()) != old {
				g.Release()
				continue // torn under a concurrent writer: HasChanged would say so
			}
			x, err = g.ToExclusive(bw)
		}
		if err != nil {
			if !errors.Is(err, bufmgr.ErrRestart) {
				panic(err) // unreadable: fail the operation like Exclusive would
			}
			continue
		}
		r.writeValue(co, bw, node, x, pid, v)
		return old
	}
}

// wholeValue is the value of a latched page, which cannot be torn.
func (r *simRun) wholeValue(pid protocol.PID, data []byte) uint64 {
	v, whole := checker.PageValue(data)
	if !whole {
		r.c.inv.Fail("page %v: torn page under a latch", pid)
	}
	return v
}

// pageWatch writes what happens to one page into the trace.
type pageWatch struct {
	w   io.Writer
	pid protocol.PID
	now func() int64
}

func (p *pageWatch) Violation(n protocol.NodeID, err error) {
	fmt.Fprintf(p.w, "%d ! %v\n", p.now(), err)
}
func (p *pageWatch) CopyChanged(n protocol.NodeID, pid protocol.PID, old, now protocol.Mode, _ []byte) {
	if pid == p.pid {
		fmt.Fprintf(p.w, "%d   node %d copy of %v: %v -> %v\n", p.now(), n, pid, old, now)
	}
}
func (p *pageWatch) Accepted(dir protocol.NodeID, d protocol.Decision) {
	if d.PID == p.pid {
		fmt.Fprintf(p.w, "%d   directory %d: %v: %v for node %d (%v) epoch=%d target=%d pred=%d k=%d set=%v\n",
			p.now(), dir, d.PID, d.Action, d.Requester, d.Mode, d.Epoch, d.Target, d.Pred, d.K, d.Set)
	}
}
func (p *pageWatch) Unreadable(n protocol.NodeID, pid protocol.PID, err error) {
	if pid == p.pid {
		fmt.Fprintf(p.w, "%d   node %d could not read %v from its SSD: %v\n", p.now(), n, pid, err)
	}
}
func (p *pageWatch) Obtained(n protocol.NodeID, pid protocol.PID, m protocol.Mode, waited int64) {
	if pid == p.pid {
		fmt.Fprintf(p.w, "%d   node %d obtained %v in %v after %d ns\n", p.now(), n, pid, m, waited)
	}
}

// startRun is what every run of this package does first: it applies cfg's
// mutant (undo takes it back) and draws the seed's fault plan, which it
// names in res.
func startRun(cfg SimConfig, res *SimResult) (plan sim.FaultPlan, undo func(), err error) {
	undo = func() {}
	if cfg.Mutate != "" {
		if err := mutation.Enable(cfg.Mutate); err != nil {
			return plan, undo, err
		}
		undo = func() { mutation.Disable(cfg.Mutate) }
	}
	if plan, err = sim.SeedPlan(cfg.Faults, cfg.Seed); err != nil {
		undo()
		return plan, func() {}, err
	}
	res.Plan = plan.String()
	return plan, undo, nil
}
