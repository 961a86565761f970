package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"
)

// The rows of issue 49's targets: MSET of 10 keys at -P 1 and INCR at
// -P 16 (redis-benchmark), each against redis-server, and a transfer
// between two keys whose pages live on two nodes (WATCH and MULTI/EXEC
// from Go clients), against the same transfer on redis-server.

// benchOps are the operations --ops may name, in the order they run.
var benchOps = []string{"mset", "incr", "transfer"}

// benchOpRow is one row of the operations table.
type benchOpRow struct {
	Op       string  `json:"op"`
	Target   string  `json:"target"`
	How      string  `json:"how"`
	Pipeline int     `json:"pipeline"`
	Clients  int     `json:"clients"`
	Requests int     `json:"requests"` // transfers: the committed ones
	RPS      float64 `json:"rps"`      // requests (transfers) per second
	// Latency of a transfer from its first WATCH to its committed EXEC,
	// retries included; and how many EXECs aborted on the way.
	P50Ms  float64 `json:"p50_ms,omitempty"`
	P99Ms  float64 `json:"p99_ms,omitempty"`
	Aborts int     `json:"aborts,omitempty"`
	// The ratio to the redis row of the same op and clients (0: none),
	// and the goal for it (0: none).
	VsRedis float64 `json:"vs_redis"`
	Goal    float64 `json:"goal,omitempty"`
}

