package msi

import (
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
)

// The directory's states of a key.
const (
	dirI uint8 = iota // no cache holds it; memory is the value
	dirS              // sharers hold read-only copies equal to memory
	dirM              // owner holds the only copy; memory may be stale
)

// request is a request queued at the home.
type request struct {
	from  protocol.NodeID
	t     uint8  // GetS, GetM or PutM
	value uint64 // PutM
}

// entry is the home's directory entry of one key.
type entry struct {
	state   uint8
	owner   protocol.NodeID
	sharers protocol.NodeSet // a superset of the caches in S: a sharer that evicts says nothing
	mem     uint64
	// The transaction in flight (busy): requester wants want; acks are
	// the invalidation acks still due; fetch: the owner's WriteBack is due.
	busy      bool
	requester protocol.NodeID
	want      uint8
	acks      int
	fetch     bool
	queue     []request
}

// home is the directory side of a node: the entries of the keys it homes,
// key k at entries[k / nodes].
type home struct {
	n       *node
	entries []entry
}

func (h *home) entry(key uint64) *entry { return &h.entries[key/uint64(h.n.nodes)] }

// receive handles a message to the home.
func (h *home) receive(from protocol.NodeID, m Msg) error {
	e := h.entry(m.Key)
	switch m.T {
	case GetS, GetM, PutM:
		e.queue = append(e.queue, request{from: from, t: m.T, value: m.Value})
		return h.serve(m.Key, e)
	case InvAck:
		if !e.busy || e.acks == 0 {
			return fmt.Errorf("home of key %d: an InvAck from node %d that no transaction waits for", m.Key, from)
		}
		if e.acks--; e.acks == 0 {
			h.grant(m.Key, e)
			return h.serve(m.Key, e)
		}
		return nil
	case WriteBack:
		if !e.busy || !e.fetch || from != e.owner {
			return fmt.Errorf("home of key %d: a WriteBack from node %d that no transaction waits for", m.Key, from)
		}
		e.mem, e.fetch = m.Value, false
		if e.want == GetS {
			// The owner kept a shared copy (Fetch Keep).
			e.state = dirS
			e.sharers = protocol.NodeSet{}
			e.sharers.Add(e.owner)
		}
		h.grant(m.Key, e)
		return h.serve(m.Key, e)
	}
	return fmt.Errorf("home of key %d: %v is not for a home", m.Key, m)
}

// serve starts the queued requests, one transaction at a time (a blocking
// directory).
func (h *home) serve(key uint64, e *entry) error {
	for !e.busy && len(e.queue) > 0 {
		rq := e.queue[0]
		e.queue = e.queue[1:]
		if err := h.start(key, e, rq); err != nil {
			return err
		}
	}
	return nil
}

// start begins one request's transaction; it grants at once when no
// other cache must act first.
func (h *home) start(key uint64, e *entry, rq request) error {
	env := h.n.env
	switch rq.t {
	case PutM:
		if e.state == dirM && e.owner == rq.from {
			if !h.n.mutant.forgetWriteBack {
				e.mem = rq.value
			}
			e.state = dirI
		}
		// Otherwise a Fetch took the line already: its WriteBack brought
		// the same value. The owner drops the line on the ack either way.
		env.Send(rq.from, Msg{T: PutAck, Key: key})
		return nil
	case GetS:
		e.requester, e.want = rq.from, GetS
		if e.state == dirM {
			if e.owner == rq.from {
				return fmt.Errorf("home of key %d: GetS from its owner, node %d", key, rq.from)
			}
			e.busy, e.fetch = true, true
			h.n.count.fetches++
			env.Send(e.owner, Msg{T: Fetch, Key: key, Keep: true})
			return nil
		}
		h.grant(key, e)
		return nil
	case GetM:
		e.requester, e.want = rq.from, GetM
		switch e.state {
		case dirM:
			if e.owner == rq.from {
				return fmt.Errorf("home of key %d: GetM from its owner, node %d", key, rq.from)
			}
			e.busy, e.fetch = true, true
			h.n.count.fetches++
			env.Send(e.owner, Msg{T: Fetch, Key: key})
			return nil
		case dirS:
			if h.n.mutant.grantWithoutInvalidation {
				h.grant(key, e) // the sharers keep their copies
				return nil
			}
			e.sharers.Each(func(s protocol.NodeID) {
				if s != rq.from {
					e.acks++
					h.n.count.invalidations++
					env.Send(s, Msg{T: Inv, Key: key})
				}
			})
			if e.acks > 0 {
				e.busy = true
				return nil
			}
		}
		h.grant(key, e)
		return nil
	}
	return fmt.Errorf("home of key %d: cannot queue %v", key, rq.t)
}

// grant ends the transaction: the requester gets the line in the mode it
// wanted, with memory's value.
func (h *home) grant(key uint64, e *entry) {
	e.busy = false
	h.n.count.grants++
	mode := ModeS
	if e.want == GetM {
		mode = ModeM
		e.state, e.owner, e.sharers = dirM, e.requester, protocol.NodeSet{}
	} else {
		e.state = dirS
		e.sharers.Add(e.requester)
	}
	h.n.env.Send(e.requester, Msg{T: Data, Key: key, Mode: mode, Value: e.mem})
}
