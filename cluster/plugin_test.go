package cluster

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/examples/msi"
	"github.com/scalestore-go/scalestore/procrunner"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/sel"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/tcp"
)

// startPlugin starts every node of protocol name's deployment cfg in this
// process, each on a tcp transport of its own on loopback, and connects
// them as 'scalestore cluster' does ("setup", then "peers").
func startPlugin(t *testing.T, name string, cfg protocolapi.Config) []*procrunner.Node {
	t.Helper()
	// The protocols by their packages: the registry (package protocols)
	// imports this package, through the built-ins' process designs.
	newProtocol, ok := map[string]func() protocolapi.Protocol{msi.Name: msi.Protocol, sel.Name: sel.Protocol}[name]
	if !ok {
		t.Fatalf("no protocol %q here", name)
	}
	p := newProtocol()
	_, lay, err := procrunner.Deploy(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	members := map[protocol.NodeID]string{}
	for i := range lay.Nodes {
		members[protocol.NodeID(i)] = ""
	}
	nodes := make([]*procrunner.Node, lay.Nodes)
	trs := make([]*tcp.Transport, lay.Nodes)
	for i := range nodes {
		n, err := procrunner.Start(procrunner.Config{Protocol: p, Deploy: cfg, ID: protocol.NodeID(i), Seed: 1, Watchdog: 5 * time.Second,
			NewTransport: func(h transport.Handler) (transport.Transport, error) {
				tr, err := tcp.New(tcp.Config{Self: protocol.NodeID(i), Listen: "127.0.0.1:0", Peers: members, ClusterID: 7, Handler: h})
				trs[i] = tr
				return tr, err
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes[i] = n
	}
	regions := make([]transport.Region, lay.Nodes)
	for i, a := range trs {
		regions[i], _ = nodes[i].Region()
		for j, b := range trs {
			if i != j {
				if err := a.SetPeerAddr(protocol.NodeID(j), b.Addr().String()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, n := range nodes {
		if err := n.Connect(regions); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// runPlugin runs wl on every node that runs workers, then the final read
// on node 0, and returns the history and every node's violations.
func runPlugin(t *testing.T, nodes []*procrunner.Node, workerNodes int, wl Workload) ([]checker.Op, []string) {
	t.Helper()
	wl.History = true
	var mu sync.Mutex
	var ops []checker.Op
	var wg sync.WaitGroup
	for _, n := range nodes[:workerNodes] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, part := RunPlugin(n, wl)
			if len(res.Errors) > 0 || res.Ops == 0 {
				t.Errorf("node %d: %d ops, errors %v", n.ID(), res.Ops, res.Errors)
			}
			mu.Lock()
			ops = append(ops, part...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	final := wl
	final.FinalRead = true
	_, part := RunPlugin(nodes[0], final)
	ops = append(ops, part...)
	var viol []string
	for _, n := range nodes {
		v, faults, _ := n.Failures()
		if len(faults) > 0 {
			t.Fatalf("node %d: faults %v", n.ID(), faults)
		}
		viol = append(viol, v...)
	}
	return ops, viol
}

// A plug-in protocol's roles run unchanged on procrunner nodes over real
// tcp transports (MSI by messages, SEL by one-sided verbs to memory nodes
// that run no workers), and porcupine finds the history linearizable, the
// final read of every key included.
func TestPluginOverTCP(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  protocolapi.Config
	}{
		{msi.Name, protocolapi.Config{Nodes: 3, Workers: 2, Keys: 6, CacheLines: 3}},
		{sel.Name, protocolapi.Config{Nodes: 2, Workers: 2, Keys: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startPlugin(t, tc.name, tc.cfg)
			ops, viol := runPlugin(t, nodes, tc.cfg.Nodes, Workload{Records: tc.cfg.Keys, ReadRatio: 0.5, Threads: tc.cfg.Workers,
				Duration: 300 * time.Millisecond, Seed: 1, RMW: true})
			if len(viol) > 0 {
				t.Fatalf("violations: %v", viol)
			}
			reads := 0
			for _, op := range ops {
				if op.Kind == checker.KindRead && op.Client == 0 {
					reads++
				}
			}
			if len(ops) < 100 || reads < tc.cfg.Keys {
				t.Fatalf("%d accesses, %d reads by node 0 worker 0 (the final read is %d)", len(ops), reads, tc.cfg.Keys)
			}
			t.Logf("%d accesses checked", len(ops))
			if res, _ := checker.Check(ops, time.Minute); !res.Ok {
				t.Fatalf("not linearizable on keys %v (unknown %v)", res.BadPages, res.Unknown)
			}
		})
	}
}

// A mutant of SEL, readers that skip the latch, is caught on processes by
// the reader's own check (a torn line: a violation of the node), and the
// workers stop at it.
func TestPluginMutantCaught(t *testing.T) {
	cfg := protocolapi.Config{Nodes: 2, Workers: 2, Keys: 1, Mutant: "reader-skips-latch"}
	nodes := startPlugin(t, sel.Name, cfg)
	var viol []string
	for try := 0; try < 5 && len(viol) == 0; try++ {
		var wg sync.WaitGroup
		for _, n := range nodes[:cfg.Nodes] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				RunPlugin(n, Workload{Records: 1, ReadRatio: 0.5, Threads: 2, Duration: 300 * time.Millisecond, Seed: int64(try)})
			}()
		}
		wg.Wait()
		for _, n := range nodes {
			v, _, _ := n.Failures()
			viol = append(viol, v...)
		}
	}
	if len(viol) == 0 || !strings.Contains(strings.Join(viol, "\n"), "torn line") {
		t.Fatalf("the mutant was not caught: %v", viol)
	}
	t.Logf("caught: %s", viol[0])
}
