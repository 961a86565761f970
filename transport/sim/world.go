package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/scalestore-go/scalestore/protocol"
)

// Receiver gets the messages addressed to one node.
type Receiver interface {
	Deliver(m *protocol.Message, payload []byte)
}

// Prefetcher is told that a message is coming to its node: the world
// hints the receiver of the next event while it runs the current one, so
// that the misses on a large world's cold node state (at 256 nodes,
// megabytes of frames) overlap with work. A hint changes nothing.
type Prefetcher interface {
	PrefetchFrame(frame []byte)
}

type eventKind uint8

const (
	evMsg eventKind = iota + 1
	evFunc
	evResume
	evVerb     // a one-sided verb arrives at the memory's node (served by its NIC)
	evVerbDone // its completion arrives at the issuer
	evFrame    // an opaque frame (SendFrame) arrives at its receiver
)

type event struct {
	at      int64
	seq     uint64
	id      uint32 // its number in the agenda (eventQueue.all), 0 before its first push
	kind    eventKind
	node    protocol.NodeID
	from    protocol.NodeID          // evMsg: the sending end of the link
	frame   [protocol.FrameSize]byte // evMsg: the message as it travels, encoded
	payload []byte
	fn      func()
	co      *Coroutine
	verb    *pendingVerb
}

// TraceFunc sees every network message right after its receiver handled it.
type TraceFunc func(at int64, m *protocol.Message, payload []byte)

// World is the simulated cluster's scheduler, clock and network.
type World struct {
	now       int64
	seq       uint64
	events    eventQueue
	free      []*event
	pages     [][]byte
	rng       *rand.PCG // drawn from directly: a call the compiler sees, not one through rand.Source
	hash      uint64
	nodes     []Receiver
	frameRecv []FrameReceiver // per node (AttachFrames), or nil
	hints     []Prefetcher    // per node (SetPrefetcher), or nil
	hinted    bool            // some node has a Prefetcher: Step peeks at the next event
	n         int
	latency   Latency
	faults    FaultPlan
	linkLast  []int64 // per link from*n+to: the last arrival on it
	sentLast  []int64 // per node: the last arrival of what it sent on any link
	linkSlow  []uint8
	stalled   []int64
	verbCost  []int64 // per node: NIC time per verb (SetVerbCost)
	nicFree   []int64 // per node: when its NIC is next free
	trace     TraceFunc
	stopFault bool
	msg       protocol.Message // the message being delivered, decoded from its frame
	failed    error            // the first fault

	handleCost []int64 // CPU time a node spends on each message it handles (SetHandleCost)
	busy       []int64 // per node: the CPU time it spent so (BusyTimes)

	regions   []memRegion // registered memory of every node, for one-sided verbs
	verbs     uint64
	verbBytes uint64
	verbTrace VerbTraceFunc
	running   *Coroutine // the coroutine running now, nil in an event handler

	// OnFault receives what went wrong inside the simulation: a frame that
	// does not decode or does not name its link's ends, a payload of the
	// wrong length for its message, or a panic of a receiver, an event
	// function or a coroutine (with its stack). The faulty frame is
	// dropped, a panicking coroutine is done, and Step returns normally;
	// nil: Step panics with the fault instead.
	//
	// The world goes on with the next event: Step does not turn false
	// after a fault, because its callers read false as "at rest" or "a
	// deadlock" and would report that instead. A run loop that does not
	// stop at the violation OnFault records checks Failed.
	OnFault func(at int64, node protocol.NodeID, err error)
	// MutateFrame, when set, may change every frame after it was encoded at
	// the sender (the codec mutants: a field the encoder drops).
	MutateFrame func(frame []byte)
	// PayloadEnds, when above 0, is how many bytes at each end of a page
	// the run's checks read (a page register: its value at both ends,
	// checker.PageValue): a page sent carries those bytes, and its middle
	// is whatever the world's buffer held. Nothing that is checked can
	// tell, and a send no longer reads the sender's whole page, most of it
	// cold at 256 nodes. 0: pages travel whole (the B-tree's digests).
	PayloadEnds int

	// OrderedIO makes the storage operations on one slot complete in the
	// order they were issued (the crash runs set it; see ioAt).
	OrderedIO bool
	slotLast  map[uint64]int64 // per node and slot: the last completion (OrderedIO)
	dead      []bool           // per node: crashed (Kill)

	// Messages counts network messages delivered; PageBytes the payload
	// bytes they carried; Steps the events processed.
	Messages, PageBytes, Steps uint64
}

