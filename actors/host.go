package actors

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/anthdm/hollywood/actor"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Host runs a cluster node's roles as hollywood actors: the message handler
// is an actor (hollywood supervises it and restarts it if it panics), the
// transport is the engine's Remoter (our 64-byte frames and page payloads;
// no protobuf on the page path), and the engine's event stream feeds the
// metrics. The worker's hot path touches no actor: a cached page is a
// table lookup and a latch.
type Host struct {
	Engine  *actor.Engine
	node    *Local
	remote  *remoter
	handler *actor.PID
	events  *actor.PID
	// Events counts the engine's events by kind (restarts, dead letters,
	// unreachable remotes): the metrics read it.
	Events sync.Map // string -> *atomic.Uint64
}

// Frame is the message our Remoter carries between nodes: a 64-byte
// protocol frame and its payload.
type Frame struct {
	From    protocol.NodeID
	Bytes   [protocol.FrameSize]byte
	Payload []byte
}

// NodeAddress is the hollywood address of node id.
func NodeAddress(id protocol.NodeID) string { return "node-" + strconv.Itoa(int(id)) }

func parseNodeAddress(a string) (protocol.NodeID, error) {
	s, ok := strings.CutPrefix(a, "node-")
	if !ok {
		return 0, fmt.Errorf("actors: %q is not a node address", a)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 {
		return 0, fmt.Errorf("actors: %q is not a node address", a)
	}
	return protocol.NodeID(n), nil
}

// handlerID is the message handler actor's id on every node.
const handlerID = "handler"

// remoter adapts a transport to hollywood's Remoter.
type remoter struct {
	self   protocol.NodeID
	tr     transport.Messenger
	engine *actor.Engine
	target *actor.PID // the local handler
	wg     sync.WaitGroup
}

func (r *remoter) Address() string { return NodeAddress(r.self) }

func (r *remoter) Start(e *actor.Engine) error { r.engine = e; return nil }

func (r *remoter) Stop() *sync.WaitGroup { return &r.wg }

// Send implements actor.Remoter for messages actors send to other nodes.
// hollywood's interface has no error result: a failure is published on
// the event stream.
func (r *remoter) Send(pid *actor.PID, msg any, sender *actor.PID) {
	to, err := parseNodeAddress(pid.Address)
	if err == nil {
		f, ok := msg.(*Frame)
		if !ok {
			err = fmt.Errorf("actors: cannot send a %T to another node", msg)
		} else {
			err = r.tr.Send(to, f.Bytes[:], f.Payload)
		}
	}
	if err != nil {
		r.engine.BroadcastEvent(actor.DeadLetterEvent{Target: pid, Message: msg, Sender: sender})
	}
}

// receive is the transport's handler: the frame goes to the handler actor
// (copied: the transport's buffers are only valid during the call).
func (r *remoter) receive(from protocol.NodeID, frame, payload []byte) {
	if len(frame) != protocol.FrameSize {
		return // the transport checks lengths; this cannot happen
	}
	f := &Frame{From: from}
	copy(f.Bytes[:], frame)
	if len(payload) > 0 {
		f.Payload = append([]byte(nil), payload...)
	}
	r.engine.SendLocal(r.target, f, nil)
}

// handler is the message handler role.
type handler struct{ node *Local }

func (h *handler) Receive(c *actor.Context) {
	if f, ok := c.Message().(*Frame); ok {
		h.node.Receive(f.From, f.Bytes[:], f.Payload)
	}
}

// eventCounter counts the engine's events.
type eventCounter struct{ h *Host }

func (e *eventCounter) Receive(c *actor.Context) {
	var kind string
	switch c.Message().(type) {
	case actor.ActorRestartedEvent:
		kind = "actor_restarted"
	case actor.ActorMaxRestartsExceededEvent:
		kind = "actor_max_restarts"
	case actor.DeadLetterEvent:
		kind = "dead_letter"
	case actor.RemoteUnreachableEvent:
		kind = "remote_unreachable"
	default:
		return
	}
	v, _ := e.h.Events.LoadOrStore(kind, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
	if kind != "actor_restarted" {
		e.h.node.log.Warn("actor event", "event", kind, "node", e.h.node.node.ID())
	}
}

// NewHost hosts node (made with NewClusterNode) on a hollywood engine whose
// Remoter is tr. It returns the handler the transport must call for every
// incoming frame (pass it as the transport's Handler; frames that arrive
// before NewHost returns are not expected: start the transport with a
// handler that forwards to this one).
func NewHost(node *Local, self protocol.NodeID, tr transport.Messenger, opts ...HostOption) (*Host, transport.Handler, error) {
	var o hostOptions
	for _, opt := range opts {
		opt(&o)
	}
	h := &Host{node: node}
	h.remote = &remoter{self: self, tr: tr, target: actor.NewPID(NodeAddress(self), handlerID)}
	e, err := actor.NewEngine(actor.NewEngineConfig().WithRemote(h.remote))
	if err != nil {
		return nil, nil, fmt.Errorf("actors: starting the actor engine: %w", err)
	}
	h.Engine = e
	h.handler = e.Spawn(func() actor.Receiver { return &handler{node: node} }, handlerID,
		actor.WithID(""), actor.WithInboxSize(4096), actor.WithMaxRestarts(1000))
	h.remote.target = h.handler
	h.events = e.Spawn(func() actor.Receiver { return &eventCounter{h: h} }, "events")
	e.Subscribe(h.events)
	if ts, ok := tr.(TrySender); ok {
		node.Connect(hostTry{h, ts})
	} else {
		node.Connect(h)
	}
	if o.inline {
		return h, node.ReceiveInline, nil
	}
	return h, h.remote.receive, nil
}

// Send implements Sender: the node's outbox sends through the engine's
// Remoter, but straight, so the transport's error reaches the node.
func (h *Host) Send(to protocol.NodeID, frame, payload []byte) error {
	return h.remote.tr.Send(to, frame, payload)
}

// HostOption adjusts NewHost.
type HostOption func(*hostOptions)

type hostOptions struct{ inline bool }

// InlineFrames delivers protocol frames on the transport's receive
// goroutine instead of through the handler actor's inbox. The inbox costs a
// goroutine hand-off per message (measured in docs/cluster.md: on two cores
// it is the difference between shared memory beating TCP and not); the
// handler code is the same, it validates every frame and never panics on
// one, and the actor stays for everything else sent to it.
func InlineFrames() HostOption { return func(o *hostOptions) { o.inline = true } }

// hostTry is a Host whose transport can send without waiting.
type hostTry struct {
	*Host
	try TrySender
}

func (h hostTry) TrySend(to protocol.NodeID, frame, payload []byte) (bool, error) {
	return h.try.TrySend(to, frame, payload)
}

// TrySendCorked passes to the transport when it corks (CorkSender).
func (h hostTry) TrySendCorked(to protocol.NodeID, frame, payload []byte) (bool, error) {
	if c, ok := h.try.(CorkSender); ok {
		return c.TrySendCorked(to, frame, payload)
	}
	return h.try.TrySend(to, frame, payload)
}

// EventCount is the number of engine events of kind.
func (h *Host) EventCount(kind string) uint64 {
	if v, ok := h.Events.Load(kind); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// Stop stops the actors. The event counter leaves the engine's event
// stream first: a frame that reaches the stopped handler is a dead letter,
// an event the stream would deliver to the stopped counter, whose dead
// letter is another event, and so on: the engine spun on that loop after
// Stop, taking a core from everything else in the process.
func (h *Host) Stop() {
	h.Engine.Unsubscribe(h.events)
	<-h.Engine.Poison(h.events).Done()
	<-h.Engine.Poison(h.handler).Done()
}
