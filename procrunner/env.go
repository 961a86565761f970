package procrunner

import (
	"fmt"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
)

// nodeEnv is protocolapi.Env of a Node. Its methods are called by the role
// inside Step, so on the node's loop: they touch the loop's own fields
// without a lock.
type nodeEnv Node

var _ protocolapi.Env = (*nodeEnv)(nil)

func (e *nodeEnv) node() *Node { return (*Node)(e) }

func (e *nodeEnv) Self() protocol.NodeID { return e.cfg.ID }
func (e *nodeEnv) Nodes() int            { return e.lay.Nodes }

// Now is the monotonic time since the node started.
func (e *nodeEnv) Now() int64   { return time.Since(e.start).Nanoseconds() }
func (e *nodeEnv) Rand() uint64 { return e.rng.Uint64() }

func (e *nodeEnv) Memory() []byte { return e.mem }

func (e *nodeEnv) Region(node protocol.NodeID) (transport.Region, bool) {
	if int(node) >= len(e.regions) || e.regions[node].Len == 0 {
		return transport.Region{}, false
	}
	return e.regions[node], true
}

// Send encodes m and sends its frame; a message to this node itself is
// decoded again and handled by the loop before its next input.
func (e *nodeEnv) Send(to protocol.NodeID, m protocolapi.Message) {
	n := e.node()
	if n.p.Codec == nil {
		n.violate("node %d sends %v, but protocol %s has no codec", n.cfg.ID, m, n.p.Name)
		return
	}
	if int(to) >= n.lay.Nodes {
		n.violate("node %d sends %v to node %d, outside the deployment of %d nodes", n.cfg.ID, m, to, n.lay.Nodes)
		return
	}
	payload, err := protocolapi.EncodeFrame(n.p.Codec, n.frame[:], n.cfg.ID, to, m)
	if err != nil {
		n.fault("node %d: %v", n.cfg.ID, err)
		return
	}
	if to != n.cfg.ID {
		if err := n.tr.Send(to, n.frame[:], payload); err != nil {
			n.fault("node %d sending %v to node %d: %v", n.cfg.ID, m, to, err)
		}
		return
	}
	_, _, back, err := protocolapi.DecodeFrame(n.p.Codec, n.frame[:], payload)
	if err != nil {
		n.violate("node %d: its message to itself does not decode: %v", n.cfg.ID, err)
		return
	}
	if len(n.local) >= MaxLocal {
		n.violate("node %d: more than %d messages to itself waiting", n.cfg.ID, MaxLocal)
		return
	}
	n.local = append(n.local, protocolapi.Event{Kind: protocolapi.EventMessage, From: to, Msg: back})
}

func (e *nodeEnv) After(delay int64, token uint64) {
	n := e.node()
	time.AfterFunc(time.Duration(max(delay, 0)), func() {
		select {
		case n.inbox <- protocolapi.Event{Kind: protocolapi.EventTimer, Token: token}:
		case <-n.stop:
		}
	})
}

// The verbs and the SSD's I/O: a job for the poster of the verb's peer
// (or of the SSD).
func (e *nodeEnv) Read(dst []byte, r transport.Region, off uint64, token uint64) {
	e.node().post(int(r.Node), job{kind: jobRead, r: r, off: off, buf: dst, token: token})
}

func (e *nodeEnv) Write(r transport.Region, off uint64, src []byte, token uint64) {
	e.node().post(int(r.Node), job{kind: jobWrite, r: r, off: off, buf: src, token: token})
}

func (e *nodeEnv) CompareAndSwap(r transport.Region, off, old, new uint64, token uint64) {
	e.node().post(int(r.Node), job{kind: jobCAS, r: r, off: off, a: old, b: new, token: token})
}

func (e *nodeEnv) FetchAndAdd(r transport.Region, off, delta uint64, token uint64) {
	e.node().post(int(r.Node), job{kind: jobFAA, r: r, off: off, a: delta, token: token})
}

func (e *nodeEnv) ReadPage(slot uint64, buf []byte, token uint64) {
	e.node().postPage(job{kind: jobReadPage, off: slot, buf: buf, token: token})
}

func (e *nodeEnv) WritePage(slot uint64, buf []byte, token uint64) {
	e.node().postPage(job{kind: jobWritePage, off: slot, buf: buf, token: token})
}

// Busy: on a process, work costs what it costs.
func (e *nodeEnv) Busy(int64) {}

func (e *nodeEnv) Complete(op protocolapi.Op, res protocolapi.Result) { e.node().complete(op, res) }

// The jobs of a poster.
const (
	jobRead = iota + 1
	jobWrite
	jobCAS
	jobFAA
	jobReadPage
	jobWritePage
)

// job is one verb or page I/O (no closure: posting allocates nothing).
type job struct {
	kind  uint8
	r     transport.Region
	off   uint64 // the verb's offset, or the page's slot
	a, b  uint64 // CAS: old, new; FAA: delta
	buf   []byte
	token uint64
}

// poster runs one peer's verbs (or the SSD's I/O) one at a time, in the
// order the role posted them.
type poster struct {
	jobs chan job
}

// post queues j on the poster of node peer (started at its first job).
func (n *Node) post(peer int, j job) {
	if peer >= n.lay.Nodes {
		n.violate("node %d posts a verb to node %d, outside the deployment of %d nodes", n.cfg.ID, peer, n.lay.Nodes)
		return
	}
	n.enqueue(peer, j)
}

func (n *Node) postPage(j job) {
	if n.store == nil {
		n.violate("node %d does I/O on SSD slot %d, but its layout gives it no SSD", n.cfg.ID, j.off)
		return
	}
	n.enqueue(len(n.posters)-1, j)
}

func (n *Node) enqueue(i int, j job) {
	if n.inflight >= MaxVerbs {
		n.violate("node %d: more than %d verbs and page I/Os in flight", n.cfg.ID, MaxVerbs)
		return
	}
	p := n.posters[i]
	if p == nil {
		// Its queue holds every job the node may have in flight: a post
		// never waits.
		p = &poster{jobs: make(chan job, MaxVerbs)}
		n.posters[i] = p
		n.postWG.Add(1)
		go n.runPoster(p)
	}
	n.inflight++
	p.jobs <- j
}

// runPoster runs p's jobs and hands their completions to the loop (done
// has room for every job in flight: it never waits either).
func (n *Node) runPoster(p *poster) {
	defer n.postWG.Done()
	for j := range p.jobs {
		ev := protocolapi.Event{Kind: protocolapi.EventVerb, Token: j.token}
		switch j.kind {
		case jobRead:
			ev.Err = n.tr.Read(j.buf, j.r, j.off)
		case jobWrite:
			ev.Err = n.tr.Write(j.r, j.off, j.buf)
		case jobCAS:
			ev.Prev, ev.Err = n.tr.CompareAndSwap(j.r, j.off, j.a, j.b)
		case jobFAA:
			ev.Prev, ev.Err = n.tr.FetchAndAdd(j.r, j.off, j.a)
		case jobReadPage:
			ev.Kind, ev.Err = protocolapi.EventPage, n.store.ReadPage(j.off, j.buf)
		case jobWritePage:
			ev.Kind, ev.Err = protocolapi.EventPage, n.store.WritePage(j.off, j.buf)
		default:
			ev.Err = fmt.Errorf("procrunner: job kind %d", j.kind)
		}
		n.done <- ev
	}
}
