package procrunner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/storage"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/transport"
)

// The bounds of a node's queues.
const (
	// Inbox bounds the messages, accesses and timers queued for the loop.
	Inbox = 1 << 14
	// MaxVerbs bounds a node's verbs and SSD I/Os in flight.
	MaxVerbs = 1 << 10
	// MaxLocal bounds the messages a node sent itself and has not handled.
	MaxLocal = 1 << 14
)

// DefaultWatchdog is how long an access may wait before it is a violation.
const DefaultWatchdog = 10 * time.Second

// ErrFailed is wrapped by Access's error once the node found a violation or
// a fault: the access was not run, or its answer will not come.
var ErrFailed = errors.New("procrunner: the node failed")

// ErrClosed is wrapped by Access's error after Close.
var ErrClosed = errors.New("procrunner: the node is closed")

// Config is one node of a deployment.
type Config struct {
	// Protocol is the protocol to run (Deploy set) and Deploy its
	// deployment, the same on every node.
	Protocol protocolapi.Protocol
	Deploy   protocolapi.Config
	// ID is this node, 0..Layout.Nodes-1; nodes 0..Deploy.Nodes-1 run
	// workers.
	ID protocol.NodeID
	// Seed seeds Env.Rand (with ID: every node draws its own numbers).
	Seed uint64
	// NewTransport starts the node's transport with the node's handler.
	NewTransport func(transport.Handler) (transport.Transport, error)
	// Store is the node's SSD when its Layout.SSDPages is not 0 (nil: an
	// in-memory store of those pages). The node closes it.
	Store storage.PageStore
	// Watchdog bounds an access's wait (0: DefaultWatchdog).
	Watchdog time.Duration
}

// Check says why the process runner cannot run p, or nil. It runs every
// protocol built on protocolapi (Deploy set): a role acts only through its
// Env, which is all a process gives it. A built-in protocol runs on
// processes through its own cluster code, if at all.
func Check(p protocolapi.Protocol) error {
	if p.Deploy == nil {
		if p.Supports.Processes {
			return fmt.Errorf("protocol %s is built in: it runs on processes through its own cluster code, not the process runner", p.Name)
		}
		return fmt.Errorf("protocol %s is built in and does not run on processes", p.Name)
	}
	return nil
}

// Deploy builds p's deployment cfg as every node does (its options'
// defaults filled in), and returns it with its layout; a mutant or option
// p does not have, or a panic in the protocol, is an error. The cluster command
// calls it first to learn how many nodes to start.
func Deploy(p protocolapi.Protocol, cfg protocolapi.Config) (protocolapi.Cluster, protocolapi.Layout, error) {
	var cl protocolapi.Cluster
	var lay protocolapi.Layout
	if err := Check(p); err != nil {
		return nil, lay, err
	}
	cfg, err := p.WithDefaults(cfg)
	if err != nil {
		return nil, lay, err
	}
	err = guard("Deploy", func() error {
		var err error
		if cl, err = p.Deploy(cfg); err == nil && cl == nil {
			err = errors.New("its deploy function returned no cluster")
		}
		if err == nil {
			lay = cl.Layout()
		}
		return err
	})
	if err != nil {
		return nil, lay, fmt.Errorf("protocol %s: %w", p.Name, err)
	}
	switch {
	case lay.Nodes < cfg.Nodes || lay.Nodes > protocol.MaxNodes:
		return nil, lay, fmt.Errorf("protocol %s: a layout of %d nodes for %d worker nodes (at most %d)", p.Name, lay.Nodes, cfg.Nodes, protocol.MaxNodes)
	case len(lay.Memory) > lay.Nodes || len(lay.SSDPages) > lay.Nodes:
		return nil, lay, fmt.Errorf("protocol %s: memory or SSD given for more than its %d nodes", p.Name, lay.Nodes)
	}
	return cl, lay, nil
}

