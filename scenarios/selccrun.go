package scenarios

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"time"
	"unsafe"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/linecache"
	"github.com/scalestore-go/scalestore/linetree"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// The systems a simulated run can put under the workload.
const (
	SystemScaleStore = "scalestore"
	SystemSELCC      = selcc.Name
)

// DefaultMemoryNodes is how many passive memory nodes a SELCC run has
// when SimConfig.MemoryNodes is 0.
const DefaultMemoryNodes = selcc.DefaultMemoryNodes

// DefaultGamma is SELCC's local-handover threshold when SimConfig.Gamma
// is 0 (below 0: no lease).
const DefaultGamma = selcc.DefaultGamma

// selccCluster is a simulated SELCC cluster: compute nodes 0..C-1 with a
// linecache each (so a node's id is its place in the latch words), passive
// memory nodes C..C+M-1 (registered memory, no handler), and the checks
// watching them.
type selccCluster struct {
	w        *sim.World
	memNodes int
	computes int
	mem      [][]byte // each memory node's lines, by node id - computes
	regions  map[protocol.NodeID]transport.Region
	caches   []*linecache.Cache
	handlers []*sim.Coroutine
	stopping bool

	viol      checker.ViolationLog
	memCalls  uint64 // messages a memory node's CPU had to handle (must stay 0)
	changed   []protocol.PID
	isChanged map[protocol.PID]bool
	trace     io.Writer
	memos     []selcc.Memo
	onVerb    func(at int64, v *sim.Verb) // the scenarios' chart
	holdNanos int64                       // a worker's local latch hold (SimConfig.HoldNanos)
	trees     []*linetree.Tree            // btree: each compute node's handle
}

// line is the PID of line i: lines are spread round-robin over the memory
// nodes.
func (s *selccCluster) line(i int) protocol.PID {
	return protocol.MakePID(protocol.NodeID(s.computes+i%s.memNodes), uint64(i/s.memNodes))
}

func (s *selccCluster) fail(format string, args ...any) { s.viol.Fail(format, args...) }

// lineOf is the line whose word or data a verb at off of a memory node
// touched.
func (s *selccCluster) lineOf(node protocol.NodeID, off uint64) protocol.PID {
	return protocol.MakePID(node, off/linecache.Stride)
}

func (s *selccCluster) mark(line protocol.PID) {
	if !s.isChanged[line] {
		s.isChanged[line] = true
		s.changed = append(s.changed, line)
	}
}

func (s *selccCluster) word(line protocol.PID) selcc.Word {
	b := s.mem[int(line.Dir())-s.computes][linecache.WordOffset(line.Slot()):]
	return selcc.Word(binary.LittleEndian.Uint64(b))
}

func (s *selccCluster) memData(line protocol.PID) []byte {
	off := linecache.WordOffset(line.Slot()) + linecache.DataOffset
	return s.mem[int(line.Dir())-s.computes][off : off+linecache.LineSize]
}

// checkChanged checks every line whose word, memory copy or memos changed
// since the last step: the word grants at least what the memos believe,
// single writer, and a shared copy equals memory's (no holder may have
// changed memory under it).
func (s *selccCluster) checkChanged() {
	for _, line := range s.changed {
		delete(s.isChanged, line)
		s.checkLine(line, false)
	}
	s.changed = s.changed[:0]
}

func (s *selccCluster) checkLine(line protocol.PID, atRest bool) {
	w := s.word(line)
	s.memos = s.memos[:0]
	for _, c := range s.caches {
		s.memos = append(s.memos, c.Memo(line))
	}
	check := selcc.CheckLine
	if atRest {
		check = selcc.CheckLineAtRest
	}
	if err := check(w, s.memos); err != nil {
		s.fail("line %v: %v", line, err)
		return
	}
	for n, c := range s.caches {
		if data, memo, ok := c.Copy(line); ok && memo == selcc.SharedCopy && !slices.Equal(data, s.memData(line)) {
			a, _ := checker.PageValue(data)
			b, _ := checker.PageValue(s.memData(line))
			s.fail("line %v: node %d's shared copy (value %d) differs from memory's (value %d)", line, n, a, b)
		}
	}
}

type computeReceiver struct {
	s *selccCluster
	c *linecache.Cache
}

func (r computeReceiver) Deliver(m *protocol.Message, _ []byte) {
	if err := r.c.Deliver(m); err != nil {
		r.s.fail("%v", err)
	}
}

type memoryReceiver struct{ s *selccCluster }

func (r memoryReceiver) Deliver(m *protocol.Message, _ []byte) {
	r.s.memCalls++
	r.s.fail("memory node %d received %v: memory nodes have no CPU in SELCC", m.To, m)
}

// alignedBytes is n zero bytes starting on an 8-byte boundary (the reply
// slots' status words are read atomically).
func alignedBytes(n int) []byte {
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
}

