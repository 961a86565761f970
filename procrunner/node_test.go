package procrunner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
)

// fakeVerbs is a transport whose verbs record, per peer, the order they
// ran in and whether two ran at once; each takes a random few microseconds.
type fakeVerbs struct {
	self    protocol.NodeID
	mu      sync.Mutex
	order   map[protocol.NodeID][]uint64 // the FAA deltas, as run
	running map[protocol.NodeID]*atomic.Int32
	overlap atomic.Bool // two verbs to one peer at once
	across  atomic.Bool // verbs to two peers at once
	busy    atomic.Int32
}

func newFakeVerbs(self protocol.NodeID, peers int) *fakeVerbs {
	f := &fakeVerbs{self: self, order: map[protocol.NodeID][]uint64{}, running: map[protocol.NodeID]*atomic.Int32{}}
	for i := range peers {
		f.running[protocol.NodeID(i)] = &atomic.Int32{}
	}
	return f
}

func (f *fakeVerbs) Self() protocol.NodeID                      { return f.self }
func (f *fakeVerbs) Send(protocol.NodeID, []byte, []byte) error { return transport.ErrClosed }
func (f *fakeVerbs) Close() error                               { return nil }
func (f *fakeVerbs) Register(mem []byte) (transport.Region, error) {
	return transport.Region{Node: f.self, Key: 1, Len: uint64(len(mem))}, nil
}
func (f *fakeVerbs) Read([]byte, transport.Region, uint64) error  { return nil }
func (f *fakeVerbs) Write(transport.Region, uint64, []byte) error { return nil }
func (f *fakeVerbs) CompareAndSwap(transport.Region, uint64, uint64, uint64) (uint64, error) {
	return 0, nil
}

func (f *fakeVerbs) FetchAndAdd(r transport.Region, off, delta uint64) (uint64, error) {
	if f.running[r.Node].Add(1) > 1 {
		f.overlap.Store(true)
	}
	if f.busy.Add(1) > 1 {
		f.across.Store(true)
	}
	time.Sleep(time.Duration(rand.IntN(20)) * time.Microsecond)
	f.mu.Lock()
	f.order[r.Node] = append(f.order[r.Node], delta)
	f.mu.Unlock()
	f.busy.Add(-1)
	f.running[r.Node].Add(-1)
	return delta, nil
}

// scriptRole is a role whose access does what its key says: key 0 posts
// verbs FAAs to each of nodes 1 and 2 (token and delta counting up across
// both) and completes when all came back in; key 1 fails its Step; key 2
// never completes; key 3 completes with an error; key 4 completes twice;
// key 5 writes op.Value to SSD slot 1, reads it back and returns it.
type scriptRole struct {
	env     protocolapi.Env
	verbs   int
	waiting int
	op      protocolapi.Op
	seq     uint64
	prev    []uint64
	page    []byte
}

func (r *scriptRole) Step(ev protocolapi.Event) error {
	switch ev.Kind {
	case protocolapi.EventAccess:
		r.op = ev.Op
		switch ev.Op.Key {
		case 0:
			for i := range 2 * r.verbs {
				peer := protocol.NodeID(1 + i%2)
				rg, ok := r.env.Region(peer)
				if !ok {
					return fmt.Errorf("no region on node %d", peer)
				}
				r.seq++
				r.env.FetchAndAdd(rg, 0, r.seq, r.seq)
				r.waiting++
			}
		case 1:
			return errors.New("a rule broken")
		case 3:
			r.env.Complete(ev.Op, protocolapi.Result{Err: errors.New("a wrong value")})
		case 4:
			r.env.Complete(ev.Op, protocolapi.Result{})
			r.env.Complete(ev.Op, protocolapi.Result{})
		case 5:
			r.page = make([]byte, protocol.PageSize)
			binary.LittleEndian.PutUint64(r.page, ev.Op.Value)
			r.env.WritePage(1, r.page, 1)
		}
	case protocolapi.EventPage:
		switch {
		case ev.Err != nil:
			return ev.Err
		case ev.Token == 1:
			clear(r.page)
			r.env.ReadPage(1, r.page, 2)
		default:
			r.env.Complete(r.op, protocolapi.Result{Value: binary.LittleEndian.Uint64(r.page)})
		}
	case protocolapi.EventVerb:
		if ev.Err != nil || ev.Prev != ev.Token {
			return fmt.Errorf("verb %d: prev %d, err %v", ev.Token, ev.Prev, ev.Err)
		}
		r.prev = append(r.prev, ev.Token)
		if r.waiting--; r.waiting == 0 {
			r.env.Complete(r.op, protocolapi.Result{Value: uint64(len(r.prev))})
		}
	}
	return nil
}

