package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/membership"
	"github.com/scalestore-go/scalestore/procrunner"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/protocols"
	"github.com/scalestore-go/scalestore/ycsb"
)

const clusterUsage = `Usage: scalestore cluster [flags]

Starts --nodes node processes on this host (children of this process, on
loopback), creates the YCSB table (one B-tree) across them, loads it with
every node inserting its share, runs YCSB workers inside the nodes as the
paper does, and prints the aggregate throughput, latency percentiles, cache
hit ratio and remote page fetches. With --check every operation is recorded
and the history is checked for linearizability with porcupine, per key.

Flags:
`

type clusterFlags struct {
	durability              string
	nodes, threads, records int
	kind, cache, logFile    string
	historyOut, data        string
	readRatio, zipf         float64
	duration, shiftEvery    time.Duration
	checkTimeout, shmSpin   time.Duration
	pollSpin                time.Duration
	keyOrder                string
	trace                   bool
	partitioned, check      bool
	asJSON, quiet, reformat bool
	protocol                string
	memoryNodes             int
	workload                string
	scanLen                 int
	cacheBytes              int64
	elastic                 bool
	computeNodes            int
	// kill, with --kill N@D: node killNode is killed killAfter into the
	// run; the nodes keep their membership in an etcd this process runs
	// (etcd: its client URLs) with a lease of lease.
	kill      string
	killNode  int
	killAfter time.Duration
	lease     time.Duration
	etcd      []string
	clusterID uint64 // the nodes' --cluster-id with --kill (their etcd prefix)
	// A plug-in protocol (--protocol P of the registry, run by procrunner):
	// its cache lines a node, mutant and options (pluginFlags).
	plugin     *protocolapi.Protocol
	cacheLines int
	mutant     string
	opts       map[string]string
	// A registered protocol's own process design (--protocol or
	// --workload designName), and its run's plan.
	design     *cluster.Design
	designName string
	plan       cluster.Plan
}

type clusterResult struct {
	Nodes             int     `json:"nodes"`
	Transport         string  `json:"transport"`
	Records           int     `json:"records"`
	Threads           int     `json:"threads"`
	ReadRatio         float64 `json:"read_ratio"`
	Zipf              float64 `json:"zipf"`
	Ops               int64   `json:"ops"`
	OpsPerSec         float64 `json:"ops_per_sec"`
	P50us             float64 `json:"p50_us"`
	P99us             float64 `json:"p99_us"`
	P999us            float64 `json:"p999_us"`
	HitRatio          float64 `json:"cache_hit_ratio"`
	RemotePageFetches uint64  `json:"remote_page_fetches"`
	FetchP50us        float64 `json:"remote_fetch_p50_us"`
	FetchP99us        float64 `json:"remote_fetch_p99_us"`
	Invalidations     uint64  `json:"invalidations"`
	Checked           bool    `json:"checked"`
	HistoryOps        int     `json:"history_ops,omitempty"`
	Violations        int     `json:"violations"`
	Undecided         bool    `json:"undecided,omitempty"`
	LoadSeconds       float64 `json:"load_seconds"`
	KeyOrder          string  `json:"key_order"`
	Partitioned       bool    `json:"partitioned"`
	// Trace breaks the remote fetches into hops (--trace-remote).
	Trace *traceResult `json:"trace,omitempty"`
	// SELCC: its memory nodes, and the messages they received (0 by
	// design: they have no handler).
	Protocol       string `json:"protocol"`
	MemoryNodes    int    `json:"memory_nodes,omitempty"`
	MemoryMessages uint64 `json:"memory_messages"`
	// The index workloads: head nodes' group (0: none), the scans, their
	// mean latency and the round trips (a batch of READs in flight
	// together is one) and READs each waited for on average.
	HeadGroup      int     `json:"head_group,omitempty"`
	Scans          uint64  `json:"scans,omitempty"`
	ScanMeanUs     float64 `json:"scan_mean_us,omitempty"`
	ScanRoundTrips float64 `json:"scan_round_trips,omitempty"`
	ScanReads      float64 `json:"scan_reads,omitempty"`
	// --elastic: the compute nodes, the throughput of each second of the
	// schedule, and the nodes that left.
	Elastic      bool       `json:"elastic,omitempty"`
	ComputeNodes int        `json:"compute_nodes,omitempty"`
	Timeline     []int64    `json:"timeline,omitempty"`
	Left         []leftNode `json:"left,omitempty"`
	// --kill: the node killed, when, how long until the view without it
	// (agreed on etcd), and the survivors' operations that failed on its
	// pages (or were cut by the view change) while they went on.
	Killed      *int    `json:"killed,omitempty"`
	KilledAtS   float64 `json:"killed_at_s,omitempty"`
	ToViewMS    float64 `json:"kill_to_view_ms,omitempty"`
	Unavailable int64   `json:"unavailable_ops,omitempty"`
	// A plug-in protocol's own counters, summed over its nodes, and the
	// first violations its own history check found.
	Counters          []protocolapi.Counter `json:"counters,omitempty"`
	HistoryViolations []string              `json:"history_violations,omitempty"`
}

