package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport/shm"
	"github.com/scalestore-go/scalestore/transport/tcp"
)

const benchUsage = `Usage: scalestore bench transport [--duration D] [--json]

Measures message passing between two processes on this machine. It starts a
second scalestore process (the hidden 'bench-peer' command) and, over each of
TCP loopback (TCP_NODELAY), a Unix domain socket and the shared-memory
transport (transport/shm, L5-style rings), runs for --duration each:

  ping-pong   a 64-byte request answered with 64 bytes, one in flight:
              round trips per second and round-trip latency p50/p99
  page fetch  a 64-byte request answered with 64 bytes and a 4 KiB page
              (a remote page fetch): latency p50/p99

and then the one-sided verbs, --verbs-duration each, one at a time, on the
peer's registered memory over tcp and shm:

  READ        4 KiB (a SELCC line)
  CAS, FAA    on one 8-byte word
  FAA+READ    the two verbs of a SELCC miss (a shared acquire)

(latency p50/p99). shm is measured both ways: on memory the peer allocated
from the transport, which this process maps so the calling thread does the
access ("shm"), and on memory it did not, each verb served by the peer's
reader through the rings ("shm-ring").

after a short warm-up of each. TCP and the Unix socket use one blocking
connection; shared memory is driven from the transport's handlers, as the
engine uses it. The peer process exits when this one does (its stdin closes;
it is killed if this process dies first).

--json prints one object with the keys tcp.round_trips_per_sec,
tcp.rtt_p50_us, tcp.rtt_p99_us, tcp.page_fetch_p50_us, tcp.page_fetch_p99_us,
tcp.page_fetch_vs_rtt (fetch p50 / rtt p50), the same for unix and shm,
shm_vs_tcp and unix_vs_tcp (ratios of round trips per second) and
duration_sec, and for tcp, shm and shm-ring the keys NAME.VERB_p50_us and
NAME.VERB_p99_us with VERB one of read, cas, faa and faa_read.

Flags:
`

// runBench dispatches 'scalestore bench <what>'.
func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, benchUsage)
		return 2
	}
	switch args[0] {
	case "transport":
		return runBenchTransport(args[1:], stdout, stderr)
	case "memory":
		return runBenchMemory(args[1:], stdout, stderr)
	case "io":
		return runBenchIO(args[1:], stdout, stderr)
	case "cluster":
		return runBenchCluster(args[1:], stdout, stderr)
	case "resp":
		return runBenchRESP(args[1:], stdout, stderr)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, benchUsage)
		fmt.Fprint(stdout, "\n"+benchMemoryUsage)
		fmt.Fprint(stdout, "\n"+benchIOUsage)
		fmt.Fprint(stdout, "\n"+benchClusterUsage)
		fmt.Fprint(stdout, "\n"+benchRESPUsage)
		return 0
	}
	fmt.Fprintf(stderr, "bench: unknown benchmark %q (known: transport, memory, io, cluster, resp)\n\n%s", args[0], benchUsage)
	return 2
}

