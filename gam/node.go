package gam

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// maxQueue bounds a node's serial queue. Every worker has at most one
// access in it and every message in it answers or asks for one
// transaction, so a run never comes near it; a queue that does is a bug
// the run reports, not memory that grows without end.
const maxQueue = 1 << 16

// errNoRMW fails a read-modify-write in TSO mode (its Supports lists the
// register workload only, so the runner never sends one).
var errNoRMW = errors.New("gam-tso: no read-modify-write (TSO has no atomic operation here)")

// req is an access as the protocol carries it: a worker's Op, or the
// write buffer's head on its way to visibility (drain: no worker waits
// for it).
type req struct {
	op    protocolapi.Op
	drain bool
	early bool // mutant early-ack: the worker has had its answer already
}

// item is one entry of the serial queue: a worker's access or a message.
type item struct {
	access bool
	r      req
	from   protocol.NodeID
	msg    Msg
}

// flags are the mutants a deployment applies.
type flags struct {
	grantWithoutInvalidation bool
	loseWriteBack            bool
	earlyAck                 bool
	drainOutOfOrder          bool
	readSkipsBuffer          bool
}

// node is one node's role: GAM's worker thread. It is the home of the
// keys striped to it (stripes) and caches every other key. Every
// input, a worker's access or a message from another node, goes through
// one FIFO queue that the worker serves one item at a time, each taking
// Cost.Service ns of the node's time.
type node struct {
	env   protocolapi.Env
	id    protocol.NodeID
	nodes int // in the deployment, memory nodes included
	homes stripes
	keys  uint64
	mode  Mode
	cost  Cost
	mut   flags
	cl    *cluster

	queue []item
	busy  bool   // an item is being served (its timer is out)
	svc   uint64 // the service timer's token

	// Per-link order: sent numbers the messages to each node; got is
	// the last number taken from each node, early the messages that
	// overtook one still on its way (see arrive).
	sent  []uint32
	got   []uint32
	early [][]Msg

	dir   directory
	cache cache
	wb    writeBuffer
	count counts
}

// counts are a node's counters (cluster.Counters).
type counts struct {
	grants, invalidations, fetches, evictions uint64
	served, forwarded, held, overtaken        uint64
}

func (c *counts) add(o counts) {
	c.grants += o.grants
	c.invalidations += o.invalidations
	c.fetches += o.fetches
	c.evictions += o.evictions
	c.served += o.served
	c.forwarded += o.forwarded
	c.held += o.held
	c.overtaken += o.overtaken
}

var _ protocolapi.Role = (*node)(nil)

func (n *node) homeOf(key uint64) protocol.NodeID { return n.homes.of(key) }

// stripes places the keys on their homes: key k on node first + k mod
// count, the k / count-th key that node homes.
type stripes struct{ first, count int }

func (s stripes) of(key uint64) protocol.NodeID {
	return protocol.NodeID(uint64(s.first) + key%uint64(s.count))
}

// homed is how many of keys node id homes.
func (s stripes) homed(id protocol.NodeID, keys int) int {
	i := int(id) - s.first
	if i < 0 || i >= s.count {
		return 0
	}
	return (keys - i + s.count - 1) / s.count
}

// Step implements protocolapi.Role.
func (n *node) Step(ev protocolapi.Event) error {
	switch ev.Kind {
	case protocolapi.EventAccess:
		op := ev.Op
		switch {
		case op.Key >= n.keys:
			n.env.Complete(op, protocolapi.Result{Err: fmt.Errorf("gam: key %d of %d", op.Key, n.keys)})
			return nil
		case op.Kind != protocolapi.OpRead && op.Kind != protocolapi.OpWrite && op.Kind != protocolapi.OpRMW:
			n.env.Complete(op, protocolapi.Result{Err: fmt.Errorf("gam: access kind %v", op.Kind)})
			return nil
		case n.mode == TSO && op.Kind == protocolapi.OpRMW:
			n.env.Complete(op, protocolapi.Result{Err: errNoRMW})
			return nil
		}
		r := req{op: op}
		switch {
		case n.mode == TSO && op.Kind == protocolapi.OpWrite:
			// GAM's asynchronous write: the thread goes on once the
			// request is queued (unless the buffer is full).
			n.wb.accept(op)
		case n.mut.earlyAck && op.Kind == protocolapi.OpWrite:
			n.env.Complete(op, protocolapi.Result{})
			r.early = true
		}
		return n.enqueue(item{access: true, r: r})
	case protocolapi.EventMessage:
		m, ok := ev.Msg.(Msg)
		if !ok {
			return fmt.Errorf("gam: node %d got a %T, not a GAM message", n.id, ev.Msg)
		}
		return n.arrive(ev.From, m)
	case protocolapi.EventTimer:
		if !n.busy || ev.Token != n.svc {
			return fmt.Errorf("gam: node %d: timer %d, but its worker waits for %d (busy %v)", n.id, ev.Token, n.svc, n.busy)
		}
		n.busy = false
		it := n.queue[0]
		n.queue = n.queue[1:]
		err := n.serve(it)
		if len(n.queue) > 0 {
			n.startService()
		}
		return err
	}
	return fmt.Errorf("gam: node %d has no use for a %v event", n.id, ev.Kind)
}

