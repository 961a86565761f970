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
)

const benchRESPUsage = `Usage: scalestore bench resp [--pipelines 1,16] [--requests N] [--clients 50]
       [--keyspace 100000] [--size 128] [--targets redis,redis-aof,...] [--json]

Runs Debian's redis-benchmark with the same flags
(-t set,get -r KEYSPACE -d SIZE -c CLIENTS -n REQUESTS -P PIPELINE) against
these targets, one after another in one run, each started fresh on free
loopback ports for every pipeline depth and stopped after it:

  redis            redis-server in memory (--save '' --appendonly no)
  redis-aof        redis-server durable: --appendonly yes --appendfsync always
                   (every write is fsynced before its reply)
  scalestore       one 'scalestore node' in memory
  scalestore-1p    the same with --procs 1 (one scheduler slot, like
                   redis-server's one thread: no thread wake-up per request)
  scalestore-data  one 'scalestore node --data DIR': every SET written through
                   to the store (O_DIRECT) before its reply, so it survives a
                   killed process (the device's cache is not flushed)
  scalestore-2shm  two 'scalestore node --transport shm' sharing the keys;
                   two redis-benchmark processes at once, one per node, each
                   with half the clients and half the requests, on the same
                   key space; their requests/s are summed

It prints one table: SET and GET requests per second and their ratio to the
in-memory redis-server at the same pipeline depth (the SET ratio of
scalestore-data is to redis-aof, marked *). --requests 0 runs 200000
requests at -P 1 and 1000000 at deeper pipelines, a few seconds each.
Progress goes to stderr. Needs redis-benchmark (Debian package redis-tools)
and, for the redis targets, redis-server (package redis-server).

--json prints one object: {"rows": [{"target", "pipeline", "requests",
"set_rps", "get_rps", "set_vs_redis", "get_vs_redis", "set_baseline"}],
"clients", "keyspace", "size"}.

Flags:
`

// benchRESPTargets are the targets in the order they run and print.
var benchRESPTargets = []string{"redis", "redis-aof", "scalestore", "scalestore-1p", "scalestore-data", "scalestore-2shm"}

// benchRESPRow is one line of the table.
type benchRESPRow struct {
	Target   string  `json:"target"`
	Pipeline int     `json:"pipeline"`
	Requests int     `json:"requests"`
	SetRPS   float64 `json:"set_rps"`
	GetRPS   float64 `json:"get_rps"`
	// The ratios to the baseline rows (0: the baseline did not run).
	SetVsRedis  float64 `json:"set_vs_redis"`
	GetVsRedis  float64 `json:"get_vs_redis"`
	SetBaseline string  `json:"set_baseline"`
}

// benchRESP is one run of 'bench resp'.
type benchRESP struct {
	bin                      string // the scalestore binary the node targets run
	redisServer, redisBench  string
	clients, keyspace, size  int
	startTimeout, runTimeout time.Duration
	stderr                   io.Writer
}

