package sim

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// One-sided verbs (RDMA READ, WRITE, CAS and FAA) on simulated registered
// memory. A verb travels to the memory's node on the same link as the
// issuer's messages (so a Write is ordered after every earlier Write and
// Send to that peer, as on an RC queue pair), acts on the memory when it
// arrives, and its completion travels back. It needs no CPU on the memory's
// side: a stalled node's memory still serves verbs, while a stalled
// issuer sees its completion only when its stall ends. Every verb is in the
// event hash and in the verb trace.

// VerbKind is a one-sided verb.
type VerbKind uint8

// The verbs.
const (
	VerbRead VerbKind = iota + 1
	VerbWrite
	VerbCAS
	VerbFAA
)

func (k VerbKind) String() string {
	switch k {
	case VerbRead:
		return "READ"
	case VerbWrite:
		return "WRITE"
	case VerbCAS:
		return "CAS"
	case VerbFAA:
		return "FAA"
	}
	return fmt.Sprintf("verb(%d)", uint8(k))
}

// Verb is one one-sided verb as the trace sees it, when it acted on the
// memory (or was refused).
type Verb struct {
	Kind   VerbKind
	From   protocol.NodeID // the issuer
	Region transport.Region
	Off    uint64
	Len    int
	// Old and New are CAS's compare and swap values, New FAA's delta; Prev
	// is the word before an atomic.
	Old, New, Prev uint64
	Err            error
}

func (v *Verb) String() string {
	s := fmt.Sprintf("%v %d->%d key=%#x off=%d len=%d", v.Kind, v.From, v.Region.Node, v.Region.Key, v.Off, v.Len)
	switch v.Kind {
	case VerbCAS:
		s += fmt.Sprintf(" old=%#x new=%#x prev=%#x", v.Old, v.New, v.Prev)
	case VerbFAA:
		s += fmt.Sprintf(" delta=%#x prev=%#x", v.New, v.Prev)
	}
	if v.Err != nil {
		s += " err=" + v.Err.Error()
	}
	return s
}

// VerbTraceFunc sees every verb when it acts on the memory.
type VerbTraceFunc func(at int64, v *Verb)

// SetVerbTrace installs a verb trace.
func (w *World) SetVerbTrace(t VerbTraceFunc) { w.verbTrace = t }

type memRegion struct {
	node protocol.NodeID
	key  uint32
	mem  []byte
}

// pendingVerb is a verb in flight.
type pendingVerb struct {
	Verb
	data []byte // WRITE: a copy of the source; READ: the destination
	done func(prev uint64, err error)
}

// Register exposes mem of node to one-sided verbs. The key is derived from
// the registration's position, so a run registers the same keys every time.
func (w *World) Register(node protocol.NodeID, mem []byte) transport.Region {
	key := uint32(len(w.regions)+1) * 0x9E3779B1
	w.regions = append(w.regions, memRegion{node: node, key: key, mem: mem})
	return transport.Region{Node: node, Key: key, Len: uint64(len(mem))}
}

// Read issues an RDMA READ of len(dst) bytes at off of r by node from; done
// runs on from when the data is in dst.
func (w *World) Read(from protocol.NodeID, dst []byte, r transport.Region, off uint64, done func(error)) {
	w.issue(&pendingVerb{Verb: Verb{Kind: VerbRead, From: from, Region: r, Off: off, Len: len(dst)}, data: dst,
		done: func(_ uint64, err error) { done(err) }})
}

// Write issues an RDMA WRITE of src (copied now) to off of r.
func (w *World) Write(from protocol.NodeID, r transport.Region, off uint64, src []byte, done func(error)) {
	w.issue(&pendingVerb{Verb: Verb{Kind: VerbWrite, From: from, Region: r, Off: off, Len: len(src)},
		data: append([]byte(nil), src...), done: func(_ uint64, err error) { done(err) }})
}

// CompareAndSwap issues an RDMA CAS on the word at off of r.
func (w *World) CompareAndSwap(from protocol.NodeID, r transport.Region, off, old, new uint64, done func(prev uint64, err error)) {
	w.issue(&pendingVerb{Verb: Verb{Kind: VerbCAS, From: from, Region: r, Off: off, Len: 8, Old: old, New: new}, done: done})
}

// FetchAndAdd issues an RDMA FAA on the word at off of r.
func (w *World) FetchAndAdd(from protocol.NodeID, r transport.Region, off, delta uint64, done func(prev uint64, err error)) {
	w.issue(&pendingVerb{Verb: Verb{Kind: VerbFAA, From: from, Region: r, Off: off, Len: 8, New: delta}, done: done})
}

// Verbs counts the one-sided verbs that acted on memory; VerbBytes the
// bytes READs and WRITEs moved.
func (w *World) VerbStats() (verbs, bytes uint64) { return w.verbs, w.verbBytes }

func (w *World) issue(v *pendingVerb) {
	to := v.Region.Node
	if int(v.From) >= w.n || int(to) >= w.n {
		panic("sim: a verb from or to a node outside the world")
	}
	out := 0
	if v.Kind == VerbWrite {
		out = v.Len
	}
	e := w.alloc()
	e.kind, e.node, e.verb = evVerb, to, v
	e.at = w.onLink(v.From, to, w.verbLatency(out))
	w.push(e)
}

// verbLatency is one way of a verb carrying n bytes.
func (w *World) verbLatency(n int) int64 {
	return w.latency.Verb + w.latency.PerKiB*int64(n)/1024
}