// traceResult is --trace-remote's breakdown over all nodes, in µs.
type traceResult struct {
	QueueP50us   float64 `json:"queue_p50_us"`
	QueueP99us   float64 `json:"queue_p99_us"`
	HandlerP50us float64 `json:"peer_handler_p50_us"`
	HandlerP99us float64 `json:"peer_handler_p99_us"`
	WakeP50us    float64 `json:"wake_p50_us"`
	WakeP99us    float64 `json:"wake_p99_us"`
	Sent         uint64  `json:"sent"`
	Queued       uint64  `json:"queued"`
	Received     uint64  `json:"received"`
	Polled       uint64  `json:"polled"`
}

// mergeTrace sums the nodes' traces.
func mergeTrace(results []cluster.RunResult) *traceResult {
	q, h, w := hdrhistogram.New(1, 60_000_000_000, 3), hdrhistogram.New(1, 60_000_000_000, 3), hdrhistogram.New(1, 60_000_000_000, 3)
	var tr traceResult
	any := false
	for _, r := range results {
		if r.Trace == nil {
			continue
		}
		any = true
		q.Merge(hdrhistogram.Import(r.Trace.Queue))
		h.Merge(hdrhistogram.Import(r.Trace.Handler))
		w.Merge(hdrhistogram.Import(r.Trace.Wake))
		tr.Sent += r.Trace.Sent
		tr.Queued += r.Trace.Queued
		tr.Received += r.Trace.Received
		tr.Polled += r.Trace.Polled
	}
	if !any {
		return nil
	}
	us := func(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	tr.QueueP50us, tr.QueueP99us = us(q, 50), us(q, 99)
	tr.HandlerP50us, tr.HandlerP99us = us(h, 50), us(h, 99)
	tr.WakeP50us, tr.WakeP99us = us(w, 50), us(w, 99)
	return &tr
}

func runCluster(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, clusterUsage); fs.PrintDefaults() }
	var f clusterFlags
	fs.IntVar(&f.nodes, "nodes", 3, "node processes to start")
	fs.StringVar(&f.kind, "transport", "tcp", "tcp, shm, auto or ibverbs (a binary built with -tags ibverbs on a host with an RDMA device: the nodes reach each other through the NIC's loopback)")
	fs.IntVar(&f.records, "records", 100_000, "YCSB records (8-byte keys, 128-byte values)")
	fs.Float64Var(&f.readRatio, "read-ratio", 0.95, "share of point lookups (the rest are updates)")
	fs.Float64Var(&f.zipf, "zipf", 0.99, "scrambled zipfian constant (0 = uniform)")
	fs.IntVar(&f.threads, "threads", 2, "YCSB workers per node")
	autoShapeFlag := fs.Bool("auto-shape", false, "choose --nodes and --threads for this machine: a core per busy worker, two nodes at least (make run uses it); the run prints the shape and why")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "measured run time")
	fs.BoolVar(&f.partitioned, "partitioned", false, "each node works on its own share of the keys")
	fs.DurationVar(&f.shiftEvery, "shift-every", 0, "with --partitioned, move every node's share to the next node this often (paper §6.5)")
	fs.BoolVar(&f.check, "check", false, "record the history and check it with porcupine")
	fs.DurationVar(&f.checkTimeout, "check-timeout", time.Minute, "porcupine's time budget")
	fs.StringVar(&f.historyOut, "history-out", "", "write the history as JSON lines (implies --check)")
	fs.StringVar(&f.logFile, "log", "", "collect the nodes' logs in this file (default: a file in a temporary directory, named on failure)")
	fs.StringVar(&f.cache, "cache", "256MiB", "buffer pool per node; with --protocol selcc each compute node's cache: --cache / 4 KiB frames of one line each, at most --records (the default holds every line of up to 65536 records: after its first miss of each line, a single compute node only hits)")
	fs.StringVar(&f.data, "data", "", "directory for the nodes' page stores (default in memory)")
	fs.StringVar(&f.durability, "durability", "none", "none (the paper's: pages live in the caches) or process (every update's pages written through to their directory's store before it returns; see 'scalestore node --help')")
	fs.BoolVar(&f.reformat, "reformat", false, "with --data: format the nodes' stores even where a node was killed (their pages are discarded)")
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON object as the last line")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines")
	fs.DurationVar(&f.shmSpin, "shm-spin", 0, "passed to the nodes (see 'scalestore node --help')")
	fs.StringVar(&f.keyOrder, "key-order", "ordered", "ordered (record i is key i) or hashed (YCSB's default: keys scattered by a bijective hash of i)")
	fs.BoolVar(&f.trace, "trace-remote", false, "break the remote page fetches into hops (outbox queueing, the peer's handler, the worker's wake-up; frames consumed by polling workers) and print them")
	fs.DurationVar(&f.pollSpin, "poll-spin", -1, "passed to the nodes (see 'scalestore node --help'; negative: the node's default)")
	fs.StringVar(&f.protocol, "protocol", "scalestore", "scalestore (the B-tree under YCSB), or selcc: SELCC's compute nodes cache --records lines of passive memory nodes (the register workload: each operation reads or writes one line), or any protocol built on protocolapi ('scalestore protocols'): the nodes of its layout as processes, each a procrunner node, --nodes of them running --threads workers that read and write --records keys (--workload register or rmw; --records defaults to the protocol's keys), a final read of every key, and with --check porcupine per key or the protocol's own history check")
	fs.IntVar(&f.cacheLines, "cache-lines", 0, "a plug-in protocol: cache lines a node (0: the protocol's default)")
	fs.StringVar(&f.mutant, "mutate", "", "a plug-in protocol: break one of its rules on purpose (its named mutants: 'scalestore protocols')")
	optionFlag(fs, &f.opts)
	fs.IntVar(&f.memoryNodes, "memory-nodes", 1, "with --protocol selcc: memory node processes (they register memory and run no handler); with an index --workload: memory servers")
	fs.StringVar(&f.workload, "workload", "ycsb", "ycsb (the protocol's own workload), or an index of the seed papers on memory servers: nam-cg, nam-fg, nam-hybrid or cell (gets, scans of 1 to --scan-len keys, puts and deletes of --records keys; --check: porcupine per key, a scan a read of every key it covers; docs/indexes.md)")
	fs.IntVar(&f.scanLen, "scan-len", 12, "index --workload: a scan covers 1 to this many keys")
	entries := protocols.Entries()
	for _, d := range protocols.Designs(entries) {
		if d.ClusterFlags != nil {
			d.ClusterFlags(fs)
		}
	}
	fs.BoolVar(&f.elastic, "elastic", false, "the decoupled architecture and Fig. 10's schedule (paper §6.6): --nodes storage nodes hold the pages and run no workers, --compute-nodes compute nodes (a cache, no pages) run them; the first works from the start, the others join one by one and leave in reverse order, each leaving node handing back every page it holds; prints the throughput of each second and checks that no directory names a node that left")
	fs.StringVar(&f.kill, "kill", "", "N@D: kill -9 node N's process D into the run (e.g. 2@3s): the others go on without it, their operations on its pages failing and counted, the rest served; --check covers the whole history (the killed node's reads are lost with it, its acknowledged writes count as writes of unknown time). The nodes keep their membership in an etcd this command runs, and write through (--durability process)")
	fs.DurationVar(&f.lease, "lease", time.Second, "with --kill: the nodes' membership lease (a dead node is out of the view within two)")
	fs.IntVar(&f.computeNodes, "compute-nodes", 3, "with --elastic: compute node processes (at least 2)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *autoShapeFlag {
		set := false
		fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "nodes" || fl.Name == "threads" })
		if set {
			fmt.Fprintln(stderr, "cluster: --auto-shape chooses --nodes and --threads: give either, not both")
			return 2
		}
		f.nodes, f.threads = autoShape(runtime.NumCPU())
		fmt.Fprintln(stderr, describeAutoShape(f.nodes, f.threads, runtime.NumCPU()))
	}
	// A plug-in protocol's keys may be fewer than its nodes (a hot key).
	_, plugErr := lookupPlugin(f.protocol)
	if f.nodes < 1 || f.nodes > 64 || f.threads < 1 || f.records < 1 || f.records < f.nodes && plugErr != nil || f.readRatio < 0 || f.readRatio > 1 || f.zipf < 0 || f.zipf >= 1 {
		fmt.Fprintln(stderr, "cluster: want --nodes 1..64, --threads >= 1, --records >= --nodes, --read-ratio in 0..1, --zipf in [0, 1)")
		return 2
	}
	if _, err := ycsb.KeyOrder(f.keyOrder); err != nil {
		fmt.Fprintf(stderr, "cluster: --key-order: %v\n", err)
		return 2
	}
	if err := checkTransport("cluster", f.kind); err != nil {
		fmt.Fprintf(stderr, "cluster: --transport: %v\n", err)
		return 2
	}
	if f.historyOut != "" {
		f.check = true
	}
	if f.kill != "" {
		node, after, ok := strings.Cut(f.kill, "@")
		var err error
		if f.killNode, err = strconv.Atoi(node); err == nil && ok {
			f.killAfter, err = time.ParseDuration(after)
		}
		if !ok || err != nil || f.killNode < 0 || f.killNode >= f.nodes || f.killAfter < 0 || f.killAfter >= f.duration {
			fmt.Fprintf(stderr, "cluster: --kill %q: want N@D, N a node (0..%d), D a duration shorter than --duration\n", f.kill, f.nodes-1)
			return 2
		}
		if f.workload != "ycsb" || f.protocol != "scalestore" || f.elastic || f.nodes < 2 {
			fmt.Fprintln(stderr, "cluster: --kill: the ScaleStore YCSB workload on 2 nodes or more")
			return 2
		}
		if f.durability == "none" {
			f.durability = "process" // a view change drops the dead node's copies: every write must be on its directory's store
		}
		dir, err := os.MkdirTemp("", "scalestore-cluster-etcd-")
		if err != nil {
			fmt.Fprintf(stderr, "cluster: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		etcd, err := membership.StartEmbedded(dir, membership.Ephemeral())
		if err != nil {
			fmt.Fprintf(stderr, "cluster: --kill: starting etcd: %v\n", err)
			return 1
		}
		defer etcd.Close()
		f.etcd = etcd.Endpoints()
		f.clusterID = uint64(os.Getpid())<<20 | uint64(time.Now().UnixNano())&(1<<20-1)
	}
	run := clusterRun
	if p, err := lookupPlugin(f.protocol); err == nil {
		if !f.pluginFlags(fs, p, stderr) {
			return 2
		}
		run = clusterRunPlugin
	} else if d := designOf(entries, f.protocol, false); d != nil {
		f.design, f.designName = d, f.protocol
	} else if f.protocol != "scalestore" {
		fmt.Fprintf(stderr, "cluster: --protocol %q: %v\n", f.protocol, err)
		return 2
	}
	switch {
	case f.plugin != nil:
	case f.workload == "ycsb":
	case designOf(entries, f.workload, true) != nil:
		f.design, f.designName = designOf(entries, f.workload, true), f.workload
	default:
		fmt.Fprintf(stderr, "cluster: --workload %q: want ycsb, %s\n", f.workload,
			orList(designNames(entries, func(d *cluster.Design) bool { return d.ByWorkload })))
		return 2
	}
	if f.elastic {
		if f.workload != "ycsb" || f.protocol != "scalestore" || f.partitioned || f.computeNodes < 2 || f.nodes+f.computeNodes > 64 {
			fmt.Fprintln(stderr, "cluster: --elastic: the ScaleStore YCSB workload, not partitioned, with --compute-nodes 2 or more (64 processes at most)")
			return 2
		}
		run = clusterRunElastic
	}
	switch {
	case f.plugin != nil:
	case f.design != nil:
		if !f.designFlags(fs, stderr) {
			return 2
		}
		run = clusterRunDesign
	case f.workload == "ycsb" && !f.partitioned && !f.elastic:
		warnOversubscribed(stderr, f.nodes, f.threads, runtime.NumCPU())
	}
	res, err := run(f, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "cluster: %v\n", err)
		return 1
	}
	for _, v := range res.HistoryViolations {
		fmt.Fprintf(stderr, "cluster: history: %s\n", v)
	}
	check := "not checked"
	if res.Checked {
		check = fmt.Sprintf("linearizable: %d violations in %d operations", res.Violations, res.HistoryOps)
		if f.plugin != nil && f.plugin.CheckHistory != nil {
			check = fmt.Sprintf("checked (%s's own history check): %d violations in %d operations", f.plugin.Name, res.Violations, res.HistoryOps)
		}
		if res.Undecided {
			check += " (porcupine ran out of time on some keys)"
		}
	}
	if f.design != nil {
		var figures strings.Builder
		printClusterFigures(&figures, res, check)
		fmt.Fprint(stdout, f.plan.Report(cluster.Report{Name: f.designName, Nodes: res.Nodes, MemoryNodes: res.MemoryNodes,
			Transport: res.Transport, Dropped: res.MemoryMessages, OpsPerSec: res.OpsPerSec, P50us: res.P50us, P99us: res.P99us,
			Scans: res.Scans, ScanMeanUs: res.ScanMeanUs, ScanRoundTrips: res.ScanRoundTrips, ScanReads: res.ScanReads,
			ScanLen: f.scanLen, HeadGroup: res.HeadGroup, Check: check, Figures: figures.String()}))
	} else if f.plugin != nil {
		printPluginFigures(stdout, res, check)
	} else {
		printClusterFigures(stdout, res, check)
	}
	if f.asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(stdout, string(b))
	}
	if res.Violations > 0 {
		return 1
	}
	return 0
}