// parseBenchOps reads --ops: names of benchOps separated by commas, or
// empty for none.
func parseBenchOps(s string) ([]string, error) {
	var ops []string
	for _, op := range strings.Split(s, ",") {
		op = strings.TrimSpace(op)
		if op == "" {
			continue
		}
		if !slices.Contains(benchOps, op) {
			return nil, fmt.Errorf("unknown operation %q (known: %s)", op, strings.Join(benchOps, ", "))
		}
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// runOps runs the rows of ops for the targets among names that have them
// (redis and scalestore; the transfer's scalestore rows run two nodes).
// requests 0: 100,000 MSETs, 1,000,000 INCRs.
func (b *benchRESP) runOps(ctx context.Context, ops, names []string, requests int, transferTime time.Duration) ([]benchOpRow, error) {
	var rows []benchOpRow
	targets := []string{}
	for _, t := range []string{"redis", "scalestore"} {
		if slices.Contains(names, t) {
			targets = append(targets, t)
		}
	}
	for _, op := range ops {
		for _, target := range targets {
			var got []benchOpRow
			var err error
			if op == "transfer" {
				got, err = b.runTransfer(ctx, target, transferTime)
			} else {
				var row benchOpRow
				row, err = b.runBenchmarkOp(ctx, op, target, requests)
				got = []benchOpRow{row}
			}
			if err != nil {
				return nil, fmt.Errorf("%s on %s: %w", op, target, err)
			}
			for _, r := range got {
				fmt.Fprintf(b.stderr, "  %s %s (%s): %.0f/s\n", r.Op, r.Target, r.How, r.RPS)
			}
			rows = append(rows, got...)
		}
	}
	opRatios(rows)
	return rows, nil
}

// runBenchmarkOp runs redis-benchmark -t op on a fresh target: MSET at
// -P 1, INCR at -P 16, as the targets say.
func (b *benchRESP) runBenchmarkOp(ctx context.Context, op, target string, requests int) (benchOpRow, error) {
	row := benchOpRow{Op: op, Target: target, Clients: b.clients, Pipeline: 1, Goal: 0.5}
	n := 100_000
	if op == "incr" {
		row.Pipeline, row.Goal, n = 16, 0.7, 1_000_000
	}
	if requests > 0 {
		n = requests
	}
	row.Requests = n
	row.How = fmt.Sprintf("redis-benchmark -t %s -P %d", op, row.Pipeline)
	fmt.Fprintf(b.stderr, "running %s on %s -P %d (%d requests, %d clients) ...\n", op, target, row.Pipeline, n, b.clients)
	var servers []*respProc
	var dir string
	defer func() { stopRESPProcs(servers); removeDir(dir) }()
	resp, dir, err := b.start(ctx, target, &servers)
	if err != nil {
		return row, err
	}
	rps, err := b.phase(ctx, benchPhase{addrs: resp, tests: op}, b.keyspace, row.Pipeline, n)
	if err != nil {
		return row, err
	}
	row.RPS = rps[strings.ToUpper(op)]
	return row, stillRunning(servers)
}

// Transfer's two accounts, and the keys that make node 1 split the
// leaves above acct-a, so that acct-z's leaf is a page of node 1 while
// acct-a's stays node 0's.
const (
	transferFrom  = "acct-a"
	transferTo    = "acct-z"
	transferStart = 1_000_000
	transferFill  = 400 // keys of 400 bytes between the two: node 1's leaves
)

// runTransfer measures transfers of 1 between acct-a and acct-z, each
// WATCH acct-a acct-z, GET both (one round trip), then MULTI, SET both,
// EXEC (another): on redis-server with 1 and 2 clients, or on two
// scalestore nodes over tcp (acct-a on a page of node 0, acct-z on one of
// node 1) with 1 client on node 0, 1 client alternating between the
// nodes, and 2 clients, one on each. Each row runs for d.
func (b *benchRESP) runTransfer(ctx context.Context, target string, d time.Duration) ([]benchOpRow, error) {
	startName := target
	if target == "scalestore" {
		startName = "scalestore-2tcp"
	}
	fmt.Fprintf(b.stderr, "running transfer on %s (%v per row) ...\n", startName, d)
	var servers []*respProc
	var dir string
	defer func() { stopRESPProcs(servers); removeDir(dir) }()
	resp, dir, err := b.start(ctx, startName, &servers)
	if err != nil {
		return nil, err
	}
	node0, node1 := resp[0], resp[len(resp)-1]
	if err := setupTransfer(node0, node1); err != nil {
		return nil, err
	}
	type mode struct {
		how     string
		clients [][]string // per client, the nodes it goes through in turn
	}
	modes := []mode{{"1 client", [][]string{{node0}}}, {"2 clients", [][]string{{node0}, {node0}}}}
	if target == "scalestore" {
		modes = []mode{
			{"1 client on node 0", [][]string{{node0}}},
			{"1 client alternating nodes", [][]string{{node0, node1}}},
			{"2 clients, one per node", [][]string{{node0}, {node1}}},
		}
	}
	var rows []benchOpRow
	for _, m := range modes {
		row := benchOpRow{Op: "transfer", Target: startName, How: m.how, Pipeline: 1, Clients: len(m.clients)}
		lat, aborts, elapsed, err := transferLoad(ctx, m.clients, d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.how, err)
		}
		slices.Sort(lat)
		row.Requests, row.Aborts = len(lat), aborts
		row.RPS = float64(len(lat)) / elapsed.Seconds()
		row.P50Ms = ms(lat[len(lat)/2])
		row.P99Ms = ms(lat[len(lat)*99/100])
		rows = append(rows, row)
	}
	// Every transfer moved 1 from one account to the other: the sum holds.
	c, err := dialRESPClient(node1)
	if err != nil {
		return nil, err
	}
	defer c.close()
	var sum int64
	for _, k := range []string{transferFrom, transferTo} {
		r, err := c.do("GET", k)
		if err != nil {
			return nil, err
		}
		v, err := strconv.ParseInt(r.String(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %q is not a balance", k, r.String())
		}
		sum += v
	}
	if sum != 2*transferStart {
		return nil, fmt.Errorf("after the transfers the accounts sum to %d, want %d", sum, 2*transferStart)
	}
	return rows, stillRunning(servers)
}

// setupTransfer writes acct-a through node0, then the filler keys and
// acct-z through node1.
func setupTransfer(node0, node1 string) error {
	c0, err := dialRESPClient(node0)
	if err != nil {
		return err
	}
	defer c0.close()
	c1, err := dialRESPClient(node1)
	if err != nil {
		return err
	}
	defer c1.close()
	if _, err := c0.do("SET", transferFrom, strconv.Itoa(transferStart)); err != nil {
		return err
	}
	filler := strings.Repeat("x", 400)
	for i := range transferFill {
		if _, err := c1.do("SET", fmt.Sprintf("acct-y%04d", i), filler); err != nil {
			return err
		}
	}
	_, err = c1.do("SET", transferTo, strconv.Itoa(transferStart))
	return err
}

// transferLoad runs one goroutine per client, each transferring until d
// has passed, and returns every committed transfer's latency, the EXECs
// that aborted, and how long the run took.
func transferLoad(ctx context.Context, clients [][]string, d time.Duration) ([]time.Duration, int, time.Duration, error) {
	var mu sync.Mutex
	var lat []time.Duration
	aborts := 0
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for i, nodes := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conns := make([]*respClient, len(nodes))
			for j, addr := range nodes {
				c, err := dialRESPClient(addr)
				if err != nil {
					errs[i] = err
					return
				}
				defer c.close()
				conns[j] = c
			}
			var mine []time.Duration
			myAborts := 0
			for n := 0; time.Now().Before(end) && ctx.Err() == nil; n++ {
				c := conns[n%len(conns)]
				t0 := time.Now()
				for {
					ok, err := c.transfer()
					if err != nil {
						errs[i] = err
						return
					}
					if ok {
						break
					}
					myAborts++
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat, aborts = append(lat, mine...), aborts+myAborts
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, 0, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, err
	}
	if len(lat) == 0 {
		return nil, 0, 0, fmt.Errorf("no transfer committed in %v", d)
	}
	return lat, aborts, elapsed, nil
}

// respClient is a plain RESP connection: commands out as arrays of bulk
// strings (redcon.AppendArray), replies parsed by redcon.ReadNextRESP.
type respClient struct {
	conn net.Conn
	r    *bufio.Reader
	out  []byte
	in   []byte
}

func dialRESPClient(addr string) (*respClient, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &respClient{conn: c, r: bufio.NewReaderSize(c, 16<<10)}, nil
}

func (c *respClient) close() { c.conn.Close() }

// send queues a command.
func (c *respClient) send(args ...string) {
	c.out = redcon.AppendArray(c.out, len(args))
	for _, a := range args {
		c.out = redcon.AppendBulkString(c.out, a)
	}
}

// flush writes the queued commands and reads n replies; an error reply
// is an error.
func (c *respClient) flush(n int) ([]redcon.RESP, error) {
	c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.conn.Write(c.out); err != nil {
		return nil, err
	}
	c.out = c.out[:0]
	replies := make([]redcon.RESP, 0, n)
	for len(replies) < n {
		k, r := redcon.ReadNextRESP(c.in)
		if k == 0 {
			var buf [4096]byte
			m, err := c.r.Read(buf[:])
			if m == 0 && err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, fmt.Errorf("reading a reply: %w", err)
			}
			c.in = append(c.in, buf[:m]...)
			continue
		}
		if r.Type == redcon.Error {
			return nil, fmt.Errorf("error reply %q", r.String())
		}
		r.Raw = slices.Clone(r.Raw) // c.in is reused below
		r.Data = slices.Clone(r.Data)
		replies = append(replies, r)
		c.in = c.in[k:]
	}
	if len(c.in) == 0 {
		c.in = c.in[:0:0]
	}
	return replies, nil
}

func (c *respClient) do(args ...string) (redcon.RESP, error) {
	c.send(args...)
	rs, err := c.flush(1)
	if err != nil {
		return redcon.RESP{}, fmt.Errorf("%s: %w", args[0], err)
	}
	return rs[0], nil
}

// transfer is one try: ok false when EXEC aborted (a watched account was
// written in between).
func (c *respClient) transfer() (ok bool, err error) {
	c.send("WATCH", transferFrom, transferTo)
	c.send("GET", transferFrom)
	c.send("GET", transferTo)
	rs, err := c.flush(3)
	if err != nil {
		return false, fmt.Errorf("WATCH, GET, GET: %w", err)
	}
	a, errA := strconv.ParseInt(rs[1].String(), 10, 64)
	z, errZ := strconv.ParseInt(rs[2].String(), 10, 64)
	if errA != nil || errZ != nil {
		return false, fmt.Errorf("balances %q and %q are not integers", rs[1].String(), rs[2].String())
	}
	c.send("MULTI")
	c.send("SET", transferFrom, strconv.FormatInt(a-1, 10))
	c.send("SET", transferTo, strconv.FormatInt(z+1, 10))
	c.send("EXEC")
	rs, err = c.flush(4)
	if err != nil {
		return false, fmt.Errorf("MULTI, SET, SET, EXEC: %w", err)
	}
	exec := rs[3]
	switch {
	case exec.Type == redcon.Array && exec.Count < 0, string(exec.Raw) == "*-1\r\n":
		return false, nil
	case exec.Type == redcon.Array && exec.Count == 2:
		return true, nil
	}
	return false, fmt.Errorf("EXEC answered %q", exec.Raw)
}

// opRatios fills VsRedis: each row against the redis row of the same op,
// clients and pipeline.
func opRatios(rows []benchOpRow) {
	for i := range rows {
		r := &rows[i]
		for _, base := range rows {
			if base.Target == "redis" && base.Op == r.Op && base.Clients == r.Clients && base.Pipeline == r.Pipeline && base.RPS > 0 {
				r.VsRedis = r.RPS / base.RPS
			}
		}
	}
}

func printOpTable(w io.Writer, rows []benchOpRow) {
	fmt.Fprintln(w, "| op | target | how | clients | pipeline | done | per s | p50 ms | p99 ms | aborted EXECs | ratio to redis | goal |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	opt := func(v float64, format string) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	for _, r := range rows {
		aborts := "-"
		if r.Op == "transfer" {
			aborts = strconv.Itoa(r.Aborts)
		}
		goal := "-"
		if r.Goal > 0 && r.Target != "redis" {
			goal = fmt.Sprintf(">= %.1fx", r.Goal)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.Op, r.Target, r.How, r.Clients, r.Pipeline,
			thousands(float64(r.Requests)), thousands(r.RPS), opt(r.P50Ms, "%.3f"), opt(r.P99Ms, "%.3f"), aborts, opt(r.VsRedis, "%.2fx"), goal)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "mset and incr: redis-benchmark -r KEYSPACE -d SIZE -c CLIENTS; mset sets 10 keys per request. "+
		"transfer: Go clients, each try WATCH acct-a acct-z + GET + GET in one round trip, then MULTI, SET, SET, EXEC in another, "+
		"retried until EXEC commits; on scalestore two nodes over tcp, acct-a on a page of node 0 and acct-z on one of node 1. "+
		"The ratios are to the redis row of the same op and clients.")
}
