package scenarios

import (
	"fmt"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// cluster is a simulated cluster: the world, its nodes and their SSDs, and
// the invariant checker watching them.
type cluster struct {
	// indeterminate: pages whose write-through failed (the B-tree under
	// crashes), until their exclusive latch is released.
	indeterminate map[protocol.PID]bool

	w      *sim.World
	nodes  []*actors.Node
	stores []*memfile.Store
	inv    *checker.Invariants
	// dirMsgs counts the messages the directories handled.
	dirMsgs uint64
	cc      clusterConfig
	arena   []byte // every node's page memory
	fire    func(p float64) func() bool
	// hints: each node's bufmgr.TransferHint, side by side, which the world
	// reads to hint the next message's frame (sim.Prefetcher)
	hints []bufmgr.TransferHint
	cross crossState // crossCheck's index of the pages
	// rs: where every directory's copies are (replicas 2), nil with one.
	rs *replicaState
	// stopped: the workload is over (stop); a node restarted later runs
	// no timers.
	stopped bool
}

// hintArena is the size of the frames' arena from which the world hints
// the next message's frame (sim.Prefetcher): a smaller cluster's frames
// stay in the CPU's caches, and finding the next event to hint costs more
// than the misses it would hide (the swarm's 4 nodes of 12 frames).
const hintArena = 4 << 20

type clusterConfig struct {
	seed       uint64
	nodes      int
	cachePages int
	ssdPages   uint64
	variant    protocol.Variant
	plan       sim.FaultPlan
	latency    sim.Latency
	mutate     string
	// observer, when set, is told everything the invariant checker is.
	observer actors.Observer
	// viewChanges: nodes may crash (actors.Config.ViewChanges)
	viewChanges bool
	// observedEnds: the bytes at each end of a page that the run's checks
	// read, both ends always (0: whole pages). Dropped frames are poisoned
	// at the head only (bufmgr.Cache.PoisonHead), and a page sent carries
	// only its two ends (sim.World.PayloadEnds).
	observedEnds int
	// replicas: copies of every directory's pages (docs/replication.md)
	replicas int
	// provider overrides (0: defaults)
	freeTarget       int
	providerInterval int64
}

func newCluster(cc clusterConfig) (*cluster, error) {
	if cc.nodes < 1 || cc.nodes > protocol.MaxNodes {
		return nil, fmt.Errorf("--nodes %d: a cluster has 1 to %d nodes", cc.nodes, protocol.MaxNodes)
	}
	if cc.cachePages < 2 {
		return nil, fmt.Errorf("--cache-pages %d: need at least 2 frames per node", cc.cachePages)
	}
	w := sim.New(cc.seed, cc.nodes, cc.latency, cc.plan)
	c := &cluster{w: w}
	c.inv = checker.NewInvariants(cc.variant == protocol.Chaining, w.Now)
	c.setTrace(nil)
	// A frame that does not decode and a panic inside a node are
	// violations of the seed, reported with it, never a crash of the run.
	w.OnFault = func(_ int64, _ protocol.NodeID, err error) { c.inv.Fail("%v", err) }
	fire := func(p float64) func() bool { return func() bool { return w.Chance(p) } }
	if cc.mutate != "" {
		if drop := mutation.Point(mutation.EncodeDropsPred, fire(1)); drop != nil {
			w.MutateFrame = func(frame []byte) {
				if drop() {
					clear(frame[28:32]) // Pred's bytes (protocol.Encode's layout)
				}
			}
		}
	}
	// One arena holds every node's frames, in transparent huge pages where
	// the kernel offers them: each frame is poisoned when its cache is made,
	// and at 256 nodes faulting those pages in 4 KiB at a time cost more
	// than the whole workload.
	w.PayloadEnds = cc.observedEnds
	frameBytes := cc.cachePages * protocol.PageSize
	c.cc, c.fire = cc, fire
	c.arena = make([]byte, cc.nodes*frameBytes)
	c.hints = make([]bufmgr.TransferHint, cc.nodes)
	actors.AdviseHuge(c.arena)
	if cc.replicas > 1 {
		c.rs = newReplicaState(cc.nodes)
	}
	for i := range cc.nodes {
		var store *memfile.Store
		if c.rs != nil {
			store = c.rs.ownStore(w, cc.ssdPages)
		} else {
			store = memfile.New(cc.ssdPages, w)
		}
		c.stores = append(c.stores, store)
		n := c.makeNode(protocol.NodeID(i), store)
		c.nodes = append(c.nodes, n)
	}
	if c.rs != nil {
		c.setupReplicas()
	}
	return c, nil
}

// makeNode makes node id over its SSD and attaches it to the world (at the
// start, and again when a crashed node restarts).
func (c *cluster) makeNode(id protocol.NodeID, store *memfile.Store) *actors.Node {
	cc, w, fire := c.cc, c.w, c.fire
	w.PayloadEnds = cc.observedEnds
	frameBytes := cc.cachePages * protocol.PageSize
	i := int(id)
	var env actors.Env = &sim.NodeEnv{W: w, ID: id, Store: store}
	if c.rs != nil {
		env = c.io(id, id)
	}
	cfg := actors.Config{
		ID: id, Variant: cc.variant, CacheFrames: cc.cachePages, SSDPages: cc.ssdPages,
		FreeTarget: cc.freeTarget, ProviderInterval: cc.providerInterval, ViewChanges: cc.viewChanges,
	}
	if cc.plan.Pressure && cfg.FreeTarget == 0 {
		cfg.FreeTarget = max(2, cc.cachePages/4)
	}
	if cc.mutate != "" {
		cfg.Mutations.SkipInvalidation = mutation.Point(mutation.SkipInvalidation, fire(0.5))
		cfg.Mutations.DropDirty = mutation.Point(mutation.DropDirty, fire(0.5))
		cfg.Mutations.NoWriteThrough = mutation.Point(mutation.CrashNoWriteThrough, fire(0.5))
		cfg.Mutations.KeepDeadPages = mutation.Point(mutation.CrashKeepDeadPages, fire(1))
		cfg.Mutations.ResurrectEvicting = mutation.Point(mutation.CrashResurrectEvicting, fire(1))
		cfg.Mutations.AckBeforeBackup = mutation.Point(mutation.ReplicaAckBeforeBackup, fire(1))
	}
	var obs actors.Observer = c.inv
	if cc.observer != nil {
		obs = tee{c.inv, cc.observer}
	}
	pages := c.arena[i*frameBytes : (i+1)*frameBytes : (i+1)*frameBytes]
	if i < len(c.nodes) {
		// A restart: fresh memory. The crashed incarnation's storage
		// reads still land in its old frames (its process is gone, the
		// device finishes what it was given).
		pages = make([]byte, frameBytes)
	}
	n := actors.New(cfg, env, obs, pages)
	// The register reads check both ends (a torn value is a violation), so
	// a poisoned head catches every read of a dropped frame.
	n.Cache().PoisonHead = cc.observedEnds
	c.hints[i] = n.Cache().TransferHint()
	if len(c.arena) >= hintArena {
		w.SetPrefetcher(id, &c.hints[i])
	}
	if cc.mutate != "" {
		n.Directory().NoOwnerStability = mutation.Point(mutation.NoOwnerStability, fire(1))
		n.Directory().StaleGrant = mutation.Point(mutation.StaleGrant, fire(0.5))
		n.Cache().SkipVersionCheck = mutation.Point(mutation.SkipVersionCheck, fire(0.5))
		n.Cache().UpgradeIgnoresVersion = mutation.Point(mutation.UpgradeIgnoresVersion, fire(1))
		n.Cache().EntitleFewer = mutation.Point(mutation.EntitleFewer, fire(1))
		n.Directory().ForgetOwnerSharer = mutation.Point(mutation.ForgetOwnerSharer, fire(1))
		n.Directory().ConflictKeepsEpoch = mutation.Point(mutation.ConflictKeepsEpoch, fire(1))
	}
	w.Attach(id, n)
	return n
}

// setTrace makes the world count every message for the cost invariants,
// and pass it on to fn (nil: nobody).
func (c *cluster) setTrace(fn sim.TraceFunc) {
	if fn == nil {
		c.w.SetTrace(func(_ int64, m *protocol.Message, _ []byte) { c.inv.Message(m); c.countDir(m) })
		return
	}
	c.w.SetTrace(func(at int64, m *protocol.Message, payload []byte) {
		c.inv.Message(m)
		c.countDir(m)
		fn(at, m, payload)
	})
}

func (c *cluster) countDir(m *protocol.Message) {
	switch m.Type {
	case protocol.TRequest, protocol.TDone, protocol.TEvict, protocol.TEvictData, protocol.TAlloc:
		c.dirMsgs++
	}
}

// checkCosts checks, at the end of a run, what its messages and accesses
// cost: every case within its bound (checker.Costs), and no access that
// needed a second grant after one that met its wish (bufmgr's
// Stats.Regranted).
func (c *cluster) checkCosts() {
	c.inv.CheckCosts()
	for _, n := range c.nodes {
		if k := n.Cache().Stats().Regranted; k > 0 {
			c.inv.Fail("cost: node %d: %d accesses needed a second grant after one that met their wish "+
				"(a grant entitles every waiter it satisfies to one access before queued transfers)", n.ID(), k)
		}
	}
}

// drain runs the world until no event is left, at most limit steps; false
// when the limit was hit.
func (c *cluster) drain(limit int) bool {
	for i := 0; i < limit; i++ {
		if !c.w.Step() {
			return true
		}
	}
	return false
}

// checkQuiet checks invariant 3: with the network quiet, every directory's
// metadata agrees with the nodes' copies, and nothing is in flight.
func (c *cluster) checkQuiet(pids []protocol.PID) {
	for _, pid := range pids {
		meta := c.dirOf(pid).Meta(pid)
		if meta == nil {
			c.inv.Fail("page %v: unknown to its directory", pid)
			continue
		}
		if meta.InTransition() {
			c.inv.Fail("page %v: directory still in a transition at rest", pid)
		}
		for _, n := range c.nodes {
			mode := protocol.ModeNone
			if f := n.Cache().Lookup(pid); f != nil {
				mode = f.Mode
				if f.Pending != protocol.ModeNone || f.Evicting || len(*n.Cache().Queue(f)) > 0 {
					c.inv.Fail("page %v: node %d still has work in flight at rest (pending=%v evicting=%v queued=%d)",
						pid, n.ID(), f.Pending, f.Evicting, len(*n.Cache().Queue(f)))
				}
			}
			want := protocol.ModeNone
			switch {
			case meta.Mode == protocol.ModeExclusive && meta.Owner == n.ID():
				want = protocol.ModeExclusive
			case meta.Mode == protocol.ModeShared && meta.Sharers.Has(n.ID()):
				want = protocol.ModeShared
			}
			if mode != want {
				c.inv.Fail("page %v: directory says node %d holds it %v, the node holds %v", pid, n.ID(), want, mode)
			}
		}
	}
}

// flush evicts every page from every cache and checks invariant 4: each
// directory's SSD holds the last written value.
func (c *cluster) flush(pids []protocol.PID) {
	for round := 0; round < 64; round++ {
		left := 0
		for _, n := range c.nodes {
			left += n.Cache().Frames() - n.Cache().FreeFrames()
		}
		if left == 0 {
			break
		}
		for _, n := range c.nodes {
			n.EvictAll()
		}
		if !c.drain(50_000_000) {
			c.inv.Fail("final flush did not come to rest")
			return
		}
	}
	for _, n := range c.nodes {
		if used := n.Cache().Frames() - n.Cache().FreeFrames(); used != 0 {
			c.inv.Fail("node %d: %d frames still used after the final flush", n.ID(), used)
		}
	}
	buf := make([]byte, protocol.PageSize)
	for _, pid := range pids {
		meta := c.dirOf(pid).Meta(pid)
		if meta.Mode != protocol.ModeNone || meta.Stale {
			c.inv.Fail("page %v: after the flush the directory says mode %v stale=%v", pid, meta.Mode, meta.Stale)
		}
		if c.rs != nil {
			c.checkReplicas(pid, buf)
			continue
		}
		if err := c.stores[pid.Dir()].ReadPage(pid.Slot(), buf); err != nil {
			c.inv.Fail("page %v: reading the SSD after the flush: %v", pid, err)
			continue
		}
		if ok, why := c.inv.Matches(pid, buf); !ok {
			c.inv.Fail("page %v: the directory's SSD does not hold the last write (nothing lost): %s", pid, why)
		}
	}
}

// checkReplicas checks, after the final flush, that every live node that
// holds the current copies of pid's directory (its primary, its backup
// once re-replicated) holds the last write of pid.
func (c *cluster) checkReplicas(pid protocol.PID, buf []byte) {
	d := pid.Dir()
	c.rs.current[d].Each(func(h protocol.NodeID) {
		if !c.rs.live.Has(h) {
			return
		}
		if err := c.store(h, d).ReadPage(pid.Slot(), buf); err != nil {
			c.inv.Fail("page %v: reading node %d's replica after the flush: %v", pid, h, err)
			return
		}
		if ok, why := c.inv.Matches(pid, buf); !ok {
			c.inv.Fail("page %v: node %d's replica of directory %d does not hold the last write (nothing lost): %s", pid, h, d, why)
		}
	})
}

// dirOf is the directory that serves pid in the current view.
func (c *cluster) dirOf(pid protocol.PID) *protocol.Directory {
	d := pid.Dir()
	if c.rs == nil {
		return c.nodes[d].Directory()
	}
	if hd := c.nodes[c.rs.primary[d]].Hosted(d); hd != nil {
		return hd
	}
	return c.nodes[d].Directory()
}

// checkContent switches the data-value checks to whole-page digests, for
// workloads (the B-tree) that write whole pages: every exclusive release
// records the page as the last completed write.
func (c *cluster) checkContent() {
	c.inv.Content = true
	for _, n := range c.nodes {
		n.Cache().OnExclusiveRelease = func(f *bufmgr.Frame) {
			if c.w.Dead(n.ID()) {
				// A crashed node's worker unwinding (its guards release
				// as the coroutine stops): its cache is gone, and what it
				// changed without a write-through never happened.
				return
			}
			if c.indeterminate[f.PID] {
				// Its write-through found the directory crashed: the
				// next copy may be the old content or this one.
				delete(c.indeterminate, f.PID)
				c.inv.ForgetContent(f.PID)
				return
			}
			c.inv.WroteContent(f.PID, n.Cache().Page(f))
		}
	}
}

func (c *cluster) stop() {
	c.stopped = true
	c.w.StopFaults()
	for _, n := range c.nodes {
		n.Stop()
	}
}

// tee tells two observers everything.
type tee struct{ a, b actors.Observer }

func (t tee) Violation(n protocol.NodeID, err error) { t.a.Violation(n, err); t.b.Violation(n, err) }
func (t tee) CopyChanged(n protocol.NodeID, pid protocol.PID, old, now protocol.Mode, data []byte) {
	t.a.CopyChanged(n, pid, old, now, data)
	t.b.CopyChanged(n, pid, old, now, data)
}
func (t tee) Accepted(d protocol.NodeID, dec protocol.Decision) {
	t.a.Accepted(d, dec)
	t.b.Accepted(d, dec)
}
func (t tee) Obtained(n protocol.NodeID, pid protocol.PID, m protocol.Mode, waited int64) {
	t.a.Obtained(n, pid, m, waited)
	t.b.Obtained(n, pid, m, waited)
}
func (t tee) Unreadable(n protocol.NodeID, pid protocol.PID, err error) {
	t.a.Unreadable(n, pid, err)
	t.b.Unreadable(n, pid, err)
}
