package simrunner

import (
	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// CrashEvent is one node crash of a run.
type CrashEvent struct {
	Node    int   `json:"node"`
	At      int64 `json:"t_ns"`
	Restart int64 `json:"restart_ns"` // 0: still down at the end
	// OthersDown: nodes already down when it crashed (two nodes dead in
	// a row).
	OthersDown int `json:"others_down,omitempty"`
}

// Crashes crashes and restarts the nodes of a run whose cluster supports
// it (protocolapi.Crashable): the runner's part of a crash. Due, as the
// workers' BeforeOp, schedules the next crash once the workload reached
// its point (At). A crash kills the node in the world, has the cluster
// drop its memory (Crash), stops the node's workers and abandons their
// accesses (Abandon), draws the down time and lets the survivors recover
// (Recover); at its end the node is revived, the cluster restarts it
// (Restart) and Respawn starts new workers on it. The draws, in order:
// the victim (Due), the down time, then whatever Recover draws.
type Crashes struct {
	W       *sim.World
	Work    *Workers
	Cluster protocolapi.Crashable
	Fail    func(format string, args ...any)
	// Nodes is how many nodes the world has (ids 0..Nodes-1); any may crash.
	Nodes int
	// At is the operation counts (Workers.Started) at which the next
	// crashes are due (CrashPoints).
	At []int
	// DownMin and DownSpan bound the down time: DownMin plus a draw below
	// DownSpan, plus what Recover adds.
	DownMin, DownSpan int64
	// Respawn starts new workers on a restarted node.
	Respawn func(node protocol.NodeID)

	// Events are the crashes so far; Unknown the accesses they cut that
	// may have taken effect, as writes without a return (the history gets
	// them with a return after everything else).
	Events  []CrashEvent
	Unknown []checker.Op
}

// CrashPoints spreads n crashes evenly over ops operations.
func CrashPoints(ops, n int) []int {
	var at []int
	for i := 1; i <= n; i++ {
		at = append(at, ops*i/(n+1))
	}
	return at
}

// Due schedules the next crash, of a random node, once the workload
// reached its point (a node still down is spared).
func (c *Crashes) Due() {
	if len(c.At) == 0 || c.Work.Started < c.At[0] {
		return
	}
	c.At = c.At[1:]
	victim := protocol.NodeID(c.W.Intn(int64(c.Nodes)))
	if c.W.Dead(victim) {
		return // still down from the last crash
	}
	c.Schedule(victim)
}

// Schedule crashes node x now, as the next event (a protocol may strike a
// node at a moment of its choosing: in a write-through, a second crash).
func (c *Crashes) Schedule(x protocol.NodeID) {
	c.W.After(x, 0, func() { c.crash(x) })
}

func (c *Crashes) crash(x protocol.NodeID) {
	w := c.W
	if w.Dead(x) || !c.Cluster.MayCrash(x) {
		return
	}
	ev := CrashEvent{Node: int(x), At: w.Now()}
	for i := range c.Nodes {
		if w.Dead(protocol.NodeID(i)) {
			ev.OthersDown++
		}
	}
	w.Kill(x)
	c.Cluster.Crash(x)
	c.Events = append(c.Events, ev)
	c.Work.StopNode(x, c.Abandon)
	down := c.DownMin + w.Intn(c.DownSpan)
	down += c.Cluster.Recover(x)
	w.After(x, down, func() { c.restart(x) })
}

func (c *Crashes) restart(x protocol.NodeID) {
	c.W.Revive(x)
	if err := c.Cluster.Restart(x); err != nil {
		c.Fail("restarting node %d: %v", x, err)
		return
	}
	for i := len(c.Events) - 1; i >= 0; i-- {
		if c.Events[i].Node == int(x) {
			c.Events[i].Restart = c.W.Now()
			break
		}
	}
	c.Respawn(x)
}

// Abandon cuts client's access under way, if it has one: the cluster says
// whether it may have taken effect, and then it is kept as a blind write
// of unknown outcome. (As a blind write: one that never took effect is
// linearized at the end, where a read-modify-write would need the key to
// still hold what it read. Weaker, never wrong.) The cluster's recovery
// calls it for the accesses it gives up, when it gives them up: a stalled
// worker may learn of it only after the key was read.
func (c *Crashes) Abandon(client int) {
	op, ok := c.Work.Abandon(client)
	if !ok {
		return
	}
	var written uint64
	if op.Kind != checker.KindRead {
		written = op.Value
	}
	if c.Cluster.Abandoned(client, written) {
		op.Kind, op.Read = checker.KindWrite, 0
		c.Unknown = append(c.Unknown, op)
	}
}