// guard runs protocol code: a panic is an error with its stack.
func guard(what string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the protocol's %s panicked: %v\n%s", what, v, debug.Stack())
		}
	}()
	return fn()
}

// worker is one worker's access in flight.
type worker struct {
	mu      sync.Mutex
	pending bool
	id      uint64
	// abandoned is the access the worker gave up (the node failed): its
	// late completion is no violation of its own.
	abandoned uint64
	reply     chan protocolapi.Result // capacity 1: Complete never waits
	timer     *time.Timer
}

// Node is one node of a protocol on a transport.
type Node struct {
	cfg     Config
	p       protocolapi.Protocol
	cl      protocolapi.Cluster
	lay     protocolapi.Layout
	tr      transport.Transport
	mem     []byte
	mmapped bool // mem is our own mapping (else the transport's)
	// shadowMem is the memory of the other nodes' shadow roles (mapped,
	// never touched by us).
	shadowMem [][]byte
	region    transport.Region
	regions   []transport.Region // every node's, after Connect
	store     storage.PageStore
	role      protocolapi.Role

	inbox chan protocolapi.Event
	done  chan protocolapi.Event // verb and page completions (at most MaxVerbs)
	calls chan func()            // run on the loop (Describe, Counters)
	stop  chan struct{}
	ended chan struct{} // the loop returned
	once  sync.Once

	// The loop's own: no lock.
	local    []protocolapi.Event
	inflight int
	posters  []*poster // per node, and the SSD's last
	postWG   sync.WaitGroup
	rng      *rand.Rand
	frame    [protocol.FrameSize]byte
	start    time.Time
	watchdog time.Duration

	workers []worker
	nextID  atomic.Uint64

	mu     sync.Mutex
	viol   checker.ViolationLog // the protocol's
	faults checker.ViolationLog // the environment's
	failed chan struct{}        // closed at the first violation or fault
}

// Start deploys the protocol, starts the node's transport and registers
// its memory. The role is built by Connect.
func Start(cfg Config) (*Node, error) {
	cl, lay, err := Deploy(cfg.Protocol, cfg.Deploy)
	if err != nil {
		return nil, err
	}
	id := int(cfg.ID)
	if id >= lay.Nodes {
		return nil, fmt.Errorf("procrunner: node %d: protocol %s's layout has nodes 0..%d", id, cfg.Protocol.Name, lay.Nodes-1)
	}
	if cfg.NewTransport == nil {
		return nil, fmt.Errorf("procrunner: node %d: no transport", id)
	}
	n := &Node{cfg: cfg, p: cfg.Protocol, cl: cl, lay: lay,
		inbox: make(chan protocolapi.Event, Inbox), done: make(chan protocolapi.Event, MaxVerbs), calls: make(chan func(), 4),
		stop: make(chan struct{}), ended: make(chan struct{}), failed: make(chan struct{}),
		posters: make([]*poster, lay.Nodes+1), rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.ID))),
		start: time.Now(), watchdog: cfg.Watchdog}
	if n.watchdog <= 0 {
		n.watchdog = DefaultWatchdog
	}
	now := (*nodeEnv)(n).Now
	n.viol, n.faults = checker.NewViolationLog(now), checker.NewViolationLog(now)
	if id < cfg.Deploy.Nodes {
		n.workers = make([]worker, cfg.Deploy.Workers)
		for i := range n.workers {
			n.workers[i].reply = make(chan protocolapi.Result, 1)
		}
	}
	if n.tr, err = cfg.NewTransport(n.handle); err != nil {
		return nil, fmt.Errorf("procrunner: node %d: %w", id, err)
	}
	if id < len(lay.Memory) && lay.Memory[id] > 0 {
		if err := n.register(lay.Memory[id]); err != nil {
			n.Close()
			return nil, err
		}
	}
	if id < len(lay.SSDPages) && lay.SSDPages[id] > 0 {
		pages := uint64(lay.SSDPages[id])
		n.store = cfg.Store
		if n.store == nil {
			n.store = memfile.New(pages, nil)
		}
		if n.store.Slots() < pages {
			n.Close()
			return nil, fmt.Errorf("procrunner: node %d: an SSD of %d pages, the layout needs %d", id, n.store.Slots(), pages)
		}
	} else if cfg.Store != nil {
		cfg.Store.Close()
	}
	return n, nil
}

