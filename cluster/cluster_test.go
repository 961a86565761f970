package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/transport"
)

// loopNet is an in-process network: one FIFO queue and delivery goroutine
// per ordered pair of nodes, like an RC queue pair.
type loopNet struct {
	mu       sync.Mutex
	handlers map[protocol.NodeID]transport.Handler
	queues   map[[2]protocol.NodeID]chan loopMsg
	down     map[protocol.NodeID]bool
}

type loopMsg struct{ frame, payload []byte }

type loopTransport struct {
	net  *loopNet
	self protocol.NodeID
}

func newLoopNet() *loopNet {
	return &loopNet{handlers: map[protocol.NodeID]transport.Handler{}, queues: map[[2]protocol.NodeID]chan loopMsg{}, down: map[protocol.NodeID]bool{}}
}

func (n *loopNet) attach(id protocol.NodeID, h transport.Handler) transport.Transport {
	n.mu.Lock()
	n.handlers[id] = h
	n.mu.Unlock()
	return &loopTransport{net: n, self: id}
}

func (t *loopTransport) Self() protocol.NodeID { return t.self }

func (t *loopTransport) Send(to protocol.NodeID, frame, payload []byte) error {
	n := t.net
	n.mu.Lock()
	if n.down[to] || n.down[t.self] {
		n.mu.Unlock()
		return fmt.Errorf("node %d: %w", to, transport.ErrPeerDown)
	}
	key := [2]protocol.NodeID{t.self, to}
	q, ok := n.queues[key]
	if !ok {
		q = make(chan loopMsg, 4096)
		n.queues[key] = q
		go func() {
			for m := range q {
				n.mu.Lock()
				h, dead := n.handlers[to], n.down[to]
				n.mu.Unlock()
				if h != nil && !dead {
					h(key[0], m.frame, m.payload)
				}
			}
		}()
	}
	n.mu.Unlock()
	q <- loopMsg{bytes.Clone(frame), bytes.Clone(payload)}
	return nil
}

func (t *loopTransport) Register([]byte) (transport.Region, error) {
	return transport.Region{}, transport.ErrAccess
}
func (t *loopTransport) Read([]byte, transport.Region, uint64) error  { return transport.ErrAccess }
func (t *loopTransport) Write(transport.Region, uint64, []byte) error { return transport.ErrAccess }
func (t *loopTransport) CompareAndSwap(transport.Region, uint64, uint64, uint64) (uint64, error) {
	return 0, transport.ErrAccess
}
func (t *loopTransport) FetchAndAdd(transport.Region, uint64, uint64) (uint64, error) {
	return 0, transport.ErrAccess
}
func (t *loopTransport) Close() error {
	t.net.mu.Lock()
	t.net.down[t.self] = true
	t.net.mu.Unlock()
	return nil
}

func startLoopCluster(t *testing.T, nodes, cache int, timeout time.Duration, actorDelivery bool) ([]*Node, *loopNet) {
	t.Helper()
	net := newLoopNet()
	ns := make([]*Node, nodes)
	for i := range nodes {
		id := protocol.NodeID(i)
		n, err := StartNode(NodeConfig{ID: id, CachePages: cache, Store: memfile.New(1<<14, nil), Timeout: timeout,
			Logger: slog.New(slog.DiscardHandler), ActorDelivery: actorDelivery,
			NewTransport: func(h transport.Handler) (transport.Transport, error) { return net.attach(id, h), nil }})
		if err != nil {
			t.Fatal(err)
		}
		ns[i] = n
	}
	return ns, net
}

// TestClusterLinearizable: three nodes in one process share one B-tree;
// each loads a third, then all run a 50/50 mix with history; the history
// must be linearizable and pages must have moved between nodes.
func TestClusterLinearizable(t *testing.T) {
	t.Run("inline", func(t *testing.T) { clusterLinearizable(t, false) })
	t.Run("actor-delivery", func(t *testing.T) { clusterLinearizable(t, true) })
}