func (r *scriptRole) Describe() string { return fmt.Sprintf("waiting for %d verbs", r.waiting) }

// scriptCluster builds its roles in order, as the API promises (GAM
// refuses otherwise); with actAtBuild node 0's role sets a timer when it
// is built.
type scriptCluster struct {
	verbs      int
	built      int
	actAtBuild bool
}

func (c *scriptCluster) Layout() protocolapi.Layout {
	return protocolapi.Layout{Nodes: 3, Memory: []int{0, 64, 64}, SSDPages: []int{2}}
}
func (c *scriptCluster) Role(id protocol.NodeID, env protocolapi.Env) (protocolapi.Role, error) {
	if int(id) != c.built || env.Self() != id {
		return nil, fmt.Errorf("role of node %d (its env says %d) asked after %d", id, env.Self(), c.built)
	}
	if mem := env.Memory(); id > 0 && len(mem) != 64 {
		return nil, fmt.Errorf("node %d has %d bytes of memory, want 64", id, len(mem))
	}
	if c.actAtBuild && id == 0 {
		env.After(1, 1)
	}
	c.built++
	return &scriptRole{env: env, verbs: c.verbs}, nil
}
func (c *scriptCluster) Check(bool) []error { return nil }

func scriptProtocol(verbs int) protocolapi.Protocol {
	return protocolapi.Protocol{Name: "script", Supports: protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister}},
		Deploy: func(cfg protocolapi.Config) (protocolapi.Cluster, error) {
			return &scriptCluster{verbs: verbs, actAtBuild: cfg.Mutant == "act"}, nil
		}, Mutants: []protocolapi.Mutant{{Name: "act"}}}
}

// startScript starts node 0 of the script protocol (one worker node, two
// memory nodes) on a fakeVerbs transport.
func startScript(t *testing.T, verbs int, watchdog time.Duration) (*Node, *fakeVerbs) {
	t.Helper()
	f := newFakeVerbs(0, 3)
	n, err := Start(Config{Protocol: scriptProtocol(verbs), Deploy: protocolapi.Config{Nodes: 1, Workers: 2, Keys: 5}, Watchdog: watchdog,
		NewTransport: func(transport.Handler) (transport.Transport, error) { return f, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Connect([]transport.Region{{}, {Node: 1, Key: 1, Len: 64}, {Node: 2, Key: 1, Len: 64}}); err != nil {
		t.Fatal(err)
	}
	return n, f
}

// The verbs a role posts to one peer run there one at a time, in the order
// posted (an RC queue pair's order, which SEL relies on); verbs to
// different peers run side by side.
func TestVerbOrderPerPeer(t *testing.T) {
	const verbs = 200
	n, f := startScript(t, verbs, 0)
	res, err := n.Access(protocolapi.Op{Kind: protocolapi.OpRead, Key: 0})
	if err != nil || res.Value != 2*verbs {
		t.Fatalf("access: %+v %v", res, err)
	}
	for peer := protocol.NodeID(1); peer <= 2; peer++ {
		got := f.order[peer]
		if len(got) != verbs {
			t.Fatalf("node %d ran %d verbs, want %d", peer, len(got), verbs)
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("node %d ran verb %d after %d: %v", peer, got[i], got[i-1], got)
			}
		}
	}
	if f.overlap.Load() {
		t.Fatal("two verbs ran on one peer at once")
	}
	if !f.across.Load() {
		t.Log("no two peers' verbs overlapped in this run (timing)")
	}
	if v, faults, count := n.Failures(); count != 0 {
		t.Fatalf("failures: %v %v", v, faults)
	}
}

// A role's broken rule, an access it never answers, one it fails and one
// it completes twice are violations: the access returns ErrFailed, and so
// does every later one.
func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		key  uint64
		want string
	}{
		{1, "a rule broken"},
		{2, "not answered in 100ms; the role: waiting for 0 verbs"},
		{3, "a wrong value"},
		{4, "which is not in flight"},
	} {
		t.Run(fmt.Sprint(tc.key), func(t *testing.T) {
			n, _ := startScript(t, 1, 100*time.Millisecond)
			_, err := n.Access(protocolapi.Op{Worker: 1, Kind: protocolapi.OpRead, Key: tc.key})
			if tc.key == 4 {
				// The first completion answered; the second is the violation.
				if err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(5 * time.Second)
				for _, _, c := n.Failures(); c == 0 && time.Now().Before(deadline); _, _, c = n.Failures() {
					time.Sleep(time.Millisecond)
				}
			} else if !errors.Is(err, ErrFailed) {
				t.Fatalf("access: %v, want ErrFailed", err)
			}
			viol, faults, count := n.Failures()
			if count != 1 || len(faults) != 0 || !strings.Contains(strings.Join(viol, "\n"), tc.want) {
				t.Fatalf("violations %q (%d), faults %q: want one with %q", viol, count, faults, tc.want)
			}
			if _, err := n.Access(protocolapi.Op{Kind: protocolapi.OpRead, Key: 0}); !errors.Is(err, ErrFailed) {
				t.Fatalf("an access after the violation: %v, want ErrFailed", err)
			}
		})
	}
}

