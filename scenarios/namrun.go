package scenarios

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/index/cell"
	"github.com/scalestore-go/scalestore/index/indexdesign"
	"github.com/scalestore-go/scalestore/index/nam"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// NAM-tree workloads: the index/nam designs under random gets, puts,
// deletes and scans of Keys keys, compute nodes 0..Nodes-1 and memory
// servers after them. Checked by: every node body written back while its
// lock bit is set (or written whole, fresh), every written node decodable;
// at rest the tree walk (nam.CheckTree); a final get of every key; and
// porcupine per key, a scan counting as a read of every key it covers.
//
// The cell workload runs index/cell the same way: its servers do every
// write, so the check after every verb is that no client writes at all;
// at rest, cell.CheckTree.
var namDesigns = map[string]nam.Design{indexdesign.NAMCoarse: nam.CoarseGrained, indexdesign.NAMFine: nam.FineGrained,
	indexdesign.NAMHybrid: nam.Hybrid}

// defaultHeadGroup is SimConfig.NAMHeadGroup's default.
const defaultHeadGroup = nam.DefaultHeadGroup

// IsNAMWorkload reports whether w is one of the index workloads: the
// NAM-tree's designs or Cell.
func IsNAMWorkload(w string) bool { return indexdesign.IsNAM(w) || indexdesign.IsCell(w) }

// indexClient is one compute thread of an index.
type indexClient interface {
	Get(key uint64) (uint64, bool, error)
	Put(key, val uint64) error
	Delete(key uint64) (bool, error)
	Scan(from, to uint64, fn func(k, v uint64) bool) error
}

// indexServer is a memory server's state machine.
type indexServer interface {
	Handle(req, out []byte) []byte
}

type namRun struct {
	cfg       SimConfig
	w         *sim.World
	layout    *nam.Layout
	mem       [][]byte
	servers   []indexServer
	calls     func() uint64
	atRest    func() error
	newClient func(f nam.Fabric, client int) indexClient
	// cellClients are the cell workload's clients, for their counters.
	cellClients []*cell.Client
	cellLayout  *cell.Layout
	cellServers []*cell.Server
	// cellSplitNanos sums the simulated time of the finished meganode
	// splits, start to end (cellSplitsTimed of them).
	cellSplitNanos  int64
	cellSplitsTimed int
	// shape: node fanout, the most entries of a scan call, skewed
	// partitions (index experiments; the workloads use 4, 3, even).
	fanout, scanBatch int
	skewed            bool
	computes          int
	work              *simrunner.Workers
	viol              checker.ViolationLog
	nextCall          uint64
	waiting           map[uint64]*namCall
	// waits counts the round trips the clients waited for (a batch of
	// READs is one); scans and scanWaits the workload's scans and theirs.
	waits, scanWaits uint64
	scans            int
	// headGroup: the leaves a head node lists (FG, hybrid), 0 for none.
	headGroup int
}

type namCall struct {
	co    protocolapi.Waiter
	reply []byte
	done  bool
}

func (r *namRun) fail(format string, args ...any) { r.viol.Fail(format, args...) }

// simFabric is one compute coroutine's nam.Fabric over the world, and a
// nam.BatchReader: a batch's READs are all in flight before it waits.
type simFabric struct {
	r     *namRun
	node  protocol.NodeID
	co    protocolapi.Waiter
	waits uint64 // this coroutine's round trips waited for
}

func (f *simFabric) wait(done *bool) {
	f.waits++
	f.r.waits++
	for !*done {
		f.co.Park()
	}
}

func (f *simFabric) ReadBatch(ops []nam.ReadOp) {
	left := len(ops)
	done := left == 0
	for i := range ops {
		op := &ops[i]
		f.r.w.Read(f.node, op.Dst, op.Region, op.Off, func(e error) {
			op.Err = e
			if left--; left == 0 {
				done = true
				f.co.Wake()
			}
		})
	}
	f.wait(&done)
}

func (f *simFabric) Read(dst []byte, rg transport.Region, off uint64) error {
	var err error
	done := false
	f.r.w.Read(f.node, dst, rg, off, func(e error) { err, done = e, true; f.co.Wake() })
	f.wait(&done)
	return err
}

func (f *simFabric) Write(rg transport.Region, off uint64, src []byte) error {
	var err error
	done := false
	f.r.w.Write(f.node, rg, off, src, func(e error) { err, done = e, true; f.co.Wake() })
	f.wait(&done)
	return err
}

