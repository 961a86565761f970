package actors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/memfile"
)

// memNet connects in-process cluster nodes: a send to a node that is down
// fails, as a transport's to a dead peer does.
type memNet struct {
	mu    sync.RWMutex
	nodes map[protocol.NodeID]*Local
}

type memSender struct {
	net  *memNet
	from protocol.NodeID
}

func (s memSender) Send(to protocol.NodeID, frame, payload []byte) error {
	s.net.mu.RLock()
	peer := s.net.nodes[to]
	s.net.mu.RUnlock()
	if peer == nil {
		return fmt.Errorf("node %d is down", to)
	}
	peer.Receive(s.from, frame, payload)
	return nil
}

func (m *memNet) start(t *testing.T, id protocol.NodeID, store *memfile.Store, allocated uint64) *Local {
	t.Helper()
	l, err := NewClusterNode(ClusterConfig{Config: Config{ID: id, CacheFrames: 64}, RequestTimeout: 20 * time.Second}, store)
	if err != nil {
		t.Fatal(err)
	}
	if allocated > 0 {
		l.Locked(func() { err = l.Node().Directory().Restore(allocated) })
		if err != nil {
			t.Fatal(err)
		}
	}
	l.EnableViews(nil, nil)
	l.Connect(memSender{net: m, from: id})
	m.mu.Lock()
	m.nodes[id] = l
	m.mu.Unlock()
	return l
}

func (m *memNet) kill(id protocol.NodeID) {
	m.mu.Lock()
	l := m.nodes[id]
	delete(m.nodes, id)
	m.mu.Unlock()
	l.Stop() // nothing written back; the page memory stays mapped for workers still unwinding
}

func nodeSet(ids ...protocol.NodeID) (s protocol.NodeSet) {
	for _, id := range ids {
		s.Add(id)
	}
	return s
}

