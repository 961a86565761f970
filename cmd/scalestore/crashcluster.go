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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalestore-go/scalestore/checker"
)

const crashClusterUsage = `Usage: scalestore crashtest --cluster --data DIR [--rounds N] [--nodes 3] [--transport both] [--seed S] [--json]

Kills and pauses node processes of a cluster while clients write, after
Jepsen. Each round, in DIR/round-N, from its seed:

  1. starts --nodes 'scalestore node' processes (--durability process, the
     default; tcp or shm, alternating with --transport both) on stores in
     the round's directory, and --clients Redis clients that SET unique
     values and GET --keys keys, each through a random node;
  2. after 0.5 to 1.5 s, one event: kill -9 of a random node (three rounds
     in four; sometimes the bootstrap node, which holds the catalog), or
     SIGSTOP of a random node for 0.3 to 1.5 s, shorter than the nodes'
     --timeout (3 s), then SIGCONT;
  3. after a kill the other nodes are killed too (the cluster does not yet
     go on without a node: its peers fail their operations) and the whole
     cluster is started again on its stores; after a pause it is stopped
     cleanly and started again;
  4. reads every key through a random node and checks the whole client
     history with porcupine: a write cut by a kill has an unknown outcome,
     every acknowledged write must be there (or one after it).

A round is whole (linearizable), lost (not: an acknowledged write is
missing or a read went back) or failed (a node did not start or serve). It
prints each round (its event, the writes acknowledged and cut, the time
from the restart to every node serving), the counts, and for a bad round its
seed and the command that replays it. It exits 1 if any round was bad.

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
	RestartMS float64 `json:"restart_to_serving_ms"`
	Outcome   string  `json:"outcome"`
	Detail    string  `json:"detail,omitempty"`
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
	kind := fs.String("transport", "both", "tcp, shm, or both (alternating rounds)")
	seed := fs.Uint64("seed", 0, "seed of round 0 (round N uses seed+N); 0: from the clock")
	asJSON := fs.Bool("json", false, "print one JSON line per round and a summary line")
	bin := fs.String("bin", "", "the scalestore binary the nodes run (default: this one)")
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
	case *nodes < 2 || *nodes > 16 || *clients < 1 || *keys < 1:
		fmt.Fprintln(stderr, "crashtest --cluster: --nodes 2..16, --clients and --keys at least 1")
		return 2
	case *kind != "tcp" && *kind != "shm" && *kind != "both":
		fmt.Fprintf(stderr, "crashtest --cluster: --transport %q: want tcp, shm or both\n", *kind)
		return 2
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
	counts := map[string]int{}
	enc := json.NewEncoder(stdout)
	bad := 0
	for i := range *rounds {
		r := clusterRound{Round: i, Seed: *seed + uint64(i), Transport: *kind}
		if *kind == "both" {
			r.Transport = []string{"tcp", "shm"}[i%2]
		}
		rdir := filepath.Join(*dir, fmt.Sprintf("round-%d", i))
		os.RemoveAll(rdir)
		runClusterRound(&r, *bin, rdir, *nodes, *clients, *keys)
		counts[r.Outcome]++
		if *asJSON {
			enc.Encode(r)
		} else {
			fmt.Fprintf(stdout, "round %d (%s): %s node %d; %d writes acknowledged, %d cut, %d reads; restart to serving %.0f ms: %s\n",
				i, r.Transport, r.Event, r.Node, r.Acked, r.Unknown, r.Reads, r.RestartMS, r.Outcome)
		}
		if r.Outcome != "whole" {
			bad++
			fmt.Fprintf(stderr, "crashtest --cluster: round %d %s: %s\n  replay: %s crashtest --cluster --data %s --rounds 1 --seed %d --transport %s --nodes %d\n  kept: %s\n",
				i, r.Outcome, r.Detail, os.Args[0], *dir, r.Seed, r.Transport, *nodes, rdir)
		} else {
			os.RemoveAll(rdir)
		}
	}
	if *asJSON {
		enc.Encode(map[string]any{"rounds": *rounds, "seed": *seed, "whole": counts["whole"], "lost": counts["lost"], "failed": counts["failed"]})
	} else {
		fmt.Fprintf(stdout, "crashtest --cluster: %d rounds (seed %d): whole %d, lost %d, failed %d\n",
			*rounds, *seed, counts["whole"], counts["lost"], counts["failed"])
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
	mu    sync.Mutex
}

func (c *clusterProcs) start(timeout time.Duration) error {
	ready := make(chan error, len(c.args))
	for i := len(c.args) - 1; i >= 0; i-- {
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
		c.logs[i] = log
		go func() {
			sc := bufio.NewScanner(stderr)
			said := false
			for sc.Scan() {
				c.mu.Lock()
				log.WriteString(sc.Text() + "\n")
				c.mu.Unlock()
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
	for range c.args {
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

func runClusterRound(r *clusterRound, bin, dir string, nodes, clients, keys int) {
	rng := rand.New(rand.NewPCG(r.Seed, 0xC1A5))
	fail := func(outcome, format string, a ...any) {
		r.Outcome, r.Detail = outcome, fmt.Sprintf(format, a...)
	}
	addrs, err := freeAddrs(2 * nodes)
	if err != nil {
		fail("failed", "%v", err)
		return
	}
	var peers []string
	for i := range nodes {
		peers = append(peers, fmt.Sprintf("%d=%s", i, addrs[i]))
	}
	c := &clusterProcs{bin: bin, resp: addrs[nodes:], procs: make([]*exec.Cmd, nodes), logs: make([]*strings.Builder, nodes)}
	defer func() {
		for i := range c.procs {
			c.kill(i)
		}
	}()
	for i := range nodes {
		c.args = append(c.args, []string{"node", "--id", strconv.Itoa(i), "--peers", strings.Join(peers, ","),
			"--resp", c.resp[i], "--transport", r.Transport, "--socket-dir", dir, "--data", filepath.Join(dir, fmt.Sprintf("node-%d", i)),
			"--cache", "16MiB", "--timeout", "3s", "--shutdown-timeout", "10s"})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("failed", "%v", err)
		return
	}
	if err := c.start(60 * time.Second); err != nil {
		fail("failed", "starting: %v", err)
		return
	}
	ctx := context.Background()
	dial := func(i int) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: c.resp[i], Protocol: 2, MaxRetries: -1, DialTimeout: 2 * time.Second,
			ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
	}
	var mu sync.Mutex
	var ops, unknown []checker.Op
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
				mu.Unlock()
				if err != nil {
					cli.Close()
					cli = dial(crng.IntN(nodes))
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
	r.Node = rng.IntN(nodes)
	restartErr := error(nil)
	if rng.IntN(4) < 3 {
		r.Event = "kill -9 of"
		c.kill(r.Node)
		time.Sleep(300 * time.Millisecond)
		for i := range nodes {
			c.kill(i)
		}
	} else {
		r.Event = "pause of"
		c.signal(r.Node, syscall.SIGSTOP)
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		c.signal(r.Node, syscall.SIGCONT)
		time.Sleep(500 * time.Millisecond)
		close(stop)
		wg.Wait()
		stop = nil
		restartErr = c.stop()
	}
	if stop != nil {
		close(stop)
		wg.Wait()
	}
	if restartErr != nil {
		fail("failed", "the cluster did not stop cleanly after the pause: %v\n%s", restartErr, c.tail())
		return
	}
	start := time.Now()
	if err := c.start(60 * time.Second); err != nil {
		fail("failed", "restarting on the stores: %v", err)
		return
	}
	r.RestartMS = float64(time.Since(start).Microseconds()) / 1000
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
	// A write cut by a kill may have taken effect at any time after its
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
		fail("failed", "stopping after the check: %v", err)
		return
	}
	r.Outcome = "whole"
}

// quietRedis drops go-redis's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