// designFlags checks --memory-nodes and --cache for a design on compute
// and memory nodes and has the design plan its run (--records, unless
// given, is the design's choice).
func (f *clusterFlags) designFlags(fs *flag.FlagSet, stderr io.Writer) bool {
	if f.memoryNodes < 1 || f.nodes+f.memoryNodes > 64 {
		fmt.Fprintln(stderr, "cluster: --memory-nodes: want at least 1, and at most 64 processes in all")
		return false
	}
	b, err := ycsb.ParseSize(f.cache)
	if err != nil {
		fmt.Fprintf(stderr, "cluster: --cache: %v\n", err)
		return false
	}
	f.cacheBytes = int64(b)
	recordsSet := false
	fs.Visit(func(fl *flag.Flag) { recordsSet = recordsSet || fl.Name == "records" })
	f.plan, err = f.design.Plan(f.designName, cluster.ClusterConfig{Nodes: f.nodes, MemoryNodes: f.memoryNodes, Threads: f.threads,
		Records: f.records, RecordsSet: recordsSet, ScanLen: f.scanLen, CacheBytes: f.cacheBytes, Transport: f.kind, Duration: f.duration})
	if err != nil {
		fmt.Fprintf(stderr, "cluster: %v\n", err)
		return false
	}
	f.records = f.plan.Records
	return true
}