func newSELCCCluster(cfg SimConfig, plan sim.FaultPlan) (*selccCluster, error) {
	m := cfg.MemoryNodes
	if m == 0 {
		m = DefaultMemoryNodes
	}
	c := cfg.Nodes
	switch {
	case m < 1:
		return nil, fmt.Errorf("--memory-nodes %d: want at least 1", m)
	case c > selcc.MaxNodes:
		return nil, fmt.Errorf("--nodes %d: SELCC's latch word names at most %d compute nodes", c, selcc.MaxNodes)
	case m+c > protocol.MaxNodes:
		return nil, fmt.Errorf("--nodes %d and --memory-nodes %d: at most %d nodes in all", c, m, protocol.MaxNodes)
	}
	gamma := cfg.Gamma
	if gamma == 0 {
		gamma = DefaultGamma
	}
	w := sim.New(cfg.Seed, m+c, sim.DefaultLatency, plan)
	s := &selccCluster{w: w, memNodes: m, computes: c, regions: map[protocol.NodeID]transport.Region{},
		isChanged: map[protocol.PID]bool{}, trace: cfg.Trace, viol: checker.NewViolationLog(w.Now)}
	w.OnFault = func(_ int64, _ protocol.NodeID, err error) { s.fail("%v", err) }
	lines := (cfg.Pages + m - 1) / m
	for i := range m {
		id := protocol.NodeID(c + i)
		s.mem = append(s.mem, alignedBytes(linecache.MemoryBytes(lines)))
		s.regions[id] = w.Register(id, s.mem[i])
		w.Attach(id, memoryReceiver{s})
		if cfg.HandleCost > 0 {
			w.SetHandleCost(id, cfg.HandleCost)
		}
	}
	computes := make([]protocol.NodeID, c)
	replies := make([]transport.Region, c)
	replyMem := make([][]byte, c)
	for i := range c {
		computes[i] = protocol.NodeID(i)
		replyMem[i] = alignedBytes(linecache.ReplyBytes(cfg.Workers))
		replies[i] = w.Register(computes[i], replyMem[i])
	}
	w.SetVerbTrace(func(at int64, v *sim.Verb) {
		if int(v.Region.Node) >= c && v.Kind != sim.VerbRead && v.Err == nil {
			s.mark(s.lineOf(v.Region.Node, v.Off))
		}
		if k := int(v.Region.Node); k < len(s.caches) && v.Kind == sim.VerbWrite && v.Err == nil {
			s.caches[k].Landed(v.Off)
		}
		if s.onVerb != nil {
			s.onVerb(at, v)
		}
		if s.trace != nil {
			fmt.Fprintf(s.trace, "%d %v\n", at, v)
		}
	})
	if cfg.Trace != nil {
		w.SetTrace(func(at int64, msg *protocol.Message, _ []byte) { fmt.Fprintf(cfg.Trace, "%d %v\n", at, msg) })
	}
	fire := func(name string, p float64) func() bool {
		return mutation.Point(name, func() bool { return w.Chance(p) })
	}
	lat := sim.DefaultLatency
	for i := range c {
		id := computes[i]
		lc, err := linecache.New(linecache.Config{
			Self: selcc.Node(i), ID: id, Computes: computes, Replies: replies, ReplyMem: replyMem[i],
			Memory: s.regions, Frames: cfg.CachePages, Threads: cfg.Workers, Gamma: gamma, Priority: !cfg.NoPriority,
			RTT: 2*lat.Verb + lat.Atomic, PollEvery: -1, Inbox: c * cfg.Workers,
			Post: &sim.NodeEnv{W: w, ID: id},
			Send: func(msg *protocol.Message) error { w.Send(msg, nil); return nil },
			Now:  w.Now,
			Mutations: linecache.Mutations{
				SkipUndo:           fire(mutation.SELCCSkipUndo, 1),
				HandOverWithoutFAA: fire(mutation.SELCCHandOverWithoutFAA, 0.5),
				ShareWithoutFlush:  fire(mutation.SELCCShareWithoutFlush, 1),
				ReleaseKeepsCopy:   fire(mutation.SELCCReleaseKeepsCopy, 0.5),
				EvictWithoutFlush:  fire(mutation.SELCCEvictWithoutFlush, 0.5),
				RoundRestarts:      fire(mutation.SELCCRoundRestarts, 0.5),
			},
			OnMemo: s.mark,
		})
		if err != nil {
			return nil, err
		}
		s.caches = append(s.caches, lc)
		w.Attach(id, computeReceiver{s, lc})
		s.handlers = append(s.handlers, w.Spawn(id, 0, func(co *sim.Coroutine) {
			lc.Serve(&linecache.Thread{P: co}, func() bool { return s.stopping })
		}))
	}
	return s, nil
}

