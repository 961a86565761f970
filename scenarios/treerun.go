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
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// The B-tree workload: workers on every node get, put and delete 8-byte
// keys of one tree; every put writes a unique value, a delete writes 0, a
// get reads the value (0 when absent), and a fifth of the gets are batches
// of 2 to 8 keys (GetBatch). The history is checked per key with
// the same register model as pages. A few range scans check order and
// bounds.

func (r *simRun) session(node *actors.Node, bw *bufmgr.Worker) btree.Session {
	return btree.Session{Cache: node.Cache(), Worker: bw, Allocate: func(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error) {
		g, ok := node.Allocate(w, node.ID())
		if !ok {
			return g, fmt.Errorf("node %d: SSD full", node.ID())
		}
		return g, nil
	}}
}

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
	for k, node := range r.c.nodes {
		for j := range r.cfg.Workers {
			client := k*r.cfg.Workers + j
			cos = append(cos, r.c.w.Spawn(node.ID(), r.c.w.Intn(1000), func(co *sim.Coroutine) {
				r.treeWorker(co, node, client)
			}))
		}
	}
	r.runUntil(cos, "workload")
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
	for r.started < r.cfg.Ops {
		r.started++
		co.Sleep(w.Intn(2_000))
		k := uint64(r.perm[r.zipf.next(w.Rand())])
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
		perr := bufmgr.Catch(func() { val, err = r.treeOp(s, &op, key, val, vb[:0]) })
		if perr != nil {
			err = perr
		}
		if err != nil {
			if !r.failedOp(err, fmt.Sprintf("key %d: %s", k, op.Kind)) {
				return
			}
			r.completed++
			r.lastOp = w.Now()
			continue
		}
		op.Return = w.Now()
		r.hist.Add(op)
		r.completed++
		r.lastOp = op.Return
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
		r.nextValue++
		op.Kind, op.Value = "write", r.nextValue
		err = r.tree.Put(s, key, binary.BigEndian.AppendUint64(vb, r.nextValue))
	default:
		op.Kind = "write" // a delete writes 0
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
			k = uint64(r.perm[r.zipf.next(w.Rand())])
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
			r.completed++
			r.lastOp = w.Now()
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
		r.hist.Add(op)
	}
	r.completed++
	r.lastOp = ret
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
	r.completed++
	r.lastOp = r.c.w.Now()
}

// allPIDs lists every page allocated on any directory (for the checks at
// rest and the final flush).
func (r *simRun) allPIDs() []protocol.PID {
	var out []protocol.PID
	for _, n := range r.c.nodes {
		for slot := range n.Directory().Allocated() {
			out = append(out, protocol.MakePID(n.ID(), slot))
		}
	}
	return out
}
