package scenarios

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// The B-tree workload: workers on every node get, put and delete 8-byte
// keys of one tree; every put writes a unique value, a delete writes 0, a
// get reads the value (0 when absent), and a fifth of the gets are batches
// of 2 to 8 keys (GetBatch). The history is checked per key with
// the same register model as pages. A few range scans check order and
// bounds.

func (r *simRun) session(node *actors.Node, bw *bufmgr.Worker) btree.Session {
	s := btree.Session{Cache: node.Cache(), Worker: bw, Allocate: func(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error) {
		g, ok := node.Allocate(w, node.ID())
		if !ok {
			return g, fmt.Errorf("node %d: SSD full", node.ID())
		}
		return g, nil
	}}
	if r.cfg.durable() {
		// Every page an operation changed is on its directory's SSD before
		// the operation returns; a write-through whose directory crashed
		// first leaves the operation's outcome unknown, and the page's
		// next copy may be the old one or the new.
		s.Persist = func(w *bufmgr.Worker, g *bufmgr.ExclusiveGuard) error {
			if w.ID >= 0 {
				in := r.inflight[w.ID]
				in.writing, in.persisting, in.hasPersisting = true, g.PID(), true
				defer func() { in.hasPersisting = false }()
			}
			strike := 0.1
			if d := g.Data(); len(d) > 0 && d[0] != 1 {
				strike = 0.9 // not a leaf: an inner node or the catalog, a split's later writes
			}
			if at := r.crash.At; len(at) > 0 && r.work.Started >= at[0] && r.c.w.Chance(strike) {
				// A crash that is due strikes this node while its
				// write-through is in flight, most likely in a split: the
				// windows between a split's writes are where a wrong order
				// loses keys.
				r.crash.At = at[1:]
				r.crash.Schedule(node.ID())
			}
			f := g.Frame()
			// Durable when acknowledged: the checker learns of the page's
			// content then, not at the release (a crash may come between).
			acked := func() { r.c.inv.WroteContent(f.PID, node.Cache().Page(f)) }
			if !node.Persist(w, f, acked) {
				if r.c.indeterminate == nil {
					r.c.indeterminate = map[protocol.PID]bool{}
				}
				// The directory may have written it before it crashed: the
				// next copy may be the old content or this one (and the
				// release, if it still comes, must not say otherwise).
				r.c.indeterminate[g.PID()] = true
				r.c.inv.ForgetContent(g.PID())
				return errIndeterminate
			}
			return nil
		}
		if split := mutation.Point(mutation.BTreeSplitNodeFirst, r.c.fire(1)); split != nil {
			s.Mutations.PersistSplitNodeFirst = split
		}
	}
	return s
}

// treeCrashGrace is how many operations a due crash waits for a
// write-through to strike in (the session's Persist) before it strikes a
// random node between operations.
const treeCrashGrace = 50

// errIndeterminate: a write-through found its page's directory crashed;
// the operation may or may not have taken effect.
var errIndeterminate = errors.New("write-through: the page's directory crashed first (outcome unknown)")

func (r *simRun) setupTree() bool {
	node := r.c.nodes[0]
	co := r.c.w.Spawn(node.ID(), 0, func(co *sim.Coroutine) {
		t, err := btree.Create(r.session(node, &bufmgr.Worker{ID: -1, P: co}))
		if err != nil {
			r.c.inv.Fail("creating the tree: %v", err)
			return
		}
		r.tree = t
	})
	return r.runUntil([]*sim.Coroutine{co}, "set-up") && r.tree != nil
}

func (r *simRun) runTreeWorkload() {
	var cos []*sim.Coroutine
	r.crash.At = simrunner.CrashPoints(r.cfg.Ops, r.cfg.Crashes)
	r.work.BeforeOp = func() {
		if at := r.crash.At; len(at) > 0 && r.work.Started >= at[0]+treeCrashGrace {
			r.crash.Due() // no write-through took the due crash
		}
	}
	for k, node := range r.c.nodes {
		cos = append(cos, r.spawnWorkers(k, node)...)
	}
	if !r.runUntil(cos, "workload") || r.cfg.Crashes == 0 {
		return
	}
	// A final read of every key by a worker of a live node: a write the
	// crashes lost cannot hide behind a key nobody read again.
	for _, node := range r.c.nodes {
		if r.c.w.Dead(node.ID()) {
			continue
		}
		id := protocolapi.Worker{Node: node.ID(), Client: len(r.inflight)}
		r.inflight = append(r.inflight, &inflight{})
		final := r.work.FinalGets(id, func(co *sim.Coroutine) protocolapi.Accessor { return r.Worker(id, co) })
		r.runUntil([]*sim.Coroutine{final}, "final read")
		return
	}
}

func treeKey(b []byte, k uint64) []byte {
	return binary.BigEndian.AppendUint64(b[:0], k)
}