func runBenchTransport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench transport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchUsage); fs.PrintDefaults() }
	duration := fs.Duration("duration", 2*time.Second, "measured time of each test (ping-pong and page fetch, per transport)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	spin := fs.Duration("shm-spin", 0, "how long a waiting shm reader polls before it parks (0: the transport's default)")
	verbs := fs.Duration("verbs-duration", 300*time.Millisecond, "measured time of each one-sided verb, per transport")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench transport: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *duration <= 0 || *verbs <= 0 {
		fmt.Fprintln(stderr, "bench transport: --duration and --verbs-duration must be positive")
		return 2
	}
	res, err := benchTransports(*duration, *verbs, *spin, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench transport: %v\n", err)
		return 1
	}
	if *asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			fmt.Fprintf(stderr, "bench transport: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	printBenchTable(stdout, res)
	fmt.Fprintln(stdout)
	printBenchVerbs(stdout, res)
	return 0
}

// Wire format of the stream benchmarks (TCP and Unix socket): a 64-byte
// request whose first byte says what to answer, and the answer: the request
// echoed, followed by a page for a fetch. Bytes 8..16 carry a sequence
// number the client checks.
const (
	reqPing  = 'p'
	reqFetch = 'f'
)

// benchTransports runs every measurement against a fresh peer process.
func benchTransports(d, verbs, spin time.Duration, stderr io.Writer) (map[string]float64, error) {
	dir, err := os.MkdirTemp("", "scalestore-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cluster := rand.Uint64()
	// Node 0 of the verbs over tcp; the peer is node 1.
	nop := func(protocol.NodeID, []byte, []byte) {}
	vt, err := tcp.New(tcp.Config{Self: 0, Listen: "127.0.0.1:0", ClusterID: cluster, Handler: nop})
	if err != nil {
		return nil, err
	}
	defer vt.Close()
	peer, err := startBenchPeer(dir, cluster, spin, vt.Addr().String(), stderr)
	if err != nil {
		return nil, err
	}
	defer peer.stop()

	warm := min(max(d/10, 20*time.Millisecond), 300*time.Millisecond)
	res := map[string]float64{"duration_sec": d.Seconds()}
	record := func(name string, ping, fetch runResult) {
		res[name+".round_trips_per_sec"] = float64(ping.count) / ping.elapsed.Seconds()
		res[name+".rtt_p50_us"] = usAt(ping.hist, 50)
		res[name+".rtt_p99_us"] = usAt(ping.hist, 99)
		res[name+".page_fetch_p50_us"] = usAt(fetch.hist, 50)
		res[name+".page_fetch_p99_us"] = usAt(fetch.hist, 99)
		res[name+".page_fetch_vs_rtt"] = usAt(fetch.hist, 50) / usAt(ping.hist, 50)
	}
	for _, s := range []struct{ name, network, addr string }{
		{"tcp", "tcp", peer.tcpAddr},
		{"unix", "unix", filepath.Join(dir, "stream.sock")},
	} {
		ping, fetch, err := benchStream(s.network, s.addr, d, warm)
		if err != nil {
			return nil, fmt.Errorf("%s: %w%s", s.name, err, peer.hint())
		}
		record(s.name, ping, fetch)
	}
	verbWarm := min(max(verbs/10, 10*time.Millisecond), 100*time.Millisecond)
	ping, fetch, err := benchShm(dir, cluster, spin, d, warm, func(tr *shm.Transport) error {
		return benchVerbsShm(tr, peer.regions, verbs, verbWarm, res)
	})
	if err != nil {
		return nil, fmt.Errorf("shm: %w%s", err, peer.hint())
	}
	if err := benchVerbsTCP(vt, peer.verbsAddr, peer.regions.tcp, verbs, verbWarm, res); err != nil {
		return nil, fmt.Errorf("tcp verbs: %w%s", err, peer.hint())
	}
	record("shm", ping, fetch)
	res["shm_vs_tcp"] = res["shm.round_trips_per_sec"] / res["tcp.round_trips_per_sec"]
	res["unix_vs_tcp"] = res["unix.round_trips_per_sec"] / res["tcp.round_trips_per_sec"]
	return res, nil
}

func usAt(h *hdrhistogram.Histogram, q float64) float64 {
	return float64(h.ValueAtQuantile(q)) / 1000
}

func newLatencyHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(10*time.Second), 3) // nanoseconds
}

// runResult is one measured run: round trips, their time, their latencies.
type runResult struct {
	count   int64
	elapsed time.Duration
	hist    *hdrhistogram.Histogram
}

// benchStream measures ping-pong and page fetches over one connection.
func benchStream(network, addr string, d, warm time.Duration) (ping, fetch runResult, err error) {
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return ping, fetch, fmt.Errorf("connecting to the peer: %w", err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		if err := tc.SetNoDelay(true); err != nil {
			return ping, fetch, err
		}
	}
	for _, kind := range []byte{reqPing, reqFetch} {
		if _, err := streamRun(conn, kind, warm); err != nil {
			return ping, fetch, err
		}
		r, err := streamRun(conn, kind, d)
		if err != nil {
			return ping, fetch, err
		}
		if kind == reqPing {
			ping = r
		} else {
			fetch = r
		}
	}
	return ping, fetch, nil
}

// streamRun does round trips of one kind for d, one at a time.
func streamRun(conn net.Conn, kind byte, d time.Duration) (runResult, error) {
	req := make([]byte, protocol.FrameSize)
	req[0] = kind
	resp := make([]byte, protocol.FrameSize+pageLenFor(kind))
	r := runResult{hist: newLatencyHist()}
	start := time.Now()
	deadline := start.Add(d)
	last := start
	for seq := uint64(1); ; seq++ {
		binary.LittleEndian.PutUint64(req[8:], seq)
		if _, err := conn.Write(req); err != nil {
			return r, fmt.Errorf("sending request %d: %w", seq, err)
		}
		if _, err := io.ReadFull(conn, resp); err != nil {
			return r, fmt.Errorf("reading answer %d: %w", seq, err)
		}
		if got := binary.LittleEndian.Uint64(resp[8:]); got != seq || resp[0] != kind {
			return r, fmt.Errorf("answer %d carries sequence number %d, kind %q", seq, got, resp[0])
		}
		now := time.Now()
		r.hist.RecordValue(now.Sub(last).Nanoseconds())
		r.count++
		last = now
		if now.After(deadline) {
			r.elapsed = now.Sub(start)
			return r, nil
		}
	}
}

func pageLenFor(kind byte) int {
	if kind == reqFetch {
		return protocol.PageSize
	}
	return 0
}

// shmRun is one measured run over shared memory, driven by the handler:
// each answer records its latency and sends the next request from the
// transport's reader goroutine, so no goroutine hand-off is on the path.
type shmRun struct {
	tr       *shm.Transport
	kind     byte
	req      []byte
	deadline time.Time
	start    time.Time
	last     time.Time
	seq      uint64
	res      runResult
	err      error
	done     chan struct{}
}

func (r *shmRun) begin(d time.Duration) error {
	r.req = make([]byte, protocol.FrameSize)
	r.req[0] = r.kind
	r.res.hist = newLatencyHist()
	r.done = make(chan struct{})
	r.start = time.Now()
	r.deadline = r.start.Add(d)
	r.last = r.start
	r.seq = 1
	binary.LittleEndian.PutUint64(r.req[8:], r.seq)
	return r.tr.Send(1, r.req, nil)
}

func (r *shmRun) answer(frame, payload []byte) {
	now := time.Now()
	if got := binary.LittleEndian.Uint64(frame[8:]); got != r.seq || frame[0] != r.kind || len(payload) != pageLenFor(r.kind) {
		r.finish(now, fmt.Errorf("answer %d carries sequence number %d, kind %q, %d payload bytes", r.seq, got, frame[0], len(payload)))
		return
	}
	r.res.hist.RecordValue(now.Sub(r.last).Nanoseconds())
	r.res.count++
	r.last = now
	if now.After(r.deadline) {
		r.finish(now, nil)
		return
	}
	r.seq++
	binary.LittleEndian.PutUint64(r.req[8:], r.seq)
	if err := r.tr.Send(1, r.req, nil); err != nil {
		r.finish(now, err)
	}
}

func (r *shmRun) finish(now time.Time, err error) {
	r.res.elapsed = now.Sub(r.start)
	r.err = err
	close(r.done)
}

// benchShm measures over the shared-memory transport: this process is node
// 0 and dials the peer's node 1.
// Then it calls verbs (the one-sided verbs) before it closes the transport.
func benchShm(dir string, cluster uint64, spin, d, warm time.Duration, verbs func(*shm.Transport) error) (ping, fetch runResult, err error) {
	var cur atomic.Pointer[shmRun]
	handler := func(_ protocol.NodeID, frame, payload []byte) {
		if r := cur.Load(); r != nil {
			r.answer(frame, payload)
		}
	}
	paths := shmPaths(dir)
	tr, err := shm.New(shm.Config{Self: 0, SocketPath: paths[0], Peers: paths, ClusterID: cluster, Handler: handler, Spin: spin})
	if err != nil {
		return ping, fetch, err
	}
	defer tr.Close()
	run := func(kind byte, d time.Duration) (runResult, error) {
		r := &shmRun{tr: tr, kind: kind}
		cur.Store(r)
		defer cur.Store(nil)
		if err := r.begin(d); err != nil {
			return runResult{}, err
		}
		select {
		case <-r.done:
		case <-time.After(d + 30*time.Second):
			return runResult{}, errors.New("no answer from the peer for 30s")
		}
		return r.res, r.err
	}
	for _, kind := range []byte{reqPing, reqFetch} {
		if _, err := run(kind, warm); err != nil {
			return ping, fetch, err
		}
		r, err := run(kind, d)
		if err != nil {
			return ping, fetch, err
		}
		if kind == reqPing {
			ping = r
		} else {
			fetch = r
		}
	}
	return ping, fetch, verbs(tr)
}

func shmPaths(dir string) map[protocol.NodeID]string {
	return map[protocol.NodeID]string{0: filepath.Join(dir, "shm0.sock"), 1: filepath.Join(dir, "shm1.sock")}
}

// benchPeer is the running peer process.
type benchPeer struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	tcpAddr   string
	verbsAddr string      // its tcp transport (node 1), for the verbs
	regions   verbRegions // its registered regions
	exited    chan struct{}
}

