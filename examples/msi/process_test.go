package msi_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/examples/msi"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// procNode is protocolapi.Env over a transport.Transport, the way a
// process runner would build it: one goroutine per node runs Step for
// every input in order (frames from the transport's handler, accesses
// from worker goroutines, timers, verb completions), and a send to the
// node itself goes to a local queue that goroutine drains first. It is a
// test harness: the point is that MSI's role runs unchanged over real
// goroutines and a transport, not only in the simulator.
type procNode struct {
	id     protocol.NodeID
	nodes  int
	codec  protocolapi.Codec
	t      transport.Transport
	role   protocolapi.Role
	inbox  chan protocolapi.Event
	local  []protocolapi.Event // self-sends, drained by the node's goroutine only
	start  time.Time
	rng    *rand.Rand // used on the node's goroutine only
	mu     sync.Mutex
	reply  map[uint64]chan protocolapi.Result
	failed chan error
}

func (n *procNode) Self() protocol.NodeID { return n.id }
func (n *procNode) Nodes() int            { return n.nodes }
func (n *procNode) Now() int64            { return time.Since(n.start).Nanoseconds() }
func (n *procNode) Rand() uint64          { return n.rng.Uint64() }
func (n *procNode) Memory() []byte        { return nil }
func (n *procNode) Region(protocol.NodeID) (transport.Region, bool) {
	return transport.Region{}, false
}

func (n *procNode) fail(err error) {
	select {
	case n.failed <- err:
	default:
	}
}

func (n *procNode) Send(to protocol.NodeID, m protocolapi.Message) {
	if to == n.id {
		n.local = append(n.local, protocolapi.Event{Kind: protocolapi.EventMessage, From: n.id, Msg: m})
		return
	}
	frame := make([]byte, protocol.FrameSize)
	payload, err := protocolapi.EncodeFrame(n.codec, frame, n.id, to, m)
	if err == nil {
		err = n.t.Send(to, frame, payload)
	}
	if err != nil {
		n.fail(fmt.Errorf("node %d sending %v: %w", n.id, m, err))
	}
}

func (n *procNode) After(delay int64, token uint64) {
	time.AfterFunc(time.Duration(delay), func() { n.inbox <- protocolapi.Event{Kind: protocolapi.EventTimer, Token: token} })
}

func (n *procNode) verb(token uint64, do func() (uint64, error)) {
	go func() {
		prev, err := do()
		n.inbox <- protocolapi.Event{Kind: protocolapi.EventVerb, Token: token, Prev: prev, Err: err}
	}()
}

func (n *procNode) Read(dst []byte, r transport.Region, off uint64, token uint64) {
	n.verb(token, func() (uint64, error) { return 0, n.t.Read(dst, r, off) })
}
func (n *procNode) Write(r transport.Region, off uint64, src []byte, token uint64) {
	n.verb(token, func() (uint64, error) { return 0, n.t.Write(r, off, src) })
}
func (n *procNode) CompareAndSwap(r transport.Region, off, old, new uint64, token uint64) {
	n.verb(token, func() (uint64, error) { return n.t.CompareAndSwap(r, off, old, new) })
}
func (n *procNode) FetchAndAdd(r transport.Region, off, delta uint64, token uint64) {
	n.verb(token, func() (uint64, error) { return n.t.FetchAndAdd(r, off, delta) })
}
func (n *procNode) ReadPage(slot uint64, buf []byte, token uint64) {
	n.inbox <- protocolapi.Event{Kind: protocolapi.EventPage, Token: token, Err: fmt.Errorf("no SSD")}
}
func (n *procNode) WritePage(slot uint64, buf []byte, token uint64) { n.ReadPage(slot, buf, token) }

// Busy: real work costs what it costs.
func (n *procNode) Busy(int64) {}

func (n *procNode) Complete(op protocolapi.Op, res protocolapi.Result) {
	n.mu.Lock()
	ch := n.reply[op.ID]
	delete(n.reply, op.ID)
	n.mu.Unlock()
	if ch == nil {
		n.fail(fmt.Errorf("node %d completes access %d, which is not in flight", n.id, op.ID))
		return
	}
	ch <- res
}

// loop runs the role: the local queue first, then the inbox.
func (n *procNode) loop(stop <-chan struct{}) {
	step := func(ev protocolapi.Event) {
		if err := n.role.Step(ev); err != nil {
			n.fail(fmt.Errorf("node %d: %w", n.id, err))
		}
	}
	for {
		if len(n.local) > 0 {
			ev := n.local[0]
			n.local = n.local[1:]
			step(ev)
			continue
		}
		select {
		case ev := <-n.inbox:
			step(ev)
		case <-stop:
			return
		}
	}
}