func (f *simFabric) CompareAndSwap(rg transport.Region, off, old, new uint64) (uint64, error) {
	var prev uint64
	var err error
	done := false
	f.r.w.CompareAndSwap(f.node, rg, off, old, new, func(p uint64, e error) { prev, err, done = p, e, true; f.co.Wake() })
	f.wait(&done)
	return prev, err
}

func (f *simFabric) FetchAndAdd(rg transport.Region, off, delta uint64) (uint64, error) {
	var prev uint64
	var err error
	done := false
	f.r.w.FetchAndAdd(f.node, rg, off, delta, func(p uint64, e error) { prev, err, done = p, e, true; f.co.Wake() })
	f.wait(&done)
	return prev, err
}

func (f *simFabric) Call(server int, req, out []byte) ([]byte, error) {
	f.r.nextCall++
	id := f.r.nextCall
	c := &namCall{co: f.co}
	f.r.waiting[id] = c
	to := protocol.NodeID(f.r.computes + server)
	f.r.w.Send(&protocol.Message{Type: protocol.TIndexCall, From: f.node, To: to, PID: protocol.PID(id), Count: uint16(len(req))}, req)
	f.wait(&c.done)
	return append(out, c.reply...), nil
}

type namServerReceiver struct {
	r  *namRun
	s  indexServer
	id protocol.NodeID
}

func (n namServerReceiver) Deliver(m *protocol.Message, payload []byte) {
	if m.Type != protocol.TIndexCall {
		n.r.fail("memory server %d received %v", n.id, m)
		return
	}
	rep := n.s.Handle(payload, nil)
	reply := protocol.Message{Type: protocol.TIndexReply, From: n.id, To: m.From, PID: m.PID, Count: uint16(len(rep))}
	if cost := n.r.cfg.HandleCost; cost > 0 {
		// The reply leaves once the server's CPU has done the work (the
		// world charges the cost to the server after this delivery). The
		// event is the client's: the server's own events wait out its
		// stall, and requests queued behind it would go first.
		n.r.w.At(m.From, n.r.w.Now()+cost, func() { n.r.w.Send(&reply, rep) })
		return
	}
	n.r.w.Send(&reply, rep)
}

type namComputeReceiver struct{ r *namRun }

func (n namComputeReceiver) Deliver(m *protocol.Message, payload []byte) {
	c := n.r.waiting[uint64(m.PID)]
	if m.Type != protocol.TIndexReply || c == nil {
		n.r.fail("compute node %d received %v, which nobody waits for", m.To, m)
		return
	}
	delete(n.r.waiting, uint64(m.PID))
	c.reply, c.done = append([]byte(nil), payload...), true
	c.co.Wake()
}

// runNAM is RunSim for the NAM-tree workloads.
func runNAM(cfg SimConfig) (SimResult, error) {
	res := SimResult{Seed: cfg.Seed}
	if cfg.Faults == "lossy" {
		return res, fmt.Errorf("--faults lossy: the index's calls assume a reliable transport, as RDMA RC gives")
	}
	if cfg.Mutate != "" && !mutation.NAM(cfg.Mutate) {
		return res, fmt.Errorf("--mutate %s does not break an index (their points: nam-*, cell-*)", cfg.Mutate)
	}
	m := cfg.MemoryNodes
	if m == 0 {
		m = DefaultMemoryNodes
	}
	plan, undo, err := startRun(cfg, &res)
	if err != nil {
		return res, err
	}
	defer undo()
	r, err := newNAMRun(cfg, m, plan, 4, 3, false)
	if err != nil {
		return res, err
	}
	w := r.w
	r.work.Ops, r.work.ReadRatio, r.work.ScanLen = cfg.Ops, cfg.ReadRatio, cfg.NAMScanLen
	var cos []*sim.Coroutine
	for k := range cfg.Nodes {
		for j := range cfg.Workers {
			id := protocolapi.Worker{Node: protocol.NodeID(k), Slot: j, Client: k*cfg.Workers + j}
			cos = append(cos, r.work.SpawnTree(id, func(co *sim.Coroutine) protocolapi.Accessor { return r.Worker(id, co) }))
		}
	}
	if r.headGroup > 0 {
		r.spawnHeadPass(cos, len(cos)+1)
	}
	wallStart := time.Now()
	ok := r.runUntil(cos, "workload")
	if ok {
		w.StopFaults()
		for range 10_000_000 {
			if !w.Step() {
				break
			}
		}
		if err := r.atRest(); err != nil {
			r.fail("the tree at rest: %v", err)
		}
		id := protocolapi.Worker{Node: 0, Slot: 0, Client: len(cos)}
		final := r.work.FinalGets(id, func(co *sim.Coroutine) protocolapi.Accessor { return r.Worker(id, co) })
		r.runUntil([]*sim.Coroutine{final}, "final read")
	}
	res.SimWall = time.Since(wallStart)
	res.Ops = r.work.Completed
	res.Messages, res.PageBytes, res.Steps = w.Messages, w.PageBytes, w.Steps
	res.Verbs, res.VerbBytes = w.VerbStats()
	res.MemoryHandlerCalls = r.calls()
	res.TraceHash, res.SimNanos = w.Hash(), w.Now()
	res.Violations, res.ViolationCount = r.viol.List(), r.viol.Count()
	res.History = r.work.Hist
	res.NAMScans, res.NAMScanWaits = r.scans, r.scanWaits
	for _, s := range r.cellServers {
		res.CellMegaSplits += s.MegaSplits
		res.CellMoved += s.Adopted
	}
	for _, c := range r.cellClients {
		res.CellRestarts += c.Stats.Restarts
	}
	cfg.checkHistory(&res, r.work.Hist.Ops())
	return res, nil
}

