package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/membership"
	"github.com/scalestore-go/scalestore/protocol"
)

const crashClusterUsage = `Usage: scalestore crashtest --cluster --data DIR [--rounds N] [--nodes 3] [--replicas 2] [--transport both] [--seed S] [--json]

Kills and pauses node processes of a running cluster while clients write,
after Jepsen. The nodes keep their membership in an etcd server this
command runs (membership.StartEmbedded), with a lease of --lease. Each
round, in DIR/round-N, from its seed:

  1. starts --nodes 'scalestore node' processes (--durability process, the
     default; tcp or shm, alternating with --transport both) on stores in
     the round's directory, and --clients Redis clients that SET unique
     values and GET --keys keys, each through a random node (a client whose
     node fails moves to another);
  2. after 0.5 to 1.5 s, one event on a random node (node 0, the
     bootstrap node that created the catalog, included; with --replicas 1
     it holds the tree's inner pages, so every operation fails until it is
     back): kill -9 (one round in two); SIGSTOP for 1.5 to 3 leases,
     then SIGCONT (one in four: the node finds its lease lost and exits,
     it was declared dead); or a partition (one in four: node
     --fault-signals, SIGUSR1 cuts it off its peers and etcd while its
     clients still reach it; it must stop serving once its lease may have
     lapsed, and exits);
  3. the others go on without it: the round measures the time from the
     event to the view without the node (agreed on etcd), with replicas
     the time until a probe wrote every key through the survivors, the
     survivors' successful operations a second from the view to the
     restart, against before the event, and the operations served and failed during the
     outage (from the event to the restart); with --replicas 2 (the
     default) every key stays served, and only the operations the event
     cut may fail;
  4. restarts the node on its store after 1 to 2 s and measures the time
     until it serves (its 'node serving' line) and is in the view again;
  5. reads every key through a random node and checks the whole client
     history with porcupine: a write cut by the event has an unknown
     outcome, every acknowledged write must be there (or one after it);
     then stops the cluster with SIGTERM (every node must stop cleanly).

A round is whole (linearizable), lost (not: an acknowledged write is
missing or a read went back) or failed (a node did not start, serve or
stop). Each round prints its event, the writes acknowledged and cut, the
times and the survivors' throughput; the end, the counts and the medians.
A bad round prints its seed and the command that replays it. The command
exits 1 if any round was bad.

Flags:
`

// clusterRound is one round of crashtest --cluster.
type clusterRound struct {
	Round     int     `json:"round"`
	Seed      uint64  `json:"seed"`
	Transport string  `json:"transport"`
	Event     string  `json:"event"`
	Node      int     `json:"node"`
	Acked     int     `json:"acked_writes"`
	Unknown   int     `json:"unknown_writes"`
	Reads     int     `json:"reads"`
	ToViewMS  float64 `json:"event_to_view_ms"`
	// ToServedMS: from the event to a pass that wrote every key through
	// the survivors without an error (-1: none before the restart, as
	// with one replica, whose dead node's keys fail until it is back).
	ToServedMS float64 `json:"event_to_every_key_served_ms"`
	BeforeOps  float64 `json:"ops_per_s_before"`
	DuringOps  float64 `json:"ops_per_s_during"`
	// OutageOps and OutageFailed count the operations that returned, and
	// those that failed, from the event to the restart.
	OutageOps    int     `json:"outage_ops"`
	OutageFailed int     `json:"outage_failed"`
	RestartMS    float64 `json:"restart_to_serving_ms"`
	RejoinMS     float64 `json:"restart_to_view_ms"`
	Outcome      string  `json:"outcome"`
	Detail       string  `json:"detail,omitempty"`
}

