package simrunner

import (
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/internal/traceview"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// Config is one seed's run of a protocol.
type Config struct {
	Seed uint64
	// The deployment (protocolapi.Config): nodes running workers, workers
	// a node, keys, cache lines a node (0: the protocol's default).
	Nodes, Workers, Keys, CacheLines int
	// Ops is the accesses across the cluster; ReadRatio their share of
	// reads; Zipf the skew of the key chosen (0 uniform, below 1).
	Ops       int
	ReadRatio float64
	Zipf      float64
	// Workload is register (reads and blind writes) or rmw (every write a
	// read-modify-write); "" is register.
	Workload string
	// Locality is the chance that a worker's access is to the key of its
	// previous access rather than a new draw (SELCC Fig. 13: 0.5); 0 draws
	// every key.
	Locality float64
	// OpNanos, when above 0, is the CPU time of an access on the worker's
	// own core before the protocol sees it (WriteNanos for a write or
	// read-modify-write when above 0), and workers run back to back
	// without the 0-2 us pause they otherwise take: the paper model's
	// operation cost (scenarios.PaperModel), so that figures charge every
	// protocol the same work per operation.
	OpNanos, WriteNanos int64
	// Faults names the fault plan (sim.Plan); the seed varies its
	// intensities.
	Faults string
	// Mutant names one of the protocol's mutants, or "".
	Mutant string
	// Options sets the protocol's own options by name (the others keep
	// their defaults).
	Options map[string]string
	// Crashes and Elastic ask for node crashes and elastic membership,
	// which the runner refuses for a protocol that does not support them.
	Crashes int
	Elastic bool
	// Trace, when set, gets one line per message and verb.
	Trace io.Writer
	// Steps, when set, gets the messages as the trace viewer's steps (at
	// most MaxSteps); with Watch at least 0 only the messages about that
	// key (protocolapi.Keyed), each with the key's state after it
	// (protocolapi.KeyStater).
	Steps *[]traceview.Step
	Watch int
	// CheckTimeout bounds porcupine's search (0: none).
	CheckTimeout time.Duration
	// PorcupineOnly searches every key's history with porcupine, none
	// decided by zones (checker.CheckPorcupine): the reference verdict.
	PorcupineOnly bool
	// Progress, when set, is called now and then with the accesses
	// completed so far and Ops (the simulation does not depend on it).
	Progress func(done, total int)
	// SkipStepChecks leaves out Cluster.Check(false) after every step of
	// the workload, for a figure that measures a key space too large to
	// walk at every step (a protocol whose check visits every key); the
	// checks at rest, the final reads and the history still run.
	SkipStepChecks bool
}

// MaxSteps bounds Config.Steps.
const MaxSteps = 20_000

// Watchdog is how long, in simulated ns, a run may go without a completed
// access before it is a violation.
const Watchdog = 2_000_000_000

// DefaultConfig is a run without flags: 3 nodes of 2 workers, 64 keys,
// 16 cache lines a node, 2,000 accesses, half reads, the default faults.
func DefaultConfig() Config {
	return Config{Seed: 1, Nodes: 3, Workers: 2, Keys: 64, CacheLines: 16, Ops: 2000, ReadRatio: 0.5,
		Faults: "default", Workload: protocolapi.WorkloadRegister, Watch: -1, CheckTimeout: time.Minute}
}

// Result is what one run found.
type Result struct {
	Seed uint64
	Plan string
	// Ops counts the completed accesses in the history; Unavailable the
	// ones that failed for the fault plan's reason (left out).
	Ops, Unavailable              int
	Messages, PayloadBytes, Verbs uint64
	Steps                         uint64
	TraceHash                     uint64
	SimNanos                      int64
	SimWall, CheckWall            time.Duration
	Violations                    []string // the first 20
	ViolationCount                int
	Linearizable, LinearUnknown   bool
	BadKeys                       []uint64
	History                       *checker.History
	// Counters are the protocol's own (protocolapi.Counterer), at the end.
	Counters []protocolapi.Counter
	// Crashes are the node crashes (Config.Crashes); UnknownOps the
	// accesses they cut that may have taken effect (in the history as
	// writes that return after everything else). Left are the nodes that
	// left (Config.Elastic).
	Crashes    []CrashEvent
	UnknownOps int
	Left       []LeftNode
	// WorkloadOps is how many of the history's first operations are the
	// workload's (the rest are the final reads of every key);
	// WorkloadMessages and WorkloadVerbs are the messages and verbs sent
	// until the workload's last access returned (throughput figures count
	// only these).
	WorkloadOps                     int
	WorkloadMessages, WorkloadVerbs uint64
	Info                            any // porcupine's LinearizationInfo, for its visualization
}

// Failed reports whether the run found a violation (a history porcupine
// could not decide in time is not one: Undecided).
func (r *Result) Failed() bool { return r.ViolationCount > 0 || !r.Linearizable && !r.LinearUnknown }

// Undecided reports whether porcupine timed out.
func (r *Result) Undecided() bool { return r.LinearUnknown }

// Check says why p cannot run cfg, or nil: what the protocol does not
// support, and what the runner does not do yet.
func Check(p protocolapi.Protocol, cfg Config) error {
	w := cfg.Workload
	if w == "" {
		w = protocolapi.WorkloadRegister
	}
	switch {
	case p.Deploy == nil:
		return fmt.Errorf("protocol %s runs through its own run loop (%s), not the generic runner", p.Name, p.BuiltIn)
	case !p.Supports.Workload(w):
		return fmt.Errorf("protocol %s does not support the %s workload (it supports %v)", p.Name, w, p.Supports.Workloads)
	case w != protocolapi.WorkloadRegister && w != protocolapi.WorkloadRMW && w != protocolapi.WorkloadBTree:
		return fmt.Errorf("--workload %q: the generic runner runs register, rmw and btree", w)
	case cfg.Crashes < 0:
		return fmt.Errorf("--crashes %d: want at least 0", cfg.Crashes)
	case cfg.Crashes > 0 && !p.Supports.Crashes:
		return fmt.Errorf("protocol %s does not support node crashes", p.Name)
	case cfg.Elastic && !p.Supports.Elastic:
		return fmt.Errorf("protocol %s does not support elastic membership", p.Name)
	case cfg.Elastic && cfg.Crashes > 0:
		return fmt.Errorf("crashes and elastic membership together: the runner does one or the other")
	case cfg.Elastic && cfg.Nodes < 2:
		return fmt.Errorf("elastic membership on %d node: want at least 2 (the first never leaves)", cfg.Nodes)
	case cfg.Nodes < 1 || cfg.Nodes > protocol.MaxNodes:
		return fmt.Errorf("--nodes %d: want 1..%d", cfg.Nodes, protocol.MaxNodes)
	case cfg.Workers < 1:
		return fmt.Errorf("--workers %d: want at least 1", cfg.Workers)
	case cfg.Keys < 1:
		return fmt.Errorf("%d keys: want at least 1", cfg.Keys)
	case cfg.CacheLines < 0:
		return fmt.Errorf("%d cache lines: want at least 0", cfg.CacheLines)
	case cfg.Ops < 0:
		return fmt.Errorf("--ops %d: want at least 0", cfg.Ops)
	case cfg.ReadRatio < 0 || cfg.ReadRatio > 1:
		return fmt.Errorf("--read-ratio %v: want 0..1", cfg.ReadRatio)
	case cfg.Zipf < 0 || cfg.Zipf >= 1:
		return fmt.Errorf("--zipf %v: want 0 (uniform) up to below 1", cfg.Zipf)
	case cfg.Locality < 0 || cfg.Locality > 1:
		return fmt.Errorf("locality %v: want 0..1", cfg.Locality)
	case cfg.OpNanos < 0 || cfg.WriteNanos < 0:
		return fmt.Errorf("operation CPU %d ns (writes %d ns): want at least 0", cfg.OpNanos, cfg.WriteNanos)
	}
	_, err := p.WithDefaults(protocolapi.Config{Mutant: cfg.Mutant, Options: cfg.Options})
	return err
}

// stepper is a worker's Accessor for an event-driven role: it steps its
// node's role with the access (EventAccess) and parks the worker until the
// role completes it (Env.Complete).
type stepper struct {
	r       *run
	node    protocol.NodeID
	co      *sim.Coroutine
	op      protocolapi.Op
	pending bool
	issuing bool // inside its role's Step: Complete must not wake it
	res     protocolapi.Result
}

func (s *stepper) Access(op protocolapi.Op) protocolapi.Result {
	s.op, s.pending, s.issuing = op, true, true
	s.r.step(s.r.envs[s.node], protocolapi.Event{Kind: protocolapi.EventAccess, Op: op})
	s.issuing = false
	for s.pending {
		s.co.Park()
	}
	return s.res
}

// run is one seed's state.
type run struct {
	p        protocolapi.Protocol
	cfg      Config
	w        *sim.World
	cl       protocolapi.Cluster
	envs     []*nodeEnv
	regions  []transport.Region
	steppers [][]*stepper // per worker node, per worker (an event-driven role's)
	blocking protocolapi.Blocking
	work     *Workers
	crash    *Crashes // Config.Crashes, or nil
	elastic  *Elastic // Config.Elastic, or nil
	hist     *checker.History
	viol     checker.ViolationLog
	stater   protocolapi.KeyStater
	watching bool
	// the workload's share, taken when its last access returned
	workloadOps            int
	workloadMsgs, workVerb uint64
}

func (r *run) fail(format string, args ...any) { r.viol.Fail(format, args...) }

// step hands ev to node e's role.
func (r *run) step(e *nodeEnv, ev protocolapi.Event) {
	if err := e.role.Step(ev); err != nil {
		r.fail("node %d, %v event: %v", e.id, ev.Kind, err)
	}
}

// deliver decodes a frame that arrived at node to and steps its role.
func (r *run) deliver(from, to protocol.NodeID, frame, payload []byte) {
	codec := r.p.Codec
	hdrFrom, hdrTo, m, err := protocolapi.DecodeFrame(codec, frame, payload)
	if err != nil {
		r.fail("a frame %d->%d (%s) does not decode: %v", from, to, protocolapi.TypeName(codec, frame), err)
		return
	}
	if hdrFrom != from || hdrTo != to {
		r.fail("a frame on link %d->%d says %d->%d: %v", from, to, hdrFrom, hdrTo, m)
		return
	}
	r.step(r.envs[to], protocolapi.Event{Kind: protocolapi.EventMessage, From: from, Msg: m})
	if r.cfg.Trace != nil {
		fmt.Fprintf(r.cfg.Trace, "%d %s %d->%d %v\n", r.w.Now(), codec.MessageTypes()[m.Type()-1], from, to, m)
	}
	if st := r.cfg.Steps; st != nil && len(*st) < MaxSteps {
		s := traceview.Step{At: r.w.Now(), From: int(from), To: int(to), Label: m.String(), Page: len(payload) >= protocol.PageSize}
		if r.watching {
			k, ok := m.(protocolapi.Keyed)
			if !ok || k.AboutKey() != uint64(r.cfg.Watch) {
				return
			}
			if r.stater != nil {
				s.State = r.stater.KeyState(uint64(r.cfg.Watch))
			}
		}
		*st = append(*st, s)
	}
}

// traceVerb puts a verb into the trace and the chart (with a watched key,
// only the verbs on its bytes, when the cluster can tell: MemoryKeyer).
func (r *run) traceVerb(at int64, v *sim.Verb, keyer protocolapi.MemoryKeyer) {
	if r.cfg.Trace != nil {
		fmt.Fprintf(r.cfg.Trace, "%d %v\n", at, v)
	}
	st := r.cfg.Steps
	if st == nil || len(*st) >= MaxSteps {
		return
	}
	s := traceview.Step{At: at, From: int(v.From), To: int(v.Region.Node), Label: v.String(), Page: v.Len >= protocol.PageSize}
	if r.watching {
		if keyer == nil {
			return
		}
		if k, ok := keyer.KeyAt(v.Region.Node, v.Off); !ok || k != uint64(r.cfg.Watch) {
			return
		}
		if r.stater != nil {
			s.State = r.stater.KeyState(uint64(r.cfg.Watch))
		}
	}
	*st = append(*st, s)
}

// complete ends a worker's access.
func (r *run) complete(node protocol.NodeID, op protocolapi.Op, res protocolapi.Result) {
	if int(node) >= len(r.steppers) || op.Worker < 0 || op.Worker >= len(r.steppers[node]) || r.steppers[node][op.Worker] == nil {
		r.fail("node %d completes %v of worker %d, which it has not", node, op.Kind, op.Worker)
		return
	}
	wt := r.steppers[node][op.Worker]
	if !wt.pending || wt.op.ID != op.ID {
		r.fail("node %d completes access %d (%v of key %d), which is not in flight", node, op.ID, op.Kind, op.Key)
		return
	}
	wt.pending, wt.res = false, res
	if !wt.issuing {
		wt.co.Wake()
	}
}

// worker is worker slot of node, the history's client slot of node's.
func (r *run) worker(node protocol.NodeID, slot int) protocolapi.Worker {
	return protocolapi.Worker{Node: node, Slot: slot, Client: int(node)*r.cfg.Workers + slot}
}

// bind is worker id's Accessor on co: the cluster's blocking entry, or a
// stepper of its role.
func (r *run) bind(id protocolapi.Worker, co *sim.Coroutine) protocolapi.Accessor {
	if r.blocking != nil {
		return r.blocking.Worker(id, co)
	}
	s := &stepper{r: r, node: id.Node, co: co}
	r.steppers[id.Node][id.Slot] = s
	return s
}

// Run runs one seed of p.
func Run(p protocolapi.Protocol, cfg Config) (Result, error) {
	res := Result{Seed: cfg.Seed}
	if cfg.Workload == "" {
		cfg.Workload = protocolapi.WorkloadRegister
	}
	if err := Check(p, cfg); err != nil {
		return res, err
	}
	plan, err := sim.SeedPlan(cfg.Faults, cfg.Seed)
	if err != nil {
		return res, err
	}
	res.Plan = plan.String()
	r, err := deploy(p, cfg, plan)
	if err != nil {
		return res, err
	}
	w := r.w
	r.work.Ops, r.work.ReadRatio, r.work.Locality = cfg.Ops, cfg.ReadRatio, cfg.Locality
	r.work.RMW, r.work.OpNanos, r.work.WriteNanos = cfg.Workload == protocolapi.WorkloadRMW, cfg.OpNanos, cfg.WriteNanos
	r.work.Keys = NewKeys(w, cfg.Keys, cfg.Zipf)
	if cfg.Workload == protocolapi.WorkloadBTree && r.blocking == nil {
		return res, fmt.Errorf("protocol %s offers the btree workload, but its cluster has no blocking access entry (protocolapi.Blocking) whose workers are a protocolapi.Tree", p.Name)
	}
	if err := r.membership(); err != nil {
		return res, err
	}
	wallStart := time.Now()
	var cos []*sim.Coroutine
	for n := range cfg.Nodes {
		if r.elastic != nil {
			if co := r.elastic.SpawnLeave(protocol.NodeID(n)); co != nil {
				cos = append(cos, co)
			}
		}
		cos = append(cos, r.spawnWorkers(protocol.NodeID(n), func(k int) int { return n*cfg.Workers + k })...)
	}
	done := r.runUntil(cos, "workload")
	r.workloadOps, r.workloadMsgs = r.hist.Len(), w.Messages
	r.workVerb, _ = w.VerbStats()
	if done {
		r.finalRead()
	}
	res.SimWall = time.Since(wallStart)
	r.finish(&res)
	r.checkHistory(&res)
	return res, nil
}

// spawnWorkers starts node's workers, each of client(slot).
func (r *run) spawnWorkers(node protocol.NodeID, client func(slot int) int) []*sim.Coroutine {
	var cos []*sim.Coroutine
	for k := range r.cfg.Workers {
		id := protocolapi.Worker{Node: node, Slot: k, Client: client(k)}
		bind := func(co *sim.Coroutine) protocolapi.Accessor { return r.bind(id, co) }
		if r.cfg.Workload == protocolapi.WorkloadBTree {
			cos = append(cos, r.work.SpawnTree(id, bind))
		} else {
			cos = append(cos, r.work.Spawn(id, bind))
		}
	}
	return cos
}

// membership sets up the crashes (Config.Crashes) or the elastic
// schedule (Config.Elastic) through the cluster's hooks.
func (r *run) membership() error {
	cfg := r.cfg
	if cfg.Crashes > 0 {
		hooks, ok := r.cl.(protocolapi.Crashable)
		if !ok {
			return fmt.Errorf("protocol %s supports crashes, but its cluster does not implement protocolapi.Crashable", r.p.Name)
		}
		next := cfg.Nodes * cfg.Workers // a restarted node's workers are new clients
		r.crash = &Crashes{W: r.w, Work: r.work, Cluster: crashRoles{r, hooks}, Fail: r.fail, Nodes: len(r.envs),
			At: CrashPoints(cfg.Ops, cfg.Crashes), DownMin: CrashDownMin, DownSpan: CrashDownSpan,
			Respawn: func(x protocol.NodeID) {
				r.spawnWorkers(x, func(int) int { next++; return next - 1 })
			}}
		r.work.BeforeOp = r.crash.Due
	}
	if cfg.Elastic {
		hooks, ok := r.cl.(protocolapi.Leaver)
		if !ok {
			return fmt.Errorf("protocol %s supports elastic membership, but its cluster does not implement protocolapi.Leaver", r.p.Name)
		}
		r.elastic = &Elastic{Work: r.work, Cluster: hooks, Fail: r.fail, Ops: cfg.Ops, First: 0, Count: cfg.Nodes}
		r.work.Window = r.elastic.Window
	}
	return nil
}

// The down time of a crashed node: CrashDownMin to CrashDownMin +
// CrashDownSpan ns of simulated time (20 to 220 us: many round trips).
const (
	CrashDownMin  = 20_000
	CrashDownSpan = 200_000
)

// crashRoles is a cluster's crash hooks with the runner's part for the
// roles: a crashed node's env drops what its old role set off, and a
// restarted node gets a new role (Cluster.Role again).
type crashRoles struct {
	r *run
	protocolapi.Crashable
}

func (c crashRoles) Crash(x protocol.NodeID) {
	c.r.envs[x].gen++
	if int(x) < len(c.r.steppers) {
		for _, s := range c.r.steppers[x] {
			if s != nil {
				s.pending = false // its worker is stopped: it waits for nothing
			}
		}
	}
	c.Crashable.Crash(x)
}

func (c crashRoles) Restart(x protocol.NodeID) error {
	if err := c.Crashable.Restart(x); err != nil {
		return err
	}
	e := c.r.envs[x]
	role, err := c.r.cl.Role(x, e)
	if err == nil && role == nil {
		err = fmt.Errorf("no role")
	}
	if err != nil {
		return fmt.Errorf("its new role: %w", err)
	}
	e.role = role
	return nil
}

// deploy builds the world, the deployment and its roles.
func deploy(p protocolapi.Protocol, cfg Config, plan sim.FaultPlan) (*run, error) {
	var cl protocolapi.Cluster
	var lay protocolapi.Layout
	var err error
	if perr := guard("Deploy", func() {
		var pcfg protocolapi.Config
		pcfg, err = p.WithDefaults(protocolapi.Config{Nodes: cfg.Nodes, Workers: cfg.Workers, Keys: cfg.Keys,
			CacheLines: cfg.CacheLines, Mutant: cfg.Mutant, Options: cfg.Options})
		if err == nil {
			cl, err = p.Deploy(pcfg)
		}
		if err == nil && cl != nil {
			lay = cl.Layout()
		}
	}); perr != nil {
		err = perr
	}
	if err == nil && cl == nil {
		err = fmt.Errorf("its deploy function returned no cluster")
	}
	if err != nil {
		return nil, fmt.Errorf("protocol %s: %w", p.Name, err)
	}
	switch {
	case lay.Nodes < cfg.Nodes || lay.Nodes > protocol.MaxNodes:
		return nil, fmt.Errorf("protocol %s: a layout of %d nodes for %d worker nodes (at most %d)", p.Name, lay.Nodes, cfg.Nodes, protocol.MaxNodes)
	case len(lay.Memory) > lay.Nodes || len(lay.SSDPages) > lay.Nodes:
		return nil, fmt.Errorf("protocol %s: memory or SSD given for more than its %d nodes", p.Name, lay.Nodes)
	}
	w := sim.New(cfg.Seed, lay.Nodes, sim.DefaultLatency, plan)
	r := &run{p: p, cfg: cfg, w: w, cl: cl, hist: checker.NewHistory(cfg.Ops + cfg.Keys),
		regions: make([]transport.Region, lay.Nodes)}
	r.viol = checker.NewViolationLog(w.Now)
	r.work = &Workers{W: w, Hist: r.hist, Fail: r.fail}
	r.stater, _ = cl.(protocolapi.KeyStater)
	r.blocking, _ = cl.(protocolapi.Blocking)
	r.watching = cfg.Watch >= 0
	w.OnFault = func(_ int64, node protocol.NodeID, err error) { r.fail("node %d: %v", node, err) }
	if cfg.Trace != nil || cfg.Steps != nil {
		keyer, _ := cl.(protocolapi.MemoryKeyer)
		w.SetVerbTrace(func(at int64, v *sim.Verb) { r.traceVerb(at, v, keyer) })
	}
	for i := range lay.Nodes {
		id := protocol.NodeID(i)
		e := &nodeEnv{r: r, id: id, local: sim.NodeEnv{W: w, ID: id}}
		if i < len(lay.Memory) && lay.Memory[i] > 0 {
			e.mem = alignedBytes(lay.Memory[i])
			r.regions[i] = w.Register(id, e.mem)
		}
		if i < len(lay.SSDPages) && lay.SSDPages[i] > 0 {
			e.local.Store = memfile.New(uint64(lay.SSDPages[i]), w)
		}
		r.envs = append(r.envs, e)
		w.AttachFrames(id, e)
	}
	for _, e := range r.envs {
		var role protocolapi.Role
		var err error
		if perr := guard("Role", func() { role, err = cl.Role(e.id, e) }); perr != nil {
			err = perr
		}
		if err != nil {
			return nil, fmt.Errorf("protocol %s: node %d: %w", p.Name, e.id, err)
		}
		if role == nil {
			return nil, fmt.Errorf("protocol %s: node %d: no role", p.Name, e.id)
		}
		e.role = role
	}
	r.steppers = make([][]*stepper, cfg.Nodes)
	for n := range r.steppers {
		r.steppers[n] = make([]*stepper, cfg.Workers)
	}
	return r, nil
}

// guard runs protocol code outside the world's events (which recover
// their own panics): a panic is an error with its stack, never a crash.
func guard(what string, fn func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the protocol's %s panicked: %v\n%s", what, v, debug.Stack())
		}
	}()
	fn()
	return nil
}