// newNAMRun sets up a world of cfg.Nodes compute nodes and m memory
// servers of cfg.Workload's index, with nodes of fanout entries, scan
// calls of at most scanBatch entries, and (NAM-tree) skewed partitions.
func newNAMRun(cfg SimConfig, m int, plan sim.FaultPlan, fanout, scanBatch int, skewed bool) (*namRun, error) {
	if m < 1 || cfg.Nodes+m > protocol.MaxNodes {
		return nil, fmt.Errorf("--nodes %d and --memory-nodes %d: want 1 or more servers and at most %d nodes in all", cfg.Nodes, m, protocol.MaxNodes)
	}
	w := sim.New(cfg.Seed, cfg.Nodes+m, sim.DefaultLatency, plan)
	r := &namRun{cfg: cfg, w: w, computes: cfg.Nodes, waiting: map[uint64]*namCall{},
		fanout: fanout, scanBatch: scanBatch, skewed: skewed, viol: checker.NewViolationLog(w.Now)}
	r.work = &simrunner.Workers{W: w, StartSpread: 1000, Mix: simrunner.MixIndex, Keys: simrunner.UniformKeys(cfg.Keys),
		Hist: checker.NewHistory(cfg.Ops + cfg.Keys), Fail: r.fail}
	w.OnFault = func(_ int64, _ protocol.NodeID, err error) { r.fail("%v", err) }
	var err error
	if indexdesign.IsCell(cfg.Workload) {
		err = r.setupCell(m)
	} else {
		err = r.setupNAM(m)
	}
	if err != nil {
		return nil, err
	}
	for i := range cfg.Nodes {
		w.Attach(protocol.NodeID(i), namComputeReceiver{r})
	}
	return r, nil
}

// setupNAM lays out m memory servers of a NAM-tree design.
func (r *namRun) setupNAM(m int) error {
	cfg, w := r.cfg, r.w
	design := namDesigns[cfg.Workload]
	keys := uint64(cfg.Keys)
	// Enough slots for every key in leaves a third full, and the inner levels.
	slots := 16 + 4*keys/uint64(m)
	r.layout = &nam.Layout{Design: design, Slots: slots, Bounds: nam.Bounds(m, keys, r.skewed), Fanout: r.fanout, ScanBatch: r.scanBatch}
	var servers []*nam.Server
	for i := range m {
		id := protocol.NodeID(cfg.Nodes + i)
		mem := alignedBytes(int(slots) * nam.NodeSize)
		r.mem = append(r.mem, mem)
		r.layout.Regions = append(r.layout.Regions, w.Register(id, mem))
		s := &nam.Server{Mutations: nam.ServerMutations{
			ReplyBeforeApply: mutation.Point(mutation.NAMReplyBeforeApply, func() bool { return w.Chance(0.5) }),
			ScanSkipsNext:    mutation.Point(mutation.NAMScanSkipsNext, func() bool { return true }),
			LocateNextLeaf:   mutation.Point(mutation.NAMLocateNextLeaf, func() bool { return w.Chance(0.2) }),
		}}
		servers = append(servers, s)
		r.servers = append(r.servers, s)
		w.Attach(id, namServerReceiver{r, s, id})
		if cfg.HandleCost > 0 {
			w.SetHandleCost(id, cfg.HandleCost)
		}
	}
	if err := nam.Format(r.layout, r.mem, servers); err != nil {
		return err
	}
	r.calls = func() (n uint64) {
		for _, s := range servers {
			n += s.Calls
		}
		return n
	}
	r.atRest = func() error {
		if design == nam.CoarseGrained {
			return nil
		}
		_, _, err := nam.CheckTree(r.layout, r.mem)
		return err
	}
	w.SetVerbTrace(func(at int64, v *sim.Verb) {
		if v.Kind != sim.VerbWrite || v.Err != nil || int(v.Region.Node) < cfg.Nodes {
			return
		}
		mem := r.mem[int(v.Region.Node)-cfg.Nodes]
		slot := v.Off / nam.NodeSize
		base := slot * nam.NodeSize
		var n nam.Node
		if err := nam.Decode(mem[base:base+nam.NodeSize], &n); err != nil {
			r.fail("node %d:%d after a write by node %d: %v", int(v.Region.Node)-cfg.Nodes, slot, v.From, err)
		}
		if v.Off != base && binary.LittleEndian.Uint64(mem[base:])&1 == 0 {
			r.fail("node %d:%d written back by node %d without its lock", int(v.Region.Node)-cfg.Nodes, slot, v.From)
		}
	})
	if design != nam.CoarseGrained {
		r.headGroup = cfg.NAMHeadGroup
	}
	r.newClient = func(f nam.Fabric, client int) indexClient {
		return &nam.Client{L: r.layout, F: f, Alloc: client, HeadNodes: r.headGroup > 0,
			Mut: nam.Mutations{
				UnlockedWrite: mutation.Point(mutation.NAMUnlockedWrite, func() bool { return w.Chance(0.5) }),
				NoMoveRight:   mutation.Point(mutation.NAMNoMoveRight, func() bool { return true }),
				TrustHead:     mutation.Point(mutation.NAMTrustHead, func() bool { return true }),
			}}
	}
	return nil
}