// startBenchPeer re-executes this binary as 'scalestore bench-peer' and
// waits for it to report its TCP address.
func startBenchPeer(dir string, cluster uint64, spin time.Duration, verbsPeer string, stderr io.Writer) (*benchPeer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable to start the peer: %w", err)
	}
	cmd := exec.Command(exe, "bench-peer", "--dir", dir, "--cluster", strconv.FormatUint(cluster, 10), "--spin", spin.String(), "--verbs-peer", verbsPeer)
	// The peer dies with us: it exits by itself when its stdin closes (we
	// exit or call stop), and the kernel kills it if we die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Our own pipe rather than StdoutPipe: Wait runs concurrently and must
	// not close the read end under the reader.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("starting the peer process %s: %w", exe, err)
	}
	p := &benchPeer{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	lines := make(chan string, 1)
	go func() {
		defer out.Close()
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
		io.Copy(io.Discard, out)
	}()
	select {
	case line := <-lines:
		// "ready tcp=ADDR verbs=ADDR regions=K,K,K"
		f := strings.Fields(line)
		var err error
		if len(f) == 4 && f[0] == "ready" && strings.HasPrefix(f[1], "tcp=") && strings.HasPrefix(f[2], "verbs=") && strings.HasPrefix(f[3], "regions=") {
			p.tcpAddr, p.verbsAddr = f[1][len("tcp="):], f[2][len("verbs="):]
			p.regions, err = parseVerbRegions(f[3][len("regions="):])
		} else {
			err = errors.New("not a ready line")
		}
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("the peer process (%s bench-peer) did not start: it said %q (%v)%s", exe, line, err, p.hint())
		}
	case <-time.After(10 * time.Second):
		p.stop()
		return nil, fmt.Errorf("the peer process (%s bench-peer) did not report ready within 10s", exe)
	}
	return p, nil
}

