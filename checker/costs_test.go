package checker

import (
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

// A shared conflict (Fig. 3): Request, Grant with an invalidation set of two
// sharers, an Invalidate and an Ack per sharer is within every bound; a
// third Invalidate is the case that grew.
func TestCostsSharedConflict(t *testing.T) {
	var c Costs
	send := func(ty protocol.Type, n int) {
		for range n {
			c.Sent(&protocol.Message{Type: ty})
		}
	}
	var set protocol.NodeSet
	set.Add(1)
	set.Add(2)
	set.Add(3) // the requester itself: never invalidated over the network
	c.Accepted(protocol.Decision{Action: protocol.ActGrantFromSSD, Requester: 3, Mode: protocol.ModeExclusive, Set: set})
	send(protocol.TRequest, 1)
	send(protocol.TGrant, 1)
	send(protocol.TInvalidate, 2)
	send(protocol.TInvalidateAck, 2)
	if bad := c.Check(); len(bad) != 0 {
		t.Fatalf("the paper's case flagged: %v", bad)
	}
	send(protocol.TInvalidate, 1)
	bad := c.Check()
	if len(bad) != 1 || !strings.Contains(bad[0], "Invalidate: 3 messages, at most 2") {
		t.Fatalf("a third invalidation: %v", bad)
	}
}

// An exclusive conflict (Fig. 4) allows one Transfer per forward; a
// transfer nobody was forwarded to, a reply without a request, a second
// answer to one request and a parked decision that is not yet an answer are
// each caught.
func TestCostsExclusiveConflict(t *testing.T) {
	var c Costs
	c.Accepted(protocol.Decision{Action: protocol.ActParked})
	c.Accepted(protocol.Decision{Action: protocol.ActForward, Requester: 1, Target: 2, Mode: protocol.ModeExclusive})
	for _, ty := range []protocol.Type{protocol.TRequest, protocol.TForward, protocol.TTransfer, protocol.TTransferReply} {
		c.Sent(&protocol.Message{Type: ty})
	}
	if bad := c.Check(); len(bad) != 0 {
		t.Fatalf("the paper's case flagged: %v", bad)
	}
	for _, ty := range []protocol.Type{protocol.TTransfer, protocol.TTransferReply, protocol.TGrant, protocol.TEvictReply} {
		c.Sent(&protocol.Message{Type: ty})
	}
	got := strings.Join(c.Check(), "\n")
	for _, want := range []string{"Transfer: 2 messages, at most 1", "Grant+Forward: 2 messages, at most 1", "EvictReply: 1 messages, at most 0"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if c.Messages(protocol.TTransfer) != 2 {
		t.Fatalf("Messages(Transfer) = %d", c.Messages(protocol.TTransfer))
	}
}
