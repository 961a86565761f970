package main

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/internal/respregister"
)

// respCluster is a cluster of `scalestore node --resp` processes (the
// processes of crashtest --cluster, failing the test on errors).
type respCluster struct {
	*clusterProcs
	t *testing.T
}

// startRESPCluster starts n nodes (the non-bootstrap ones first: any
// order works) and waits until each serves RESP. extra flags go to every
// node; data, if set, gives node i the directory data[i].
func startRESPCluster(t *testing.T, n int, data []string, extra ...string) *respCluster {
	t.Helper()
	addrs, err := freeAddrs(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("%d=%s", i, addrs[i]))
	}
	c := newRESPCluster(t, scalestoreBinary(t))
	c.resp = addrs[n:]
	for i := range n {
		args := []string{"node", "--id", strconv.Itoa(i), "--peers", strings.Join(peers, ","), "--resp", c.resp[i],
			"--cache", "16MiB", "--socket-dir", t.TempDir()}
		if data != nil {
			args = append(args, "--data", data[i])
		}
		c.add(append(args, extra...), c.resp[i])
	}
	c.start()
	return c
}

func newRESPCluster(t *testing.T, bin string) *respCluster {
	c := &respCluster{clusterProcs: &clusterProcs{bin: bin}, t: t}
	t.Cleanup(c.kill)
	return c
}

// add names one more node process (its arguments and RESP address).
func (c *respCluster) add(args []string, resp string) {
	c.args = append(c.args, args)
	c.procs = append(c.procs, nil)
	c.logs = append(c.logs, &strings.Builder{})
	if len(c.resp) < len(c.args) {
		c.resp = append(c.resp, resp)
	}
}

func (c *respCluster) start() {
	c.t.Helper()
	if err := c.clusterProcs.start(60 * time.Second); err != nil {
		c.t.Fatal(err)
	}
}

func (c *respCluster) allLogs() string { return c.tail() }

// stop sends SIGTERM to every node at once and waits for clean exits.
func (c *respCluster) stop() {
	c.t.Helper()
	if err := c.clusterProcs.stop(); err != nil {
		c.t.Fatalf("the nodes did not stop cleanly: %v\n%s", err, c.tail())
	}
}

func (c *respCluster) kill() {
	for i := range c.procs {
		c.clusterProcs.kill(i)
	}
}

func (c *respCluster) client(i int) *redis.Client {
	r := redis.NewClient(&redis.Options{Addr: c.resp[i], Protocol: 2, MaxRetries: -1, DialTimeout: 5 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	c.t.Cleanup(func() { r.Close() })
	return r
}

func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed (Debian package %s; .ci/run installs it)", name, pkg)
	}
	return p
}

// The README's example: two nodes, SET through one with redis-cli, GET
// through the other.
func TestREADMEExample(t *testing.T) {
	cli := needTool(t, "redis-cli", "redis-tools")
	c := startRESPCluster(t, 2, nil)
	host0, port0, _ := net.SplitHostPort(c.resp[0])
	host1, port1, _ := net.SplitHostPort(c.resp[1])
	if out, err := exec.Command(cli, "-h", host0, "-p", port0, "SET", "greeting", "hello").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "OK" {
		t.Fatalf("redis-cli SET: %v %q", err, out)
	}
	out, err := exec.Command(cli, "-h", host1, "-p", port1, "GET", "greeting").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("redis-cli GET on the other node: %v %q", err, out)
	}
	// redis-cli --scan lists every key, through either node.
	ctx := context.Background()
	r0 := c.client(0)
	for i := range 300 {
		if err := r0.Set(ctx, fmt.Sprintf("k%03d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	out, err = exec.Command(cli, "-h", host1, "-p", port1, "--scan").CombinedOutput()
	if err != nil || len(strings.Fields(string(out))) != 301 {
		t.Fatalf("redis-cli --scan on node 1 listed %d keys (want 301): %v", len(strings.Fields(string(out))), err)
	}
	c.stop()
}

// Real Redis clients on random nodes, every SET a unique value, the
// history per key checked with porcupine: linearizable across nodes, as
// seen from the wire. Then redis-benchmark against the cluster.
func TestRESPLinearizableAcrossNodes(t *testing.T) {
	for _, nodes := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d-nodes", nodes), func(t *testing.T) {
			c := startRESPCluster(t, nodes, nil)
			const clients, keys = 8, 12
			d := 2 * time.Second
			if testing.Short() {
				d = 500 * time.Millisecond
			}
			// A new connection to a random node every 20 operations.
			ops, err := respregister.Run(context.Background(), respregister.Config{Clients: clients, Keys: keys, Duration: d, OpsPerConn: 20,
				Dial: func(_ int, rng *rand.Rand) *redis.Client { return c.client(rng.Intn(nodes)) }})
			if err != nil {
				t.Fatal(err)
			}
			res, _ := checker.Check(ops, time.Minute)
			if !res.Ok {
				t.Fatalf("%d operations over RESP on %d nodes: not linearizable (keys %v, unknown=%v)", len(ops), nodes, res.BadPages, res.Unknown)
			}
			t.Logf("%d operations of %d clients on %d nodes: linearizable", len(ops), clients, nodes)
			if bench, err := exec.LookPath("redis-benchmark"); err == nil {
				host, port, _ := net.SplitHostPort(c.resp[nodes-1])
				out, err := exec.Command(bench, "-h", host, "-p", port, "-t", "set,get", "-n", "5000", "-c", "10", "-r", "1000", "-q").CombinedOutput()
				if err != nil || strings.Contains(strings.ToLower(string(out)), "error") || strings.Count(string(out), "requests per second") != 2 {
					t.Fatalf("redis-benchmark against the cluster: %v\n%s", err, out)
				}
			}
			c.stop()
		})
	}
}