func runBenchRESP(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench resp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchRESPUsage); fs.PrintDefaults() }
	pipelines := fs.String("pipelines", "1,16", "pipeline depths (redis-benchmark -P), separated by commas")
	requests := fs.Int("requests", 0, "requests per test (redis-benchmark -n; 0: 200000 at -P 1, 1000000 deeper)")
	clients := fs.Int("clients", 50, "client connections (redis-benchmark -c; split between the nodes of scalestore-2shm)")
	keyspace := fs.Int("keyspace", 100000, "random keys (redis-benchmark -r)")
	size := fs.Int("size", 128, "value size in bytes (redis-benchmark -d)")
	targets := fs.String("targets", strings.Join(benchRESPTargets, ","), "targets, separated by commas")
	bin := fs.String("bin", "", "the scalestore binary the node targets run (default: this one)")
	runTimeout := fs.Duration("timeout", 10*time.Minute, "longest one redis-benchmark run may take")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
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
	depths, err := parseInts(*pipelines)
	if err != nil {
		fmt.Fprintf(stderr, "bench resp: --pipelines: %v\n", err)
		return 2
	}
	var names []string
	for _, t := range strings.Split(*targets, ",") {
		t = strings.TrimSpace(t)
		if !slices.Contains(benchRESPTargets, t) {
			fmt.Fprintf(stderr, "bench resp: --targets: unknown target %q (known: %s)\n", t, strings.Join(benchRESPTargets, ", "))
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
	case *clients < 1 || *keyspace < 1 || *size < 1:
		fmt.Fprintln(stderr, "bench resp: --clients, --keyspace and --size must be positive")
		return 2
	case *clients < 2 && slices.Contains(names, "scalestore-2shm"):
		fmt.Fprintln(stderr, "bench resp: scalestore-2shm needs --clients 2 or more (one per node at least)")
		return 2
	case *runTimeout <= 0:
		fmt.Fprintln(stderr, "bench resp: --timeout must be positive")
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
	for _, p := range depths {
		n := *requests
		if n == 0 {
			n = 200_000
			if p > 1 {
				n = 1_000_000
			}
		}
		for _, t := range names {
			fmt.Fprintf(stderr, "running %s -P %d (%d requests, %d clients) ...\n", t, p, n, *clients)
			set, get, err := b.run(ctx, t, p, n)
			if err != nil {
				if ctx.Err() != nil {
					fmt.Fprintf(stderr, "bench resp: %s -P %d: interrupted\n", t, p)
					return 1
				}
				fmt.Fprintf(stderr, "bench resp: %s -P %d: %v\n", t, p, err)
				return 1
			}
			fmt.Fprintf(stderr, "  %s -P %d: SET %.0f req/s, GET %.0f req/s\n", t, p, set, get)
			rows = append(rows, benchRESPRow{Target: t, Pipeline: p, Requests: n, SetRPS: set, GetRPS: get})
		}
	}
	respRatios(rows)
	if *asJSON {
		out, err := json.Marshal(map[string]any{"rows": rows, "clients": *clients, "keyspace": *keyspace, "size": *size})
		if err != nil {
			fmt.Fprintf(stderr, "bench resp: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, string(out))
		return 0
	}
	printRESPTable(stdout, rows, *clients, *keyspace, *size)
	return 0
}

// findPrograms finds redis-benchmark, redis-server (if a redis target
// runs) and the scalestore binary (if a node target runs).
func (b *benchRESP) findPrograms(targets []string) error {
	var err error
	if b.redisBench, err = exec.LookPath("redis-benchmark"); err != nil {
		return errors.New("redis-benchmark not found in $PATH: install Debian's redis-tools package (apt-get install redis-tools)")
	}
	if slices.ContainsFunc(targets, func(t string) bool { return strings.HasPrefix(t, "redis") }) {
		if b.redisServer, err = exec.LookPath("redis-server"); err != nil {
			return errors.New("redis-server not found in $PATH: install Debian's redis-server package (apt-get install redis-server), or leave the redis targets out of --targets")
		}
	}
	if slices.ContainsFunc(targets, func(t string) bool { return strings.HasPrefix(t, "scalestore") }) {
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

// run starts target fresh in its own temporary directory, waits until it
// answers PING, runs redis-benchmark against it, and stops it and removes
// the directory whatever happens.
func (b *benchRESP) run(ctx context.Context, target string, pipeline, requests int) (set, get float64, err error) {
	dir, err := os.MkdirTemp("", "scalestore-bench-resp-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	var servers []*respProc
	defer func() { stopRESPProcs(servers) }()
	start := func(name, path string, args ...string) (*respProc, error) {
		p, err := startRESPProc(name, path, args...)
		if p != nil {
			servers = append(servers, p)
		}
		return p, err
	}

	nAddrs := 1
	if target == "scalestore-2shm" {
		nAddrs = 4 // two cluster ports, two RESP ports
	} else if strings.HasPrefix(target, "scalestore") {
		nAddrs = 2
	}
	addrs, err := freeAddrs(nAddrs)
	if err != nil {
		return 0, 0, err
	}
	var resp []string // the addresses redis-benchmark runs against
	switch target {
	case "redis", "redis-aof":
		_, port, _ := net.SplitHostPort(addrs[0])
		args := []string{"--port", port, "--save", "", "--appendonly", "no", "--daemonize", "no"}
		if target == "redis-aof" {
			args = []string{"--port", port, "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", dir, "--daemonize", "no"}
		}
		if _, err := start("redis-server", b.redisServer, args...); err != nil {
			return 0, 0, err
		}
		resp = addrs[:1]
	case "scalestore", "scalestore-1p", "scalestore-data":
		args := []string{"node", "--id", "0", "--peers", "0=" + addrs[0], "--resp", addrs[1], "--shutdown-timeout", "10s"}
		if target == "scalestore-data" {
			args = append(args, "--data", filepath.Join(dir, "data"))
		}
		if target == "scalestore-1p" {
			args = append(args, "--procs", "1")
		}
		if _, err := start("node 0", b.bin, args...); err != nil {
			return 0, 0, err
		}
		resp = addrs[1:2]
	case "scalestore-2shm":
		peers := "0=" + addrs[0] + ",1=" + addrs[1]
		for i := range 2 {
			if _, err := start(fmt.Sprintf("node %d", i), b.bin, "node", "--id", strconv.Itoa(i), "--peers", peers,
				"--resp", addrs[2+i], "--transport", "shm", "--socket-dir", dir, "--shutdown-timeout", "10s"); err != nil {
				return 0, 0, err
			}
		}
		resp = addrs[2:4]
	default:
		return 0, 0, fmt.Errorf("unknown target %q", target)
	}
	deadline := time.Now().Add(b.startTimeout)
	for i, p := range servers {
		if err := waitRESPPing(ctx, p, resp[i], deadline, b.startTimeout); err != nil {
			return 0, 0, err
		}
	}

	// One redis-benchmark per RESP address, all at once, the clients and
	// requests split between them.
	type result struct {
		set, get float64
		err      error
	}
	results := make([]result, len(resp))
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, addr := range resp {
		c := b.clients / len(resp)
		n := requests / len(resp)
		if i < b.clients%len(resp) {
			c++
		}
		if i < requests%len(resp) {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			r.set, r.get, r.err = b.redisBenchmark(runCtx, addr, c, n, pipeline)
			if r.err != nil {
				cancel() // the other one's figures are worthless now
			}
		}()
	}
	wg.Wait()
	for _, r := range results {
		if r.err != nil && ctx.Err() == nil && !errors.Is(r.err, context.Canceled) {
			return 0, 0, r.err
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	for _, r := range results {
		set += r.set
		get += r.get
	}
	// A server that died under the load makes the figures suspect.
	for _, p := range servers {
		if p.exited() {
			return 0, 0, fmt.Errorf("%s exited during the benchmark (%s); its last output lines:\n%s", p.name, p.exitStatus(), p.out.lastLines(15))
		}
	}
	return set, get, nil
}

// redisBenchmark runs one redis-benchmark against addr and returns the SET
// and GET requests per second from its CSV output.
func (b *benchRESP) redisBenchmark(ctx context.Context, addr string, clients, requests, pipeline int) (set, get float64, err error) {
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(ctx, b.runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.redisBench, "-h", host, "-p", port, "--csv", "-t", "set,get",
		"-r", strconv.Itoa(b.keyspace), "-d", strconv.Itoa(b.size), "-c", strconv.Itoa(clients),
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
	what := fmt.Sprintf("redis-benchmark -p %s -c %d -n %d -P %d", port, clients, requests, pipeline)
	switch {
	case len(failed) > 0:
		return 0, 0, fmt.Errorf("%s failed: %s; its last stderr lines:\n%s", what, failed[0], errOut.tail.lastLines(15))
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return 0, 0, fmt.Errorf("%s did not finish within %v (--timeout); its last stderr lines:\n%s", what, b.runTimeout, errOut.tail.lastLines(15))
	case ctx.Err() != nil:
		return 0, 0, ctx.Err()
	case runErr != nil:
		return 0, 0, fmt.Errorf("%s: %v; its last stderr lines:\n%s", what, runErr, errOut.tail.lastLines(15))
	}
	rps, err := parseRedisBenchmarkCSV(stdout.Bytes())
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %v; its output:\n%s%s", what, err, stdout.String(), errOut.tail.lastLines(15))
	}
	set, okSet := rps["SET"]
	get, okGet := rps["GET"]
	if !okSet || !okGet {
		return 0, 0, fmt.Errorf("%s printed no SET or GET rate; its output:\n%s%s", what, stdout.String(), errOut.tail.lastLines(15))
	}
	return set, get, nil
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

// respRatios fills the ratio columns: against redis at the same pipeline
// depth, and for scalestore-data's SET against redis-aof.
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
		if base := find("redis", r.Pipeline); base != nil {
			r.GetVsRedis = r.GetRPS / base.GetRPS
			r.SetVsRedis = r.SetRPS / base.SetRPS
			r.SetBaseline = "redis"
		}
		if r.Target == "scalestore-data" {
			r.SetVsRedis, r.SetBaseline = 0, ""
			if base := find("redis-aof", r.Pipeline); base != nil {
				r.SetVsRedis = r.SetRPS / base.SetRPS
				r.SetBaseline = "redis-aof"
			}
		}
	}
}

func printRESPTable(w io.Writer, rows []benchRESPRow, clients, keyspace, size int) {
	ratio := func(v float64, mark string) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx%s", v, mark)
	}
	fmt.Fprintln(w, "| target | pipeline | SET req/s | GET req/s | SET vs redis | GET vs redis |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	marked := false
	for _, r := range rows {
		mark := ""
		if r.SetBaseline == "redis-aof" {
			mark, marked = "*", true
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", r.Target, r.Pipeline, thousands(r.SetRPS), thousands(r.GetRPS),
			ratio(r.SetVsRedis, mark), ratio(r.GetVsRedis, ""))
	}
	fmt.Fprintln(w)
	if marked {
		fmt.Fprintln(w, "* against redis-aof (appendfsync always) at the same pipeline depth.")
	}
	fmt.Fprintf(w, "redis-benchmark -t set,get -r %d -d %d -c %d (scalestore-2shm: two at once, %d and %d clients); "+
		"scalestore-data writes every SET to its store (O_DIRECT) before its reply, without flushing the device's cache; redis-aof fsyncs.\n", keyspace, size, clients, (clients+1)/2, clients/2)
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