func runCrashtestCluster(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("crashtest --cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, crashClusterUsage); fs.PrintDefaults() }
	dir := fs.String("data", "", "directory for the rounds' stores (required; each round uses DIR/round-N)")
	rounds := fs.Int("rounds", 10, "rounds to run")
	nodes := fs.Int("nodes", 3, "node processes a round")
	clients := fs.Int("clients", 6, "Redis clients a round")
	keys := fs.Int("keys", 40, "keys the clients write and read")
	kind := fs.String("transport", "both", "tcp, shm, ibverbs (a binary built with -tags ibverbs on a host with an RDMA device), or both (tcp and shm in alternating rounds)")
	seed := fs.Uint64("seed", 0, "seed of round 0 (round N uses seed+N); 0: from the clock")
	asJSON := fs.Bool("json", false, "print one JSON line per round and a summary line")
	bin := fs.String("bin", "", "the scalestore binary the nodes run (default: this one)")
	lease := fs.Duration("lease", time.Second, "the nodes' membership lease (whole seconds)")
	replicas := fs.Int("replicas", 2, "the nodes' --replicas: 2 keeps every directory on a primary and a backup (docs/replication.md), 1 on its own node only")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case *dir == "" || *rounds < 1 || fs.NArg() > 0:
		fmt.Fprintln(stderr, "crashtest --cluster: --data DIR is required, --rounds must be at least 1, and there are no arguments")
		return 2
	case *nodes < 2 || *nodes > 16 || *clients < 1 || *keys < 1 || *replicas < 1 || *replicas > 2:
		fmt.Fprintln(stderr, "crashtest --cluster: --nodes 2..16, --replicas 1 or 2, --clients and --keys at least 1")
		return 2
	}
	if *kind != "both" {
		if err := checkTransport("crashtest --cluster", *kind); err != nil {
			fmt.Fprintf(stderr, "crashtest --cluster: --transport: %v\n", err)
			return 2
		}
	}
	if *bin == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "crashtest --cluster: finding this binary: %v (pass --bin)\n", err)
			return 2
		}
		*bin = exe
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano()) & (1<<48 - 1)
	}
	// Clients of killed nodes fail to dial by design: go-redis would log
	// every attempt.
	redis.SetLogger(quietRedis{})
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "crashtest --cluster: %v\n", err)
		return 2
	}
	etcd, err := membership.StartEmbedded(filepath.Join(*dir, "etcd"), membership.Ephemeral())
	if err != nil {
		fmt.Fprintf(stderr, "crashtest --cluster: starting etcd: %v\n", err)
		return 1
	}
	defer func() {
		etcd.Close()
		os.RemoveAll(filepath.Join(*dir, "etcd"))
	}()
	counts := map[string]int{}
	var toView, toServed, ratio, restart []float64
	var outageOps, outageFailed, node0 int
	enc := json.NewEncoder(stdout)
	bad := 0
	for i := range *rounds {
		r := clusterRound{Round: i, Seed: *seed + uint64(i), Transport: *kind}
		if *kind == "both" {
			r.Transport = []string{"tcp", "shm"}[i%2]
		}
		rdir := filepath.Join(*dir, fmt.Sprintf("round-%d", i))
		os.RemoveAll(rdir)
		runClusterRound(&r, roundConfig{bin: *bin, dir: rdir, nodes: *nodes, clients: *clients, keys: *keys, etcd: etcd.Endpoints(), lease: *lease, replicas: *replicas})
		counts[r.Outcome]++
		if r.Outcome == "whole" {
			toView, restart = append(toView, r.ToViewMS), append(restart, r.RestartMS)
			if r.ToServedMS >= 0 {
				toServed = append(toServed, r.ToServedMS)
			}
			outageOps, outageFailed = outageOps+r.OutageOps, outageFailed+r.OutageFailed
			if r.Node == 0 {
				node0++
			}
			if r.BeforeOps > 0 && (r.Node != 0 || *replicas > 1) {
				// With one replica node 0, the bootstrap node, holds the
				// tree's inner pages: while it is down every operation
				// fails.
				ratio = append(ratio, r.DuringOps/r.BeforeOps)
			}
		}
		if *asJSON {
			enc.Encode(r)
		} else {
			fmt.Fprintf(stdout, "round %d (%s): %s node %d; %d writes acknowledged, %d cut, %d reads; to the view %.0f ms, to every key served %.0f ms; survivors %.0f ops/s (before %.0f); outage %d operations served, %d failed; restart to serving %.0f ms, to the view %.0f ms: %s\n",
				i, r.Transport, r.Event, r.Node, r.Acked, r.Unknown, r.Reads, r.ToViewMS, r.ToServedMS, r.DuringOps, r.BeforeOps, r.OutageOps, r.OutageFailed, r.RestartMS, r.RejoinMS, r.Outcome)
		}
		if r.Outcome != "whole" {
			bad++
			fmt.Fprintf(stderr, "crashtest --cluster: round %d %s: %s\n  replay: %s crashtest --cluster --data %s --rounds 1 --seed %d --transport %s --nodes %d --clients %d --keys %d --lease %v\n  kept: %s\n",
				i, r.Outcome, r.Detail, os.Args[0], *dir, r.Seed, r.Transport, *nodes, *clients, *keys, *lease, rdir)
			fmt.Fprintf(stderr, "  (with --replicas %d)\n", *replicas)
		} else {
			os.RemoveAll(rdir)
		}
	}
	if *asJSON {
		enc.Encode(map[string]any{"rounds": *rounds, "seed": *seed, "replicas": *replicas, "whole": counts["whole"], "lost": counts["lost"], "failed": counts["failed"],
			"node0_rounds": node0, "outage_ops": outageOps, "outage_failed": outageFailed,
			"median_event_to_view_ms": median(toView), "median_event_to_every_key_served_ms": median(toServed), "max_event_to_every_key_served_ms": maxOf(toServed), "median_survivor_ratio": median(ratio), "median_restart_to_serving_ms": median(restart)})
	} else {
		which := "every outage, node 0's included"
		if *replicas < 2 {
			which = "outages of nodes other than 0, which holds the tree's inner pages"
		}
		fmt.Fprintf(stdout, "crashtest --cluster: %d rounds (seed %d, replicas %d): whole %d (node 0: %d), lost %d, failed %d; during the outages %d operations served, %d failed; event to every key served: %d rounds, median %.0f ms, at most %.0f ms; medians: event to view %.0f ms (lease %v), survivors %.2fx of before (%s), restart to serving %.0f ms\n",
			*rounds, *seed, *replicas, counts["whole"], node0, counts["lost"], counts["failed"], outageOps, outageFailed, len(toServed), median(toServed), maxOf(toServed), median(toView), *lease, median(ratio), which, median(restart))
	}
	if bad > 0 {
		return 1
	}
	return 0
}