// New makes a world of n nodes with the given seed, latency model and fault
// plan. Receivers are attached with Attach.
func New(seed uint64, n int, lat Latency, faults FaultPlan) *World {
	w := &World{
		rng:      rand.NewPCG(seed, seed^0x9E3779B97F4A7C15),
		hash:     0xcbf29ce484222325,
		nodes:    make([]Receiver, n),
		hints:    make([]Prefetcher, n),
		n:        n,
		latency:  lat,
		faults:   faults,
		linkLast: make([]int64, n*n),
		sentLast: make([]int64, n),
		stalled:  make([]int64, n),
	}
	w.faults.prepare(w)
	return w
}

// Attach sets the receiver of node id.
func (w *World) Attach(id protocol.NodeID, r Receiver) { w.nodes[id] = r }

// SetPrefetcher makes p the hint for the messages to node id (nil: none).
func (w *World) SetPrefetcher(id protocol.NodeID, p Prefetcher) {
	w.hints[id] = p
	w.hinted = w.hinted || p != nil
}

// SetTrace installs a message trace.
func (w *World) SetTrace(t TraceFunc) { w.trace = t }

// Now is the simulated time in nanoseconds.
func (w *World) Now() int64 { return w.now }

// Rand draws from the world's seeded PRNG.
func (w *World) Rand() uint64 { return w.rng.Uint64() }

// Chance is true with probability p.
func (w *World) Chance(p float64) bool {
	if p <= 0 {
		return false
	}
	return float64(w.rng.Uint64()>>11)*(1.0/(1<<53)) < p
}

// Intn draws from [0, n).
func (w *World) Intn(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return int64(w.rng.Uint64() % uint64(n))
}

// Hash is the running hash of every event processed so far.
func (w *World) Hash() uint64 { return w.hash }

// Pending is the number of scheduled events.
func (w *World) Pending() int { return w.events.n }

func (w *World) mix(x uint64) {
	w.hash ^= x
	w.hash *= 0x100000001b3
}

func (w *World) alloc() *event {
	if k := len(w.free); k > 0 {
		e := w.free[k-1]
		w.free = w.free[:k-1]
		return e
	}
	return &event{}
}

func (w *World) push(e *event) {
	w.seq++
	e.seq = w.seq
	w.events.push(e)
}

// At schedules fn at absolute time t on behalf of node (a stalled node's
// events wait for the stall to end).
func (w *World) At(node protocol.NodeID, t int64, fn func()) {
	e := w.alloc()
	e.at, e.kind, e.node, e.fn = max(t, w.now), evFunc, node, fn
	w.push(e)
}

// After schedules fn after delay.
func (w *World) After(node protocol.NodeID, delay int64, fn func()) { w.At(node, w.now+delay, fn) }

// Send puts m on the link m.From -> m.To. It travels as the real transports
// carry it: encoded into its 64-byte frame (protocol.Encode) with the
// payload copied behind it, and decoded at the receiver, which checks it
// as actors.Local.Receive does behind a real transport: the frame decodes,
// names the link's ends as its sender and receiver, and comes with the
// payload length its type needs (Message.PayloadLen).
func (w *World) Send(m *protocol.Message, payload []byte) {
	if int(m.To) >= w.n || int(m.From) >= w.n {
		panic("sim: message to or from a node outside the world")
	}
	if len(payload) > protocol.PageSize {
		panic("sim: payload larger than a page")
	}
	if w.dead != nil && (w.dead[m.From] || w.dead[m.To]) {
		return // a crashed node sends nothing, and nothing reaches it
	}
	e := w.alloc()
	e.kind, e.node, e.from = evMsg, m.To, m.From
	protocol.Encode(e.frame[:], m)
	if w.MutateFrame != nil {
		w.MutateFrame(e.frame[:])
	}
	e.payload = e.payload[:0]
	if len(payload) > 0 {
		e.payload = w.getPage()[:len(payload)]
		if k := w.PayloadEnds; k > 0 && len(payload) == protocol.PageSize && 2*k < len(payload) {
			copy(e.payload[:k], payload[:k])
			copy(e.payload[len(payload)-k:], payload[len(payload)-k:])
		} else {
			copy(e.payload, payload)
		}
	}
	// per-link FIFO, like an RC queue pair
	e.at = w.onLink(m.From, m.To, w.latency.Message+w.latency.PerKiB*int64(len(payload))/1024)
	w.push(e)
}