// register allocates size bytes off the Go heap (registered memory must
// not move), zeroed and page aligned, and registers them.
func (n *Node) register(size int) error {
	var err error
	if a, ok := n.tr.(transport.Allocator); ok {
		n.mem, err = a.AllocMemory(size)
	} else {
		n.mem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		n.mmapped = err == nil
	}
	if err != nil {
		return fmt.Errorf("procrunner: node %d: allocating %d bytes: %w", n.cfg.ID, size, err)
	}
	if n.region, err = n.tr.Register(n.mem); err != nil {
		return fmt.Errorf("procrunner: node %d: registering %d bytes: %w", n.cfg.ID, size, err)
	}
	return nil
}

// ID is this node.
func (n *Node) ID() protocol.NodeID { return n.cfg.ID }

// Workers is how many workers the node runs (0: a node above
// Config.Nodes, which runs none).
func (n *Node) Workers() int { return len(n.workers) }

// Keys is how many keys the deployment has.
func (n *Node) Keys() int { return n.cfg.Deploy.Keys }

// Layout is the deployment's layout.
func (n *Node) Layout() protocolapi.Layout { return n.lay }

// Region is this node's registered memory (false: its layout gives it
// none).
func (n *Node) Region() (transport.Region, bool) { return n.region, n.mem != nil }

// Connect takes every node's region (indexed by node; Len 0: the node has
// none), builds the node's role (and, to keep Cluster.Role's promise, every
// other node's on a shadow env: shadow.go) and starts its loop.
func (n *Node) Connect(regions []transport.Region) error {
	if n.role != nil {
		return fmt.Errorf("procrunner: node %d: connected twice", n.cfg.ID)
	}
	if len(regions) != n.lay.Nodes {
		return fmt.Errorf("procrunner: node %d: %d regions for a layout of %d nodes", n.cfg.ID, len(regions), n.lay.Nodes)
	}
	for i, r := range regions {
		if r.Len > 0 && int(r.Node) != i {
			return fmt.Errorf("procrunner: node %d: region %d names node %d", n.cfg.ID, i, r.Node)
		}
	}
	if own := regions[n.cfg.ID]; n.mem != nil && own != n.region {
		return fmt.Errorf("procrunner: node %d: its region is given as %+v, it registered %+v", n.cfg.ID, own, n.region)
	}
	n.regions = append([]transport.Region(nil), regions...)
	if err := n.buildRoles(); err != nil {
		n.role = nil
		return err
	}
	go n.loop()
	return nil
}

// loop steps the role with every input, one at a time: messages the node
// sent itself first, then whatever comes.
func (n *Node) loop() {
	defer close(n.ended)
	for {
		if len(n.local) > 0 {
			ev := n.local[0]
			n.local[0] = protocolapi.Event{}
			n.local = n.local[1:]
			n.step(ev)
			continue
		}
		select {
		case ev := <-n.done:
			n.inflight--
			n.step(ev)
		case ev := <-n.inbox:
			n.step(ev)
		case f := <-n.calls:
			f()
		case <-n.stop:
			return
		}
	}
}

func (n *Node) step(ev protocolapi.Event) {
	err := guard("Step", func() error { return n.role.Step(ev) })
	if err != nil {
		n.violate("node %d, %v event: %v", n.cfg.ID, ev.Kind, err)
	}
}

