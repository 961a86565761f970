package scenarios

import (
	"fmt"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// Replicated directories in the simulator (SimConfig.Replicas;
// docs/replication.md). Every directory's pages are kept on two nodes: a
// primary that serves the directory and a backup that keeps a copy of each
// page, placed by protocol.Placement from the live nodes. Writes are
// written through to both before they are acknowledged. A crash is a view
// change as with one replica, but a directory whose node died is not down:
// its backup is promoted (it hosts the directory, rebuilt from the
// survivors' holdings), and the directory is copied to its new backup in
// the background (re-replication) before it counts as replicated again.
// A restarted node first takes the current copies of its pages from a node
// that holds them, then serves its directory again.

// replicaState is the coordinator's record of where every directory's
// copies are: the membership service's view, in a real cluster.
type replicaState struct {
	live protocol.NodeSet
	// current[d]: the nodes whose store of directory d holds every
	// acknowledged write (the primary, the backup once re-replicated); a
	// holder that dies stays one until a view serves d without it.
	current []protocol.NodeSet
	// stores[h][d]: node h's store of directory d's pages (h == d: its
	// own, which is cluster.stores[h]).
	stores [][]*memfile.Store
	// gates lets the coordinator's own copies (catchUp) bypass the fault
	// plan.
	gates []*gatedInjector
	// primary and backup of each directory in the current view.
	primary, backup []protocol.NodeID
	hasBackup       protocol.NodeSet
	// promoted: directories whose primary changed in the view change
	// under way (their new host rebuilds them from the holdings).
	promoted protocol.NodeSet
	// view counts the view changes; a re-replication of an older view
	// stops.
	view uint64
	// copying[h]: re-replications running on node h.
	copying [][]*sim.Coroutine
	// rereplicated counts the re-replications that completed.
	rereplicated int
	// ios[h][d]: node h's storage of directory d's pages, in its current
	// incarnation.
	ios [][]*replicaIO
	// err[d]: the error of a directory that lost both copies.
	err []error
	// second: a crash asked for another node to crash once the
	// directories are replicated again, while it is still down.
	second bool
}

// gatedInjector passes the fault plan's decisions on, unless off.
type gatedInjector struct {
	w   *sim.World
	off bool
}

func (g *gatedInjector) Inject(op memfile.Op, slot uint64) error {
	if g.off {
		return nil
	}
	return g.w.Inject(op, slot)
}

// incarnationStore is a store as one incarnation of a node writes it.
// Once the node crashed, the writes its device had not completed are lost
// (with replicas; with one replica they land, docs/protocol.md): a write
// of a crashed incarnation could otherwise land after the copies its
// successor took at its return (catchUp), over them. A lost write was not
// acknowledged: an acknowledgement follows the write. pending are the
// writes issued and not landed yet, the newest of each slot: what a read
// issued now would see (sim.World.OrderedIO), and what a copy of the
// store must take.
type incarnationStore struct {
	*memfile.Store
	dead    bool
	seq     uint64
	pending map[uint64]pendingWrite
}

type pendingWrite struct {
	seq  uint64
	page []byte
}

func (s *incarnationStore) WritePage(slot uint64, buf []byte) error {
	if s.dead {
		return nil
	}
	return s.Store.WritePage(slot, buf)
}

// read reads slot as a read issued now would: the newest pending write,
// or the store.
func (s *incarnationStore) read(slot uint64, buf []byte) error {
	if p, ok := s.pending[slot]; ok {
		copy(buf, p.page)
		return nil
	}
	return s.Store.ReadPage(slot, buf)
}

// replicaIO is a node's storage of one directory's pages (its own, through
// its Env, or another's), recording its writes in flight.
type replicaIO struct {
	*sim.NodeEnv
	inc *incarnationStore
}

// WritePage implements actors.PageIO (and actors.Env's).
func (r *replicaIO) WritePage(slot uint64, buf []byte, done func(error)) {
	inc := r.inc
	inc.seq++
	seq := inc.seq
	if inc.pending == nil {
		inc.pending = map[uint64]pendingWrite{}
	}
	inc.pending[slot] = pendingWrite{seq, append([]byte(nil), buf...)}
	r.NodeEnv.WritePage(slot, buf, func(err error) {
		if p, ok := inc.pending[slot]; ok && p.seq == seq {
			// Landed, or failed (the node retries it, as a new write,
			// unless a view change came between).
			delete(inc.pending, slot)
		}
		done(err)
	})
}

// io is node h's storage of directory d's pages in its current
// incarnation, made at first use.
func (c *cluster) io(h, d protocol.NodeID) *replicaIO {
	rs := c.rs
	if r := rs.ios[h][d]; r != nil {
		return r
	}
	inc := &incarnationStore{Store: c.store(h, d)}
	r := &replicaIO{NodeEnv: &sim.NodeEnv{W: c.w, ID: h, Store: inc}, inc: inc}
	rs.ios[h][d] = r
	return r
}

// retire makes the writes node h has under way to its store of d lost (a
// copy replaces the store's content).
func (rs *replicaState) retire(h, d protocol.NodeID) {
	if r := rs.ios[h][d]; r != nil {
		r.inc.dead = true
		rs.ios[h][d] = nil
	}
}

// crashed ends node h's incarnation: its writes still in flight are lost.
func (rs *replicaState) crashed(h protocol.NodeID) {
	for d := range rs.ios[h] {
		rs.retire(h, protocol.NodeID(d))
	}
}

// newReplicaState is the record of a cluster of n nodes, before any view.
func newReplicaState(n int) *replicaState {
	rs := &replicaState{current: make([]protocol.NodeSet, n), stores: make([][]*memfile.Store, n),
		primary: make([]protocol.NodeID, n), backup: make([]protocol.NodeID, n), copying: make([][]*sim.Coroutine, n),
		ios: make([][]*replicaIO, n)}
	for h := range n {
		rs.live.Add(protocol.NodeID(h))
		rs.stores[h] = make([]*memfile.Store, n)
		rs.ios[h] = make([]*replicaIO, n)
	}
	return rs
}

// setupReplicas places every directory in the first view (every node
// live): both copies hold every page (none was written yet).
func (c *cluster) setupReplicas() {
	rs := c.rs
	for d := range c.nodes {
		p, b, hb, _ := protocol.Placement(protocol.NodeID(d), rs.live, 2)
		rs.current[d].Add(p)
		if hb {
			rs.current[d].Add(b)
		}
	}
	c.place()
}

// store is node h's store of directory d's pages, made at first use.
func (c *cluster) store(h, d protocol.NodeID) *memfile.Store {
	rs := c.rs
	if h == d {
		return c.stores[h]
	}
	if rs.stores[h][d] == nil {
		g := &gatedInjector{w: c.w}
		rs.gates = append(rs.gates, g)
		rs.stores[h][d] = memfile.New(c.cc.ssdPages, g)
	}
	return rs.stores[h][d]
}

// ownStore makes a node's store of its own pages, behind a gate.
func (rs *replicaState) ownStore(w *sim.World, slots uint64) *memfile.Store {
	g := &gatedInjector{w: w}
	rs.gates = append(rs.gates, g)
	return memfile.New(slots, g)
}

// faultsOff turns the fault plan off for the coordinator's own store
// accesses (on), or back on.
func (c *cluster) faultsOff(on bool) {
	for _, g := range c.rs.gates {
		g.off = on
	}
}

// allocated is how many pages directory d has allocated (allocations
// happen only on a node's own directory, while it is live).
func (c *cluster) allocated(d protocol.NodeID) uint64 { return c.nodes[d].Directory().Allocated() }

// place computes every directory's placement in the view of the live
// nodes and tells the nodes: routes, stores, and which node hosts which
// directory. It returns the directories that lost every current copy
// (down: their pages wait for a node that holds them).
func (c *cluster) place() (down protocol.NodeSet) {
	rs := c.rs
	rs.view++
	rs.promoted = protocol.NodeSet{}
	for i := range c.nodes {
		d := protocol.NodeID(i)
		p, b, hb, ok := protocol.Placement(d, rs.live, 2)
		avail := rs.current[d]
		for h := range c.nodes {
			if !rs.live.Has(protocol.NodeID(h)) {
				avail.Remove(protocol.NodeID(h))
			}
		}
		if !ok || avail.Empty() {
			// Both copies are gone: the directory is down until a node
			// that holds its current copies returns; its pages fail at
			// once, naming those nodes.
			down.Add(d)
			if old := rs.primary[d]; old != d && !c.nodes[old].Dead() {
				c.nodes[old].Host(d, nil)
			}
			err := c.lostError(d)
			rs.primary[d], rs.hasBackup = d, removed(rs.hasBackup, d)
			for _, n := range c.nodes {
				if !n.Dead() {
					n.SetRoute(d, d, 0, false)
					n.SetLost(d, err)
				}
			}
			continue
		}
		if rs.err != nil {
			rs.err[d] = nil
		}
		for _, n := range c.nodes {
			if !n.Dead() {
				n.SetLost(d, nil)
			}
		}
		if !rs.current[d].Has(p) {
			// p becomes the primary (it returned, and precedes the
			// acting primary in id order): it takes the current copies
			// first, and never serves older ones of its own.
			c.catchUp(d, p)
		}
		if !rs.current[d].Has(p) {
			c.inv.Fail("view %d: directory %d's primary %d does not hold its current copies (held by %v)", rs.view, d, p, avail)
		}
		// A node that is neither primary nor backup gets no more writes:
		// its copies stop being current.
		var keep protocol.NodeSet
		keep.Add(p)
		if hb && rs.current[d].Has(b) {
			keep.Add(b)
		}
		rs.current[d] = keep
		old := rs.primary[d]
		if old != p && rs.view > 1 {
			if old != d && !c.nodes[old].Dead() {
				c.nodes[old].Host(d, nil)
			}
			if p != d {
				rs.promoted.Add(d)
				hd := protocol.NewHostedDirectory(d, p, c.cc.variant, c.cc.ssdPages)
				if err := hd.Restore(c.allocated(d)); err != nil {
					c.inv.Fail("promoting node %d for directory %d: %v", p, d, err)
				}
				if c.cc.mutate != "" {
					hd.NoOwnerStability = mutation.Point(mutation.NoOwnerStability, c.fire(1))
					hd.StaleGrant = mutation.Point(mutation.StaleGrant, c.fire(0.5))
					hd.ForgetOwnerSharer = mutation.Point(mutation.ForgetOwnerSharer, c.fire(1))
					hd.ConflictKeepsEpoch = mutation.Point(mutation.ConflictKeepsEpoch, c.fire(1))
				}
				c.nodes[p].Host(d, hd)
			}
		}
		rs.primary[d], rs.backup[d] = p, b
		if hb {
			rs.hasBackup.Add(d)
		} else {
			rs.hasBackup.Remove(d)
		}
		for _, n := range c.nodes {
			if !n.Dead() {
				n.SetRoute(d, p, b, hb)
			}
		}
		if p != d {
			c.nodes[p].SetPageIO(d, c.io(p, d))
		}
		if hb && b != d {
			c.nodes[b].SetPageIO(d, c.io(b, d))
		}
	}
	return down
}

// lostError is the error of directory d's pages once no live node holds
// its current copies: it names the primary and the backup it had.
func (c *cluster) lostError(d protocol.NodeID) error {
	rs := c.rs
	if rs.err != nil && rs.err[d] != nil {
		return rs.err[d] // lost in an earlier view already
	}
	p, b := rs.primary[d], rs.backup[d]
	var err error
	switch {
	case !rs.hasBackup.Has(d):
		err = fmt.Errorf("%w: directory %d lost both copies: node %d, its primary, is down and it had no backup", actors.ErrDirectoryDown, d, p)
	case rs.live.Has(b):
		err = fmt.Errorf("%w: directory %d lost both copies: node %d, its primary, is down and node %d, its backup, was still being copied", actors.ErrDirectoryDown, d, p, b)
	default:
		err = fmt.Errorf("%w: directory %d lost both copies: nodes %d and %d, its primary and backup, are down", actors.ErrDirectoryDown, d, p, b)
	}
	if rs.err == nil {
		rs.err = make([]error, len(c.nodes))
	}
	rs.err[d] = err
	return err
}

func removed(s protocol.NodeSet, n protocol.NodeID) protocol.NodeSet {
	s.Remove(n)
	return s
}

// maybeSecondCrash crashes another node, if a crash asked for it, once
// every directory has its two copies again while a node is still down:
// two nodes dead in a row, the second after re-replication.
func (r *simRun) maybeSecondCrash() {
	c := r.c
	rs := c.rs
	if !rs.second || r.work.Started >= r.cfg.Ops {
		return // (not after the workload: the final reads run then)
	}
	for i := range c.nodes {
		d := protocol.NodeID(i)
		if rs.hasBackup.Has(d) && !rs.current[d].Has(rs.backup[d]) {
			return // still copying
		}
	}
	var live []protocol.NodeID
	down := false
	for i := range c.nodes {
		if rs.live.Has(protocol.NodeID(i)) {
			live = append(live, protocol.NodeID(i))
		} else {
			down = true
		}
	}
	if !down || len(live) < 2 {
		return // nobody down any more, or one node left
	}
	rs.second = false
	x := live[c.w.Intn(int64(len(live)))]
	r.crash.Schedule(x)
}

// replicaCrash is the view change after node x crashed, with replicas.
func (r *simRun) replicaCrash(x protocol.NodeID) {
	c := r.c
	rs := c.rs
	r.stopCopies(x)
	rs.crashed(x)
	rs.live.Remove(x)
	// x stays a holder of the current copies of the directories it held
	// until a view serves them without it (place): if every holder is
	// down, the first to return has them all.
	rs.second = rs.second || c.w.Chance(0.5)
	down := c.place()
	c.fence(down, func(w *bufmgr.Worker) { r.crash.Abandon(w.ID) })
	r.startCopies()
}

// crashAllowed reports whether a crash of x leaves every directory a live
// node with its current copies (the simulator does not schedule double
// faults: two nodes dead in a row only once re-replication is done).
func (r *simRun) crashAllowed(x protocol.NodeID) bool {
	rs := r.c.rs
	if rs == nil {
		return true
	}
	if r.cfg.DoubleFaults {
		left := rs.live
		left.Remove(x)
		return !left.Empty() // any node but the last
	}
	for d := range rs.current {
		left := rs.current[d]
		left.Remove(x)
		alive := false
		left.Each(func(h protocol.NodeID) {
			if rs.live.Has(h) {
				alive = true
			}
		})
		if !alive {
			return false
		}
	}
	return true
}

// catchUp copies every page of directory x from a live node that holds its
// current copies into node to's store of it: a returning node never serves
// its own older pages (docs/replication.md, decision 5). It reports false
// when no live node holds them.
func (c *cluster) catchUp(x, to protocol.NodeID) bool {
	rs := c.rs
	if rs.current[x].Has(to) {
		return true
	}
	// From the acting primary: its store has every write it took, also one
	// whose copy to the backup a view change cut.
	from, ok := rs.primary[x], rs.live.Has(rs.primary[x]) && rs.current[x].Has(rs.primary[x])
	rs.current[x].Each(func(h protocol.NodeID) {
		if !ok && rs.live.Has(h) {
			from, ok = h, true
		}
	})
	if !ok {
		return false
	}
	if stale := mutation.Point(mutation.ReplicaReturnStale, c.fire(1)); stale != nil && stale() {
		rs.current[x].Add(to) // mutation: its own older copies count as current
		return true
	}
	src, dst := c.io(from, x).inc, c.store(to, x)
	// The copy is made in the view change's step, over what the store
	// holds now: the writes the stores acknowledged have landed, and a
	// crashed incarnation's writes that had not would never land
	// (replicaState.incarnation).
	if to != x {
		// Writes to's device may still have under way there, from when it
		// was x's backup before, must not land over the copy.
		rs.retire(to, x)
	}
	buf := make([]byte, protocol.PageSize)
	c.faultsOff(true)
	defer c.faultsOff(false)
	for slot := range c.allocated(x) {
		if err := src.read(slot, buf); err != nil {
			c.inv.Fail("node %d catching up directory %d from node %d: %v", to, x, from, err)
			return false
		}
		if err := dst.WritePage(slot, buf); err != nil {
			c.inv.Fail("node %d catching up directory %d from node %d: %v", to, x, from, err)
			return false
		}
	}
	rs.current[x].Add(to)
	return true
}

// startCopies starts a re-replication for every directory whose backup
// does not hold its current copies yet.
func (r *simRun) startCopies() {
	c := r.c
	rs := c.rs
	for i := range c.nodes {
		d := protocol.NodeID(i)
		if !rs.hasBackup.Has(d) || rs.current[d].Has(rs.backup[d]) || !rs.live.Has(rs.primary[d]) {
			continue
		}
		r.rereplicate(d, rs.primary[d], rs.backup[d])
	}
}

// stopCopies stops the re-replications running on node x (it crashed).
func (r *simRun) stopCopies(x protocol.NodeID) {
	for _, co := range r.c.rs.copying[x] {
		co.Stop()
	}
	r.c.rs.copying[x] = nil
}

// rereplicate copies directory d's pages from its primary p to its new
// backup b, page by page, each held shared through p's cache until b
// acknowledged it, so that no write-through of the page can be under way
// or start meanwhile (docs/replication.md, decision 4). It stops when the
// view changes; once every page is copied, b holds the current copies.
func (r *simRun) rereplicate(d, p, b protocol.NodeID) {
	c := r.c
	rs := c.rs
	view := rs.view
	unlatched := mutation.Point(mutation.ReplicaCopyUnlatched, c.fire(1))
	co := c.w.Spawn(p, c.w.Intn(1000), func(co *sim.Coroutine) {
		node := c.nodes[p]
		bw := &bufmgr.Worker{ID: -1000 - int(d), P: co}
		buf := make([]byte, protocol.PageSize)
		for slot := range c.allocated(d) {
			if rs.view != view || node.Dead() {
				return
			}
			pid := protocol.MakePID(d, slot)
			ok := false
			perr := bufmgr.Catch(func() {
				if unlatched != nil && unlatched() {
					// Mutation: the page read from the store without
					// holding it; a write may land on b before the copy.
					io := c.io(p, d)
					done, failed := false, false
					io.ReadPage(slot, buf, func(err error) { done, failed = true, err != nil; co.Wake() })
					for !done {
						co.Park()
					}
					if failed || rs.view != view {
						return
					}
					ok = node.Replicate(bw, pid, buf, b)
					return
				}
				g := node.Cache().Shared(bw, pid)
				if rs.view == view { // (the view may have changed while it waited)
					ok = node.Replicate(bw, pid, g.Data(), b)
				}
				g.Release()
			})
			if perr != nil || !ok {
				return // an unreadable page or a view change: not a replica yet
			}
		}
		if rs.view == view {
			rs.current[d].Add(b)
			rs.rereplicated++
			r.maybeSecondCrash()
		}
	})
	rs.copying[p] = append(rs.copying[p], co)
}

// replicaRestart is the view change that readmits node x, with replicas:
// x first takes the current copies of its pages (catchUp), then serves its
// directory again, and the directories whose backup it becomes are copied
// to it in the background.
func (r *simRun) replicaRestart(x protocol.NodeID) {
	c := r.c
	c.rs.live.Add(x)
	down := c.place()
	c.fence(down, nil)
	r.startCopies()
}