// checkStep runs the invariants that hold at every instant.
func (r *run) checkStep() {
	if r.cfg.SkipStepChecks {
		return
	}
	var errs []error
	if err := guard("Check", func() { errs = r.cl.Check(false) }); err != nil {
		r.fail("invariant: %v", err)
	}
	for _, err := range errs {
		r.fail("invariant: %v", err)
	}
}

// runUntil steps the world (sim.Drive, the one run loop) until every
// coroutine returned, with the invariants after every step. It stops at
// the first violation, at a deadlock, or when no access completed for
// Watchdog ns; then every role's state is in the report.
func (r *run) runUntil(cos []*sim.Coroutine, phase string) bool {
	d := sim.Drive{Phase: phase, Watchdog: Watchdog, LastOp: &r.work.LastOp, Every: 1, AfterStep: r.checkStep,
		Violations: r.viol.Count, Fail: r.fail, Stuck: r.stuck}
	if phase == "workload" {
		d.Done = r.work.Done // a restarted node's workers too
	}
	if r.cfg.Progress != nil {
		d.Progress = func() { r.cfg.Progress(r.work.Completed, r.cfg.Ops) }
	}
	return d.Run(r.w, cos)
}

// stuck reports every role's state and every worker still waiting.
func (r *run) stuck() {
	for _, e := range r.envs {
		if d := e.role.Describe(); d != "" {
			r.fail("node %d: %s", e.id, d)
		}
	}
	for n, ws := range r.steppers {
		for k, wt := range ws {
			if wt != nil && wt.pending {
				r.fail("node %d worker %d waits for %v of key %d (access %d)", n, k, wt.op.Kind, wt.op.Key, wt.op.ID)
			}
		}
	}
}

