package gam

import (
	"fmt"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// The directory's states of a key.
const (
	dirUnshared uint8 = iota // no cache holds it; memory is the value
	dirShared                // sharers hold read-only copies equal to memory
	dirDirty                 // owner holds the only copy; memory may be stale
)

var dirNames = []string{"unshared", "shared", "dirty"}

// dreq is a request queued at a key's home: a cache's ReadShared,
// ReadExclusive or Evict, or an access of the home's own workers (local).
type dreq struct {
	from  protocol.NodeID
	t     uint8  // ReadShared, ReadExclusive, Evict; for local: by r's kind
	value uint64 // Evict
	local bool
	r     req
}

// shared reports whether rq wants a read-only view of the key.
func (rq dreq) shared() bool {
	if rq.local {
		return rq.r.op.Kind == protocolapi.OpRead
	}
	return rq.t == ReadShared
}

// entry is the home's directory entry and memory of one key.
type entry struct {
	state   uint8
	owner   protocol.NodeID
	sharers protocol.NodeSet // a superset of the caches holding it shared
	mem     uint64
	// The transaction in flight (busy): cur is being served; acks are
	// the InvalidateAcks still due; fetch: the owner's WriteBack is due.
	busy  bool
	cur   dreq
	acks  int
	fetch bool
	queue []dreq
}

// directory is a node's part as the home of the keys striped to it: it
// serves one transaction a key at a time (a blocking directory) and
// queues the rest.
type directory struct {
	n       *node
	entries []entry // key k at k / stripes.count
}

func (d *directory) entry(key uint64) *entry { return &d.entries[key/uint64(d.n.homes.count)] }

// local takes an access of this node's workers to a key it homes: served
// on the home's memory, behind the key's queued requests.
func (d *directory) local(r req) {
	e := d.entry(r.op.Key)
	e.queue = append(e.queue, dreq{from: d.n.id, local: true, r: r})
	d.serve(r.op.Key, e)
}

// receive handles a message to the home.
func (d *directory) receive(from protocol.NodeID, m Msg) error {
	e := d.entry(m.Key)
	switch m.T {
	case ReadShared, ReadExclusive, Evict:
		e.queue = append(e.queue, dreq{from: from, t: m.T, value: m.Value})
		return d.serve(m.Key, e)
	case InvalidateAck:
		if !e.busy || e.acks == 0 {
			return fmt.Errorf("gam: home of key %d: an InvalidateAck from node %d that no transaction waits for", m.Key, from)
		}
		if e.acks--; e.acks > 0 {
			return nil
		}
		e.state, e.sharers = dirUnshared, protocol.NodeSet{}
		d.complete(m.Key, e)
		return d.serve(m.Key, e)
	case WriteBack:
		if !e.busy || !e.fetch || from != e.owner {
			return fmt.Errorf("gam: home of key %d: a WriteBack from node %d that no transaction waits for", m.Key, from)
		}
		e.mem, e.fetch = m.Value, false
		e.sharers = protocol.NodeSet{}
		if e.cur.shared() {
			e.state = dirShared // the owner kept a copy (FetchShared)
			e.sharers.Add(e.owner)
		} else {
			e.state = dirUnshared
		}
		d.complete(m.Key, e)
		return d.serve(m.Key, e)
	}
	return fmt.Errorf("gam: home of key %d: %v is not for a home", m.Key, m)
}

// serve starts the queued requests, one transaction at a time.
func (d *directory) serve(key uint64, e *entry) error {
	for !e.busy && len(e.queue) > 0 {
		rq := e.queue[0]
		e.queue = e.queue[1:]
		if err := d.start(key, e, rq); err != nil {
			return err
		}
	}
	return nil
}

// start begins rq's transaction; it completes at once when no cache must
// act first.
func (d *directory) start(key uint64, e *entry, rq dreq) error {
	send := d.n.send
	if rq.t == Evict {
		if e.state == dirDirty && e.owner == rq.from {
			if !d.n.mut.loseWriteBack {
				e.mem = rq.value
			}
			e.state = dirUnshared
		}
		// Otherwise a fetch took the line already, and its WriteBack
		// brought the same value. The owner frees the frame either way.
		send(rq.from, Msg{T: EvictAck, Key: key})
		return nil
	}
	e.cur = rq
	if e.state == dirDirty {
		if e.owner == rq.from {
			return fmt.Errorf("gam: home of key %d: %v from its owner, node %d", key, typeNames[rq.t-1], rq.from)
		}
		e.busy, e.fetch = true, true
		d.n.count.fetches++
		if rq.shared() {
			send(e.owner, Msg{T: FetchShared, Key: key})
		} else {
			send(e.owner, Msg{T: FetchInvalidate, Key: key})
		}
		return nil
	}
	if !rq.shared() && e.state == dirShared {
		if d.n.mut.grantWithoutInvalidation {
			d.complete(key, e) // the sharers keep their copies
			return nil
		}
		e.sharers.Each(func(s protocol.NodeID) {
			if s != rq.from {
				e.acks++
				d.n.count.invalidations++
				send(s, Msg{T: Invalidate, Key: key})
			}
		})
		if e.acks > 0 {
			e.busy = true
			return nil
		}
	}
	d.complete(key, e)
	return nil
}

// complete ends the transaction of e.cur: a cache gets its grant with
// memory's value; a local access reads or writes memory.
func (d *directory) complete(key uint64, e *entry) {
	e.busy = false
	rq := e.cur
	e.cur = dreq{}
	switch {
	case rq.local && rq.shared():
		d.n.finish(rq.r, e.mem)
	case rq.local:
		// No cache holds it now (invalidated or fetched).
		e.state, e.sharers = dirUnshared, protocol.NodeSet{}
		old := e.mem
		e.mem = rq.r.op.Value
		d.n.cl.wrote(key, e.mem)
		d.n.finish(rq.r, old)
	case rq.shared():
		d.n.count.grants++
		e.state = dirShared
		e.sharers.Add(rq.from)
		d.n.send(rq.from, Msg{T: Grant, Key: key, Shared: true, Value: e.mem})
	default:
		d.n.count.grants++
		e.state, e.owner, e.sharers = dirDirty, rq.from, protocol.NodeSet{}
		d.n.send(rq.from, Msg{T: Grant, Key: key, Value: e.mem})
	}
}

// describe lists the keys with a transaction in flight or requests queued.
func (d *directory) describe() string {
	var b strings.Builder
	for i := range d.entries {
		e := &d.entries[i]
		if e.busy || len(e.queue) > 0 {
			key := uint64(i)*uint64(d.n.homes.count) + uint64(int(d.n.id)-d.n.homes.first)
			fmt.Fprintf(&b, " home of key %d: %s, busy %v for node %d (acks due %d, write-back due %v), %d queued",
				key, dirNames[e.state], e.busy, e.cur.from, e.acks, e.fetch, len(e.queue))
		}
	}
	return b.String()
}