// send sends m to node to, numbered on the link.
func (n *node) send(to protocol.NodeID, m Msg) {
	n.sent[to]++
	m.Seq = n.sent[to]
	n.env.Send(to, m)
}

// arrive takes a message in its link's order. The protocol needs
// per-link FIFO (a Grant before the fetch the home sent after it), which
// the transports give; the simulator breaks it when the fault plan stops
// (sim.World.StopFaults forgets the stalls while frames they held back
// keep their later times, so a frame sent after overtakes them). A
// message that overtook waits here for the ones before it.
func (n *node) arrive(from protocol.NodeID, m Msg) error {
	switch {
	case int(from) >= len(n.got):
		return fmt.Errorf("gam: node %d: %v from node %d, outside the %d nodes", n.id, m, from, len(n.got))
	case m.Seq <= n.got[from]:
		return fmt.Errorf("gam: node %d: %v from node %d numbered %d, after %d", n.id, m, from, m.Seq, n.got[from])
	case m.Seq > n.got[from]+1:
		if len(n.early[from]) >= maxQueue {
			return fmt.Errorf("gam: node %d: %d messages from node %d wait for number %d", n.id, len(n.early[from]), from, n.got[from]+1)
		}
		n.early[from] = append(n.early[from], m)
		n.count.overtaken++
		return nil
	}
	n.got[from]++
	if err := n.enqueue(item{from: from, msg: m}); err != nil {
		return err
	}
	for {
		i := slices.IndexFunc(n.early[from], func(e Msg) bool { return e.Seq == n.got[from]+1 })
		if i < 0 {
			return nil
		}
		next := n.early[from][i]
		n.early[from] = slices.Delete(n.early[from], i, i+1)
		n.got[from]++
		if err := n.enqueue(item{from: from, msg: next}); err != nil {
			return err
		}
	}
}

// enqueue puts it behind the items the worker has not served yet.
func (n *node) enqueue(it item) error {
	if len(n.queue) >= maxQueue {
		return fmt.Errorf("gam: node %d: its serial queue holds %d items", n.id, len(n.queue))
	}
	if n.cost.Service <= 0 {
		// No service time: the worker serves the item at once.
		return n.serve(it)
	}
	n.queue = append(n.queue, it)
	if !n.busy {
		n.startService()
	}
	return nil
}

// startService lets the worker take the queue's head: it is served when
// its service time is up.
func (n *node) startService() {
	n.busy = true
	n.svc++
	n.env.After(n.cost.Service, n.svc)
}

// serve handles one item, then lets the write buffer go on.
func (n *node) serve(it item) error {
	n.count.served++
	var err error
	if it.access {
		n.access(it.r)
	} else {
		err = n.receive(it.from, it.msg)
	}
	if n.mode == TSO && err == nil {
		n.wb.drainNext()
	}
	return err
}

// access serves a worker's access.
func (n *node) access(r req) {
	op := r.op
	if n.mode == TSO {
		if op.Kind == protocolapi.OpWrite {
			n.wb.push(op)
			return
		}
		if !n.mut.readSkipsBuffer {
			if v, ok := n.wb.forward(op.Worker, op.Key); ok {
				n.count.forwarded++
				n.env.Complete(op, protocolapi.Result{Value: v})
				return
			}
		}
	}
	n.issue(r)
}

// issue sends an access to where its key lives: the directory when this
// node is its home (GAM reads and writes a home's own memory without a
// cache), the cache otherwise.
func (n *node) issue(r req) {
	if n.homeOf(r.op.Key) == n.id {
		n.dir.local(r)
		return
	}
	n.cache.access(r)
}

// finish ends an access that happened: v is what a read read or what a
// write overwrote.
func (n *node) finish(r req, v uint64) {
	switch {
	case r.drain:
		n.wb.drained(r.op.Worker)
	case !r.early:
		n.env.Complete(r.op, protocolapi.Result{Value: v})
	}
}

// receive handles a message: to the directory for a key this node homes,
// to the cache for any other.
func (n *node) receive(from protocol.NodeID, m Msg) error {
	if m.Key >= n.keys {
		return fmt.Errorf("gam: node %d: %v from node %d for a key beyond %d", n.id, m, from, n.keys)
	}
	toHome := m.T == ReadShared || m.T == ReadExclusive || m.T == InvalidateAck || m.T == WriteBack || m.T == Evict
	if toHome != (n.homeOf(m.Key) == n.id) {
		return fmt.Errorf("gam: node %d: %v from node %d, but key %d's home is node %d", n.id, m, from, m.Key, n.homeOf(m.Key))
	}
	if toHome {
		return n.dir.receive(from, m)
	}
	return n.cache.receive(from, m)
}

// Describe implements protocolapi.Role.
func (n *node) Describe() string {
	var b strings.Builder
	for from, e := range n.early {
		if len(e) > 0 {
			fmt.Fprintf(&b, " %d messages from node %d wait for number %d", len(e), from, n.got[from]+1)
		}
	}
	if len(n.queue) > 0 || n.busy {
		fmt.Fprintf(&b, " serial queue: %d items (serving %v)", len(n.queue), n.busy)
	}
	if d := n.cache.describe(); d != "" {
		b.WriteString(" cache:" + d)
	}
	b.WriteString(n.dir.describe())
	b.WriteString(n.wb.describe())
	return strings.TrimSpace(b.String())
}