// clusterRunDesign runs a registered protocol's process design: the
// processes of runMemoryNodes with the node arguments of its plan.
func clusterRunDesign(f clusterFlags, stderr io.Writer) (clusterResult, error) {
	res, dropped, err := runMemoryNodes(f, memoryNodeDesign{protocol: f.designName, name: f.designName, args: f.plan.NodeArgs,
		running: f.plan.Running, dropped: f.plan.Dropped}, stderr)
	if f.plan.DroppedToMemory {
		res.MemoryMessages = dropped
	}
	res.HeadGroup = f.plan.HeadGroup
	return res, err
}

// printClusterFigures prints the figures of a ScaleStore run (and of a
// design that prints them after its own).
func printClusterFigures(stdout io.Writer, res clusterResult, check string) {
	if res.Elastic {
		fmt.Fprintf(stdout, "%d compute nodes and ", res.ComputeNodes)
	}
	fmt.Fprintf(stdout, "%d nodes over %s: %.0f ops/s  p50 %.1fus  p99 %.1fus  p99.9 %.1fus  hit ratio %.3f  remote page fetches %d (p50 %.1fus p99 %.1fus)  %s\n",
		res.Nodes, res.Transport, res.OpsPerSec, res.P50us, res.P99us, res.P999us, res.HitRatio, res.RemotePageFetches, res.FetchP50us, res.FetchP99us, check)
	if res.Elastic {
		printElastic(stdout, res)
	}
	if res.Killed != nil {
		fmt.Fprintf(stdout, "node %d killed (kill -9) %.1fs into the run; the view without it %.0f ms later; the survivors finished the run: %d operations served, %d failed on its pages or were cut by the view change\n",
			*res.Killed, res.KilledAtS, res.ToViewMS, res.Ops, res.Unavailable)
	}
	if t := res.Trace; t != nil {
		fmt.Fprintf(stdout, "remote fetch p50 %.1fus (p99 %.1fus), request to reply handled: the requester's outbox queueing, the transport both ways, the peer's wait for a reader or poller and its handler; then the requester's wake-up:\n",
			res.FetchP50us, res.FetchP99us)
		fmt.Fprintf(stdout, "  outbox queueing  p50 %.1fus p99 %.1fus  (%d of %d messages queued; the rest went straight into the transport)\n",
			t.QueueP50us, t.QueueP99us, t.Queued, t.Sent)
		fmt.Fprintf(stdout, "  peer handler     p50 %.1fus p99 %.1fus  (a request or transfer request, delivery to return)\n", t.HandlerP50us, t.HandlerP99us)
		fmt.Fprintf(stdout, "  wake-up          p50 %.1fus p99 %.1fus  (Wake to the worker running)\n", t.WakeP50us, t.WakeP99us)
		if t.Received > 0 {
			fmt.Fprintf(stdout, "  frames consumed by polling workers: %d of %d (%.0f%%); the rest by reader goroutines\n",
				t.Polled, t.Received, 100*float64(t.Polled)/float64(t.Received))
		}
	}
}

