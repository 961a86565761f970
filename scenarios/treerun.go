package scenarios

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
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
		client := len(r.inflight)
		r.inflight = append(r.inflight, &inflight{})
		final := r.c.w.Spawn(node.ID(), 0, func(co *sim.Coroutine) {
			s := r.session(node, &bufmgr.Worker{ID: client, P: co})
			var kb [8]byte
			for key := range r.cfg.Keys {
				op := checker.Op{Client: client, Page: uint64(key), Call: r.c.w.Now(), Kind: "read"}
				var val []byte
				var found bool
				var err error
				if perr := bufmgr.Catch(func() { val, found, err = r.tree.Get(s, treeKey(kb[:], uint64(key)), nil) }); perr != nil {
					err = perr
				}
				if err != nil {
					r.failedOp(err, fmt.Sprintf("final read of key %d", key))
					continue
				}
				if found && len(val) == 8 {
					op.Value = binary.BigEndian.Uint64(val)
				}
				op.Return = r.c.w.Now()
				r.work.Hist.Add(op)
				r.work.LastOp = op.Return
			}
		})
		r.runUntil([]*sim.Coroutine{final}, "final read")
		return
	}
}

func treeKey(b []byte, k uint64) []byte {
	return binary.BigEndian.AppendUint64(b[:0], k)
}

func (r *simRun) treeWorker(co *sim.Coroutine, node *actors.Node, client int) {
	bw := &bufmgr.Worker{ID: client, P: co}
	s := r.session(node, bw)
	w := r.c.w
	var kb, vb [8]byte
	var val []byte
	in := r.inflight[client]
	l := r.work
	for l.Started < r.cfg.Ops {
		l.Started++
		if at := r.crash.At; len(at) > 0 && l.Started >= at[0]+treeCrashGrace {
			r.crash.Due() // no write-through took the due crash
		}
		co.Sleep(w.Intn(2_000))
		k := uint64(l.Keys.Next(w.Rand()))
		key := treeKey(kb[:], k)
		if w.Chance(0.02) {
			r.scan(s, key, k)
			continue
		}
		op := checker.Op{Client: client, Page: k, Call: w.Now()}
		if w.Chance(r.cfg.ReadRatio) && w.Chance(0.2) {
			r.batchGet(s, client, k)
			continue
		}
		var err error
		*in = inflight{}
		l.Begin(op)
		perr := bufmgr.Catch(func() { val, err = r.treeOp(s, &op, key, val, vb[:0]) })
		if perr != nil {
			err = perr
		}
		if !l.InFlight(client) || errors.Is(err, errIndeterminate) {
			// A crash cut it (abandon recorded a write of unknown outcome).
			r.crash.Abandon(client)
			l.Completed++
			l.LastOp = w.Now()
			continue
		}
		l.End(client)
		if err != nil {
			if !r.failedOp(err, fmt.Sprintf("key %d: %s", k, op.Kind)) {
				return
			}
			l.Completed++
			l.LastOp = w.Now()
			continue
		}
		op.Return = w.Now()
		l.Hist.Add(op)
		l.Completed++
		l.LastOp = op.Return
	}
}

// treeOp does one read, put or delete of the key op names (op.Page) and
// fills in op's kind and value.
func (r *simRun) treeOp(s btree.Session, op *checker.Op, key, val, vb []byte) ([]byte, error) {
	w := r.c.w
	k := op.Page
	var err error
	switch {
	case w.Chance(r.cfg.ReadRatio):
		var found bool
		val, found, err = r.tree.Get(s, key, val[:0])
		op.Kind = "read"
		if found {
			if len(val) != 8 {
				r.c.inv.Fail("key %d: value of %d bytes", k, len(val))
			} else {
				op.Value = binary.BigEndian.Uint64(val)
			}
		}
	case w.Chance(0.8):
		r.work.Value++
		op.Kind, op.Value = "write", r.work.Value
		r.work.Begin(*op)
		err = r.tree.Put(s, key, binary.BigEndian.AppendUint64(vb, op.Value))
	default:
		op.Kind = "write" // a delete writes 0
		r.work.Begin(*op)
		_, err = r.tree.Delete(s, key)
	}
	return val, err
}

// batchGet reads key k and a few more in one GetBatch: every key is a
// read in the history, called when the batch starts and returned when it
// ends (the batch counts as one operation of the run).
func (r *simRun) batchGet(s btree.Session, client int, k uint64) {
	w := r.c.w
	n := 2 + w.Intn(7)
	keys := make([][]byte, n)
	vals := make([][]byte, n)
	found := make([]bool, n)
	ks := make([]uint64, n)
	for i := range keys {
		if i > 0 {
			k = uint64(r.work.Keys.Next(w.Rand()))
		}
		ks[i], keys[i] = k, treeKey(nil, k)
	}
	call := w.Now()
	// An unreadable page fails only the keys that need it (GetBatch
	// catches the guard's panic and returns a BatchError): the others are
	// answered, and go into the history.
	err := r.tree.GetBatch(s, keys, vals, found)
	var partial *btree.BatchError
	if err != nil {
		r.failedOp(err, fmt.Sprintf("batch of %d keys from key %d", n, ks[0]))
		if !errors.As(err, &partial) {
			r.work.Completed++
			r.work.LastOp = w.Now()
			return
		}
	}
	ret := w.Now()
	for i, k := range ks {
		if partial != nil && slices.Contains(partial.Keys, i) {
			continue
		}
		op := checker.Op{Client: client, Page: k, Call: call, Return: ret, Kind: "read"}
		if found[i] {
			if len(vals[i]) != 8 {
				r.c.inv.Fail("key %d: value of %d bytes (in a batch)", k, len(vals[i]))
				return
			}
			op.Value = binary.BigEndian.Uint64(vals[i])
		}
		r.work.Hist.Add(op)
	}
	r.work.Completed++
	r.work.LastOp = ret
}

// scan reads up to 50 keys from key on and checks they come in order and
// within bounds (scans are not part of the linearizability check).
func (r *simRun) scan(s btree.Session, from []byte, k uint64) {
	to := treeKey(nil, k+50)
	var last []byte
	n := 0
	visit := func(key, val []byte) bool {
		if bytes.Compare(key, from) < 0 || bytes.Compare(key, to) >= 0 || (last != nil && bytes.Compare(key, last) <= 0) {
			r.c.inv.Fail("scan [%x, %x): key %x out of order or bounds (previous %x)", from, to, key, last)
			return false
		}
		last = append(last[:0], key...)
		n++
		return n < 50
	}
	var err error
	if perr := bufmgr.Catch(func() { err = r.tree.Scan(s, from, to, visit) }); perr != nil {
		err = perr
	}
	if err != nil {
		r.failedOp(err, fmt.Sprintf("scan from key %d", k))
	}
	r.work.Completed++
	r.work.LastOp = r.c.w.Now()
}

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
