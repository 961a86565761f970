package sim

import (
	"encoding/binary"
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
)

// Opaque frames: the messages of a protocol the world has never heard of
// (a protocolapi plug-in). They travel like ScaleStore's messages (the
// links' latency model, per-link FIFO, the fault plan's delays, stalls,
// crashed nodes and view changes' DropMessages), as the real transports
// carry them: a frame of exactly protocol.FrameSize bytes and a payload
// of at most a page, both copied at the send. The world does not decode
// them; the receiver does, and reports what it cannot decode itself.
// Every frame is in the event hash, bytes and all.

// FrameReceiver gets the opaque frames addressed to one node.
type FrameReceiver interface {
	// DeliverFrame hands over one frame and its payload, valid only during
	// the call.
	DeliverFrame(from protocol.NodeID, frame, payload []byte)
}

// AttachFrames sets the receiver of the opaque frames to node id.
func (w *World) AttachFrames(id protocol.NodeID, r FrameReceiver) {
	if w.frameRecv == nil {
		w.frameRecv = make([]FrameReceiver, w.n)
	}
	w.frameRecv[id] = r
}

// SendFrame puts an opaque frame and its payload on the link from -> to.
// A frame to or from a node outside the world, of the wrong size, or with
// a payload larger than a page is a fault of the sender (OnFault), and is
// dropped. A node may send to itself: the frame then takes the link's
// latency like any other.
func (w *World) SendFrame(from, to protocol.NodeID, frame, payload []byte) {
	switch {
	case int(from) >= w.n || int(to) >= w.n:
		w.fault(from, fmt.Errorf("sim: a frame %d->%d names a node outside the world of %d nodes, dropped", from, to, w.n))
		return
	case len(frame) != protocol.FrameSize:
		w.fault(from, fmt.Errorf("sim: a frame %d->%d of %d bytes, want %d; dropped", from, to, len(frame), protocol.FrameSize))
		return
	case len(payload) > protocol.PageSize:
		w.fault(from, fmt.Errorf("sim: a frame %d->%d with a payload of %d bytes, more than a page; dropped", from, to, len(payload)))
		return
	}
	if w.dead != nil && (w.dead[from] || w.dead[to]) {
		return // a crashed node sends nothing, and nothing reaches it
	}
	e := w.alloc()
	e.kind, e.node, e.from = evFrame, to, from
	copy(e.frame[:], frame)
	if w.MutateFrame != nil {
		w.MutateFrame(e.frame[:])
	}
	e.payload = e.payload[:0]
	if len(payload) > 0 {
		e.payload = w.getPage()[:len(payload)]
		copy(e.payload, payload)
	}
	e.at = w.onLink(from, to, w.latency.Message+w.latency.PerKiB*int64(len(payload))/1024)
	w.push(e)
}

// deliverFrame runs an opaque frame's arrival.
func (w *World) deliverFrame(e *event) {
	if w.dead != nil && (w.dead[e.node] || w.dead[e.from]) {
		return // on its way when a node crashed
	}
	for i := 0; i < protocol.FrameSize; i += 8 {
		w.mix(binary.LittleEndian.Uint64(e.frame[i:]))
	}
	w.mix(uint64(e.from) | uint64(e.node)<<8 | uint64(len(e.payload))<<16)
	w.Messages++
	w.PageBytes += uint64(len(e.payload))
	var r FrameReceiver
	if w.frameRecv != nil {
		r = w.frameRecv[e.node]
	}
	if r == nil {
		w.fault(e.node, fmt.Errorf("sim: a frame %d->%d to a node without a frame receiver, dropped", e.from, e.node))
		return
	}
	r.DeliverFrame(e.from, e.frame[:], e.payload)
	if w.handleCost != nil && w.handleCost[e.node] > 0 && !w.stopFault {
		w.stalled[e.node] = max(w.stalled[e.node], w.now) + w.handleCost[e.node]
		w.busy[e.node] += w.handleCost[e.node]
	}
}