// child is one node process under the parent's control.
type child struct {
	id    int
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	mu    sync.Mutex
	alive chan struct{}
}

func (c *child) call(cmd cluster.Command) (cluster.Reply, error) {
	var rep cluster.Reply
	err := c.exchange(cmd.Op, cmd, &rep, func() string { return rep.Error })
	return rep, err
}

// exchange sends one command and reads its reply into rep; errOf reads the
// reply's error.
func (c *child) exchange(op string, cmd, rep any, errOf func() string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, _ := json.Marshal(cmd)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("node %d: %w", c.id, err)
	}
	if !c.out.Scan() {
		return fmt.Errorf("node %d exited during %q", c.id, op)
	}
	if err := json.Unmarshal(c.out.Bytes(), rep); err != nil {
		return fmt.Errorf("node %d: bad reply %q: %w", c.id, c.out.Text(), err)
	}
	if e := errOf(); e != "" {
		return fmt.Errorf("node %d: %s: %s", c.id, op, e)
	}
	return nil
}

// freeAddrs finds n free loopback ports (the kernel picks them; a port
// could be taken again before the node binds it, which the node reports).
func freeAddrs(n int) ([]string, error) {
	addrs := make([]string, n)
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs, nil
}

func clusterRun(f clusterFlags, stderr io.Writer) (res clusterResult, err error) {
	p, end, err := launch(f, "cluster", f.nodes, stderr, func(i int, p *processes) []string {
		return f.nodeArgs(i, p.addrs, p.peers, p.tmp, p.logFile)
	})
	defer end(&err)
	if err != nil {
		return res, err
	}
	children := p.children
	progress, history := f.progress(stderr), p.history(f)
	if err := p.openTable(); err != nil {
		return res, err
	}
	// Load: every node inserts its share, all at once.
	progress("loading %d records on %d nodes...", f.records, f.nodes)
	loadStart := time.Now()
	if err := each(children, func(i int, c *child) error {
		_, err := c.call(cluster.Command{Op: "load", From: i * f.records / f.nodes, To: (i + 1) * f.records / f.nodes, Hashed: f.keyOrder == "hashed", HistoryFile: history("load", i)})
		return err
	}); err != nil {
		return res, err
	}
	res.LoadSeconds = time.Since(loadStart).Seconds()
	progress("loaded %d records in %.1fs; running for %v\n", f.records, res.LoadSeconds, f.duration)
	stopTicker := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		start := time.Now()
		collecting := false
		for {
			select {
			case <-stopTicker:
				return
			case <-t.C:
				switch ran := time.Since(start); {
				case ran <= f.duration+time.Second/2:
					progress("run %.0fs/%.0fs ", ran.Seconds(), f.duration.Seconds())
				case !collecting:
					// The nodes stop their workers and send their
					// histories: a large history takes seconds.
					collecting = true
					progress("collecting the nodes' results... ")
				}
			}
		}
	}()
	results := make([]cluster.RunResult, f.nodes)
	runStart := time.Now()
	var killed chan killReport
	if f.kill != "" {
		killed = make(chan killReport, 1)
		go killDuringRun(f, children[f.killNode], runStart, killed)
	}
	err = each(children, func(i int, c *child) error {
		wl := cluster.Workload{Hashed: f.keyOrder == "hashed", Records: f.records, ReadRatio: f.readRatio, Zipf: f.zipf, Threads: f.threads, Duration: f.duration,
			Seed: 42, Nodes: f.nodes, Index: i, Partitioned: f.partitioned, ShiftEvery: f.shiftEvery}
		rep, err := c.call(cluster.Command{Op: "run", Workload: &wl, HistoryFile: history("run", i)})
		if f.kill != "" && i == f.killNode {
			return nil // killed during the run, by design
		}
		if err == nil && rep.Result != nil {
			results[i] = *rep.Result
			if len(rep.Result.Errors) > 0 {
				err = fmt.Errorf("node %d: %s", i, rep.Result.Errors[0])
			}
		}
		return err
	})
	close(stopTicker)
	progress("\n")
	if killed != nil {
		k := <-killed
		if k.err != nil && err == nil {
			err = k.err
		}
		res.KilledAtS, res.ToViewMS = k.at.Sub(runStart).Seconds(), float64(k.toView.Microseconds())/1000
	}
	if err != nil {
		return res, err
	}
	load := res.LoadSeconds
	killedAt, toView := res.KilledAtS, res.ToViewMS
	res = aggregate(f, results, load)
	if f.kill != "" {
		res.Killed, res.KilledAtS, res.ToViewMS = &f.killNode, killedAt, toView
		for _, r := range results {
			res.Unavailable += r.Unavailable
		}
	}
	if f.check {
		var paths []string
		for i := range f.nodes {
			paths = append(paths, history("load", i))
			if f.kill == "" || i != f.killNode {
				paths = append(paths, history("run", i)) // the killed node's is lost with it
			}
		}
		err = checkHistories(f, paths, &res, progress)
	}
	return res, err
}

