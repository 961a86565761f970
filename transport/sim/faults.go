package sim

import (
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/transport"
)

// Latency is the latency model, in nanoseconds.
type Latency struct {
	Message  int64 // one-way latency of a 64-byte message
	PerKiB   int64 // extra per KiB of payload (messages and verbs)
	SSDRead  int64
	SSDWrite int64
	// Verb is one way of a one-sided verb (request or completion), the NIC
	// serving it without the remote CPU; Atomic is what a CAS or FAA adds
	// at the remote NIC.
	Verb   int64
	Atomic int64
}

// DefaultLatency follows the paper's Table 1: a 4 KiB remote read over EDR
// InfiniBand takes 5 us (a request and a response carrying the page), the
// link moves 11.2 GB/s (about 90 ns per KiB), and a flash SSD reads 4 KiB in
// 78 us. The paper gives no write latency; we assume the same. A one-sided
// verb needs no remote CPU: 1 us each way (an 8-byte READ round trip of
// 2 us, a 4 KiB one of 2.7 us, against 4.6 and 5 us for a message and its
// answer), and an atomic 0.5 us more at the remote NIC (SELCC gives no
// figures; these are typical of EDR hardware and are our decision).
var DefaultLatency = Latency{Message: 2_300, PerKiB: 90, SSDRead: 78_000, SSDWrite: 78_000, Verb: 1_000, Atomic: 500}

// FaultPlan says which faults the world injects and how often.
type FaultPlan struct {
	Name string
	// Jitter adds a uniform [0, Jitter) to every message.
	Jitter int64
	// DelayProb delays a message by up to DelayMax more.
	DelayProb float64
	DelayMax  int64
	// SlowLinks is the share of links SlowFactor times slower than the rest.
	SlowLinks  float64
	SlowFactor int64
	// StallProb is the chance, every StallEvery ns, that one node stalls for
	// up to StallMax ns: it processes no message, timer or worker meanwhile.
	StallProb  float64
	StallEvery int64
	StallMax   int64
	// SpikeProb multiplies a storage operation's latency by SpikeFactor.
	SpikeProb   float64
	SpikeFactor int64
	// IOErrorProb fails a storage operation with a transient error.
	IOErrorProb float64
	// UnreadableProb fails a read for good (a corrupt page, a bad sector):
	// the directory grants the page as unreadable and the operations that
	// wanted it fail. The SSD copy itself is intact, so a later read of the
	// same page may succeed.
	UnreadableProb float64
	// YieldProb yields a worker at a guard operation.
	YieldProb float64
	// Pressure makes the page providers keep more frames free than the
	// default, so evictions meet conflicts.
	Pressure bool
}

// PlanNames lists the fault plans Plan knows, for help texts.
const PlanNames = "none, default, heavy or lossy"

// SeedPlan is the named fault plan of the run of seed: its intensities
// drawn from a stream of their own (not the world's), so every seed of a
// swarm gets its own mix and the world's draws stay as they were.
func SeedPlan(name string, seed uint64) (FaultPlan, error) {
	return Plan(name, New(seed^0xFA17, 1, Latency{}, FaultPlan{}).Rand)
}

// Plan returns the named fault plan (none, default, heavy, lossy) with its
// intensities varied by draw, so every seed of a swarm gets its own mix.
func Plan(name string, draw func() uint64) (FaultPlan, error) {
	f := func(lo, hi float64) float64 {
		return lo + (hi-lo)*float64(draw()>>11)*(1.0/(1<<53))
	}
	switch name {
	case "none":
		return FaultPlan{Name: name}, nil
	case "default":
		return FaultPlan{Name: name, Jitter: 1_000, DelayProb: f(0, 0.02), DelayMax: 50_000,
			SpikeProb: f(0, 0.02), SpikeFactor: 10, IOErrorProb: f(0, 0.01), YieldProb: f(0.05, 0.2)}, nil
	case "heavy":
		return FaultPlan{Name: name, Jitter: 5_000, DelayProb: f(0.01, 0.08), DelayMax: 200_000,
			SlowLinks: f(0, 0.2), SlowFactor: 10, StallProb: f(0.1, 0.5), StallEvery: 200_000, StallMax: 500_000,
			SpikeProb: f(0.01, 0.05), SpikeFactor: 20, IOErrorProb: f(0.01, 0.05), YieldProb: f(0.1, 0.4),
			Pressure: true}, nil
	case "lossy":
		// default's faults, and reads that fail for good.
		return FaultPlan{Name: name, Jitter: 1_000, DelayProb: f(0, 0.02), DelayMax: 50_000,
			SpikeProb: f(0, 0.02), SpikeFactor: 10, IOErrorProb: f(0, 0.01), YieldProb: f(0.05, 0.2),
			UnreadableProb: f(0.002, 0.02)}, nil
	}
	return FaultPlan{}, fmt.Errorf("unknown fault plan %q (want %s)", name, PlanNames)
}

func (p *FaultPlan) String() string {
	if p.Name == "none" || p.Name == "" {
		return "none"
	}
	s := fmt.Sprintf("%s(delay=%.3f slow=%.2f stall=%.2f spike=%.3f ioerr=%.3f yield=%.2f",
		p.Name, p.DelayProb, p.SlowLinks, p.StallProb, p.SpikeProb, p.IOErrorProb, p.YieldProb)
	if p.UnreadableProb > 0 {
		s += fmt.Sprintf(" unreadable=%.3f", p.UnreadableProb)
	}
	return s + ")"
}