func (w *World) getPage() []byte {
	if k := len(w.pages); k > 0 {
		p := w.pages[k-1]
		w.pages = w.pages[:k-1]
		return p[:cap(p)]
	}
	return make([]byte, protocol.PageSize)
}

// Step processes the next event; false when none is left.
func (w *World) Step() bool {
	if w.events.n == 0 {
		return false
	}
	e := w.events.pop()
	w.now = e.at
	if w.hinted && w.events.n > 0 {
		if next := w.events.peek(); next.kind == evMsg && w.hints[next.node] != nil {
			w.hints[next.node].PrefetchFrame(next.frame[:])
		}
	}
	if w.stalled[e.node] > w.now && !w.stopFault && e.kind != evVerb {
		// A stalled node processes nothing: its events wait, in order. They
		// keep their sequence number, so events held back and events that
		// arrive at the end of the stall still run in the order they were
		// scheduled (per-link FIFO holds across stalls). A verb's arrival is
		// served by the NIC, not the stalled CPU.
		e.at = w.stalled[e.node]
		w.events.push(e)
		return true
	}
	if e.kind == evVerb && w.verbCost != nil && w.verbCost[e.node] > 0 {
		// The NIC serves one verb at a time: a verb that arrives while it
		// is busy waits its turn, in arrival order.
		if w.nicFree[e.node] > w.now {
			e.at = w.nicFree[e.node]
			w.events.push(e)
			return true
		}
		w.nicFree[e.node] = w.now + w.verbCost[e.node]
	}
	w.Steps++
	w.mix(uint64(e.at))
	w.mix(uint64(e.kind)<<8 | uint64(e.node))
	w.run(e)
	if cap(e.payload) >= protocol.PageSize {
		w.pages = append(w.pages, e.payload)
	}
	e.payload, e.fn, e.co, e.verb = nil, nil, nil, nil
	w.free = append(w.free, e)
	return true
}

// run processes one event; a panic in it is a fault of the event's node.
func (w *World) run(e *event) {
	defer func() {
		if r := recover(); r != nil {
			if e.kind == evResume {
				e.co.done = true // its body is gone with the panic
			}
			w.fault(e.node, panicError(e.node, r))
		}
	}()
	switch e.kind {
	case evMsg:
		var err error
		if w.msg, err = protocol.Decode(e.frame[:]); err != nil {
			w.fault(e.node, fmt.Errorf("sim: a frame to node %d does not decode, dropped: %w", e.node, err))
			return
		}
		m := &w.msg
		if w.dead != nil && (w.dead[m.To] || w.dead[m.From]) {
			return // on its way when a node crashed
		}
		switch {
		case m.From != e.from:
			w.fault(e.node, fmt.Errorf("sim: a frame on link %d->%d claims to come from node %d, dropped: %v", e.from, e.node, m.From, m))
			return
		case m.To != e.node:
			w.fault(e.node, fmt.Errorf("sim: a frame on link %d->%d is for node %d, dropped: %v", e.from, e.node, m.To, m))
			return
		case len(e.payload) != m.PayloadLen():
			w.fault(e.node, fmt.Errorf("sim: %v with a payload of %d bytes, want %d; dropped", m, len(e.payload), m.PayloadLen()))
			return
		}
		w.mix(uint64(m.Type) | uint64(m.From)<<8 | uint64(m.To)<<16 | uint64(m.Mode)<<24 | uint64(m.Epoch)<<32)
		w.mix(uint64(m.PID))
		w.Messages++
		w.PageBytes += uint64(len(e.payload))
		w.nodes[m.To].Deliver(m, e.payload)
		if w.handleCost != nil && w.handleCost[e.node] > 0 && !w.stopFault {
			// The handler kept the node's CPU busy: its next events wait
			// (verbs do not: the NIC serves them).
			w.stalled[e.node] = max(w.stalled[e.node], w.now) + w.handleCost[e.node]
			w.busy[e.node] += w.handleCost[e.node]
		}
		if w.trace != nil {
			w.trace(w.now, m, e.payload)
		}
	case evFunc:
		e.fn()
	case evResume:
		e.co.resume()
	case evVerb:
		w.actVerb(e.verb)
	case evVerbDone:
		e.verb.done(e.verb.Prev, e.verb.Err)
	case evFrame:
		w.deliverFrame(e)
	}
}