// access asks the node's role for op from a worker goroutine and waits.
func (n *procNode) access(op protocolapi.Op) (protocolapi.Result, error) {
	ch := make(chan protocolapi.Result, 1)
	n.mu.Lock()
	n.reply[op.ID] = ch
	n.mu.Unlock()
	n.inbox <- protocolapi.Event{Kind: protocolapi.EventAccess, Op: op}
	select {
	case res := <-ch:
		return res, nil
	case err := <-n.failed:
		return protocolapi.Result{}, err
	case <-time.After(30 * time.Second):
		return protocolapi.Result{}, fmt.Errorf("node %d: access %d (%v of key %d) not answered in 30 s", n.id, op.ID, op.Kind, op.Key)
	}
}

// MSI's role runs unchanged over transports and goroutines (sim.Net: the
// world's links under real goroutines, what the conformance suite runs
// shm and tcp against), and porcupine finds its history linearizable.
func TestRunsOverATransport(t *testing.T) {
	const nodes, workers, keys, opsPerWorker = 3, 2, 6, 150
	cfg := protocolapi.Config{Nodes: nodes, Workers: workers, Keys: keys, CacheLines: 3}
	p := msi.Protocol()
	cl, err := p.Deploy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	start := time.Now()
	ns := make([]*procNode, nodes)
	handlers := make([]transport.Handler, nodes)
	for i := range ns {
		n := &procNode{id: protocol.NodeID(i), nodes: nodes, codec: p.Codec, inbox: make(chan protocolapi.Event, 1<<16),
			start: start, rng: rand.New(rand.NewPCG(uint64(i), 1)), reply: map[uint64]chan protocolapi.Result{}, failed: failed}
		ns[i] = n
		handlers[i] = func(from protocol.NodeID, frame, payload []byte) {
			f, to, m, err := protocolapi.DecodeFrame(n.codec, frame, payload)
			if err != nil || f != from || to != n.id {
				n.fail(fmt.Errorf("node %d: a frame from %d: %v", n.id, from, err))
				return
			}
			n.inbox <- protocolapi.Event{Kind: protocolapi.EventMessage, From: from, Msg: m}
		}
	}
	net := sim.NewNet(1, handlers)
	stop := make(chan struct{})
	var loops sync.WaitGroup
	for _, n := range ns {
		n.t = net.Node(n.id)
		if n.role, err = cl.Role(n.id, n); err != nil {
			t.Fatal(err)
		}
		loops.Add(1)
		go func() { defer loops.Done(); n.loop(stop) }()
	}
	defer func() {
		close(stop)
		loops.Wait()
		for _, n := range ns {
			n.t.Close()
		}
	}()
	var mu sync.Mutex
	var ops []checker.Op
	var value uint64
	var wg sync.WaitGroup
	errs := make(chan error, nodes*workers)
	for i, n := range ns {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i*workers+w), 2))
				for k := range opsPerWorker {
					op := protocolapi.Op{ID: uint64(w*opsPerWorker + k + 1), Worker: w, Key: rng.Uint64N(keys), Kind: protocolapi.OpRead}
					if rng.IntN(2) == 0 {
						op.Kind = protocolapi.OpRMW
						mu.Lock()
						value++
						op.Value = value
						mu.Unlock()
					}
					call := time.Since(start).Nanoseconds()
					res, err := n.access(op)
					ret := time.Since(start).Nanoseconds()
					if err == nil && res.Err != nil {
						err = res.Err
					}
					if err != nil {
						errs <- err
						return
					}
					h := checker.Op{Client: i*workers + w, Page: op.Key, Kind: checker.KindRead, Value: res.Value, Call: call, Return: ret}
					if op.Kind == protocolapi.OpRMW {
						h.Kind, h.Value, h.Read = checker.KindRMW, op.Value, res.Value
					}
					mu.Lock()
					ops = append(ops, h)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	select {
	case err := <-failed:
		t.Fatal(err)
	default:
	}
	if len(ops) != nodes*workers*opsPerWorker {
		t.Fatalf("%d accesses, want %d", len(ops), nodes*workers*opsPerWorker)
	}
	if res, _ := checker.Check(ops, time.Minute); !res.Ok {
		t.Fatalf("not linearizable on keys %v (unknown %v)", res.BadPages, res.Unknown)
	}
}