// handle is the transport's handler: it decodes a frame and queues it for
// the loop (a full inbox makes the transport's reader wait).
func (n *Node) handle(from protocol.NodeID, frame, payload []byte) {
	codec := n.p.Codec
	if codec == nil {
		n.violate("node %d: a message from node %d, but protocol %s has no codec (it sends none)", n.cfg.ID, from, n.p.Name)
		return
	}
	hdrFrom, hdrTo, m, err := protocolapi.DecodeFrame(codec, frame, payload)
	switch {
	case err != nil:
		n.violate("node %d: a frame from node %d (%s) does not decode: %v", n.cfg.ID, from, protocolapi.TypeName(codec, frame), err)
		return
	case hdrFrom != from || hdrTo != n.cfg.ID:
		n.violate("a frame on link %d->%d says %d->%d: %v", from, n.cfg.ID, hdrFrom, hdrTo, m)
		return
	}
	select {
	case n.inbox <- protocolapi.Event{Kind: protocolapi.EventMessage, From: from, Msg: m}:
	case <-n.stop:
	}
}

// Access runs op (its ID is the node's to choose) for worker op.Worker,
// which must have no other access in flight, and waits for its result. It
// is called from worker goroutines. An access whose Result.Err is not
// protocolapi.ErrUnavailable is a violation: Access returns it with
// ErrFailed.
func (n *Node) Access(op protocolapi.Op) (protocolapi.Result, error) {
	if op.Worker < 0 || op.Worker >= len(n.workers) {
		return protocolapi.Result{}, fmt.Errorf("procrunner: node %d has no worker %d (it runs %d)", n.cfg.ID, op.Worker, len(n.workers))
	}
	if n.role == nil {
		return protocolapi.Result{}, fmt.Errorf("procrunner: node %d: an access before Connect", n.cfg.ID)
	}
	select {
	case <-n.failed: // a role that broke a rule is not run on
		return protocolapi.Result{}, fmt.Errorf("node %d worker %d: %v of key %d: %w", n.cfg.ID, op.Worker, op.Kind, op.Key, ErrFailed)
	default:
	}
	w := &n.workers[op.Worker]
	op.ID = n.nextID.Add(1)
	w.mu.Lock()
	if w.pending {
		w.mu.Unlock()
		return protocolapi.Result{}, fmt.Errorf("procrunner: node %d worker %d has an access in flight", n.cfg.ID, op.Worker)
	}
	w.pending, w.id = true, op.ID
	w.mu.Unlock()
	if w.timer == nil {
		w.timer = time.NewTimer(n.watchdog)
	} else {
		w.timer.Reset(n.watchdog)
	}
	defer w.timer.Stop()
	select {
	case n.inbox <- protocolapi.Event{Kind: protocolapi.EventAccess, Op: op}:
	case <-n.failed:
		return n.abandon(w, op, ErrFailed)
	case <-n.stop:
		return n.abandon(w, op, ErrClosed)
	}
	select {
	case res := <-w.reply:
		if res.Err != nil && !errors.Is(res.Err, protocolapi.ErrUnavailable) {
			n.violate("node %d worker %d: %v of key %d: %v", n.cfg.ID, op.Worker, op.Kind, op.Key, res.Err)
			return res, fmt.Errorf("%w: %w", ErrFailed, res.Err)
		}
		return res, nil
	case <-n.failed:
		return n.abandon(w, op, ErrFailed)
	case <-n.stop:
		return n.abandon(w, op, ErrClosed)
	case <-w.timer.C:
		n.violate("node %d worker %d: %v of key %d (access %d) not answered in %v; the role: %s",
			n.cfg.ID, op.Worker, op.Kind, op.Key, op.ID, n.watchdog, n.Describe())
		return n.abandon(w, op, ErrFailed)
	}
}

// abandon gives up a worker's access.
func (n *Node) abandon(w *worker, op protocolapi.Op, why error) (protocolapi.Result, error) {
	w.mu.Lock()
	if w.pending && w.id == op.ID {
		w.pending, w.abandoned = false, op.ID
	}
	w.mu.Unlock()
	select {
	case <-w.reply: // it came after all
	default:
	}
	return protocolapi.Result{}, fmt.Errorf("node %d worker %d: %v of key %d: %w", n.cfg.ID, op.Worker, op.Kind, op.Key, why)
}

