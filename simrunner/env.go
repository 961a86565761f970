package simrunner

import (
	"unsafe"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// nodeEnv is protocolapi.Env for one simulated node.
type nodeEnv struct {
	r    *run
	id   protocol.NodeID
	role protocolapi.Role
	mem  []byte
	// local is this node's side of the world: its verbs, and its SSD
	// (Store nil without one)
	local sim.NodeEnv
	frame [protocol.FrameSize]byte
	// gen counts the node's crashes: a timer, a verb, an I/O or a message
	// to itself that an earlier incarnation set off is dropped (the world
	// drops the messages of a dead node itself).
	gen uint64
}

// current wraps fn to run only if the node has not crashed since.
func (e *nodeEnv) current(fn func()) func() {
	gen := e.gen
	return func() {
		if e.gen == gen {
			fn()
		}
	}
}

var _ protocolapi.Env = (*nodeEnv)(nil)

func (e *nodeEnv) Self() protocol.NodeID { return e.id }
func (e *nodeEnv) Nodes() int            { return len(e.r.envs) }
func (e *nodeEnv) Now() int64            { return e.r.w.Now() }
func (e *nodeEnv) Rand() uint64          { return e.r.w.Rand() }
func (e *nodeEnv) Memory() []byte        { return e.mem }

func (e *nodeEnv) Region(node protocol.NodeID) (transport.Region, bool) {
	if int(node) >= len(e.r.regions) || e.r.envs[node].mem == nil {
		return transport.Region{}, false
	}
	return e.r.regions[node], true
}

// Send encodes m and puts its frame on the link; a message to this node
// itself is delivered by the node's own queue, now, without the network's
// latency (a local directory), but still through its frame.
func (e *nodeEnv) Send(to protocol.NodeID, m protocolapi.Message) {
	r := e.r
	if r.p.Codec == nil {
		r.fail("node %d sends %v, but protocol %s has no codec", e.id, m, r.p.Name)
		return
	}
	if int(to) >= len(r.envs) {
		r.fail("node %d sends %v to node %d, outside the deployment of %d nodes", e.id, m, to, len(r.envs))
		return
	}
	payload, err := protocolapi.EncodeFrame(r.p.Codec, e.frame[:], e.id, to, m)
	if err != nil {
		r.fail("node %d: %v", e.id, err)
		return
	}
	if to != e.id {
		r.w.SendFrame(e.id, to, e.frame[:], payload)
		return
	}
	frame := e.frame
	payload = append([]byte(nil), payload...)
	r.w.After(e.id, 0, e.current(func() { r.deliver(e.id, e.id, frame[:], payload) }))
}

func (e *nodeEnv) After(delay int64, token uint64) {
	e.r.w.After(e.id, delay, e.current(func() { e.r.step(e, protocolapi.Event{Kind: protocolapi.EventTimer, Token: token}) }))
}

func (e *nodeEnv) verbDone(token uint64) func(uint64, error) {
	gen := e.gen
	return func(prev uint64, err error) {
		if e.gen == gen {
			e.r.step(e, protocolapi.Event{Kind: protocolapi.EventVerb, Token: token, Prev: prev, Err: err})
		}
	}
}

func (e *nodeEnv) Read(dst []byte, rg transport.Region, off uint64, token uint64) {
	done := e.verbDone(token)
	e.local.Read(dst, rg, off, func(err error) { done(0, err) })
}

func (e *nodeEnv) Write(rg transport.Region, off uint64, src []byte, token uint64) {
	done := e.verbDone(token)
	e.local.Write(rg, off, src, func(err error) { done(0, err) })
}

func (e *nodeEnv) CompareAndSwap(rg transport.Region, off, old, new uint64, token uint64) {
	e.local.CompareAndSwap(rg, off, old, new, e.verbDone(token))
}

func (e *nodeEnv) FetchAndAdd(rg transport.Region, off, delta uint64, token uint64) {
	e.local.FetchAndAdd(rg, off, delta, e.verbDone(token))
}

func (e *nodeEnv) pageDone(token uint64) func(error) {
	gen := e.gen
	return func(err error) {
		if e.gen == gen {
			e.r.step(e, protocolapi.Event{Kind: protocolapi.EventPage, Token: token, Err: err})
		}
	}
}

func (e *nodeEnv) ReadPage(slot uint64, buf []byte, token uint64) {
	if e.local.Store == nil {
		e.r.fail("node %d reads SSD slot %d, but its layout gives it no SSD", e.id, slot)
		return
	}
	e.local.ReadPage(slot, buf, e.pageDone(token))
}

func (e *nodeEnv) WritePage(slot uint64, buf []byte, token uint64) {
	if e.local.Store == nil {
		e.r.fail("node %d writes SSD slot %d, but its layout gives it no SSD", e.id, slot)
		return
	}
	e.local.WritePage(slot, buf, e.pageDone(token))
}

func (e *nodeEnv) Busy(ns int64) { e.r.w.Spend(e.id, ns) }

func (e *nodeEnv) Complete(op protocolapi.Op, res protocolapi.Result) { e.r.complete(e.id, op, res) }

// DeliverFrame implements sim.FrameReceiver.
func (e *nodeEnv) DeliverFrame(from protocol.NodeID, frame, payload []byte) {
	e.r.deliver(from, e.id, frame, payload)
}

// alignedBytes is n zero bytes starting on an 8-byte boundary (atomic
// verbs act on aligned words).
func alignedBytes(n int) []byte {
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
}