// A cluster stopped with SIGTERM and started again on its data holds
// every key.
func TestRESPClusterRestart(t *testing.T) {
	data := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	c := startRESPCluster(t, 3, data)
	ctx := context.Background()
	const n = 3000
	for i := range n {
		if err := c.client(i%3).Set(ctx, fmt.Sprintf("user:%05d", i), fmt.Sprintf("value %d", i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.stop()
	c.start()
	for node := range 3 {
		r := c.client(node)
		for i := 0; i < n; i += 7 {
			v, err := r.Get(ctx, fmt.Sprintf("user:%05d", i)).Result()
			if err != nil || v != fmt.Sprintf("value %d", i) {
				t.Fatalf("after the restart, node %d: user:%05d = %q, %v", node, i, v, err)
			}
		}
	}
	if size, err := c.client(1).DBSize(ctx).Result(); err != nil || size != n {
		t.Fatalf("DBSIZE after the restart: %d %v", size, err)
	}
	c.stop()
}

// A node whose peer died answers with an error that names the peer, in
// bounded time, and keeps its RESP port open.
func TestRESPPeerDownNamesThePeer(t *testing.T) {
	c := startRESPCluster(t, 2, nil, "--timeout", "2s")
	ctx := context.Background()
	r0 := c.client(0)
	for i := range 2000 { // enough that both nodes allocate pages
		if err := c.client(i%2).Set(ctx, fmt.Sprintf("k%05d", i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.procs[1].Process.Kill()
	c.procs[1].Wait()
	c.procs[1] = nil
	start := time.Now()
	var err error
	for i := range 2000 {
		if err = r0.Set(ctx, fmt.Sprintf("k%05d", i), "w", 0).Err(); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "node 1") {
		t.Fatalf("writes after node 1 died: %v (want an error naming node 1)", err)
	}
	if waited := time.Since(start); waited > 20*time.Second {
		t.Fatalf("the error took %v", waited)
	}
	if pong, err := r0.Ping(ctx).Result(); err != nil || pong != "PONG" {
		t.Fatalf("node 0 stopped serving RESP: %v %v\nnode 0's log:\n%s", pong, err, c.logs[0].String())
	}
	t.Logf("error after node 1 died: %v", err)
}

// With write-through (the default durability), a node killed with SIGKILL
// loses no acknowledged write: clients SET unique values through every
// node, one node is killed mid-run, then all the others, and the cluster
// started again on the same stores holds, for every key, the last
// acknowledged write or one that was under way (porcupine over the whole
// history: writes cut by the kills have unknown outcomes).
func TestRESPKillLosesNoAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, d := range []string{"process", "sync"} {
		t.Run(d, func(t *testing.T) { killLosesNothing(t, d, 3) })
	}
	// One node logs alone (nodelog.go): a SET's answer, and that of
	// every GET that may have read it, waits until its record is in the
	// log. Readers check that no value read was lost by the kill.
	for _, d := range []string{"process", "sync"} {
		t.Run("one-node-"+d, func(t *testing.T) { killLosesNothing(t, d, 1) })
	}
}

func killLosesNothing(t *testing.T, durability string, nodes int) {
	var data []string
	for range nodes {
		data = append(data, t.TempDir())
	}
	c := startRESPCluster(t, nodes, data, "--timeout", "3s", "--durability", durability)
	ctx := context.Background()
	const clients, keys = 6, 40
	var mu sync.Mutex
	var ops, unknown []checker.Op
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// A loader puts fresh keys, so that leaves split all the time: a
	// split's pages are written through together (PersistAll), and every
	// key it acknowledged must be there after the restart.
	var loaded []int
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := c.client(0)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := r.Set(ctx, fmt.Sprintf("bulk:%07d", i), strings.Repeat("v", 100)+strconv.Itoa(i), 0).Err(); err != nil {
				return // a kill
			}
			mu.Lock()
			loaded = append(loaded, i)
			mu.Unlock()
		}
	}()
	for cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(cl)))
			r := c.client(cl % nodes)
			var seq uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := rng.Intn(keys)
				if rng.Intn(3) == 0 {
					// A read: a value it returns must survive the kill.
					op := checker.Op{Client: cl, Page: uint64(k), Kind: checker.KindRead, Call: time.Now().UnixNano()}
					v, err := r.Get(ctx, fmt.Sprintf("key:%d", k)).Result()
					op.Return = time.Now().UnixNano()
					if err == nil || err == redis.Nil {
						if err == nil {
							op.Value, _ = strconv.ParseUint(v, 10, 64)
						}
						mu.Lock()
						ops = append(ops, op)
						mu.Unlock()
						continue
					}
					r = c.client(rng.Intn(nodes))
					time.Sleep(20 * time.Millisecond)
					continue
				}
				seq++
				op := checker.Op{Client: cl, Page: uint64(k), Kind: checker.KindWrite, Value: uint64(cl+1)<<40 | seq, Call: time.Now().UnixNano()}
				err := r.Set(ctx, fmt.Sprintf("key:%d", k), strconv.FormatUint(op.Value, 10), 0).Err()
				op.Return = time.Now().UnixNano()
				mu.Lock()
				if err == nil {
					ops = append(ops, op)
				} else {
					unknown = append(unknown, op) // cut by a kill: it may or may not have happened
				}
				mu.Unlock()
				if err != nil {
					r = c.client(rng.Intn(nodes)) // try another node
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	if nodes > 1 {
		c.procs[1].Process.Kill()
		c.procs[1].Wait()
		c.procs[1] = nil
		time.Sleep(500 * time.Millisecond)
	}
	c.kill() // every other node too, mid-write
	close(stop)
	wg.Wait()
	acked := len(ops)
	if acked < 100 {
		t.Fatalf("only %d operations were acknowledged before the kills", acked)
	}
	c.start() // the killed stores are recovered (write-through)
	// About 30 keys fill a leaf: 150 make several splits.
	if len(loaded) < 150 {
		t.Fatalf("the loader put only %d keys before the kills", len(loaded))
	}
	// One client a node: a client each would hold a connection each, and
	// a fast loader's keys outnumber the server's 10,000 connections.
	readers := make([]*redis.Client, nodes)
	for i := range readers {
		readers[i] = c.client(i)
	}
	for _, i := range loaded {
		k := fmt.Sprintf("bulk:%07d", i)
		v, err := readers[i%nodes].Get(ctx, k).Result()
		if want := strings.Repeat("v", 100) + strconv.Itoa(i); err != nil || v != want {
			t.Fatalf("after the restart, %s (acknowledged; %d keys loaded) reads %.20q..., %v\n%s", k, len(loaded), v, err, c.allLogs())
		}
	}
	end := time.Now().UnixNano()
	for k := range keys {
		r := c.client(k % nodes)
		op := checker.Op{Client: clients + k, Page: uint64(k), Kind: checker.KindRead, Call: time.Now().UnixNano()}
		v, err := r.Get(ctx, fmt.Sprintf("key:%d", k)).Result()
		if err != nil && err != redis.Nil {
			t.Fatalf("reading key %d after the restart: %v\n%s", k, err, c.allLogs())
		}
		if err == nil {
			op.Value, _ = strconv.ParseUint(v, 10, 64)
		}
		op.Return = time.Now().UnixNano() + 1
		if op.Call <= end {
			op.Call = end + 1
		}
		ops = append(ops, op)
	}
	// A write cut by a kill may have taken effect at any time after its
	// call, or never: it returns after everything else.
	last := time.Now().UnixNano() + 2
	for _, op := range unknown {
		op.Return = last
		ops = append(ops, op)
	}
	res, _ := checker.Check(ops, time.Minute)
	if !res.Ok {
		for _, k := range res.BadPages[:min(3, len(res.BadPages))] {
			var last checker.Op
			var read uint64
			for _, op := range ops {
				if op.Page == k && op.Kind == checker.KindWrite && op.Return < end && op.Return > last.Return {
					last = op
				}
				if op.Page == k && op.Kind == checker.KindRead {
					read = op.Value
				}
			}
			t.Logf("key %d: last acknowledged write %x (client %d, returned %d ns before the first kill ended), read %x", k, last.Value, last.Client, end-last.Return, read)
		}
		t.Fatalf("after the kills and the restart: not linearizable on keys %v (%d acknowledged writes, %d of unknown outcome)", res.BadPages, acked, len(unknown))
	}
	t.Logf("%d acknowledged writes and %d cut by the kills: every key holds its last acknowledged write or a later one", acked, len(unknown))
	c.stop()
}