// runSELCC is RunSim for SystemSELCC: the register or rmw workload on
// SELCC's compute nodes, with the line checks after every step, the word
// checked exactly at rest, a final read of every line, and porcupine.
func runSELCC(cfg SimConfig) (SimResult, error) {
	res := SimResult{Seed: cfg.Seed}
	btreeMode := cfg.Workload == "btree"
	if btreeMode {
		// The catalog, the first root, and room for every split.
		cfg.Pages = 2 + cfg.Keys + 64
	}
	if cfg.Mutate != "" && !mutation.SELCC(cfg.Mutate) {
		return res, fmt.Errorf("--mutate %s breaks ScaleStore, not SELCC", cfg.Mutate)
	}
	plan, undo, err := startRun(cfg, &res)
	if err != nil {
		return res, err
	}
	defer undo()
	s, err := newSELCCCluster(cfg, plan)
	if err != nil {
		return res, err
	}
	w := s.w
	pids := make([]protocol.PID, cfg.Pages)
	for i := range pids {
		pids[i] = s.line(i)
	}
	items := cfg.Pages
	var trees []*linetree.Tree
	if btreeMode {
		items = cfg.Keys
		linetree.Format(s.memData(pids[0]), s.memData(pids[1]))
		for k, c := range s.caches {
			next := uint64(2 + k)
			trees = append(trees, &linetree.Tree{Cache: c, Fanout: treeFanout,
				Line: func(i uint64) protocol.PID { return s.line(int(i)) },
				Alloc: func() (uint64, bool) {
					l := next
					next += uint64(len(s.caches))
					return l, l < uint64(cfg.Pages)
				}})
		}
	}
	s.holdNanos = cfg.HoldNanos
	work := &simrunner.Workers{W: w, Ops: cfg.Ops, ReadRatio: cfg.ReadRatio, Locality: cfg.Locality,
		RMW: cfg.Workload == "rmw", StartSpread: 1000, SingleWriter: cfg.SingleWriter,
		Keys: simrunner.NewKeys(w, items, cfg.Zipf), Hist: checker.NewHistory(cfg.Ops + items), Fail: s.fail}
	s.trees = trees
	r := &selccRun{cfg: cfg, s: s, pids: pids, work: work}
	wallStart := time.Now()
	var cos []*sim.Coroutine
	for k := range s.caches {
		for j := range cfg.Workers {
			id := protocolapi.Worker{Node: protocol.NodeID(k), Slot: j, Client: k*cfg.Workers + j}
			bind := func(co *sim.Coroutine) protocolapi.Accessor { return s.Worker(id, co) }
			if btreeMode {
				cos = append(cos, work.SpawnTree(id, bind))
			} else {
				cos = append(cos, work.Spawn(id, bind))
			}
		}
	}
	ok := r.runUntil(cos, "workload")
	if ok {
		// At rest: every word is exactly what the memos say. Then one
		// more read of every line, which a lost write cannot pass.
		w.StopFaults()
		r.settle()
		if s.viol.Count() == 0 {
			for _, line := range pids {
				s.checkLine(line, true)
			}
			var final *sim.Coroutine
			if id := (protocolapi.Worker{Node: 0, Slot: 0, Client: len(cos)}); btreeMode {
				final = work.FinalGets(id, func(co *sim.Coroutine) protocolapi.Accessor { return s.Worker(id, co) })
			} else {
				// The lines once more, under the local shared latch.
				t := &linecache.Thread{Slot: 0}
				final = w.Spawn(0, 0, func(co *sim.Coroutine) {
					t.P = co
					for i, pid := range pids {
						call := w.Now()
						var v uint64
						err := s.caches[0].Access(t, pid, selcc.Read, func(data []byte) { v = s.whole(pid, data) })
						if err != nil {
							s.fail("final read of %v: %v", pid, err)
							continue
						}
						r.work.Hist.Add(checker.Op{Client: len(cos), Page: uint64(i), Kind: "read", Value: v, Call: call, Return: w.Now()})
					}
				})
			}
			r.runUntil([]*sim.Coroutine{final}, "final read")
		}
	}
	res.SimWall = time.Since(wallStart)
	s.stopping = true
	for _, h := range s.handlers {
		h.Wake()
	}
	for range 1_000_000 {
		if !w.Step() {
			break
		}
	}
	for _, h := range s.handlers {
		h.Stop()
	}
	r.finish(&res)
	cfg.checkHistory(&res, r.work.Hist.Ops())
	return res, nil
}

type selccRun struct {
	cfg  SimConfig
	s    *selccCluster
	pids []protocol.PID
	work *simrunner.Workers
}

// treeFanout is the B-link tree's entries per node in the simulator: small,
// so that a run of a thousand keys splits often.
const treeFanout = 6