// killReport is what killDuringRun saw.
type killReport struct {
	at     time.Time
	toView time.Duration
	err    error
}

// killDuringRun kills node c's process --kill's delay into the run and
// measures the time until the others agree on a view without it.
func killDuringRun(f clusterFlags, c *child, runStart time.Time, out chan<- killReport) {
	var r killReport
	defer func() { out <- r }()
	time.Sleep(time.Until(runStart.Add(f.killAfter)))
	obs, err := membership.Observe(f.etcd, strconv.FormatUint(f.clusterID, 10))
	if err != nil {
		r.err = err
		return
	}
	defer obs.Close()
	r.at = time.Now()
	c.cmd.Process.Kill()
	at, err := waitView(obs, func(v membership.View) bool { return v.Number > 0 && !v.Has(protocol.NodeID(c.id)) }, 5*f.lease+5*time.Second)
	if err != nil {
		r.err = fmt.Errorf("--kill: no view without node %d: %w", c.id, err)
		return
	}
	r.toView = at.Sub(r.at)
}

// progress prints progress lines on stderr unless --quiet.
func (f *clusterFlags) progress(stderr io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if !f.quiet {
			fmt.Fprintf(stderr, "\r"+format, a...)
		}
	}
}

// openTable creates the YCSB table on the first node and opens it on the
// others.
func (p *processes) openTable() error {
	rep, err := p.children[0].call(cluster.Command{Op: "create"})
	if err != nil {
		return err
	}
	for _, c := range p.children[1:] {
		if _, err := c.call(cluster.Command{Op: "open", Catalog: rep.Catalog}); err != nil {
			return err
		}
	}
	return nil
}

