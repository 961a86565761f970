package checker

import (
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
)

// Costs checks what the protocol's messages cost against its cases
// (docs/protocol.md, "Cases and message counts"; paper Fig. 3/4, §3.3): it
// counts the network messages of a run by type and the directory's
// decisions by what they entail, and at the end each message type must stay
// within what the decisions and the messages that cause it allow. A change
// that makes the protocol chattier (a second invalidation of a sharer, a
// transfer nobody was forwarded to, a reply to a request never sent) fails
// with the case that grew. The bounds are upper bounds, not equalities:
// messages between roles on one node never reach the network.
//
// Costs is not safe for concurrent use; the simulator is single-threaded.
type Costs struct {
	sent [256]uint64 // network messages by type

	decisions   uint64 // decisions that answer a request (all but parked)
	forwards    uint64 // ActForward decisions: at most one Transfer each
	invalidates uint64 // sharers named in decisions' invalidation sets
}

// Sent counts one network message.
func (c *Costs) Sent(m *protocol.Message) { c.sent[m.Type]++ }

// Accepted counts one directory decision (the actors.Observer method of
// the same name).
func (c *Costs) Accepted(d protocol.Decision) {
	if d.Action == protocol.ActParked || d.Action == protocol.ActBusy {
		return // a parked request is decided again later; Busy is counted as a message
	}
	c.decisions++
	if d.Action == protocol.ActForward {
		c.forwards++
	}
	s := d.Set
	s.Remove(d.Requester)
	c.invalidates += uint64(s.Len())
}

// Messages is the number of network messages of type t counted so far.
func (c *Costs) Messages(t protocol.Type) uint64 { return c.sent[t] }

// Check returns one line for every case whose messages exceed its bound.
func (c *Costs) Check() []string {
	var bad []string
	n := func(t protocol.Type) uint64 { return c.sent[t] }
	over := func(what string, got, bound uint64, why string) {
		if got > bound {
			bad = append(bad, fmt.Sprintf("cost: %s: %d messages, at most %d (%s)", what, got, bound, why))
		}
	}
	// Every request is decided once (a Busy answer makes the polling
	// baseline ask again).
	over("Request", n(protocol.TRequest), c.decisions+n(protocol.TBusy), "one per decision, plus one per Busy")
	// Every request gets one answer; a local requester's needs no message.
	over("Grant+Forward", n(protocol.TGrant)+n(protocol.TForward), c.decisions, "one answer per decision")
	over("Busy", n(protocol.TBusy), n(protocol.TRequest), "at most one answer per request")
	over("Transfer", n(protocol.TTransfer), c.forwards, "one per forward decision (Fig. 4)")
	over("TransferReply", n(protocol.TTransferReply), n(protocol.TTransfer), "one per transfer request")
	over("Invalidate", n(protocol.TInvalidate), c.invalidates, "one per sharer in the decisions' invalidation sets")
	over("InvalidateAck", n(protocol.TInvalidateAck), n(protocol.TInvalidate), "one per invalidation")
	over("Done", n(protocol.TDone), c.decisions, "one per decision (FIFO and polling baselines)")
	over("EvictReply", n(protocol.TEvictReply), n(protocol.TEvict), "one per eviction batch")
	over("EvictData", n(protocol.TEvictData), uint64(protocol.MaxEvictBatch)*n(protocol.TEvictReply), "one per page the directory pulled")
	over("AllocReply", n(protocol.TAllocReply), n(protocol.TAlloc), "one per allocation request")
	return bad
}
