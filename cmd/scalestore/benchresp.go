package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/scalestore-go/scalestore/membership"
)

const benchRESPUsage = `Usage: scalestore bench resp [--pipelines 1,16|none] [--requests N] [--clients 50]
       [--keyspace 100000] [--size 128] [--targets redis,redis-aof,...]
       [--load-requests 1000000] [--ops mset,incr,transfer] [--op-requests N]
       [--transfer-time 2s] [--json]

Runs Debian's redis-benchmark with the same flags
(-t set,get -r KEYSPACE -d SIZE -c CLIENTS -n REQUESTS -P PIPELINE) against
these targets, one after another in one run, each started fresh on free
loopback ports for every pipeline depth and stopped after it. Each row says
what an acknowledged write survives, and its ratios are to the redis row
that promises the same:

  redis              redis-server in memory (--save '' --appendonly no)
  redis-aof-everysec redis-server --appendonly yes --appendfsync everysec:
                     the AOF is written every event-loop pass (a killed
                     process loses nothing) and fsynced every second (an OS
                     crash or power loss loses up to a second)
  redis-aof          redis-server --appendonly yes --appendfsync always
                     (every write is fsynced before its reply)
  scalestore         one 'scalestore node' in memory
  scalestore-1p      the same with --procs 1 (one scheduler slot, like
                     redis-server's one thread: no thread wake-up per request)
  scalestore-goroutine
                     one node with --resp-loop goroutine: a goroutine per
                     connection blocking in read, instead of the default
                     epoll event loops (compare with the scalestore row).
                     Any scalestore target takes the suffix -goroutine
                     (scalestore-data-goroutine, scalestore-remote-goroutine,
                     ...): its nodes run with --resp-loop goroutine
  scalestore-data    one 'scalestore node --data DIR' (--durability process):
                     every SET is on the store before its reply, so it
                     survives a killed process; against redis-aof-everysec
  scalestore-sync    the same with --durability sync: the device's cache is
                     flushed before the reply (power loss); against redis-aof
  scalestore-2shm    two 'scalestore node --transport shm' sharing the keys;
                     two redis-benchmark processes at once, one per node, each
                     with half the clients and half the requests, on the same
                     key space; their requests/s are summed
  scalestore-3tcp    three nodes over tcp, three redis-benchmark processes at
                     once, a third of the clients each
  scalestore-remote  two nodes over shm: the SETs through node 0 (which
                     allocates every page: the keys' home), then the GETs
                     through node 1, which fetches the pages from node 0;
                     against the one-node scalestore row
  scalestore-3tcp-r1, scalestore-3tcp-r2
                     three nodes over tcp with --data (durability process)
                     and membership on an etcd this command runs, --replicas
                     1 and 2: the cost of the second copy of every write
                     (docs/replication.md); r2 against r1
  load-redis-aof-everysec, load-scalestore-data
                     loading fresh keys: -t set -P 16 -r 100000000 and
                     --load-requests requests (1,000,000 by default), whatever
                     --pipelines says; the scalestore row (durability process)
                     against the redis one (appendfsync everysec)

--requests 0 runs 200000 requests at -P 1 and 1000000 at deeper pipelines,
a few seconds each. --pipelines none runs none of these rows (only --ops).

Then a second table, issue 49's targets, for the targets redis and
scalestore among --targets (--ops "" runs none):

  mset      redis-benchmark -t mset (10 keys a request) at -P 1, --op-requests
            of them (0: 100000); goal: scalestore >= 0.5x redis
  incr      redis-benchmark -t incr at -P 16 (0: 1000000); goal >= 0.7x redis
  transfer  moving 1 between two keys with WATCH, GET, GET (one round trip)
            and MULTI, SET, SET, EXEC (another), retried until EXEC commits,
            from Go clients for --transfer-time per row: on redis-server
            with 1 and 2 clients; on two scalestore nodes over tcp, the
            keys on pages of different nodes, with 1 client on node 0, 1
            client alternating between the nodes, and 2 clients, one per
            node. Transfers per second, latency p50 and p99, aborted EXECs;
            the sum of the two keys is checked at the end. Progress goes to stderr. Needs redis-benchmark (Debian
package redis-tools) and, for the redis targets, redis-server (package
redis-server).

--json prints one object: {"rows": [{"target", "promise", "pipeline",
"requests", "set_rps", "get_rps", "set_vs_redis", "get_vs_redis",
"set_baseline", "get_baseline"}], "ops": [{"op", "target", "how",
"clients", "pipeline", "requests", "rps", "p50_ms", "p99_ms", "aborts",
"vs_redis", "goal"}], "clients", "keyspace", "size"}.

Flags:
`