// Spend makes node's CPU busy for ns more from now (work it does outside
// a message's handling: a background step), as SetHandleCost's handling
// does: its timers, coroutines and later messages wait meanwhile.
func (w *World) Spend(node protocol.NodeID, ns int64) {
	if ns <= 0 || w.stopFault {
		return
	}
	if w.handleCost == nil {
		w.handleCost, w.busy = make([]int64, w.n), make([]int64, w.n)
	}
	w.stalled[node] = max(w.stalled[node], w.now) + ns
	w.busy[node] += ns
}

// SetHandleCost makes node spend ns of CPU on every message it handles:
// its timers, coroutines and later messages wait meanwhile, as on a node
// with fewer cores for message handling (one-sided verbs to its memory do
// not wait: its NIC serves them). 0, the default, costs nothing.
func (w *World) SetHandleCost(node protocol.NodeID, ns int64) {
	if w.handleCost == nil {
		w.handleCost, w.busy = make([]int64, w.n), make([]int64, w.n)
	}
	w.handleCost[node] = ns
}

// BusyTimes is the CPU time (SetHandleCost) nodes first..first+n-1 spent
// handling messages so far.
func (w *World) BusyTimes(first, n int) []int64 {
	out := make([]int64, n)
	if w.busy != nil {
		copy(out, w.busy[first:first+n])
	}
	return out
}

// SetVerbCost makes node's NIC spend ns on every one-sided verb to its
// memory, one verb at a time (a NIC's verb rate: the paper's Cell measures
// 1.44M READs/s, 0.7 us each): verbs that arrive meanwhile wait. 0, the
// default, serves every verb at once.
func (w *World) SetVerbCost(node protocol.NodeID, ns int64) {
	if w.verbCost == nil {
		w.verbCost, w.nicFree = make([]int64, w.n), make([]int64, w.n)
	}
	w.verbCost[node] = ns
}

// Failed is the first fault of the world (see OnFault), nil while there was
// none. A world that failed is no longer a faithful run of its seed: its
// caller should stop it and report the fault with the seed.
func (w *World) Failed() error { return w.failed }

// fault reports err through OnFault, or panics without one.
func (w *World) fault(node protocol.NodeID, err error) {
	if w.failed == nil {
		w.failed = fmt.Errorf("t=%dns node %d: %w", w.now, node, err)
	}
	if w.OnFault == nil {
		panic(err)
	}
	w.OnFault(w.now, node, err)
}

// StopFaults ends fault injection (the final flush runs without faults, so
// it terminates).
func (w *World) StopFaults() {
	w.stopFault = true
	for i := range w.stalled {
		w.stalled[i] = 0
	}
	// Messages a stall held back arrive at its end, later than one sent
	// on their link from now on would: move each link's clock past them,
	// so that links stay FIFO once stalls are off.
	w.events.each(func(e *event) {
		if (e.kind == evMsg || e.kind == evFrame) && e.at > w.now {
			link := int(e.from)*w.n + int(e.node)
			w.linkLast[link] = max(w.linkLast[link], e.at)
			w.sentLast[e.from] = max(w.sentLast[e.from], e.at)
		}
	})
}