func clusterLinearizable(t *testing.T, actorDelivery bool) {
	const records = 3000
	ns, _ := startLoopCluster(t, 3, 96, 10*time.Second, actorDelivery)
	cat, err := ns[0].CreateTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns[1:] {
		n.OpenTable(cat)
	}
	hists := make([]*checker.History, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		hists[i] = checker.NewHistory(records)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Load(i*records/3, (i+1)*records/3, false, hists[i]); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var ops []checker.Op
	for _, h := range hists {
		ops = append(ops, h.Ops()...)
	}
	results := make([]RunResult, len(ns))
	runOps := make([][]checker.Op, len(ns))
	for i, n := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], runOps[i] = n.Run(Workload{Records: records, ReadRatio: 0.5, Zipf: 0.9, Threads: 2, Duration: 400 * time.Millisecond, Seed: 1, History: true})
		}()
	}
	wg.Wait()
	var remote, total int64
	for i, r := range results {
		if len(r.Errors) > 0 {
			t.Fatalf("node %d: %v", i, r.Errors)
		}
		total += r.Ops
		remote += int64(r.Stats.RemoteFetches)
		ops = append(ops, runOps[i]...)
	}
	if total == 0 || remote == 0 {
		t.Fatalf("%d ops, %d remote fetches: want both > 0", total, remote)
	}
	res, _ := checker.Check(ops, 30*time.Second)
	if !res.Ok {
		t.Fatalf("history of %d ops not linearizable (unknown=%v) on keys %v", len(ops), res.Unknown, res.BadPages)
	}
	for _, n := range ns {
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d ops, %d remote fetches, %d keys checked", total, remote, res.Partitions)
}

// TestPeerDeathReportsError: a node dies mid-run; its peers' workers return
// an error within the request timeout instead of hanging.
func TestPeerDeathReportsError(t *testing.T) {
	const records = 600
	ns, _ := startLoopCluster(t, 3, 64, time.Second, false)
	cat, err := ns[0].CreateTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns[1:] {
		n.OpenTable(cat)
	}
	if err := ns[2].Load(0, records, false, nil); err != nil { // node 2 owns most pages
		t.Fatal(err)
	}
	done := make(chan RunResult, 2)
	for _, n := range ns[:2] {
		go func() {
			r, _ := n.Run(Workload{Records: records, ReadRatio: 0.5, Threads: 2, Duration: 3 * time.Second, Seed: 2})
			done <- r
		}()
	}
	time.Sleep(200 * time.Millisecond)
	ns[2].Stop()
	failed := 0
	for range 2 {
		select {
		case r := <-done:
			// A node that needed the dead peer reports it; one whose
			// workers only touched pages they could still get finishes
			// its run. Neither may hang.
			if len(r.Errors) > 0 {
				failed++
			}
		case <-time.After(20 * time.Second):
			var b strings.Builder
			for _, n := range ns {
				b.WriteString(n.RT.DescribeWaits() + "\n")
			}
			pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Fatalf("workers hang after a peer died; goroutines:\n%s", b.String())
		}
	}
	if failed == 0 {
		t.Fatal("no node reported the dead peer")
	}
	for _, n := range ns[:2] {
		n.Stop()
	}
}

// TestTraceRemote: a traced run reports the hops of its remote fetches:
// frames received, peers' handler times for requests, workers' wake-ups.
func TestTraceRemote(t *testing.T) {
	const records = 2000
	net := newLoopNet()
	ns := make([]*Node, 2)
	for i := range ns {
		id := protocol.NodeID(i)
		n, err := StartNode(NodeConfig{ID: id, CachePages: 64, Store: memfile.New(1<<14, nil), Timeout: 10 * time.Second,
			Logger: slog.New(slog.DiscardHandler), Trace: true,
			NewTransport: func(h transport.Handler) (transport.Transport, error) { return net.attach(id, h), nil }})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Stop()
		ns[i] = n
	}
	cat, err := ns[0].CreateTable()
	if err != nil {
		t.Fatal(err)
	}
	ns[1].OpenTable(cat)
	if err := ns[0].Load(0, records, true, nil); err != nil {
		t.Fatal(err)
	}
	ns[0].RT.Trace() // from here on
	r, _ := ns[1].Run(Workload{Records: records, ReadRatio: 0.9, Threads: 2, Duration: 300 * time.Millisecond, Seed: 3, Hashed: true})
	if len(r.Errors) > 0 || r.Stats.RemoteFetches == 0 {
		t.Fatalf("run: %v, %d remote fetches", r.Errors, r.Stats.RemoteFetches)
	}
	tr := r.Trace
	if tr == nil || tr.Received == 0 || tr.Sent == 0 || hdrhistogram.Import(tr.Wake).TotalCount() == 0 {
		t.Fatalf("trace of the requesting node: %+v", tr)
	}
	if tr.Polled != 0 {
		t.Fatalf("%d frames polled over a transport that cannot be polled", tr.Polled)
	}
	if peer, ok := ns[0].RT.Trace(); !ok || hdrhistogram.Import(peer.Handler).TotalCount() == 0 || peer.Received == 0 {
		t.Fatal("node 0, directory of the pages node 1 fetched, timed no handler of a request")
	}
}