// The B-tree's entry for a worker (protocolapi.Tree and its deletes,
// batches and scans): keys are 8 bytes big-endian, values 8 bytes. A
// panic of a guard (an unreadable page) fails the operation; a
// write-through whose directory crashed first abandons it (its outcome
// is unknown).

func (a *pageWorker) Get(key uint64) (uint64, bool, error) {
	r := a.r
	*r.inflight[a.bw.ID] = inflight{}
	var found bool
	var err error
	if perr := bufmgr.Catch(func() { a.val, found, err = r.tree.Get(a.s, treeKey(a.kb[:], key), a.val[:0]) }); perr != nil {
		err = perr
	}
	var v uint64
	if found && err == nil {
		if len(a.val) != 8 {
			r.c.inv.Fail("key %d: value of %d bytes", key, len(a.val))
		} else {
			v = binary.BigEndian.Uint64(a.val)
		}
	}
	return v, found, a.opErr(err)
}

func (a *pageWorker) Put(key, value uint64) error {
	r := a.r
	*r.inflight[a.bw.ID] = inflight{}
	var err error
	if perr := bufmgr.Catch(func() {
		err = r.tree.Put(a.s, treeKey(a.kb[:], key), binary.BigEndian.AppendUint64(a.vb[:0], value))
	}); perr != nil {
		err = perr
	}
	return a.opErr(err)
}

func (a *pageWorker) Delete(key uint64) error {
	r := a.r
	*r.inflight[a.bw.ID] = inflight{}
	var err error
	if perr := bufmgr.Catch(func() { _, err = r.tree.Delete(a.s, treeKey(a.kb[:], key)) }); perr != nil {
		err = perr
	}
	return a.opErr(err)
}

// opErr is what a get, put or delete returns to the runner: an error of
// an operation a crash already cut as it is (the runner drops it), an
// unknown outcome abandoned, an unreadable page as unavailable.
func (a *pageWorker) opErr(err error) error {
	if err == nil || !a.r.work.InFlight(a.bw.ID) {
		return err
	}
	if errors.Is(err, errIndeterminate) {
		a.r.crash.Abandon(a.bw.ID)
		return err
	}
	return a.r.unavailableErr(err)
}

// unavailableErr wraps err with protocolapi.ErrUnavailable if the fault
// plan caused it (counted: unavailable).
func (r *simRun) unavailableErr(err error) error {
	if err != nil && r.unavailable(err) {
		return fmt.Errorf("%w: %w", protocolapi.ErrUnavailable, err)
	}
	return err
}

// GetBatch gets the keys in one btree.GetBatch: an unreadable page fails
// only the keys that need it (a *btree.BatchError lists them).
func (a *pageWorker) GetBatch(keys, vals []uint64, found []bool) ([]int, error) {
	r := a.r
	bk := make([][]byte, len(keys))
	bv := make([][]byte, len(keys))
	for i, k := range keys {
		bk[i] = treeKey(nil, k)
	}
	err := r.tree.GetBatch(a.s, bk, bv, found)
	var failed []int
	var partial *btree.BatchError
	if errors.As(err, &partial) {
		failed = partial.Keys
	}
	for i := range keys {
		if !found[i] || slices.Contains(failed, i) {
			continue
		}
		if len(bv[i]) != 8 {
			r.c.inv.Fail("key %d: value of %d bytes (in a batch)", keys[i], len(bv[i]))
			continue
		}
		vals[i] = binary.BigEndian.Uint64(bv[i])
	}
	return failed, r.unavailableErr(err)
}

// Scan scans the keys in [from, to).
func (a *pageWorker) Scan(from, to uint64, visit func(key, value uint64) bool) error {
	r := a.r
	var err error
	if perr := bufmgr.Catch(func() {
		err = r.tree.Scan(a.s, treeKey(nil, from), treeKey(nil, to), func(key, val []byte) bool {
			if len(key) != 8 {
				r.c.inv.Fail("scan [%d, %d): a key of %d bytes", from, to, len(key))
				return false
			}
			var v uint64
			if len(val) == 8 {
				v = binary.BigEndian.Uint64(val)
			}
			return visit(binary.BigEndian.Uint64(key), v)
		})
	}); perr != nil {
		err = perr
	}
	return r.unavailableErr(err)
}

var _ interface {
	protocolapi.Tree
	protocolapi.TreeDeleter
	protocolapi.TreeBatcher
	protocolapi.TreeScanner
} = (*pageWorker)(nil)

// allPIDs lists every page allocated on any directory (for the checks at
// rest and the final flush).
func (r *simRun) allPIDs() []protocol.PID {
	var out []protocol.PID
	for _, n := range r.c.nodes {
		for slot := range r.c.allocated(n.ID()) {
			out = append(out, protocol.MakePID(n.ID(), slot))
		}
	}
	return out
}