// waitActive waits until every node is active in view v.
func waitActive(t *testing.T, v uint32, nodes ...*Local) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, l := range nodes {
		for {
			n, active := l.View()
			if n == v && active {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: view %d active=%v, want view %d active", l.Node().ID(), n, active, v)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// increment adds one to the counter of pid through w's node, written
// through before it returns.
func increment(l *Local, pid protocol.PID) (uint64, error) {
	var v uint64
	err := l.Do(func(w *bufmgr.Worker) error {
		g := l.Node().Cache().Exclusive(w, pid)
		defer g.Release()
		v = binary.LittleEndian.Uint64(g.Data()) + 1
		binary.LittleEndian.PutUint64(g.Data(), v)
		g.MarkDirty()
		return l.Persist(w, &g)
	})
	return v, err
}

func read(l *Local, pid protocol.PID) (uint64, error) {
	var v uint64
	err := l.Do(func(w *bufmgr.Worker) error {
		g := l.Node().Cache().Shared(w, pid)
		defer g.Release()
		v = binary.LittleEndian.Uint64(g.Data())
		return nil
	})
	return v, err
}

// TestViewChangeSurvivesANodeDeath: three in-process nodes increment
// counters on each other's pages with write-through. Node 2 dies (nothing
// written back) and the survivors install view 2 without it: operations on
// pages of nodes 0 and 1 go on and lose nothing, operations on node 2's
// pages fail at once with ErrDirectoryDown naming it. Node 2 restarts on
// its store and all three install view 3: its pages hold every
// acknowledged increment.
//
// The nodes install each view at once, or one after the other (stagger):
// in between, one node is in the new view while the other goes on in the
// old one, and their messages to each other are held or dropped.
func TestViewChangeSurvivesANodeDeath(t *testing.T) {
	for _, stagger := range []time.Duration{0, 30 * time.Millisecond} {
		t.Run(fmt.Sprintf("stagger=%v", stagger), func(t *testing.T) { testViewChange(t, stagger) })
	}
}

func testViewChange(t *testing.T, stagger time.Duration) {
	net := &memNet{nodes: map[protocol.NodeID]*Local{}}
	stores := []*memfile.Store{memfile.New(1<<10, nil), memfile.New(1<<10, nil), memfile.New(1<<10, nil)}
	const perNode = 8
	var nodes [3]*Local
	for i := range nodes {
		nodes[i] = net.start(t, protocol.NodeID(i), stores[i], 0)
	}
	all := nodeSet(0, 1, 2)
	for _, l := range nodes {
		if err := l.ChangeView(1, all, protocol.NodeSet{}); err != nil {
			t.Fatal(err)
		}
	}
	waitActive(t, 1, nodes[:]...)
	var pids []protocol.PID
	for _, l := range nodes {
		for range perNode {
			if err := l.Do(func(w *bufmgr.Worker) error {
				g, err := l.Allocate(w)
				if err != nil {
					return err
				}
				pids = append(pids, g.PID())
				g.MarkDirty()
				err = l.Persist(w, &g)
				g.Release()
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// acked[i] is the highest acknowledged value of pids[i]; mu guards it.
	var mu sync.Mutex
	acked := make([]uint64, len(pids))
	var stop atomic.Bool
	var wg sync.WaitGroup
	var unexpected atomic.Pointer[error]
	worker := func(k int, l *Local, seed uint64) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 1))
		for !stop.Load() {
			i := rng.IntN(len(pids))
			v, err := increment(l, pids[i])
			if err != nil {
				if l.stopped.Load() {
					return // the node was killed
				}
				if errors.Is(err, ErrDirectoryDown) || errors.Is(err, ErrWriteThrough) || l.Failed() {
					continue // node 2's pages while it is down, or a write cut by the view change
				}
				unexpected.Store(&err)
				return
			}
			mu.Lock()
			acked[i] = max(acked[i], v)
			mu.Unlock()
		}
	}
	for k := range 3 {
		for j := range 2 {
			wg.Add(1)
			go worker(k, nodes[k], uint64(10*k+j))
		}
	}
	time.Sleep(300 * time.Millisecond)
	// Node 2 dies: nodes 0 and 1 go on in view 2 without it.
	net.kill(2)
	for _, l := range nodes[:2] {
		if err := l.ChangeView(2, nodeSet(0, 1), nodeSet(2)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(stagger)
	}
	waitActive(t, 2, nodes[0], nodes[1])
	before := opsDone(t, nodes[0], pids[:2*perNode])
	time.Sleep(300 * time.Millisecond)
	if after := opsDone(t, nodes[0], pids[:2*perNode]); after <= before {
		t.Fatalf("survivors made no progress without node 2: %d increments before, %d after", before, after)
	}
	start := time.Now()
	_, err := increment(nodes[0], pids[2*perNode])
	if !errors.Is(err, ErrDirectoryDown) || time.Since(start) > time.Second {
		t.Fatalf("an increment of node 2's page while it is down: %v after %v, want ErrDirectoryDown at once", err, time.Since(start))
	}
	t.Logf("node 2's page while it is down: %v", err)
	// Node 2 comes back on its store; everyone installs view 3.
	var allocated uint64
	nodes[2].Locked(func() { allocated = nodes[2].Node().Directory().Allocated() })
	nodes[2] = net.start(t, 2, stores[2], allocated)
	for k := range 2 {
		wg.Add(1)
		go worker(2, nodes[2], uint64(100+k))
	}
	for _, l := range nodes {
		if err := l.ChangeView(3, all, nodeSet()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(stagger)
	}
	waitActive(t, 3, nodes[:]...)
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if e := unexpected.Load(); e != nil {
		t.Fatalf("an operation failed: %v", *e)
	}
	for i, pid := range pids {
		for _, l := range nodes {
			v, err := read(l, pid)
			if err != nil {
				t.Fatalf("reading %v through node %d: %v", pid, l.Node().ID(), err)
			}
			if v < acked[i] {
				t.Fatalf("%v through node %d holds %d, but %d was acknowledged", pid, l.Node().ID(), v, acked[i])
			}
		}
	}
	var stale uint64
	for _, l := range nodes {
		stale += l.StaleFrames.Load()
		l.Stop()
	}
	t.Logf("stale frames dropped: %d", stale)
}

// opsDone sums the counters of pids as node l reads them.
func opsDone(t *testing.T, l *Local, pids []protocol.PID) uint64 {
	t.Helper()
	var sum uint64
	for _, pid := range pids {
		v, err := read(l, pid)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}

// TestViewFramesAreCheckedAgainstTheView: a frame of an older view is
// dropped and counted (a paused node's message from before the view
// change is never served); one of a newer view waits until the node
// installs that view; a view-change frame that does not fit (from a
// non-member, for a page of another directory) is dropped as bad, and the
// node goes on.
func TestViewFramesAreCheckedAgainstTheView(t *testing.T) {
	net := &memNet{nodes: map[protocol.NodeID]*Local{}}
	l := net.start(t, 0, memfile.New(64, nil), 0)
	defer l.Stop()
	if err := l.ChangeView(5, nodeSet(0, 1), protocol.NodeSet{}); err != nil {
		t.Fatal(err)
	}
	frame := func(m protocol.Message) []byte {
		var b [protocol.FrameSize]byte
		protocol.Encode(b[:], &m)
		return b[:]
	}
	// View 5 waits for node 1's holdings: node 0 is not active yet.
	if _, active := l.View(); active {
		t.Fatal("active in view 5 before node 1 reported")
	}
	l.Receive(1, frame(protocol.Message{Type: protocol.TRequest, From: 1, To: 0, Mode: protocol.ModeShared, PID: protocol.MakePID(0, 0), View: 4}), nil)
	if got := l.StaleFrames.Load(); got != 1 {
		t.Fatalf("a request of view 4 in view 5: %d stale frames counted, want 1", got)
	}
	l.Receive(1, frame(protocol.Message{Type: protocol.TRequest, From: 1, To: 0, Mode: protocol.ModeShared, PID: protocol.MakePID(0, 0), View: 6}), nil)
	l.Locked(func() {
		if len(l.vs.held) != 1 {
			t.Fatalf("a request of view 6 in view 5: %d frames held, want 1", len(l.vs.held))
		}
	})
	// Holdings from node 2, not a member; holdings naming node 1's page.
	var entry [protocol.ViewEntrySize]byte
	protocol.EncodeViewEntries(entry[:], []protocol.ViewEntry{{PID: protocol.MakePID(1, 0), Mode: protocol.ModeShared}})
	l.Receive(2, frame(protocol.Message{Type: protocol.THoldings, From: 2, To: 0, Flags: protocol.FlagLast, View: 5}), nil)
	l.Receive(1, frame(protocol.Message{Type: protocol.THoldings, From: 1, To: 0, Count: 1, Flags: protocol.FlagLast, View: 5}), entry[:])
	if got := l.BadFrames.Load(); got != 2 {
		t.Fatalf("%d bad frames counted, want 2", got)
	}
	if l.Failed() {
		t.Fatalf("bad view-change frames failed the node: %v", l.Err())
	}
	// Node 1's real report, then its rebuild answer: node 0 is active.
	l.Receive(1, frame(protocol.Message{Type: protocol.THoldings, From: 1, To: 0, Flags: protocol.FlagLast, View: 5}), nil)
	l.Receive(1, frame(protocol.Message{Type: protocol.TRebuilt, From: 1, To: 0, Flags: protocol.FlagLast, View: 5}), nil)
	if n, active := l.View(); n != 5 || !active {
		t.Fatalf("view %d active=%v, want view 5 active", n, active)
	}
	// A view without this node fails it.
	if err := l.ChangeView(7, nodeSet(1), nodeSet(0)); !errors.Is(err, ErrNotInView) {
		t.Fatalf("a view without the node: %v, want ErrNotInView", err)
	}
}