// respTarget is one target of bench resp: what it runs and what its
// acknowledged writes survive.
type respTarget struct {
	name    string
	promise string
	// base is the row the ratios are to (at the same pipeline depth).
	base string
	// load: a loading run (fresh keys, SET only, -P 16) instead of one per
	// pipeline depth.
	load bool
	// goroutine: the nodes run with --resp-loop goroutine (the target's
	// name ends in -goroutine).
	goroutine bool
}

// goroutineSuffix names the variant of a scalestore target whose nodes
// serve RESP with a goroutine per connection.
const goroutineSuffix = "-goroutine"

// benchRESPTargets are the targets in the order they run and print.
var benchRESPTargets = []respTarget{
	{name: "redis", promise: "nothing (memory)", base: "redis"},
	{name: "redis-aof-everysec", promise: "kill -9; OS crash loses <= 1 s", base: "redis"},
	{name: "redis-aof", promise: "power loss (fsync per write)", base: "redis"},
	{name: "scalestore", promise: "nothing (memory)", base: "redis"},
	{name: "scalestore-1p", promise: "nothing (memory)", base: "redis"},
	{name: "scalestore-goroutine", promise: "nothing (memory)", base: "redis", goroutine: true},
	{name: "scalestore-data", promise: "kill -9 (durability process)", base: "redis-aof-everysec"},
	{name: "scalestore-sync", promise: "power loss (durability sync)", base: "redis-aof"},
	{name: "scalestore-2shm", promise: "nothing (memory)", base: "redis"},
	{name: "scalestore-3tcp", promise: "nothing (memory)", base: "redis"},
	{name: "scalestore-remote", promise: "nothing (memory)", base: "scalestore"},
	{name: "scalestore-3tcp-r1", promise: "kill -9 (process); the dead node's pages wait", base: "scalestore-3tcp-r1"},
	{name: "scalestore-3tcp-r2", promise: "kill -9 of any one node, every page served", base: "scalestore-3tcp-r1"},
	{name: "load-redis-aof-everysec", promise: "kill -9; OS crash loses <= 1 s", load: true},
	{name: "load-scalestore-data", promise: "kill -9 (durability process)", base: "load-redis-aof-everysec", load: true},
}

func benchRESPTarget(name string) (respTarget, bool) {
	for _, t := range benchRESPTargets {
		if t.name == name {
			return t, true
		}
	}
	if base, ok := strings.CutSuffix(name, goroutineSuffix); ok && !isRedisTarget(base) {
		if t, ok := benchRESPTarget(base); ok && !t.goroutine {
			t.name, t.goroutine = name, true
			return t, true
		}
	}
	return respTarget{}, false
}

func benchRESPTargetNames() []string {
	var names []string
	for _, t := range benchRESPTargets {
		names = append(names, t.name)
	}
	return names
}

// loadKeyspace is the key space of the loading rows: almost every SET
// creates a key.
const loadKeyspace = 100_000_000

// benchRESPRow is one line of the table.
type benchRESPRow struct {
	Target   string  `json:"target"`
	Promise  string  `json:"promise"`
	Pipeline int     `json:"pipeline"`
	Requests int     `json:"requests"`
	SetRPS   float64 `json:"set_rps"`
	GetRPS   float64 `json:"get_rps"`
	// The ratios to the baseline rows (0: the baseline did not run).
	SetVsRedis  float64 `json:"set_vs_redis"`
	GetVsRedis  float64 `json:"get_vs_redis"`
	SetBaseline string  `json:"set_baseline"`
	GetBaseline string  `json:"get_baseline"`
}