// Bad calls are errors, not hangs: a worker the node does not run, a
// second access of a busy worker, an access on a node above Config.Nodes.
func TestAccessRefusals(t *testing.T) {
	n, _ := startScript(t, 1, time.Second)
	if _, err := n.Access(protocolapi.Op{Worker: 2, Kind: protocolapi.OpRead}); err == nil || errors.Is(err, ErrFailed) {
		t.Fatalf("worker 2 of 2: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := n.Access(protocolapi.Op{Kind: protocolapi.OpRead, Key: 2}); done <- err }()
	time.Sleep(20 * time.Millisecond)
	if _, err := n.Access(protocolapi.Op{Kind: protocolapi.OpRead, Key: 0}); err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Fatalf("a second access of worker 0: %v", err)
	}
	n.Close()
	if err := <-done; !errors.Is(err, ErrClosed) && !errors.Is(err, ErrFailed) {
		t.Fatalf("the waiting access after Close: %v", err)
	}
	m, err := Start(Config{Protocol: scriptProtocol(1), Deploy: protocolapi.Config{Nodes: 1, Workers: 2, Keys: 5}, ID: 1,
		NewTransport: func(transport.Handler) (transport.Transport, error) { return newFakeVerbs(1, 3), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Workers() != 0 {
		t.Fatalf("memory node 1 runs %d workers", m.Workers())
	}
	if _, err := Start(Config{Protocol: scriptProtocol(1), Deploy: protocolapi.Config{Nodes: 1, Workers: 2, Keys: 5}, ID: 3,
		NewTransport: func(transport.Handler) (transport.Transport, error) { return newFakeVerbs(3, 3), nil }}); err == nil {
		t.Fatal("node 3 of a layout of 3 started")
	}
}

// The SSD of a layout that gives a node pages: a page written and read
// back through Env's page I/O (an in-memory store by default).
func TestSSD(t *testing.T) {
	n, _ := startScript(t, 1, time.Second)
	res, err := n.Access(protocolapi.Op{Kind: protocolapi.OpWrite, Key: 5, Value: 0xfeed})
	if err != nil || res.Value != 0xfeed {
		t.Fatalf("a page written and read back: %+v %v", res, err)
	}
}

// A process builds every node's role in order (the API's promise), its own
// on its Env and the others on shadow envs with their memory's size, which
// it never steps; a shadow role that acts is a violation.
func TestShadowRoles(t *testing.T) {
	regions := []transport.Region{{}, {Node: 1, Key: 1, Len: 64}, {Node: 2, Key: 1, Len: 64}}
	for _, mutant := range []string{"", "act"} {
		f := newFakeVerbs(1, 3)
		n, err := Start(Config{Protocol: scriptProtocol(1), Deploy: protocolapi.Config{Nodes: 1, Workers: 2, Keys: 5, Mutant: mutant}, ID: 1,
			NewTransport: func(transport.Handler) (transport.Transport, error) { return f, nil }})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		if err := n.Connect(regions); err != nil {
			t.Fatal(err)
		}
		viol, _, count := n.Failures()
		switch {
		case mutant == "" && count != 0:
			t.Fatalf("violations: %v", viol)
		case mutant == "act" && (count != 1 || !strings.Contains(viol[0], "node 0's role, built on this process only to keep Cluster.Role's order and never stepped, set a timer")):
			t.Fatalf("a shadow role that acts: %v", viol)
		}
	}
}