// complete is Env.Complete: it hands res to the worker waiting for op.
func (n *Node) complete(op protocolapi.Op, res protocolapi.Result) {
	if op.Worker < 0 || op.Worker >= len(n.workers) {
		n.violate("node %d completes %v of worker %d, which it has not", n.cfg.ID, op.Kind, op.Worker)
		return
	}
	w := &n.workers[op.Worker]
	w.mu.Lock()
	ok := w.pending && w.id == op.ID
	late := !w.pending && w.abandoned == op.ID
	w.pending = false
	w.mu.Unlock()
	if late {
		return
	}
	if !ok {
		n.violate("node %d completes access %d (%v of key %d), which is not in flight", n.cfg.ID, op.ID, op.Kind, op.Key)
		return
	}
	w.reply <- res
}

// onLoop runs f on the loop and waits for it (false: the loop did not take
// it within wait, or has stopped).
func (n *Node) onLoop(f func(), wait time.Duration) bool {
	if n.role == nil {
		return false
	}
	ran := make(chan struct{})
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case n.calls <- func() { f(); close(ran) }:
	case <-n.ended:
		return false
	case <-t.C:
		return false
	}
	select {
	case <-ran:
		return true
	case <-n.ended:
		return false
	case <-t.C:
		return false
	}
}

// Describe is the role's Describe, taken on the loop.
func (n *Node) Describe() string {
	var d string
	if !n.onLoop(func() {
		if err := guard("Describe", func() error { d = n.role.Describe(); return nil }); err != nil {
			d = err.Error()
		}
	}, time.Second) {
		return "(the node's loop did not answer: it is stuck in a Step or a Send)"
	}
	return d
}

// Counters are this node's protocol counters (protocolapi.Counterer on its
// Cluster, which holds this node's role only), taken on the loop.
func (n *Node) Counters() []protocolapi.Counter {
	c, ok := n.cl.(protocolapi.Counterer)
	if !ok {
		return nil
	}
	var out []protocolapi.Counter
	n.onLoop(func() {
		if err := guard("Counters", func() error { out = c.Counters(); return nil }); err != nil {
			n.violate("node %d: %v", n.cfg.ID, err)
		}
	}, 5*time.Second)
	return out
}

func (n *Node) record(log *checker.ViolationLog, format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	log.Fail(format, args...)
	if n.viol.Count()+n.faults.Count() == 1 {
		close(n.failed)
	}
}

// violate records a violation of the protocol.
func (n *Node) violate(format string, args ...any) { n.record(&n.viol, format, args...) }

// fault records a failure of the environment (a transport).
func (n *Node) fault(format string, args ...any) { n.record(&n.faults, format, args...) }

// Failures are what the node found: the violations of the protocol and the
// faults of its environment (the first checker.MaxViolations of each, with
// the time since the node started), and how many there were in all.
func (n *Node) Failures() (violations, faults []string, count int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.viol.List()...), append([]string(nil), n.faults.List()...), n.viol.Count() + n.faults.Count()
}

// Close stops the loop, the transport and the posters, and releases the
// node's memory and SSD.
func (n *Node) Close() error {
	var err error
	n.once.Do(func() {
		close(n.stop)
		if n.role != nil {
			<-n.ended
		}
		if n.tr != nil {
			err = n.tr.Close() // a poster in a verb returns
		}
		for _, p := range n.posters {
			if p != nil {
				close(p.jobs)
			}
		}
		n.postWG.Wait()
		if n.mmapped {
			unix.Munmap(n.mem)
		}
		for _, m := range n.shadowMem {
			unix.Munmap(m)
		}
		if n.store != nil {
			n.store.Close()
		}
	})
	return err
}