// hint adds a note to an error if the peer process is gone.
func (p *benchPeer) hint() string {
	select {
	case <-p.exited:
		return fmt.Sprintf(" (the peer process exited: %v; see its messages above)", p.cmd.ProcessState)
	default:
		return ""
	}
}

// stop closes the peer's stdin, which makes it exit, and kills it if it has
// not after 2s.
func (p *benchPeer) stop() {
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// runBenchPeer is the hidden 'scalestore bench-peer' command: the answering
// side of 'bench transport'. It serves TCP on a loopback port it prints, a
// Unix socket and the shared-memory node 1 in --dir, until stdin closes.
func runBenchPeer(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory of the sockets")
	cluster := fs.Uint64("cluster", 0, "shared-memory cluster id")
	spin := fs.Duration("spin", 0, "shm poll time before parking (0: default)")
	verbsPeer := fs.String("verbs-peer", "", "the tcp transport address of node 0 (the verbs' caller)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "bench-peer: --dir is required (this command is started by 'scalestore bench transport')")
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "bench-peer: %v\n", err)
		return 1
	}
	page := make([]byte, protocol.PageSize)
	for i := range page {
		page[i] = byte(i * 7)
	}
	tcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	defer tcpLn.Close()
	unixLn, err := net.Listen("unix", filepath.Join(*dir, "stream.sock"))
	if err != nil {
		return fail(err)
	}
	defer unixLn.Close()
	for _, ln := range []net.Listener{tcpLn, unixLn} {
		go serveStream(ln, page, stderr)
	}
	var tr atomic.Pointer[shm.Transport]
	handler := func(from protocol.NodeID, frame, _ []byte) {
		var p []byte
		if frame[0] == reqFetch {
			p = page
		}
		if t := tr.Load(); t != nil {
			if err := t.Send(from, frame, p); err != nil {
				fmt.Fprintf(stderr, "bench-peer: shm answer: %v\n", err)
			}
		}
	}
	paths := shmPaths(*dir)
	t, err := shm.New(shm.Config{Self: 1, SocketPath: paths[1], Peers: paths, ClusterID: *cluster, Handler: handler, Spin: *spin})
	if err != nil {
		return fail(err)
	}
	tr.Store(t)
	defer t.Close()
	nop := func(protocol.NodeID, []byte, []byte) {}
	peers := map[protocol.NodeID]string{}
	if *verbsPeer != "" {
		peers[0] = *verbsPeer
	}
	vt, err := tcp.New(tcp.Config{Self: 1, Listen: "127.0.0.1:0", Peers: peers, ClusterID: *cluster, Handler: nop})
	if err != nil {
		return fail(err)
	}
	defer vt.Close()
	regions, free, err := benchPeerRegions(t, vt)
	if err != nil {
		return fail(err)
	}
	defer free()
	fmt.Fprintf(stdout, "ready tcp=%s verbs=%s regions=%s\n", tcpLn.Addr(), vt.Addr(), regions)
	io.Copy(io.Discard, stdin) // until the parent closes it or dies
	return 0
}

