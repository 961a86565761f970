package scenarios

import (
	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// Node crashes in the simulator (SimConfig.Crashes; docs/protocol.md,
// "Node crashes"). Writes are written through to their directory before
// they are acknowledged (actors.Node.Persist). A crash kills one node: its
// workers stop where they are, its cache and directory are gone, its SSD
// stays. The coordinator (the membership service) then changes the view:
// every message in flight is dropped, the survivors abort what they had
// under way and give up their copies of the dead node's pages, and the
// survivors' directories rebuild their metadata from the copies still held.
// After a down time the node restarts with an empty cache and its directory
// restored from its SSD (every page at home), the view changes again (the
// requests survivors sent it while it was down were lost), and new workers
// start on it.

// crashDownMin and crashDownSpan bound how long a crashed node stays down
// (simulated ns): 20 to 220 us, many round trips.
const (
	crashDownMin  = 20_000
	crashDownSpan = 200_000
)

// inflight is what a worker's operation under way (simrunner.Workers
// has it) is doing, for the history of a crash: an operation that wrote
// (or began to) when its node crashed, or whose write-through found its
// directory gone, has an unknown outcome.
type inflight struct {
	pid     protocol.PID
	writing bool
	// persisting: a B-tree page whose write-through is under way (its
	// directory may have written it when the writer crashed).
	persisting    protocol.PID
	hasPersisting bool
}

// crashPoints are the operation counts at which the run's crashes happen,
// spread evenly over the workload.
func (r *simRun) crashPoints() []int {
	var at []int
	for i := 1; i <= r.cfg.Crashes; i++ {
		at = append(at, r.cfg.Ops*i/(r.cfg.Crashes+1))
	}
	return at
}

// maybeCrash schedules the next crash once the workload reached its point.
func (r *simRun) maybeCrash() {
	if len(r.crashAt) == 0 || r.work.Started < r.crashAt[0] {
		return
	}
	r.crashAt = r.crashAt[1:]
	w := r.c.w
	victim := protocol.NodeID(w.Intn(int64(len(r.c.nodes))))
	if w.Dead(victim) {
		return // still down from the last crash
	}
	w.After(victim, 0, func() { r.crash(victim) })
}

// crash kills node x and changes the view.
func (r *simRun) crash(x protocol.NodeID) {
	c, w := r.c, r.c.w
	if w.Dead(x) || !r.crashAllowed(x) {
		return
	}
	ev := CrashEvent{Node: int(x), At: w.Now()}
	for i := range c.nodes {
		if w.Dead(protocol.NodeID(i)) {
			ev.OthersDown++
		}
	}
	w.Kill(x)
	c.nodes[x].Crash()
	r.crashes = append(r.crashes, ev)
	for _, client := range r.clientsOf[x] {
		r.abandon(client)
		r.cos[client].Stop()
	}
	downFor := crashDownMin + w.Intn(crashDownSpan)
	if c.rs != nil {
		r.replicaCrash(x)
		// Down long enough that the next crash may find it still down
		// (two nodes dead in a row once re-replication is done).
		downFor += w.Intn(replicaDownSpan)
	} else {
		var down protocol.NodeSet
		down.Add(x)
		c.fence(down, func(w *bufmgr.Worker) { r.abandon(w.ID) })
	}
	w.After(x, downFor, func() { r.restart(x) })
}

// replicaDownSpan is how much longer a crashed node may stay down with
// replicas (simulated ns).
const replicaDownSpan = 10_000_000

// abandon records the operation client had under way as one of unknown
// outcome if it had begun to write; a read that did not return never
// happened. It is called when the crash happens (for the crashed node's
// workers and those whose write-through went to it), not when the worker
// next runs: a stalled worker may learn of it after its page was read.
func (r *simRun) abandon(client int) {
	op, ok := r.work.Abandon(client)
	if !ok {
		return
	}
	in := r.inflight[client]
	if in.writing {
		// As a blind write: one that never took effect is linearized at
		// the end, where a read-modify-write would need the page to
		// still hold what it read. (Weaker, never wrong: it may have
		// happened without its read's constraint being checked.)
		op.Kind, op.Read = checker.KindWrite, 0
		r.unknown = append(r.unknown, op)
		if r.tree == nil {
			r.c.inv.Maybe(in.pid, op.Value)
		}
	}
	if in.hasPersisting {
		in.hasPersisting = false
		r.c.inv.ForgetContent(in.persisting)
	}
}

// restart brings node x back with an empty cache and its directory
// restored from its SSD, changes the view, and starts new workers on it.
func (r *simRun) restart(x protocol.NodeID) {
	c, w := r.c, r.c.w
	old := c.nodes[x]
	n := c.makeNode(x, c.stores[x])
	if err := n.Directory().Restore(old.Directory().Allocated()); err != nil {
		c.inv.Fail("restarting node %d: %v", x, err)
		return
	}
	c.nodes[x] = n
	w.Revive(x)
	n.Start()
	if c.stopped {
		n.Stop() // after the workload: its timers lapse, so the cluster comes to rest
	}
	if c.rs != nil {
		r.replicaRestart(x)
		r.restarted(x)
		r.spawnWorkers(int(x), n)
		return
	}
	for _, s := range c.nodes {
		for i := range s.Cache().Frames() {
			f := s.Cache().Frame(i)
			if f.PID.Dir() == x && f.Mode != protocol.ModeNone && s.Cache().Lookup(f.PID) == f && s != n {
				c.inv.Fail("node %d restarts, but node %d still holds its page %v (%v)", x, s.ID(), f.PID, f.Mode)
			}
		}
	}
	c.fence(protocol.NodeSet{}, nil)
	r.restarted(x)
	r.spawnWorkers(int(x), n)
}

// restarted records the restart of x in its crash event (the latest of
// x's: with replicas, another node may have crashed since).
func (r *simRun) restarted(x protocol.NodeID) {
	for i := len(r.crashes) - 1; i >= 0; i-- {
		if r.crashes[i].Node == int(x) {
			r.crashes[i].Restart = r.c.w.Now()
			return
		}
	}
}

// fence is the view change: every message in flight is dropped, every
// live node aborts what it had under way (giving up its copies of pages
// whose directory is in down), and every live directory rebuilds its
// metadata from the copies the live nodes still hold.
func (c *cluster) fence(down protocol.NodeSet, failed func(w *bufmgr.Worker)) {
	if keep := mutation.Point(mutation.CrashKeepMessages, c.fire(1)); keep == nil || !keep() {
		c.w.DropMessages()
	}
	for _, n := range c.nodes {
		if !n.Dead() {
			n.Fence(down, failed)
		}
	}
	c.inv.ResetOrder()
	unfenced := mutation.Point(mutation.ReplicaPromoteUnfenced, c.fire(1))
	for _, d := range c.nodes {
		if d.Dead() {
			continue
		}
		for _, dir := range c.hostedDirs(d) {
			if c.rs != nil && dir.Self() != d.ID() && c.rs.promoted.Has(dir.Self()) && unfenced != nil && unfenced() {
				continue // mutation: promoted without the old view's holdings
			}
			c.rebuild(dir)
		}
	}
	if c.rs != nil {
		for _, n := range c.nodes {
			if !n.Dead() {
				n.HoldOrphans()
			}
		}
	}
}

// hostedDirs are the directories node d serves: its own, and with
// replicas those it serves as a promoted backup, in id order.
func (c *cluster) hostedDirs(d *actors.Node) []*protocol.Directory {
	if c.rs == nil {
		return []*protocol.Directory{d.Directory()}
	}
	var out []*protocol.Directory
	for i := range c.nodes {
		if hd := d.Hosted(protocol.NodeID(i)); hd != nil && (i == int(d.ID()) || c.rs.primary[i] == d.ID()) {
			out = append(out, hd)
		}
	}
	return out
}

// rebuild rebuilds every page's metadata of dir from the copies the live
// nodes hold.
func (c *cluster) rebuild(dir *protocol.Directory) {
	for slot := range dir.Allocated() {
		pid := protocol.MakePID(dir.Self(), slot)
		var holders protocol.NodeSet
		mode := protocol.ModeNone
		for _, n := range c.nodes {
			if n.Dead() {
				continue
			}
			m := n.Holding(pid)
			if m == protocol.ModeNone {
				continue
			}
			if mode != protocol.ModeNone && (m != mode || m == protocol.ModeExclusive) {
				c.inv.Fail("view change: page %v held %v by node %d beside %v holders %v", pid, m, n.ID(), mode, holders)
			}
			mode = m
			holders.Add(n.ID())
		}
		epoch, err := dir.Rebuild(pid, mode, holders)
		if err != nil {
			c.inv.Fail("view change: %v", err)
			continue
		}
		holders.Each(func(h protocol.NodeID) { c.nodes[h].Rebuilt(pid, epoch) })
	}
}

// spawnWorkers starts the workers of node k (at the start, and after a
// restart, as new clients: the history's clients never overlap).
func (r *simRun) spawnWorkers(k int, node *actors.Node) []*sim.Coroutine {
	var cos []*sim.Coroutine
	for slot := range r.cfg.Workers {
		id := protocolapi.Worker{Node: node.ID(), Slot: slot, Client: len(r.inflight)}
		r.inflight = append(r.inflight, &inflight{})
		r.clientsOf[k] = append(r.clientsOf[k], id.Client)
		var co *sim.Coroutine
		if r.tree != nil {
			co = r.work.SpawnBody(id, func(co *sim.Coroutine) { r.treeWorker(co, node, id.Client) })
		} else {
			co = r.work.Spawn(id, func(co *sim.Coroutine) protocolapi.Accessor { return r.Worker(id, co) })
		}
		r.cos = append(r.cos, co)
		cos = append(cos, co)
	}
	return cos
}

// CrashEvent is one node crash of a run (SimConfig.Crashes).
type CrashEvent struct {
	Node    int   `json:"node"`
	At      int64 `json:"t_ns"`
	Restart int64 `json:"restart_ns"` // 0: still down at the end
	// OthersDown: nodes already down when it crashed (replicas 2: two
	// nodes dead in a row).
	OthersDown int `json:"others_down,omitempty"`
}
