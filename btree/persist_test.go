package btree

import (
	"errors"
	"testing"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/memfile"
)

// persistRig records what a tree writes through: single pages (Persist)
// and groups (PersistAll).
type persistRig struct {
	rt      *actors.Local
	tr      *Tree
	singles []protocol.PID
	groups  [][]protocol.PID
	failAt  int // PersistAll call (1-based) that fails; 0: none
}

func (r *persistRig) session(w *bufmgr.Worker) Session {
	return Session{Cache: r.rt.Node().Cache(), Worker: w, Allocate: r.rt.Allocate,
		Persist: func(w *bufmgr.Worker, g *bufmgr.ExclusiveGuard) error {
			r.singles = append(r.singles, g.PID())
			return nil
		},
		PersistAll: func(w *bufmgr.Worker, gs ...*bufmgr.ExclusiveGuard) error {
			var pids []protocol.PID
			for _, g := range gs {
				pids = append(pids, g.PID())
			}
			r.groups = append(r.groups, pids)
			if len(r.groups) == r.failAt {
				return errors.New("injected write-through failure")
			}
			return nil
		}}
}

func newPersistRig(t *testing.T) *persistRig {
	rt, err := actors.NewLocal(actors.Config{CacheFrames: 8192}, memfile.New(1<<14, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	r := &persistRig{rt: rt}
	if err := rt.Do(func(w *bufmgr.Worker) error {
		r.tr, err = Create(r.session(w))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *persistRig) put(key, val []byte) error {
	return r.rt.Do(func(w *bufmgr.Worker) error { return r.tr.Put(r.session(w), key, val) })
}

// A split writes its pages through in one PersistAll: the new page, the
// new root and the catalog (root split) or the parent, the split node last.
func TestSplitPersistsPagesTogether(t *testing.T) {
	r := newPersistRig(t)
	val := make([]byte, 200)
	created := len(r.singles)
	for i := range 3000 {
		if err := r.put(u64key(uint64(i)*7919%3001), val); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.groups) < 10 {
		t.Fatalf("%d splits written through together; want many", len(r.groups))
	}
	if got := len(r.singles) - created; got != 3000 {
		t.Errorf("%d single write-throughs for 3000 puts; want one each (splits go in groups)", got)
	}
	rootSplits := 0
	for _, g := range r.groups {
		switch len(g) {
		case 3:
		case 4:
			rootSplits++
			if g[2] != r.tr.Catalog() {
				t.Errorf("root split %v: the catalog is not third", g)
			}
		default:
			t.Fatalf("split wrote %v: want 3 pages, or 4 for a root split", g)
		}
		// The new page comes first: newer than the split node (last) and
		// than the parent it is linked from.
		if last := g[len(g)-1]; last.Slot() > g[0].Slot() || len(g) == 3 && g[1].Slot() > g[0].Slot() {
			t.Errorf("split %v: the first page is not the new one", g)
		}
	}
	if rootSplits == 0 {
		t.Error("no root split seen")
	}
}

// A split whose group write-through fails is undone: the put fails, every
// key put before is still found, and the tree goes on taking puts.
func TestSplitPersistFailureUndoes(t *testing.T) {
	r := newPersistRig(t)
	r.failAt = 5
	val := make([]byte, 200)
	var kept [][]byte
	failed := 0
	for i := range 1500 {
		k := u64key(uint64(i) * 7919 % 1501)
		if err := r.put(k, val); err != nil {
			failed++
			continue
		}
		kept = append(kept, k)
	}
	if failed != 1 {
		t.Fatalf("%d puts failed; want the one whose split's write-through failed", failed)
	}
	if err := r.rt.Do(func(w *bufmgr.Worker) error {
		for _, k := range kept {
			if _, ok, err := r.tr.Get(r.session(w), k, nil); err != nil || !ok {
				t.Fatalf("key %x: found %v, %v after the failed split", k, ok, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