// onLink is the arrival time of something sent now from -> to after lat,
// with the fault plan's delays, in FIFO order with everything sent on that
// link before.
//
// The link's last arrival is read only when some link of the sender has
// an arrival later than this one (sentLast): otherwise none of its links
// can, and the per-link clock (n*n entries, a cache miss a message at 256
// nodes) is only written, which does not stall.
func (w *World) onLink(from, to protocol.NodeID, lat int64) int64 {
	lat += w.faults.messageDelay(w, from, to)
	link := int(from)*w.n + int(to)
	at := w.now + lat
	if at < w.sentLast[from] {
		at = max(at, w.linkLast[link])
	}
	w.linkLast[link] = at
	w.sentLast[from] = max(w.sentLast[from], at)
	return at
}

// ErrNotInCoroutine is returned by a blocking verb called outside a
// coroutine (an event handler must not wait).
var ErrNotInCoroutine = errors.New("sim: a blocking verb outside a coroutine")

// actVerb runs a verb at the memory's node, then sends its completion back.
func (w *World) actVerb(v *pendingVerb) {
	var m *memRegion
	for i := range w.regions {
		if w.regions[i].key == v.Region.Key && w.regions[i].node == v.Region.Node {
			m = &w.regions[i]
			break
		}
	}
	atomic := v.Kind == VerbCAS || v.Kind == VerbFAA
	switch {
	case m == nil:
		v.Err = fmt.Errorf("sim: %v by node %d: no region %#x on node %d: %w", v.Kind, v.From, v.Region.Key, v.Region.Node, transport.ErrAccess)
	case atomic && v.Off%8 != 0:
		v.Err = fmt.Errorf("sim: %v by node %d at offset %d: %w", v.Kind, v.From, v.Off, transport.ErrMisaligned)
	case v.Off > uint64(len(m.mem)) || uint64(v.Len) > uint64(len(m.mem))-v.Off:
		v.Err = fmt.Errorf("sim: %v by node %d of %d bytes at offset %d of a %d-byte region: %w",
			v.Kind, v.From, v.Len, v.Off, len(m.mem), transport.ErrAccess)
	}
	back := 0
	if v.Err == nil {
		b := m.mem[v.Off : v.Off+uint64(v.Len)]
		switch v.Kind {
		case VerbRead:
			copy(v.data, b)
			back = v.Len
		case VerbWrite:
			copy(b, v.data)
		case VerbCAS:
			v.Prev = binary.LittleEndian.Uint64(b)
			if v.Prev == v.Old {
				binary.LittleEndian.PutUint64(b, v.New)
			}
		case VerbFAA:
			v.Prev = binary.LittleEndian.Uint64(b)
			binary.LittleEndian.PutUint64(b, v.Prev+v.New)
		}
		w.verbs++
		if !atomic {
			w.verbBytes += uint64(v.Len)
		}
	}
	w.mix(uint64(v.Kind) | uint64(v.From)<<8 | uint64(v.Region.Node)<<16 | uint64(v.Region.Key)<<32)
	w.mix(v.Off ^ uint64(v.Len)<<48)
	w.mix(v.Prev)
	if v.Err != nil {
		w.mix(1)
	}
	if w.verbTrace != nil {
		w.verbTrace(w.now, &v.Verb)
	}
	lat := w.verbLatency(back)
	if atomic {
		lat += w.latency.Atomic
	}
	e := w.alloc()
	e.kind, e.node, e.verb = evVerbDone, v.From, v
	e.at = w.onLink(v.Region.Node, v.From, lat)
	w.push(e)
}

// Verbs is transport.OneSided for the coroutines of one node: each verb
// parks the calling coroutine until its completion.
type Verbs struct {
	W    *World
	Node protocol.NodeID
}

var _ transport.OneSided = Verbs{}

// Register implements transport.OneSided.
func (s Verbs) Register(mem []byte) (transport.Region, error) { return s.W.Register(s.Node, mem), nil }

// wait runs issue and parks the current coroutine until done was called.
func (s Verbs) wait(issue func(done func(prev uint64, err error))) (uint64, error) {
	co := s.W.running
	if co == nil {
		return 0, ErrNotInCoroutine
	}
	var prev uint64
	var err error
	finished := false
	issue(func(p uint64, e error) {
		prev, err, finished = p, e, true
		co.Wake()
	})
	for !finished {
		co.Park()
	}
	return prev, err
}

// Read implements transport.OneSided.
func (s Verbs) Read(dst []byte, r transport.Region, off uint64) error {
	_, err := s.wait(func(done func(uint64, error)) {
		s.W.Read(s.Node, dst, r, off, func(err error) { done(0, err) })
	})
	return err
}

// Write implements transport.OneSided.
func (s Verbs) Write(r transport.Region, off uint64, src []byte) error {
	_, err := s.wait(func(done func(uint64, error)) {
		s.W.Write(s.Node, r, off, src, func(err error) { done(0, err) })
	})
	return err
}

// CompareAndSwap implements transport.OneSided.
func (s Verbs) CompareAndSwap(r transport.Region, off, old, new uint64) (uint64, error) {
	return s.wait(func(done func(uint64, error)) { s.W.CompareAndSwap(s.Node, r, off, old, new, done) })
}

// FetchAndAdd implements transport.OneSided.
func (s Verbs) FetchAndAdd(r transport.Region, off, delta uint64) (uint64, error) {
	return s.wait(func(done func(uint64, error)) { s.W.FetchAndAdd(s.Node, r, off, delta, done) })
}