// history names the file of node i's history of a phase (load, run) with
// --check; "" without.
func (p *processes) history(f clusterFlags) func(phase string, i int) string {
	return func(phase string, i int) string {
		if !f.check {
			return ""
		}
		return filepath.Join(p.tmp, fmt.Sprintf("%s-%d.jsonl", phase, i))
	}
}

// nodeArgs are the arguments of node process i of a ScaleStore cluster.
func (f *clusterFlags) nodeArgs(i int, addrs, peers []string, tmp, logFile string) []string {
	args := []string{"node", "--control", "--id", fmt.Sprint(i), "--listen", addrs[i], "--peers", strings.Join(peers, ","),
		"--transport", f.kind, "--socket-dir", tmp, "--cache", f.cache, "--log", logFile, "--durability", f.durability}
	if f.data != "" {
		args = append(args, "--data", f.data)
	}
	if f.reformat {
		args = append(args, "--reformat")
	}
	if f.trace {
		args = append(args, "--trace-remote")
	}
	if f.pollSpin >= 0 {
		args = append(args, "--poll-spin", f.pollSpin.String())
	} else if f.kind == "shm" && f.nodes*f.threads <= runtime.NumCPU() {
		// Every worker has a core of its own: one waiting for a peer may
		// poll long (its peer's worker is on another core and answers at
		// its next operation), and the readers nap meanwhile. With more
		// workers than cores the node's adaptive default stays: polling
		// would take the CPU from the worker it waits for.
		args = append(args, "--poll-spin", dedicatedPollSpin.String())
	}
	if f.shmSpin != 0 {
		args = append(args, "--shm-spin", f.shmSpin.String())
	}
	if len(f.etcd) > 0 {
		// Every run a cluster of its own in etcd.
		args = append(args, "--etcd", strings.Join(f.etcd, ","), "--lease", f.lease.String(), "--cluster-id", strconv.FormatUint(f.clusterID, 10))
	}
	return args
}

// dedicatedPollSpin is the poll window the cluster gives shm nodes when
// every worker of the cluster has a core (nodeArgs).
const dedicatedPollSpin = 500 * time.Microsecond

// spawnChildren starts n node processes with the arguments argsFor gives
// each; stop closes their stdin (a node exits when it closes) and kills
// those still alive after 5 s. stop must be called even after an error.
func spawnChildren(exe string, n int, stderr io.Writer, argsFor func(i int) []string) ([]*child, func(), error) {
	children := make([]*child, n)
	stop := func() {
		for _, c := range children {
			if c == nil {
				continue
			}
			c.in.Close()
			select {
			case <-c.alive:
			case <-time.After(5 * time.Second):
				c.cmd.Process.Kill()
				<-c.alive
			}
		}
	}
	for i := range n {
		cmd := exec.Command(exe, argsFor(i)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Stderr = stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return children, stop, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return children, stop, err
		}
		if err := cmd.Start(); err != nil {
			return children, stop, fmt.Errorf("starting node %d: %w", i, err)
		}
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		c := &child{id: i, cmd: cmd, in: in, out: sc, alive: make(chan struct{})}
		go func() { cmd.Wait(); close(c.alive) }()
		children[i] = c
	}
	return children, stop, nil
}

// each runs fn on every child at once and returns the first error.
func each(cs []*child, fn func(i int, c *child) error) error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn(i, c) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func aggregate(f clusterFlags, results []cluster.RunResult, load float64) clusterResult {
	res := clusterResult{Nodes: f.nodes, Transport: f.kind, Records: f.records, Threads: f.threads, ReadRatio: f.readRatio, Zipf: f.zipf, LoadSeconds: load}
	all := hdrhistogram.New(1, 60_000_000, 3)
	fetches := hdrhistogram.New(1, 60_000_000, 3)
	secs := 0.0
	var hits, misses uint64
	for _, r := range results {
		res.Ops += r.Ops
		secs = max(secs, r.Seconds)
		if r.Latencies != nil {
			all.Merge(hdrhistogram.Import(r.Latencies))
		}
		if r.Fetches != nil {
			fetches.Merge(hdrhistogram.Import(r.Fetches))
		}
		hits += r.Stats.CacheHits
		misses += r.Stats.CacheMisses
		res.RemotePageFetches += r.Stats.RemoteFetches
		res.Invalidations += r.Stats.Invalidations
	}
	if secs > 0 {
		res.OpsPerSec = float64(res.Ops) / secs
	}
	if hits+misses > 0 {
		res.HitRatio = float64(hits) / float64(hits+misses)
	}
	res.P50us = float64(all.ValueAtQuantile(50)) / 1000
	res.P99us = float64(all.ValueAtQuantile(99)) / 1000
	res.P999us = float64(all.ValueAtQuantile(99.9)) / 1000
	res.FetchP50us = float64(fetches.ValueAtQuantile(50)) / 1000
	res.FetchP99us = float64(fetches.ValueAtQuantile(99)) / 1000
	res.KeyOrder, res.Partitioned = f.keyOrder, f.partitioned
	res.Trace = mergeTrace(results)
	return res
}

