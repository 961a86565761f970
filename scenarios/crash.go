package scenarios

import (
	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
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
// start on it. The runner's part (when, which node, the down time of
// simrunner.CrashDownMin plus up to CrashDownSpan ns, the workers and the
// accesses a crash cut) is simrunner.Crashes; simRun's hooks below are
// ScaleStore's part.

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

// MayCrash: a crash must leave every directory a live node with its
// current copies (crashAllowed).
func (r *simRun) MayCrash(x protocol.NodeID) bool { return r.crashAllowed(x) }

// Crash drops node x's cache and directory (its SSD stays).
func (r *simRun) Crash(x protocol.NodeID) { r.c.nodes[x].Crash() }

// Abandoned says whether client's access a crash cut may have taken
// effect (it began to write): then its page may hold the value it was
// writing. A B-tree page whose write-through was under way may hold
// either content.
func (r *simRun) Abandoned(client int, written uint64) bool {
	in := r.inflight[client]
	if in.writing && r.tree == nil {
		r.c.inv.Maybe(in.pid, written)
	}
	if in.hasPersisting {
		in.hasPersisting = false
		r.c.inv.ForgetContent(in.persisting)
	}
	return in.writing
}

// Recover is the view change after node x crashed (with replicas,
// replicaCrash; x then stays down up to replicaDownSpan longer, so that
// the next crash may find it still down: two nodes dead in a row once
// re-replication is done).
func (r *simRun) Recover(x protocol.NodeID) int64 {
	c := r.c
	if c.rs != nil {
		r.replicaCrash(x)
		return c.w.Intn(replicaDownSpan)
	}
	var down protocol.NodeSet
	down.Add(x)
	c.fence(down, func(w *bufmgr.Worker) { r.crash.Abandon(w.ID) })
	return 0
}

// replicaDownSpan is how much longer a crashed node may stay down with
// replicas (simulated ns).
const replicaDownSpan = 10_000_000

// Restart brings node x back with an empty cache and its directory
// restored from its SSD, and changes the view (the runner then starts new
// workers on it).
func (r *simRun) Restart(x protocol.NodeID) error {
	c := r.c
	old := c.nodes[x]
	n := c.makeNode(x, c.stores[x])
	if err := n.Directory().Restore(old.Directory().Allocated()); err != nil {
		return err
	}
	c.nodes[x] = n
	n.Start()
	if c.stopped {
		n.Stop() // after the workload: its timers lapse, so the cluster comes to rest
	}
	if c.rs != nil {
		r.replicaRestart(x)
		return nil
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
	return nil
}

var _ protocolapi.Crashable = (*simRun)(nil)

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
		var co *sim.Coroutine
		if r.tree != nil {
			co = r.work.SpawnTree(id, func(co *sim.Coroutine) protocolapi.Accessor { return r.Worker(id, co) })
		} else {
			co = r.work.Spawn(id, func(co *sim.Coroutine) protocolapi.Accessor { return r.Worker(id, co) })
		}
		cos = append(cos, co)
	}
	return cos
}

// CrashEvent is one node crash of a run (SimConfig.Crashes).
type CrashEvent = simrunner.CrashEvent