// clusterProcs are one round's node processes.
type clusterProcs struct {
	bin   string
	args  [][]string
	procs []*exec.Cmd
	resp  []string
	logs  []*strings.Builder
	// logDir, when set, keeps every node's whole log (node-i.log).
	logDir string
	mu     sync.Mutex
}

func (c *clusterProcs) start(timeout time.Duration) error {
	var all []int
	for i := len(c.args) - 1; i >= 0; i-- {
		all = append(all, i)
	}
	return c.startNodes(all, timeout)
}

// startNodes starts the given nodes and waits until each serves.
func (c *clusterProcs) startNodes(nodes []int, timeout time.Duration) error {
	ready := make(chan error, len(nodes))
	for _, i := range nodes {
		cmd := exec.Command(c.bin, c.args[i]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		c.procs[i] = cmd
		log := &strings.Builder{}
		c.mu.Lock()
		if c.logs[i] != nil {
			log.WriteString(c.logs[i].String() + "--- restarted\n")
		}
		c.logs[i] = log
		c.mu.Unlock()
		go func() {
			sc := bufio.NewScanner(stderr)
			said := false
			var file io.Writer = io.Discard
			if c.logDir != "" {
				if f, err := os.OpenFile(filepath.Join(c.logDir, fmt.Sprintf("node-%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
					defer f.Close()
					file = f
				}
			}
			for sc.Scan() {
				c.mu.Lock()
				log.WriteString(sc.Text() + "\n")
				c.mu.Unlock()
				fmt.Fprintln(file, sc.Text())
				if !said && strings.Contains(sc.Text(), `msg="node serving"`) {
					said = true
					ready <- nil
				}
			}
			if !said {
				ready <- fmt.Errorf("node %d exited before serving", i)
			}
		}()
	}
	deadline := time.After(timeout)
	for range nodes {
		select {
		case err := <-ready:
			if err != nil {
				return fmt.Errorf("%w:\n%s", err, c.tail())
			}
		case <-deadline:
			return fmt.Errorf("the nodes did not serve within %v:\n%s", timeout, c.tail())
		}
	}
	return nil
}

// tail is the last lines of every node's log.
func (c *clusterProcs) tail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for i, l := range c.logs {
		lines := strings.Split(strings.TrimSpace(l.String()), "\n")
		fmt.Fprintf(&b, "--- node %d\n%s\n", i, strings.Join(lines[max(0, len(lines)-5):], "\n"))
	}
	return b.String()
}

func (c *clusterProcs) signal(i int, sig syscall.Signal) {
	if p := c.procs[i]; p != nil {
		p.Process.Signal(sig)
	}
}

func (c *clusterProcs) kill(i int) {
	if p := c.procs[i]; p != nil {
		p.Process.Kill()
		p.Wait()
		c.procs[i] = nil
	}
}

// stop sends SIGTERM to every node at once and waits for clean exits.
func (c *clusterProcs) stop() error {
	for i := range c.procs {
		c.signal(i, syscall.SIGTERM)
	}
	var errs []error
	for i, p := range c.procs {
		if p == nil {
			continue
		}
		if err := p.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i, err))
		}
		c.procs[i] = nil
	}
	return errors.Join(errs...)
}