func readHistory(path string) ([]checker.Op, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer fh.Close()
	return checker.ReadJSONLines(fh)
}

func writeOps(path string, ops []checker.Op) error {
	h := checker.NewHistory(len(ops))
	for _, op := range ops {
		h.Add(op)
	}
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--history-out: %w", err)
	}
	if err := h.WriteJSONLines(fh); err != nil {
		fh.Close()
		return fmt.Errorf("--history-out: %w", err)
	}
	return fh.Close()
}

// processes are the node processes of one cluster run, children of this
// process: the temporary directory they share (sockets, histories), the
// log file they write, and their loopback addresses.
type processes struct {
	tmp, logFile string
	addrs, peers []string
	children     []*child
	stop         func()
}

// launch starts total node processes in a fresh temporary directory named
// after kind, each with the arguments args gives. end stops them, prints
// the tail of their log if *errp is set and no --log was asked for (it is
// in the directory end removes), and removes the directory; it must be
// deferred even when launch fails.
func launch(f clusterFlags, kind string, total int, stderr io.Writer, args func(i int, p *processes) []string) (p *processes, end func(errp *error), err error) {
	p = &processes{stop: func() {}}
	end = func(errp *error) {
		p.stop()
		if *errp != nil && f.logFile == "" && p.logFile != "" {
			printLogTail(stderr, p.logFile)
		}
		if p.tmp != "" {
			os.RemoveAll(p.tmp)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return p, end, err
	}
	if p.tmp, err = os.MkdirTemp("", "scalestore-"+kind+"-"); err != nil {
		return p, end, err
	}
	p.logFile = f.logFile
	if p.logFile == "" {
		p.logFile = filepath.Join(p.tmp, "nodes.log")
	}
	if p.addrs, err = freeAddrs(total); err != nil {
		return p, end, err
	}
	for i, a := range p.addrs {
		p.peers = append(p.peers, fmt.Sprintf("%d=%s", i, a))
	}
	p.children, p.stop, err = spawnChildren(exe, total, stderr, func(i int) []string { return args(i, p) })
	return p, end, err
}

// printLogTail prints the last lines of the nodes' log after a failed run.
func printLogTail(stderr io.Writer, logFile string) {
	if b, err := os.ReadFile(logFile); err == nil && len(b) > 0 {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		fmt.Fprintf(stderr, "the nodes' last log lines:\n%s\n", strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
}

// checkHistories reads the history files at paths, writes them to
// --history-out if asked, and checks them with porcupine per key; the keys
// not linearizable add to res.Violations.
func checkHistories(f clusterFlags, paths []string, res *clusterResult, progress func(string, ...any)) error {
	var ops []checker.Op
	for _, path := range paths {
		part, err := readHistory(path)
		if err != nil {
			return err
		}
		ops = append(ops, part...)
	}
	ops = completeHistory(ops, f)
	res.Checked, res.HistoryOps = true, len(ops)
	if f.historyOut != "" {
		if err := writeOps(f.historyOut, ops); err != nil {
			return err
		}
	}
	if f.plugin != nil && f.plugin.CheckHistory != nil {
		progress("checking %d operations with %s's own history check...", len(ops), f.plugin.Name)
		if bad, ok := procrunner.CheckHistory(*f.plugin, ops); ok {
			progress("\n")
			res.Violations += len(bad)
			res.HistoryViolations = bad[:min(len(bad), 20)]
			return nil
		}
	}
	progress("checking %d operations with porcupine...", len(ops))
	cr, _ := checker.Check(ops, f.checkTimeout)
	progress("\n")
	res.Violations += len(cr.BadPages)
	res.Undecided = cr.Unknown
	return nil
}

// completeHistory gives the writes a view change cut (cluster.UnknownReturn)
// a return after everything else (they may have happened at any time after
// their call, or never), and, with --kill, adds the killed node's writes
// that reads saw: its history died with it, so each is a write of unknown
// time.
func completeHistory(ops []checker.Op, f clusterFlags) []checker.Op {
	if len(ops) == 0 {
		return ops
	}
	first, end := ops[0].Call, int64(0)
	for _, op := range ops {
		first, end = min(first, op.Call), max(end, op.Call)
		if op.Return != cluster.UnknownReturn {
			end = max(end, op.Return)
		}
	}
	end++
	written := map[uint64]bool{}
	for i := range ops {
		if ops[i].Return == cluster.UnknownReturn {
			ops[i].Return = end
		}
		if ops[i].Kind == checker.KindWrite {
			written[ops[i].Value] = true
		}
	}
	if f.kill == "" {
		return ops
	}
	client := 1 << 30
	for _, op := range ops {
		if op.Kind != checker.KindRead || op.Value == 0 || op.Value>>56 != uint64(f.killNode)+1 || written[op.Value] {
			continue
		}
		written[op.Value] = true
		ops = append(ops, checker.Op{Client: client, Page: op.Page, Kind: checker.KindWrite, Value: op.Value, Call: first, Return: end})
		client++
	}
	return ops
}
