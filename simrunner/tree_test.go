package simrunner

import (
	"fmt"
	"testing"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// mapTree is an index in one map, each operation atomic; key 0 is
// unavailable (as a page the fault plan made unreadable would be).
type mapTree struct{ m map[uint64]uint64 }

func (t *mapTree) Access(protocolapi.Op) protocolapi.Result { return protocolapi.Result{} }

func (t *mapTree) Get(key uint64) (uint64, bool, error) {
	if key == 0 {
		return 0, false, fmt.Errorf("key 0: %w", protocolapi.ErrUnavailable)
	}
	v, ok := t.m[key]
	return v, ok, nil
}

func (t *mapTree) Put(key, value uint64) error { t.m[key] = value; return nil }
func (t *mapTree) Delete(key uint64) error     { delete(t.m, key); return nil }

func (t *mapTree) Scan(from, to uint64, visit func(key, value uint64) bool) error {
	for k := from; k < to; k++ {
		if v, ok := t.m[k]; ok && !visit(k, v) {
			break
		}
	}
	return nil
}

// The index mix: gets, puts, deletes and scans, a scan a read of every key
// it covers at one call and return, a get of an unavailable key counted
// (and left out); the history is linearizable.
func TestIndexMix(t *testing.T) {
	plan, _ := sim.Plan("none", nil)
	w := sim.New(1, 2, sim.DefaultLatency, plan)
	tree := &mapTree{m: map[uint64]uint64{}}
	var fails []string
	l := &Workers{W: w, Ops: 2000, ReadRatio: 0.5, Mix: MixIndex, ScanLen: 6, StartSpread: 1000,
		Keys: UniformKeys(16), Hist: checker.NewHistory(4000),
		Fail: func(f string, a ...any) { fails = append(fails, fmt.Sprintf(f, a...)) }}
	var cos []*sim.Coroutine
	for n := range 2 {
		for k := range 2 {
			id := protocolapi.Worker{Node: protocol.NodeID(n), Slot: k, Client: 2*n + k}
			cos = append(cos, l.SpawnTree(id, func(*sim.Coroutine) protocolapi.Accessor { return tree }))
		}
	}
	if !(sim.Drive{Phase: "test", LastOp: &l.LastOp, Violations: func() int { return len(fails) },
		Fail: func(f string, a ...any) { fails = append(fails, fmt.Sprintf(f, a...)) }}).Run(w, cos) {
		t.Fatalf("the run failed: %v", fails)
	}
	if len(fails) > 0 || l.Started != 2000 || l.Completed != 2000 || l.Unavailable == 0 {
		t.Fatalf("fails %v, %d started, %d completed, %d unavailable", fails, l.Started, l.Completed, l.Unavailable)
	}
	ops := l.Hist.Ops()
	scanned, deletes := 0, 0
	for i, op := range ops {
		if i > 0 && op.Kind == checker.KindRead && ops[i-1].Client == op.Client && ops[i-1].Call == op.Call && op.Page == ops[i-1].Page+1 {
			scanned++
		}
		if op.Kind == checker.KindWrite && op.Value == 0 {
			deletes++
		}
	}
	if scanned == 0 || deletes == 0 {
		t.Fatalf("%d keys scanned after the first of a scan, %d deletes: want both", scanned, deletes)
	}
	if lin, _ := checker.Check(ops, 0); !lin.Ok {
		t.Fatalf("not linearizable: %v", lin.BadPages)
	}
}
