package cluster

import (
	"flag"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Design is a registered protocol's own code for real processes, for a
// protocol that procrunner does not run (one with its own run loop: SELCC,
// the index designs): `scalestore cluster` starts --nodes compute node
// processes (ids 0..C-1) and --memory-nodes memory node processes (C..),
// and drives each with the control commands of serveRegions; `scalestore
// node --protocol NAME --control` is one of those processes. Everything
// that sets one design apart from another is here, supplied by the
// protocol's own package and attached to its registration (package
// protocols), so that neither command names a protocol.
//
// One Design may run several registered protocols (the index designs
// share one); its hooks get the name they run. A Design holds the values
// of its flags: make a new one for every command line.
type Design struct {
	// Title is how output names it ("SELCC").
	Title string
	// ByWorkload: `scalestore cluster` selects it with --workload NAME
	// (the index designs, a workload beside ScaleStore's ycsb), else with
	// --protocol NAME.
	ByWorkload bool
	// Bench puts it into `scalestore bench cluster`: its rows run shared,
	// with durability none, and compare their remote fetches with the
	// transports' FAA+READ (its miss's verbs).
	Bench bool
	// ClusterFlags, if set, adds its own flags to `scalestore cluster`.
	ClusterFlags func(fs *flag.FlagSet)
	// NodeFlags, if set, adds its own flags to `scalestore node`.
	NodeFlags func(fs *flag.FlagSet)
	// Plan checks a run of protocol name for `scalestore cluster` and
	// says what sets it apart.
	Plan func(name string, c ClusterConfig) (Plan, error)
	// Serve runs one node process of protocol name under `scalestore
	// cluster`: it answers the control commands on in until in closes.
	Serve func(name string, n DesignNode, in io.Reader, out io.Writer) error
}

// ClusterConfig is what `scalestore cluster` was given for a design's run.
type ClusterConfig struct {
	// Nodes are the compute nodes, MemoryNodes the memory nodes; Threads
	// run on every compute node.
	Nodes, MemoryNodes, Threads int
	// Records is --records; RecordsSet says whether the command line gave
	// it (else Plan chooses).
	Records    int
	RecordsSet bool
	// ScanLen is --scan-len (a scan's keys, for a design that scans).
	ScanLen int
	// CacheBytes is --cache: a compute node's cache.
	CacheBytes int64
	// Transport is --transport; Duration the measured run.
	Transport string
	Duration  time.Duration
}

// Plan is one run of a design on processes.
type Plan struct {
	// Records is the records (keys, lines) of the run.
	Records int
	// NodeArgs are the arguments of its own every node process gets.
	NodeArgs []string
	// Running is the progress line before the run.
	Running string
	// Dropped says what the nodes' dropped messages mean, with one %d:
	// any is a violation.
	Dropped string
	// DroppedToMemory: the dropped messages are messages that reached a
	// memory node (the result's memory_messages).
	DroppedToMemory bool
	// HeadGroup is the result's head group (0: none).
	HeadGroup int
	// Report is the figures' text of the run, from the figures every run
	// has.
	Report func(r Report) string
}

// Report is what a design's Plan.Report describes.
type Report struct {
	// Name is the protocol run.
	Name string
	// Nodes, MemoryNodes and Transport are the run's.
	Nodes, MemoryNodes int
	Transport          string
	// Dropped are the messages the nodes dropped.
	Dropped uint64
	// OpsPerSec, P50us and P99us are its throughput and latencies.
	OpsPerSec, P50us, P99us float64
	// Scans, their mean latency, round trips and READs (the designs that
	// scan), and the longest scan's keys.
	Scans                                 uint64
	ScanMeanUs, ScanRoundTrips, ScanReads float64
	ScanLen, HeadGroup                    int
	// Check is what the history check found ("not checked", ...).
	Check string
	// Figures is the figures line every ScaleStore run prints, for a
	// design that prints it after its own.
	Figures string
}

// DesignNode is what `scalestore node` gives a design's node process.
type DesignNode struct {
	ID protocol.NodeID
	// Memory: a memory node (--role memory); else a compute node.
	Memory bool
	// Threads is --threads; Keys, Computes and Servers are --keys,
	// --computes and --servers.
	Threads           int
	Keys              uint64
	Computes, Servers int
	// Transport is the transport's kind, resolved.
	Transport    string
	NewTransport func(transport.Handler) (transport.Transport, error)
	Logger       *slog.Logger
}

// RegionNode is a node on compute and memory nodes as its control loop
// drives it (ServeRegions).
type RegionNode struct {
	// Region is its registered memory ("setup").
	Region transport.Region
	// Peers gives it every node's region ("peers").
	Peers func(*RegionCommand) error
	// Run runs its workload on a compute node ("run").
	Run func(Workload) (RunResult, []checker.Op)
	// Dropped counts the messages it dropped ("stats").
	Dropped func() uint64
}

// ServeRegions answers control commands for a node of a design.
func ServeRegions(n RegionNode, in io.Reader, out io.Writer) error {
	return serveRegions(regionNode{region: n.Region, peers: n.Peers, run: n.Run, dropped: n.Dropped}, in, out)
}

// Thread is one workload thread of RunThreads, as a design's operation
// sees it.
type Thread struct{ w *workloadThread }

// Index is the thread's number on its node.
func (t Thread) Index() int { return t.w.t }

// Rand is the thread's generator, seeded by the workload's seed, the node
// and the thread.
func (t Thread) Rand() *rand.Rand { return t.w.r }

// Client is the thread's client in the history.
func (t Thread) Client() int { return t.w.client }

// NextWrite is the unique value of the thread's next write.
func (t Thread) NextWrite() uint64 { return t.w.nextWrite() }

// Record adds op to the history the thread returns.
func (t Thread) Record(op checker.Op) { t.w.ops = append(t.w.ops, op) }

// RunThreads runs wl.Threads workload threads of node for wl.Duration and
// merges what they measured: each thread calls the operation start gives
// it until the run ends or the operation fails; an operation returns its
// latency in ns.
func RunThreads(wl Workload, node protocol.NodeID, start func(t Thread) func() (int64, error)) (RunResult, []checker.Op) {
	return runThreads(wl, node, func(w *workloadThread) func() (int64, error) { return start(Thread{w}) })
}