// spawnHeadPass runs the head nodes' background pass (nam.RefreshHeads)
// as a coroutine of compute node 0, every 20 to 200 us of simulated time,
// until the clients cos are done.
func (r *namRun) spawnHeadPass(cos []*sim.Coroutine, client int) {
	w := r.w
	w.Spawn(0, w.Intn(1000), func(co *sim.Coroutine) {
		c := &nam.Client{L: r.layout, F: &simFabric{r: r, node: 0, co: co}, Alloc: client}
		for {
			co.Sleep(20_000 + w.Intn(180_000))
			if allDone(cos) {
				return
			}
			if _, err := c.RefreshHeads(r.headGroup); err != nil {
				r.fail("head pass: %v", err)
				return
			}
		}
	})
}

// Worker is an index client's blocking entry (protocolapi.Blocking): a
// client of the workload's index over the world's verbs and calls, its
// gets, puts, deletes and scans (protocolapi.Tree, TreeDeleter,
// TreeScanner) for the runner's index mix.
func (r *namRun) Worker(id protocolapi.Worker, on protocolapi.Waiter) protocolapi.Accessor {
	f := &simFabric{r: r, node: id.Node, co: on}
	return &indexWorker{r: r, f: f, c: r.newClient(f, id.Client)}
}

type indexWorker struct {
	r *namRun
	f *simFabric
	c indexClient
}

// Access is not how the index is used: its workload is the tree mix.
func (a *indexWorker) Access(op protocolapi.Op) protocolapi.Result {
	return protocolapi.Result{Err: fmt.Errorf("an index has no register access (%v of key %d)", op.Kind, op.Key)}
}

func (a *indexWorker) Get(key uint64) (uint64, bool, error) { return a.c.Get(key) }
func (a *indexWorker) Put(key, value uint64) error          { return a.c.Put(key, value) }

func (a *indexWorker) Delete(key uint64) error {
	_, err := a.c.Delete(key)
	return err
}

// Scan counts the workload's scans and the round trips they waited for.
func (a *indexWorker) Scan(from, to uint64, visit func(key, value uint64) bool) error {
	w0 := a.f.waits
	err := a.c.Scan(from, to, visit)
	if err == nil {
		a.r.scans++
		a.r.scanWaits += a.f.waits - w0
	}
	return err
}

var _ protocolapi.Blocking = (*namRun)(nil)

func (r *namRun) runUntil(cos []*sim.Coroutine, phase string) bool {
	return sim.Drive{Phase: phase, LastOp: &r.work.LastOp, Violations: r.viol.Count, Fail: r.fail, Progress: func() {
		if r.cfg.Progress != nil {
			r.cfg.Progress(r.work.Completed, r.cfg.Ops)
		}
	}}.Run(r.w, cos)
}

// namWorkloads is the list for help texts.
var namWorkloads = strings.Join([]string{indexdesign.NAMCoarse, indexdesign.NAMFine, indexdesign.NAMHybrid, indexdesign.Cell}, ", ")