// settle steps the world, without faults, until nothing is in flight,
// then checks the invariants at rest.
func (r *run) settle(phase string) bool {
	w := r.w
	w.StopFaults()
	for range 50_000_000 {
		if w.Pending() == 0 {
			var errs []error
			if err := guard("Check", func() { errs = r.cl.Check(true) }); err != nil {
				r.fail("%s: at rest: %v", phase, err)
			}
			for _, err := range errs {
				r.fail("%s: at rest: %v", phase, err)
			}
			return r.viol.Count() == 0
		}
		w.Step()
		r.checkStep()
		if r.viol.Count() > 0 {
			return false
		}
	}
	r.fail("%s: the cluster did not come to rest", phase)
	return false
}

// finalRead brings the cluster to rest, reads every key once more from
// worker 0 of node 0 (a lost write cannot pass it), and checks at rest
// again.
func (r *run) finalRead() {
	if !r.settle("after the workload") {
		return
	}
	id := r.worker(0, 0)
	var final *sim.Coroutine
	if r.cfg.Workload == protocolapi.WorkloadBTree {
		final = r.work.FinalGets(id, func(co *sim.Coroutine) protocolapi.Accessor { return r.bind(id, co) })
	} else {
		var acc protocolapi.Accessor
		final = r.w.Spawn(0, 0, func(co *sim.Coroutine) {
			for key := range r.cfg.Keys {
				r.work.Access(co, id, acc, protocolapi.OpRead, uint64(key), 0)
			}
		})
		acc = r.bind(id, final)
	}
	if r.runUntil([]*sim.Coroutine{final}, "final read") {
		r.settle("after the final read")
	}
}