func (p *FaultPlan) prepare(w *World) {
	if p.SlowLinks > 0 {
		w.linkSlow = make([]uint8, w.n*w.n)
		for i := range w.linkSlow {
			if w.Chance(p.SlowLinks) {
				w.linkSlow[i] = 1
			}
		}
	}
	if p.StallProb > 0 && p.StallEvery > 0 {
		w.scheduleStall()
	}
}

func (w *World) scheduleStall() {
	e := w.alloc()
	e.at, e.kind, e.node, e.fn = w.now+w.faults.StallEvery, evFunc, 0, w.stallTick
	w.push(e)
}

func (w *World) stallTick() {
	if w.stopFault {
		return
	}
	if w.Chance(w.faults.StallProb) {
		n := w.Intn(int64(w.n))
		until := w.now + w.faults.StallMax/10 + w.Intn(w.faults.StallMax)
		// The stall tick is itself an event of node 0; stalling node 0
		// would postpone this tick too, which is harmless.
		w.stalled[n] = max(w.stalled[n], until)
	}
	w.scheduleStall()
}

func (p *FaultPlan) messageDelay(w *World, from, to protocol.NodeID) int64 {
	if w.stopFault {
		return 0
	}
	var d int64
	if p.Jitter > 0 {
		d += w.Intn(p.Jitter)
	}
	if p.DelayProb > 0 && w.Chance(p.DelayProb) {
		d += w.Intn(p.DelayMax)
	}
	if w.linkSlow != nil && w.linkSlow[int(from)*w.n+int(to)] != 0 {
		d += w.latency.Message * (p.SlowFactor - 1)
	}
	return d
}

// ioLatency is the latency of one storage operation.
func (w *World) ioLatency(write bool) int64 {
	lat := w.latency.SSDRead
	if write {
		lat = w.latency.SSDWrite
	}
	if !w.stopFault && w.faults.SpikeProb > 0 && w.Chance(w.faults.SpikeProb) {
		lat *= w.faults.SpikeFactor
	}
	return lat
}

// Inject implements memfile.Injector with the world's PRNG.
func (w *World) Inject(op memfile.Op, slot uint64) error {
	if w.stopFault {
		return nil
	}
	if op == memfile.OpRead && w.faults.UnreadableProb > 0 && w.Chance(w.faults.UnreadableProb) {
		return fmt.Errorf("injected unreadable page in slot %d: %w", slot, ErrInjectedUnreadable)
	}
	if w.faults.IOErrorProb <= 0 || !w.Chance(w.faults.IOErrorProb) {
		return nil
	}
	if op == memfile.OpRead {
		return fmt.Errorf("injected read error: %w", storage.ErrTransient)
	}
	return fmt.Errorf("injected write error: %w", storage.ErrTransient)
}

// ErrInjectedUnreadable is the permanent read error of the lossy plan.
var ErrInjectedUnreadable = errors.New("sim: unreadable page")

// NodeEnv is one simulated node's side of the world: the actors.Env of
// ScaleStore's nodes, and the verbs it posts for any other (SELCC's line
// caches, the plug-in runner's envs), so that every adapter between the
// simulator and a node's code is this one.
type NodeEnv struct {
	W     *World
	ID    protocol.NodeID
	Store storage.PageStore
}

// Now implements actors.Env.
func (e *NodeEnv) Now() int64 { return e.W.now }

// Rand implements actors.Env.
func (e *NodeEnv) Rand() uint64 { return e.W.Rand() }

// Send implements actors.Env.
func (e *NodeEnv) Send(m protocol.Message, payload []byte) { e.W.Send(&m, payload) }

// After implements actors.Env.
func (e *NodeEnv) After(delay int64, fn func()) { e.W.After(e.ID, delay, fn) }

// ReadPage implements actors.Env: the read happens when its latency has
// passed.
func (e *NodeEnv) ReadPage(slot uint64, buf []byte, done func(error)) {
	e.W.At(e.ID, e.W.ioAt(e.ID, slot, false), func() { done(e.Store.ReadPage(slot, buf)) })
}

// WritePage implements actors.Env.
func (e *NodeEnv) WritePage(slot uint64, buf []byte, done func(error)) {
	e.W.At(e.ID, e.W.ioAt(e.ID, slot, true), func() { done(e.Store.WritePage(slot, buf)) })
}

// Read posts a one-sided READ from this node (linecache.Poster).
func (e *NodeEnv) Read(dst []byte, r transport.Region, off uint64, done func(error)) {
	e.W.Read(e.ID, dst, r, off, done)
}

// Write posts a one-sided WRITE from this node.
func (e *NodeEnv) Write(r transport.Region, off uint64, src []byte, done func(error)) {
	e.W.Write(e.ID, r, off, src, done)
}

// CompareAndSwap posts an atomic CAS from this node.
func (e *NodeEnv) CompareAndSwap(r transport.Region, off, old, new uint64, done func(prev uint64, err error)) {
	e.W.CompareAndSwap(e.ID, r, off, old, new, done)
}

// FetchAndAdd posts an atomic FAA from this node.
func (e *NodeEnv) FetchAndAdd(r transport.Region, off, delta uint64, done func(prev uint64, err error)) {
	e.W.FetchAndAdd(e.ID, r, off, delta, done)
}
