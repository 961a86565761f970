package simrunner

import (
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// LeftNode is a node that left an elastic run.
type LeftNode struct {
	Node        int   `json:"node"`
	At          int64 `json:"t_ns"`         // simulated time it was gone
	PagesHanded int   `json:"pages_handed"` // what it held when its workers stopped
}

// Elastic is elastic membership (ScaleStore Fig. 10's schedule) for a
// cluster whose nodes can leave (protocolapi.Leaver): Count nodes from
// First on work in turn, the first from the start, the others joining one
// by one and then leaving in reverse order, at equal steps of the Ops
// operations (with 3: joins at 1/5 and 2/5, leaves at 3/5 and 4/5). Window
// is the workers' Window; a leaving node's workers finish their access
// and stop, and its leave coroutine (SpawnLeaves) then asks it to leave.
type Elastic struct {
	Work         *Workers
	Cluster      protocolapi.Leaver
	Fail         func(format string, args ...any)
	Ops          int
	First, Count int
	// Left are the nodes that left, in order.
	Left []LeftNode
}

// Window is when node works, in operations started: from its join to its
// leave (0 and Ops for a node outside the schedule).
func (e *Elastic) Window(node protocol.NodeID) (join, leave int) {
	j := int(node) - e.First
	if j < 0 || j >= e.Count {
		return 0, e.Ops
	}
	steps := 2*e.Count - 1
	join = e.Ops * j / steps
	leave = e.Ops
	if j > 0 {
		leave = e.Ops * (steps - j) / steps
	}
	return join, leave
}

// SpawnLeave starts node's leave coroutine if the schedule has it leave
// (nil otherwise): it waits until the node's workers stopped and then
// asks the node to leave.
func (e *Elastic) SpawnLeave(node protocol.NodeID) *sim.Coroutine {
	if _, leave := e.Window(node); leave >= e.Ops {
		return nil
	}
	w := e.Work.W
	return w.Spawn(node, 0, func(co *sim.Coroutine) {
		for e.Work.Active(node) > 0 {
			co.Sleep(5_000)
		}
		held, err := e.Cluster.Leave(node, co)
		if err != nil {
			e.Fail("node %d leaving: %v", node, err)
			return
		}
		e.Left = append(e.Left, LeftNode{Node: int(node), At: w.Now(), PagesHanded: held})
	})
}