func (r *run) finish(res *Result) {
	w := r.w
	res.Ops, res.Unavailable = r.hist.Len(), r.work.Unavailable
	res.Messages, res.PayloadBytes, res.Steps = w.Messages, w.PageBytes, w.Steps
	res.Verbs, _ = w.VerbStats()
	res.TraceHash, res.SimNanos = w.Hash(), w.Now()
	res.Violations, res.ViolationCount = r.viol.List(), r.viol.Count()
	res.History = r.hist
	res.WorkloadOps, res.WorkloadMessages, res.WorkloadVerbs = r.workloadOps, r.workloadMsgs, r.workVerb
	if r.crash != nil {
		res.Crashes, res.UnknownOps = r.crash.Events, len(r.crash.Unknown)
		// A write of unknown outcome may take effect at any time after
		// its call: it returns after everything else.
		end := w.Now()
		for _, op := range r.hist.Ops() {
			end = max(end, op.Return)
		}
		for _, op := range r.crash.Unknown {
			op.Return = end + 1
			r.hist.Add(op)
		}
	}
	if r.elastic != nil {
		res.Left = r.elastic.Left
	}
	if c, ok := r.cl.(protocolapi.Counterer); ok {
		if err := guard("Counters", func() { res.Counters = c.Counters() }); err != nil {
			res.ViolationCount++
			res.Violations = append(res.Violations, err.Error())
		}
	}
}

// checkHistory checks the history with the protocol's model: porcupine's
// linearizability per key, or its own CheckHistory.
func (r *run) checkHistory(res *Result) {
	start := time.Now()
	defer func() { res.CheckWall = time.Since(start) }()
	if r.p.CheckHistory != nil {
		var bad []string
		if err := guard("CheckHistory", func() { bad = r.p.CheckHistory(r.hist.Ops()) }); err != nil {
			bad = append(bad, err.Error())
		}
		res.Linearizable = len(bad) == 0
		for _, b := range bad {
			res.ViolationCount++
			if len(res.Violations) < 20 {
				res.Violations = append(res.Violations, "history: "+b)
			}
		}
		return
	}
	check := checker.Check
	if r.cfg.PorcupineOnly {
		check = checker.CheckPorcupine
	}
	lin, info := check(r.hist.Ops(), r.cfg.CheckTimeout)
	res.Linearizable, res.LinearUnknown, res.BadKeys, res.Info = lin.Ok, lin.Unknown, lin.BadPages, info
}