// settle steps the world until every cache is quiet (the handlers parked
// with empty inboxes, no verb in flight).
func (r *selccRun) settle() {
	w := r.s.w
	for range 50_000_000 {
		quiet := true
		for _, c := range r.s.caches {
			if !c.Quiet() {
				quiet = false
				break
			}
		}
		if quiet && w.Pending() == 0 {
			return
		}
		if !w.Step() {
			return
		}
		r.s.checkChanged()
	}
	r.s.fail("the cluster did not come to rest after the workload")
}

func (r *selccRun) runUntil(cos []*sim.Coroutine, phase string) bool {
	s := r.s
	return sim.Drive{Phase: phase, LastOp: &r.work.LastOp, AfterStep: s.checkChanged, Violations: s.viol.Count, Fail: s.fail,
		Progress: r.progress, Stuck: func() { r.stuck(cos) }}.Run(s.w, cos)
}

// progress reports the workload's progress to the caller.
func (r *selccRun) progress() {
	if r.cfg.Progress != nil {
		r.cfg.Progress(r.work.Completed, r.cfg.Ops)
	}
}

func allDone(cos []*sim.Coroutine) bool {
	for _, co := range cos {
		if !co.Done() {
			return false
		}
	}
	return true
}

func (r *selccRun) stuck(cos []*sim.Coroutine) {
	for _, c := range r.s.caches {
		r.s.fail("%s", c.Describe())
	}
	for i, co := range cos {
		if !co.Done() {
			r.s.fail("coroutine %d not done", i)
		}
	}
}

// Worker is a SELCC worker's blocking access entry (protocolapi.Blocking)
// on its compute node's line cache.
func (s *selccCluster) Worker(id protocolapi.Worker, on protocolapi.Waiter) protocolapi.Accessor {
	a := &selccWorker{s: s, c: s.caches[id.Node], t: &linecache.Thread{Slot: id.Slot, P: on}}
	if s.trees != nil {
		a.tree = s.trees[id.Node]
	}
	return a
}

// selccWorker reads a line under its node's local shared latch and writes
// it (blind, or read-modify-write) under the exclusive one; a line holds
// its value at both ends, written with a yield between them, so that a
// latch that let a reader in beside a writer shows as a torn line.
type selccWorker struct {
	s    *selccCluster
	c    *linecache.Cache
	t    *linecache.Thread
	tree *linetree.Tree // the btree workload's: its node's B-link tree
}

// Get and Put are the B-link tree's (protocolapi.Tree).
func (a *selccWorker) Get(key uint64) (uint64, bool, error) { return a.tree.Get(a.t, key) }
func (a *selccWorker) Put(key, value uint64) error          { return a.tree.Put(a.t, key, value) }

func (a *selccWorker) Access(op protocolapi.Op) protocolapi.Result {
	s, on := a.s, a.t.P
	pid := s.line(int(op.Key))
	var res protocolapi.Result
	if op.Kind == protocolapi.OpRead {
		res.Err = a.c.Access(a.t, pid, selcc.Read, func(data []byte) {
			head := binary.LittleEndian.Uint64(data)
			on.MaybeYield()
			if s.holdNanos > 0 {
				on.Sleep(s.holdNanos)
			}
			res.Value = s.whole(pid, data)
			if res.Value != head {
				s.fail("line %v: changed under a shared latch", pid)
			}
		})
		return res
	}
	res.Err = a.c.Access(a.t, pid, selcc.Write, func(data []byte) {
		if op.Kind == protocolapi.OpRMW {
			res.Value = s.whole(pid, data)
		}
		checker.PutPageValue(data, op.Value, false)
		on.MaybeYield()
		if s.holdNanos > 0 {
			on.Sleep(s.holdNanos)
		}
		checker.PutPageValue(data, op.Value, true)
	})
	return res
}

func (s *selccCluster) whole(pid protocol.PID, data []byte) uint64 {
	v, whole := checker.PageValue(data)
	if !whole {
		s.fail("line %v: torn under a latch", pid)
		return checker.TornValue
	}
	return v
}

func (r *selccRun) finish(res *SimResult) {
	s := r.s
	res.Ops = r.work.Completed
	res.Messages, res.PageBytes, res.Steps = s.w.Messages, s.w.PageBytes, s.w.Steps
	res.Verbs, res.VerbBytes = s.w.VerbStats()
	res.MemoryHandlerCalls = s.memCalls
	res.TraceHash = s.w.Hash()
	res.SimNanos = s.w.Now()
	res.Violations, res.ViolationCount = s.viol.List(), s.viol.Count()
	res.History = r.work.Hist
	for _, c := range s.caches {
		res.Hits += c.Stats.Hits
		res.Misses += c.Stats.Misses
		res.Evictions += c.Stats.Evictions
		res.RemoteFetches += c.Stats.Misses
		res.SELCC.add(&c.Stats)
	}
}