// roundConfig is what every round of a crashtest --cluster run shares.
type roundConfig struct {
	bin, dir             string
	nodes, clients, keys int
	etcd                 []string
	lease                time.Duration
	replicas             int // 0: the nodes' default
}

// waitExit waits up to limit for node i's process to exit by itself; it
// kills it after that. It reports whether it exited by itself.
func (c *clusterProcs) waitExit(i int, limit time.Duration) bool {
	p := c.procs[i]
	if p == nil {
		return true
	}
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
		c.procs[i] = nil
		return true
	case <-time.After(limit):
		p.Process.Kill()
		<-done
		c.procs[i] = nil
		return false
	}
}

func runClusterRound(r *clusterRound, rc roundConfig) {
	rng := rand.New(rand.NewPCG(r.Seed, 0xC1A5))
	fail := func(outcome, format string, a ...any) {
		r.Outcome, r.Detail = outcome, fmt.Sprintf(format, a...)
	}
	nodes, clients, keys, dir := rc.nodes, rc.clients, rc.keys, rc.dir
	addrs, err := freeAddrs(2 * nodes)
	if err != nil {
		fail("failed", "%v", err)
		return
	}
	var peers []string
	for i := range nodes {
		peers = append(peers, fmt.Sprintf("%d=%s", i, addrs[i]))
	}
	// Every round is a cluster of its own in etcd.
	clusterID := strconv.FormatUint(r.Seed%(1<<40)+1, 10)
	c := &clusterProcs{bin: rc.bin, resp: addrs[nodes:], procs: make([]*exec.Cmd, nodes), logs: make([]*strings.Builder, nodes), logDir: dir}
	defer func() {
		for i := range c.procs {
			c.kill(i)
		}
	}()
	for i := range nodes {
		c.args = append(c.args, []string{"node", "--id", strconv.Itoa(i), "--peers", strings.Join(peers, ","),
			"--resp", c.resp[i], "--transport", r.Transport, "--socket-dir", dir, "--data", filepath.Join(dir, fmt.Sprintf("node-%d", i)),
			"--cache", "16MiB", "--timeout", "10s", "--shutdown-timeout", "10s", "--cluster-id", clusterID,
			"--etcd", strings.Join(rc.etcd, ","), "--lease", rc.lease.String(), "--fault-signals"})
		if rc.replicas > 0 {
			c.args[i] = append(c.args[i], "--replicas", strconv.Itoa(rc.replicas))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("failed", "%v", err)
		return
	}
	obs, err := membership.Observe(rc.etcd, clusterID)
	if err != nil {
		fail("failed", "%v", err)
		return
	}
	defer obs.Close()
	if err := c.start(60 * time.Second); err != nil {
		fail("failed", "starting: %v", err)
		return
	}
	ctx := context.Background()
	dial := func(i int) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: c.resp[i], Protocol: 2, MaxRetries: -1, DialTimeout: 2 * time.Second,
			ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
	}
	var mu sync.Mutex
	var ops, unknown []checker.Op
	var failedAt []int64 // when each failed operation returned
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for cl := range clients {
		seed := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			crng := rand.New(rand.NewPCG(seed, uint64(cl)))
			cli := dial(crng.IntN(nodes))
			defer func() { cli.Close() }()
			var seq uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := crng.IntN(keys)
				key := "key:" + strconv.Itoa(k)
				op := checker.Op{Client: cl, Page: uint64(k), Call: time.Now().UnixNano()}
				var err error
				if crng.IntN(2) == 0 {
					seq++
					op.Kind, op.Value = checker.KindWrite, uint64(cl+1)<<40|seq
					err = cli.Set(ctx, key, strconv.FormatUint(op.Value, 10), 0).Err()
				} else {
					op.Kind = checker.KindRead
					var v string
					v, err = cli.Get(ctx, key).Result()
					if err == redis.Nil {
						err = nil
					} else if err == nil {
						op.Value, _ = strconv.ParseUint(v, 10, 64)
					}
				}
				op.Return = time.Now().UnixNano()
				mu.Lock()
				switch {
				case err == nil:
					ops = append(ops, op)
				case op.Kind == checker.KindWrite:
					unknown = append(unknown, op) // it may or may not have happened
				}
				if err != nil {
					failedAt = append(failedAt, op.Return)
				}
				mu.Unlock()
				if err != nil {
					// A page of a node that is down fails at once: back off
					// a little, and move to another node in case it is ours.
					cli.Close()
					cli = dial(crng.IntN(nodes))
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
	r.Node = rng.IntN(nodes)
	eventAt := time.Now()
	pause := time.Duration(0)
	switch ev := rng.IntN(4); {
	case ev < 2:
		r.Event = "kill -9 of"
		c.kill(r.Node)
	case ev == 2:
		r.Event = "pause of"
		pause = time.Duration(float64(rc.lease) * (1.5 + 1.5*rng.Float64()))
		c.signal(r.Node, syscall.SIGSTOP)
	default:
		// Cut off its peers and etcd while its clients still reach it:
		// it must stop serving once its lease may have lapsed.
		r.Event = "partition of"
		c.signal(r.Node, syscall.SIGUSR1)
	}
	// With replicas, a probe writes every key at once through the
	// survivors, pass after pass, until a pass without an error: every key
	// served again (its writes join the history).
	served := make(chan time.Duration, 1)
	probeStop := make(chan struct{})
	defer close(probeStop)
	go func() {
		if rc.replicas == 1 {
			return // the dead node's keys fail until it is back
		}
		var survivors []int
		for i := range nodes {
			if i != r.Node {
				survivors = append(survivors, i)
			}
		}
		cls := make([]*redis.Client, keys)
		for k := range cls {
			cls[k] = dial(survivors[k%len(survivors)])
			defer cls[k].Close()
		}
		var seq atomic.Uint64
		for {
			select {
			case <-probeStop:
				return
			default:
			}
			var failed atomic.Int64
			var pass sync.WaitGroup
			for k := range keys {
				pass.Add(1)
				go func() {
					defer pass.Done()
					op := checker.Op{Client: clients + keys + k, Page: uint64(k), Kind: checker.KindWrite,
						Value: uint64(clients+keys+k+1)<<40 | seq.Add(1), Call: time.Now().UnixNano()}
					err := cls[k].Set(ctx, "key:"+strconv.Itoa(k), strconv.FormatUint(op.Value, 10), 0).Err()
					op.Return = time.Now().UnixNano()
					mu.Lock()
					if err == nil {
						ops = append(ops, op)
					} else {
						unknown = append(unknown, op)
						failed.Add(1)
					}
					mu.Unlock()
				}()
			}
			pass.Wait()
			if failed.Load() == 0 {
				served <- time.Since(eventAt)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	// The view without the node, agreed on etcd.
	viewAt, err := waitView(obs, func(v membership.View) bool { return v.Number > 0 && !v.Has(protocol.NodeID(r.Node)) }, 5*rc.lease+5*time.Second)
	if err != nil {
		fail("failed", "no view without node %d after the %s: %v\n%s", r.Node, r.Event, err, c.tail())
		return
	}
	r.ToViewMS = ms(viewAt.Sub(eventAt))
	if r.Event == "partition of" {
		// It finds its lease lost and exits.
		if !c.waitExit(r.Node, 3*rc.lease+5*time.Second) {
			fail("failed", "node %d did not exit after it lost its lease (partitioned)\n%s", r.Node, c.tail())
			return
		}
	}
	if pause > 0 {
		time.Sleep(time.Until(eventAt.Add(pause)))
		c.signal(r.Node, syscall.SIGCONT)
		// It finds its lease lost and exits.
		if !c.waitExit(r.Node, 5*time.Second) {
			fail("failed", "node %d did not exit after it lost its lease (paused %v)\n%s", r.Node, pause, c.tail())
			return
		}
	}
	time.Sleep(time.Until(viewAt.Add(time.Duration(1000+rng.IntN(1000)) * time.Millisecond)))
	r.ToServedMS = -1
	select {
	case d := <-served:
		r.ToServedMS = ms(d)
	default:
		if rc.replicas != 1 {
			// With two replicas every key is served again once the view
			// changed: wait a little more, then the round failed.
			select {
			case d := <-served:
				r.ToServedMS = ms(d)
			case <-time.After(5 * time.Second):
				fail("failed", "with replicas, not every key was served through the survivors before node %d's restart\n%s", r.Node, c.tail())
				return
			}
		}
	}
	restartAt := time.Now()
	// Throughput of the survivors: operations that returned a second
	// before the event, against those from the view to the restart.
	mu.Lock()
	var before, during int
	for _, op := range ops {
		switch t := time.Unix(0, op.Return); {
		case t.After(eventAt.Add(-time.Second)) && t.Before(eventAt):
			before++
		case t.After(viewAt) && t.Before(restartAt):
			during++
		}
	}
	mu.Unlock()
	r.BeforeOps = float64(before)
	r.DuringOps = float64(during) / restartAt.Sub(viewAt).Seconds()
	for _, op := range ops {
		if t := time.Unix(0, op.Return); !t.Before(eventAt) && t.Before(restartAt) {
			r.OutageOps++
		}
	}
	for _, at := range failedAt {
		if t := time.Unix(0, at); !t.Before(eventAt) && t.Before(restartAt) {
			r.OutageFailed++
		}
	}
	if err := c.startNodes([]int{r.Node}, 60*time.Second); err != nil {
		fail("failed", "restarting node %d on its store: %v", r.Node, err)
		return
	}
	r.RestartMS = ms(time.Since(restartAt))
	rejoinAt, err := waitView(obs, func(v membership.View) bool { return v.Has(protocol.NodeID(r.Node)) }, 10*time.Second)
	if err != nil {
		fail("failed", "node %d restarted but is in no view: %v\n%s", r.Node, err, c.tail())
		return
	}
	r.RejoinMS = ms(rejoinAt.Sub(restartAt))
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, op := range ops {
		if op.Kind == checker.KindWrite {
			r.Acked++
		}
	}
	r.Unknown = len(unknown)
	end := time.Now().UnixNano()
	for k := range keys {
		cli := dial(rng.IntN(nodes))
		op := checker.Op{Client: clients + k, Page: uint64(k), Kind: checker.KindRead, Call: max(time.Now().UnixNano(), end+1)}
		v, err := cli.Get(ctx, "key:"+strconv.Itoa(k)).Result()
		cli.Close()
		if err != nil && err != redis.Nil {
			fail("failed", "reading key %d after the restart: %v\n%s", k, err, c.tail())
			return
		}
		if err == nil {
			op.Value, _ = strconv.ParseUint(v, 10, 64)
		}
		op.Return = max(time.Now().UnixNano(), op.Call)
		ops = append(ops, op)
	}
	r.Reads = len(ops) - r.Acked
	// A write cut by the event may have taken effect at any time after its
	// call, or never: it returns after everything else.
	last := time.Now().UnixNano() + 1
	for _, op := range unknown {
		op.Return = last
		ops = append(ops, op)
	}
	res, _ := checker.Check(ops, time.Minute)
	if !res.Ok {
		fail("lost", "not linearizable on keys %v (unknown=%v)", res.BadPages, res.Unknown)
		return
	}
	if err := c.stop(); err != nil {
		fail("failed", "stopping after the check: %v\n%s", err, c.tail())
		return
	}
	r.Outcome = "whole"
}

// waitView polls the agreed view until ok holds, and returns when it saw
// it hold.
func waitView(obs *membership.Observer, ok func(membership.View) bool, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	var last membership.View
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := obs.View(ctx)
		cancel()
		if err == nil {
			if ok(v) {
				return time.Now(), nil
			}
			last = v
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("after %v the view is %v", limit, last)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quietRedis drops go-redis's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// maxOf is the largest of xs (0 for none).
func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// median of xs (0 for none); xs is reordered.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}