// benchRESP is one run of 'bench resp'.
type benchRESP struct {
	bin                      string // the scalestore binary the node targets run
	redisServer, redisBench  string
	clients, keyspace, size  int
	startTimeout, runTimeout time.Duration
	stderr                   io.Writer
	// etcd are the etcd servers of the running target's membership.
	etcd []*membership.Embedded
}

// closeEtcd stops the running target's etcd servers (after its nodes).
func (b *benchRESP) closeEtcd() {
	for _, e := range b.etcd {
		if err := e.Close(); err != nil {
			fmt.Fprintf(b.stderr, "bench resp: stopping etcd: %v\n", err)
		}
	}
	b.etcd = nil
}

func runBenchRESP(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench resp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchRESPUsage); fs.PrintDefaults() }
	pipelines := fs.String("pipelines", "1,16", "pipeline depths (redis-benchmark -P), separated by commas")
	requests := fs.Int("requests", 0, "requests per test (redis-benchmark -n; 0: 200000 at -P 1, 1000000 deeper)")
	loadRequests := fs.Int("load-requests", 1_000_000, "SETs of fresh keys of the load-* targets (redis-benchmark -n)")
	clients := fs.Int("clients", 50, "client connections (redis-benchmark -c; split between the nodes of scalestore-2shm and scalestore-3tcp)")
	keyspace := fs.Int("keyspace", 100000, "random keys (redis-benchmark -r)")
	size := fs.Int("size", 128, "value size in bytes (redis-benchmark -d)")
	targets := fs.String("targets", strings.Join(benchRESPTargetNames(), ","), "targets, separated by commas")
	bin := fs.String("bin", "", "the scalestore binary the node targets run (default: this one)")
	runTimeout := fs.Duration("timeout", 10*time.Minute, "longest one redis-benchmark run may take")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	opsFlag := fs.String("ops", strings.Join(benchOps, ","), "issue 49's operations to run on redis and scalestore, separated by commas (\"\": none)")
	opRequests := fs.Int("op-requests", 0, "requests of the mset and incr rows (0: 100000 MSETs, 1000000 INCRs)")
	transferTime := fs.Duration("transfer-time", 2*time.Second, "how long each transfer row runs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench resp: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var depths []int
	if *pipelines != "none" {
		var err error
		if depths, err = parseInts(*pipelines); err != nil {
			fmt.Fprintf(stderr, "bench resp: --pipelines: %v (or none)\n", err)
			return 2
		}
	}
	ops, err := parseBenchOps(*opsFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bench resp: --ops: %v\n", err)
		return 2
	}
	var names []string
	for _, t := range strings.Split(*targets, ",") {
		t = strings.TrimSpace(t)
		if _, ok := benchRESPTarget(t); !ok {
			fmt.Fprintf(stderr, "bench resp: --targets: unknown target %q (known: %s)\n", t, strings.Join(benchRESPTargetNames(), ", "))
			return 2
		}
		if !slices.Contains(names, t) {
			names = append(names, t)
		}
	}
	switch {
	case *requests < 0:
		fmt.Fprintln(stderr, "bench resp: --requests must not be negative")
		return 2
	case *loadRequests < 1:
		fmt.Fprintln(stderr, "bench resp: --load-requests must be positive")
		return 2
	case *clients < 1 || *keyspace < 1 || *size < 1:
		fmt.Fprintln(stderr, "bench resp: --clients, --keyspace and --size must be positive")
		return 2
	case *clients < 2 && slices.Contains(names, "scalestore-2shm"):
		fmt.Fprintln(stderr, "bench resp: scalestore-2shm needs --clients 2 or more (one per node at least)")
		return 2
	case *clients < 3 && (slices.Contains(names, "scalestore-3tcp") || slices.Contains(names, "scalestore-3tcp-r1") || slices.Contains(names, "scalestore-3tcp-r2")):
		fmt.Fprintln(stderr, "bench resp: scalestore-3tcp needs --clients 3 or more (one per node at least)")
		return 2
	case *runTimeout <= 0:
		fmt.Fprintln(stderr, "bench resp: --timeout must be positive")
		return 2
	case *opRequests < 0:
		fmt.Fprintln(stderr, "bench resp: --op-requests must not be negative")
		return 2
	case *transferTime <= 0:
		fmt.Fprintln(stderr, "bench resp: --transfer-time must be positive")
		return 2
	}
	b := &benchRESP{bin: *bin, clients: *clients, keyspace: *keyspace, size: *size,
		startTimeout: 30 * time.Second, runTimeout: *runTimeout, stderr: stderr}
	if err := b.findPrograms(names); err != nil {
		fmt.Fprintf(stderr, "bench resp: %v\n", err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(stderr, "bench resp: %v: stopping every process it started\n", s)
			cancel()
		case <-ctx.Done():
		}
	}()

	var rows []benchRESPRow
	one := func(t respTarget, p, n int) bool {
		fmt.Fprintf(stderr, "running %s -P %d (%d requests, %d clients) ...\n", t.name, p, n, *clients)
		set, get, err := b.run(ctx, t, p, n)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(stderr, "bench resp: %s -P %d: interrupted\n", t.name, p)
			} else {
				fmt.Fprintf(stderr, "bench resp: %s -P %d: %v\n", t.name, p, err)
			}
			return false
		}
		fmt.Fprintf(stderr, "  %s -P %d: SET %.0f req/s, GET %.0f req/s\n", t.name, p, set, get)
		rows = append(rows, benchRESPRow{Target: t.name, Promise: t.promise, Pipeline: p, Requests: n, SetRPS: set, GetRPS: get})
		return true
	}
	for _, p := range depths {
		n := *requests
		if n == 0 {
			n = 200_000
			if p > 1 {
				n = 1_000_000
			}
		}
		for _, name := range names {
			if t, _ := benchRESPTarget(name); !t.load && !one(t, p, n) {
				return 1
			}
		}
	}
	for _, name := range names {
		if t, _ := benchRESPTarget(name); t.load && !one(t, 16, *loadRequests) {
			return 1
		}
	}
	respRatios(rows)
	opRows, err := b.runOps(ctx, ops, names, *opRequests, *transferTime)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "bench resp: interrupted")
		} else {
			fmt.Fprintf(stderr, "bench resp: %v\n", err)
		}
		return 1
	}
	if *asJSON {
		out, err := json.Marshal(map[string]any{"rows": rows, "ops": opRows, "clients": *clients, "keyspace": *keyspace, "size": *size})
		if err != nil {
			fmt.Fprintf(stderr, "bench resp: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, string(out))
		return 0
	}
	if len(rows) > 0 {
		printRESPTable(stdout, rows, *clients, *keyspace, *size)
	}
	if len(opRows) > 0 {
		if len(rows) > 0 {
			fmt.Fprintln(stdout)
		}
		printOpTable(stdout, opRows)
	}
	return 0
}

// findPrograms finds redis-benchmark, redis-server (if a redis target
// runs) and the scalestore binary (if a node target runs).
func (b *benchRESP) findPrograms(targets []string) error {
	var err error
	if b.redisBench, err = exec.LookPath("redis-benchmark"); err != nil {
		return errors.New("redis-benchmark not found in $PATH: install Debian's redis-tools package (apt-get install redis-tools)")
	}
	if slices.ContainsFunc(targets, isRedisTarget) {
		if b.redisServer, err = exec.LookPath("redis-server"); err != nil {
			return errors.New("redis-server not found in $PATH: install Debian's redis-server package (apt-get install redis-server), or leave the redis targets out of --targets")
		}
	}
	if slices.ContainsFunc(targets, func(t string) bool { return !isRedisTarget(t) }) {
		if b.bin == "" {
			if b.bin, err = os.Executable(); err != nil {
				return fmt.Errorf("finding this binary for the node targets: %w (name it with --bin)", err)
			}
		}
		if _, err := os.Stat(b.bin); err != nil {
			return fmt.Errorf("--bin: %w", err)
		}
	}
	return nil
}

func isRedisTarget(name string) bool {
	return strings.HasPrefix(strings.TrimPrefix(name, "load-"), "redis")
}

// benchPhase is one step of a target's benchmark: redis-benchmark runs
// the tests against every address at once, the clients and requests split
// between them.
type benchPhase struct {
	addrs []string
	tests string // redis-benchmark -t
}

// start starts target (a name of benchRESPTargets without load-, or
// scalestore-2tcp: two nodes over tcp) in a new temporary directory (dir:
// the caller removes it), appends its processes to *servers (the caller
// stops them), and waits until each answers PING at its RESP address.
func (b *benchRESP) start(ctx context.Context, target string, servers *[]*respProc) (resp []string, dir string, err error) {
	dir, err = os.MkdirTemp("", "scalestore-bench-resp-")
	if err != nil {
		return nil, "", err
	}
	start := func(name, path string, args ...string) (*respProc, error) {
		p, err := startRESPProc(name, path, args...)
		if p != nil {
			*servers = append(*servers, p)
		}
		return p, err
	}
	// A name ending in -goroutine: the target's nodes with --resp-loop
	// goroutine.
	goroutine := false
	if !isRedisTarget(target) {
		target, goroutine = strings.CutSuffix(target, goroutineSuffix)
	}
	nodes := 1
	switch target {
	case "scalestore-2shm", "scalestore-remote", "scalestore-2tcp":
		nodes = 2
	case "scalestore-3tcp", "scalestore-3tcp-r1", "scalestore-3tcp-r2":
		nodes = 3
	}
	// The replicas targets keep their membership on an etcd in this
	// process, closed with the target.
	etcdURL := ""
	if replicas, ok := strings.CutPrefix(target, "scalestore-3tcp-r"); ok && replicas != "" {
		e, err := membership.StartEmbedded(filepath.Join(dir, "etcd"), membership.Ephemeral())
		if err != nil {
			return nil, dir, fmt.Errorf("%s: starting its etcd: %w", target, err)
		}
		b.etcd = append(b.etcd, e)
		etcdURL = strings.Join(e.Endpoints(), ",")
	}
	nAddrs := 1
	if !isRedisTarget(target) {
		nAddrs = 2 * nodes // the cluster ports, then the RESP ports
	}
	addrs, err := freeAddrs(nAddrs)
	if err != nil {
		return nil, dir, err
	}
	// resp: every server's RESP address, in order of servers.
	switch target {
	case "redis", "redis-aof", "redis-aof-everysec":
		_, port, _ := net.SplitHostPort(addrs[0])
		args := []string{"--port", port, "--save", "", "--appendonly", "no", "--daemonize", "no"}
		switch target {
		case "redis-aof":
			args = []string{"--port", port, "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", dir, "--daemonize", "no"}
		case "redis-aof-everysec":
			args = []string{"--port", port, "--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--dir", dir, "--daemonize", "no"}
		}
		if _, err := start("redis-server", b.redisServer, args...); err != nil {
			return nil, dir, err
		}
		resp = addrs[:1]
	case "scalestore", "scalestore-1p", "scalestore-data", "scalestore-sync":
		args := []string{"node", "--id", "0", "--peers", "0=" + addrs[0], "--resp", addrs[1], "--shutdown-timeout", "10s"}
		switch target {
		case "scalestore-data":
			args = append(args, "--data", filepath.Join(dir, "data"), "--durability", "process")
		case "scalestore-sync":
			args = append(args, "--data", filepath.Join(dir, "data"), "--durability", "sync")
		case "scalestore-1p":
			args = append(args, "--procs", "1")
		}
		if goroutine {
			args = append(args, "--resp-loop", "goroutine")
		}
		if _, err := start("node 0", b.bin, args...); err != nil {
			return nil, dir, err
		}
		resp = addrs[1:2]
	case "scalestore-2shm", "scalestore-3tcp", "scalestore-remote", "scalestore-2tcp", "scalestore-3tcp-r1", "scalestore-3tcp-r2":
		var peers []string
		for i := range nodes {
			peers = append(peers, fmt.Sprintf("%d=%s", i, addrs[i]))
		}
		for i := range nodes {
			args := []string{"node", "--id", strconv.Itoa(i), "--peers", strings.Join(peers, ","),
				"--resp", addrs[nodes+i], "--shutdown-timeout", "10s"}
			switch target {
			case "scalestore-3tcp", "scalestore-2tcp":
			case "scalestore-3tcp-r1", "scalestore-3tcp-r2":
				args = append(args, "--data", filepath.Join(dir, fmt.Sprintf("node%d", i)), "--durability", "process",
					"--etcd", etcdURL, "--replicas", strings.TrimPrefix(target, "scalestore-3tcp-r"))
			default:
				args = append(args, "--transport", "shm", "--socket-dir", dir)
			}
			if goroutine {
				args = append(args, "--resp-loop", "goroutine")
			}
			if _, err := start(fmt.Sprintf("node %d", i), b.bin, args...); err != nil {
				return nil, dir, err
			}
		}
		resp = addrs[nodes:]
	default:
		return nil, dir, fmt.Errorf("unknown target %q", target)
	}
	deadline := time.Now().Add(b.startTimeout)
	for i, p := range *servers {
		if err := waitRESPPing(ctx, p, resp[i], deadline, b.startTimeout); err != nil {
			return nil, dir, err
		}
	}
	return resp, dir, nil
}

// run starts target fresh in its own temporary directory, waits until it
// answers PING, runs redis-benchmark against it, and stops it and removes
// the directory whatever happens.
func (b *benchRESP) run(ctx context.Context, t respTarget, pipeline, requests int) (set, get float64, err error) {
	target := strings.TrimPrefix(t.name, "load-")
	var servers []*respProc
	var dir string
	defer func() { stopRESPProcs(servers); b.closeEtcd(); removeDir(dir) }()
	resp, dir, err := b.start(ctx, target, &servers)
	if err != nil {
		return 0, 0, err
	}

	phases := []benchPhase{{addrs: resp, tests: "set,get"}}
	keyspace := b.keyspace
	switch {
	case t.load:
		phases[0].tests = "set"
		keyspace = loadKeyspace
	case strings.TrimSuffix(target, goroutineSuffix) == "scalestore-remote":
		// Node 0 splits every leaf, so it is every page's directory;
		// node 1 reads them through the protocol.
		phases = []benchPhase{{addrs: resp[:1], tests: "set"}, {addrs: resp[1:], tests: "get"}}
	}
	for _, ph := range phases {
		rps, err := b.phase(ctx, ph, keyspace, pipeline, requests)
		if err != nil {
			return 0, 0, err
		}
		set += rps["SET"]
		get += rps["GET"]
	}
	return set, get, stillRunning(servers)
}

// stillRunning fails if a server died under the load, which makes the
// figures suspect.
func stillRunning(servers []*respProc) error {
	for _, p := range servers {
		if p.exited() {
			return fmt.Errorf("%s exited during the benchmark (%s); its last output lines:\n%s", p.name, p.exitStatus(), p.out.lastLines(15))
		}
	}
	return nil
}

func removeDir(dir string) {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// phase runs one redis-benchmark per address of ph, all at once, the
// clients and requests split between them, and sums their rates by test.
func (b *benchRESP) phase(ctx context.Context, ph benchPhase, keyspace, pipeline, requests int) (map[string]float64, error) {
	type result struct {
		rps map[string]float64
		err error
	}
	results := make([]result, len(ph.addrs))
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, addr := range ph.addrs {
		c := b.clients / len(ph.addrs)
		n := requests / len(ph.addrs)
		if i < b.clients%len(ph.addrs) {
			c++
		}
		if i < requests%len(ph.addrs) {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			r.rps, r.err = b.redisBenchmark(runCtx, addr, ph.tests, keyspace, c, n, pipeline)
			if r.err != nil {
				cancel() // the other ones' figures are worthless now
			}
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.err != nil && ctx.Err() == nil && !errors.Is(r.err, context.Canceled) {
			return nil, r.err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sum := map[string]float64{}
	for _, r := range results {
		for test, v := range r.rps {
			sum[test] += v
		}
	}
	return sum, nil
}

// redisBenchmark runs one redis-benchmark of tests (its -t) against addr
// and returns the requests per second of each test from its CSV output.
func (b *benchRESP) redisBenchmark(ctx context.Context, addr, tests string, keyspace, clients, requests, pipeline int) (map[string]float64, error) {
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(ctx, b.runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.redisBench, "-h", host, "-p", port, "--csv", "-t", tests,
		"-r", strconv.Itoa(keyspace), "-d", strconv.Itoa(b.size), "-c", strconv.Itoa(clients),
		"-n", strconv.Itoa(requests), "-P", strconv.Itoa(pipeline))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	var stdout bytes.Buffer
	// redis-benchmark retries a refused connection forever, spinning:
	// its first error line ends the run.
	var failed []string
	errOut := &lineWatcher{tail: &tailBuffer{max: 16 << 10}, onLine: func(line string) {
		if isRedisBenchmarkError(line) {
			failed = append(failed, line)
			cancel()
		}
	}}
	cmd.Stdout, cmd.Stderr = &stdout, errOut
	cmd.WaitDelay = 2 * time.Second
	runErr := cmd.Run()
	errOut.flush()
	what := fmt.Sprintf("redis-benchmark -p %s -t %s -c %d -n %d -P %d", port, tests, clients, requests, pipeline)
	switch {
	case len(failed) > 0:
		return nil, fmt.Errorf("%s failed: %s; its last stderr lines:\n%s", what, failed[0], errOut.tail.lastLines(15))
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("%s did not finish within %v (--timeout); its last stderr lines:\n%s", what, b.runTimeout, errOut.tail.lastLines(15))
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case runErr != nil:
		return nil, fmt.Errorf("%s: %v; its last stderr lines:\n%s", what, runErr, errOut.tail.lastLines(15))
	}
	rps, err := parseRedisBenchmarkCSV(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: %v; its output:\n%s%s", what, err, stdout.String(), errOut.tail.lastLines(15))
	}
	for _, test := range strings.Split(tests, ",") {
		if _, ok := rps[strings.ToUpper(test)]; !ok {
			return nil, fmt.Errorf("%s printed no %s rate; its output:\n%s%s", what, strings.ToUpper(test), stdout.String(), errOut.tail.lastLines(15))
		}
	}
	return rps, nil
}

// isRedisBenchmarkError tells whether a line redis-benchmark printed on
// stderr reports a failure (it warns on stderr too, e.g. when the server
// does not answer CONFIG GET, which is no failure).
func isRedisBenchmarkError(line string) bool {
	l := strings.ToLower(strings.TrimSpace(line))
	if l == "" || strings.HasPrefix(l, "warning") {
		return false
	}
	return strings.Contains(l, "could not connect") || strings.Contains(l, "error") ||
		strings.Contains(l, "reset by peer") || strings.Contains(l, "broken pipe")
}

// parseRedisBenchmarkCSV reads redis-benchmark --csv output:
//
//	"test","rps","avg_latency_ms",...
//	"SET","344827.59","1.977",...
//
// and returns requests per second by test name (upper case).
func parseRedisBenchmarkCSV(out []byte) (map[string]float64, error) {
	r := csv.NewReader(bytes.NewReader(out))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading its CSV: %w", err)
	}
	col := 1
	rps := map[string]float64{}
	for _, rec := range recs {
		if len(rec) == 0 {
			continue
		}
		if strings.EqualFold(rec[0], "test") {
			if i := slices.Index(rec, "rps"); i > 0 {
				col = i
			}
			continue
		}
		if len(rec) <= col {
			return nil, fmt.Errorf("CSV line %q has no rps column", strings.Join(rec, ","))
		}
		v, err := strconv.ParseFloat(rec[col], 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("CSV line %q: rps %q is not a positive number", strings.Join(rec, ","), rec[col])
		}
		name := strings.ToUpper(rec[0])
		if i := strings.IndexByte(name, ' '); i > 0 {
			name = name[:i] // e.g. "LPUSH (needed to benchmark LRANGE)"
		}
		rps[name] = v
	}
	if len(rps) == 0 {
		return nil, errors.New("no test lines in its CSV output")
	}
	return rps, nil
}

// respRatios fills the ratio columns: against each row's baseline (the
// redis row of the same promise, or for scalestore-remote the one-node
// row) at the same pipeline depth.
func respRatios(rows []benchRESPRow) {
	find := func(target string, p int) *benchRESPRow {
		for i := range rows {
			if rows[i].Target == target && rows[i].Pipeline == p {
				return &rows[i]
			}
		}
		return nil
	}
	for i := range rows {
		r := &rows[i]
		t, _ := benchRESPTarget(r.Target)
		base := find(t.base, r.Pipeline)
		if base == nil {
			continue
		}
		if r.SetRPS > 0 && base.SetRPS > 0 {
			r.SetVsRedis, r.SetBaseline = r.SetRPS/base.SetRPS, base.Target
		}
		if r.GetRPS > 0 && base.GetRPS > 0 {
			r.GetVsRedis, r.GetBaseline = r.GetRPS/base.GetRPS, base.Target
		}
	}
}

func printRESPTable(w io.Writer, rows []benchRESPRow, clients, keyspace, size int) {
	ratio := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", v)
	}
	rate := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return thousands(v)
	}
	fmt.Fprintln(w, "| target | an acknowledged write survives | pipeline | SET req/s | GET req/s | SET ratio | GET ratio | against |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		against := r.SetBaseline
		if against == "" {
			against = r.GetBaseline
		}
		if against == "" {
			against = "-"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", r.Target, r.Promise, r.Pipeline, rate(r.SetRPS), rate(r.GetRPS),
			ratio(r.SetVsRedis), ratio(r.GetVsRedis), against)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "redis-benchmark -t set,get -r %d -d %d -c %d (the nodes of scalestore-2shm and scalestore-3tcp each get their share of the clients at once; "+
		"scalestore-remote: the SETs through node 0, then the GETs through node 1; load-*: -t set -r %d). "+
		"The ratios are to the row named in the last column at the same pipeline depth.\n", keyspace, size, clients, loadKeyspace)
}

// thousands formats v rounded, with commas: 123,456.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// respProc is a server process the benchmark started: redis-server or a
// scalestore node, its output kept in a tail buffer.
type respProc struct {
	name string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{}
	err  error // how it exited, once done is closed
}

// exitStatus says how an exited process ended.
func (p *respProc) exitStatus() string {
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

func startRESPProc(name, path string, args ...string) (*respProc, error) {
	cmd := exec.Command(path, args...)
	// Its own process group, so a ^C reaches only this process, which
	// stops the servers itself; SIGKILL if this process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p := &respProc{name: name, cmd: cmd, out: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *respProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stopRESPProcs sends SIGTERM to every process at once (the nodes of a
// cluster wait for each other to stop), and SIGKILL to those still running
// 15 s later.
func stopRESPProcs(ps []*respProc) {
	for _, p := range ps {
		if !p.exited() {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(15 * time.Second)
	for _, p := range ps {
		select {
		case <-p.done:
		case <-deadline:
			p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// waitRESPPing waits until addr answers PING with +PONG, until deadline
// (limit after the servers started); it fails at once if the process exits.
func waitRESPPing(ctx context.Context, p *respProc, addr string, deadline time.Time, limit time.Duration) error {
	for {
		if respPing(addr) {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("%s exited before it answered PING at %s (%s); its last output lines:\n%s", p.name, addr, p.exitStatus(), p.out.lastLines(15))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer PING at %s within %v; its last output lines:\n%s", p.name, addr, limit, p.out.lastLines(15))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// respPing sends an inline PING and tells whether +PONG came back.
func respPing(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.TrimSpace(line) == "+PONG"
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// lastLines returns the last n lines, indented.
func (t *tailBuffer) lastLines(n int) string {
	t.mu.Lock()
	s := strings.TrimRight(string(t.buf), "\n")
	t.mu.Unlock()
	if s == "" {
		return "  (nothing)"
	}
	lines := strings.Split(s, "\n")
	lines = lines[max(0, len(lines)-n):]
	return "  " + strings.Join(lines, "\n  ")
}

// lineWatcher passes what is written to tail and every complete line
// (\n or \r ended: redis-benchmark redraws its progress with \r) to onLine.
type lineWatcher struct {
	tail    *tailBuffer
	onLine  func(string)
	partial []byte
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.tail.Write(p)
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexAny(w.partial, "\r\n")
		if i < 0 {
			break
		}
		w.onLine(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

// flush hands over a last line without a newline.
func (w *lineWatcher) flush() {
	if len(w.partial) > 0 {
		w.onLine(string(w.partial))
		w.partial = nil
	}
}