// serveStream answers stream benchmark requests on every connection.
func serveStream(ln net.Listener, page []byte, stderr io.Writer) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return // closed
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		go func() {
			defer conn.Close()
			req := make([]byte, protocol.FrameSize)
			resp := make([]byte, protocol.FrameSize+protocol.PageSize)
			copy(resp[protocol.FrameSize:], page)
			for {
				if _, err := io.ReadFull(conn, req); err != nil {
					if !errors.Is(err, io.EOF) {
						fmt.Fprintf(stderr, "bench-peer: reading a request: %v\n", err)
					}
					return
				}
				copy(resp, req)
				n := protocol.FrameSize + pageLenFor(req[0])
				if _, err := conn.Write(resp[:n]); err != nil {
					fmt.Fprintf(stderr, "bench-peer: answering: %v\n", err)
					return
				}
			}
		}()
	}
}

func printBenchTable(w io.Writer, res map[string]float64) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "transport\tround trips/s\trtt p50\trtt p99\tpage fetch p50\tpage fetch p99\tfetch/rtt\t")
	for _, name := range []string{"tcp", "unix", "shm"} {
		fmt.Fprintf(tw, "%s\t%.0f\t%.1fµs\t%.1fµs\t%.1fµs\t%.1fµs\t%.2f\t\n", name,
			res[name+".round_trips_per_sec"], res[name+".rtt_p50_us"], res[name+".rtt_p99_us"],
			res[name+".page_fetch_p50_us"], res[name+".page_fetch_p99_us"], res[name+".page_fetch_vs_rtt"])
	}
	tw.Flush()
	fmt.Fprintf(w, "\nshm vs tcp: %.1fx round trips per second (unix vs tcp: %.1fx); 64-byte ping-pong and 64 B + 4 KiB page fetches, %v each, two processes\n",
		res["shm_vs_tcp"], res["unix_vs_tcp"], time.Duration(res["duration_sec"]*float64(time.Second)))
}
