package checker

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"
)

// genRegisterHistory draws a small history of one register with unique
// writes: a sequential run (each op takes effect at its point) whose
// intervals are then widened around their points, on a coarse clock so
// that calls and returns often tie; sometimes a read's result is replaced
// by another written value, or 0, which may or may not break it.
func genRegisterHistory(t *rapid.T) []Op {
	n := rapid.IntRange(1, 12).Draw(t, "ops")
	var ops []Op
	cur, next, at := uint64(0), uint64(1), int64(10)
	var written []uint64
	for i := range n {
		at += int64(rapid.IntRange(0, 3).Draw(t, "gap"))
		op := Op{Client: i % 4, Page: 7}
		if rapid.Bool().Draw(t, "write") {
			op.Kind, op.Value = KindWrite, next
			cur, written = next, append(written, next)
			next++
		} else {
			op.Kind, op.Value = KindRead, cur
		}
		op.Call = at - int64(rapid.IntRange(0, 6).Draw(t, "before"))
		op.Return = at + int64(rapid.IntRange(0, 6).Draw(t, "after"))
		ops = append(ops, op)
	}
	if rapid.Bool().Draw(t, "perturb") {
		i := rapid.IntRange(0, len(ops)-1).Draw(t, "which")
		if ops[i].Kind == KindRead {
			choices := append([]uint64{0}, written...)
			ops[i].Value = choices[rapid.IntRange(0, len(choices)-1).Draw(t, "value")]
		}
	}
	return ops
}

func porcupineVerdict(ops []Op) bool {
	history := make([]porcupine.Operation, len(ops))
	ins := make([]regOp, len(ops))
	for i, op := range ops {
		ins[i] = regOp{page: op.Page, value: op.Value, read: op.Read, write: op.Kind != KindRead, rmw: op.Kind == KindRMW}
		history[i] = porcupine.Operation{ClientId: op.Client, Input: &ins[i], Call: op.Call, Return: op.Return}
	}
	return porcupine.CheckOperations(registerModel, history)
}

func zonesVerdict(t interface{ Fatalf(string, ...any) }, ops []Op) bool {
	res, _ := Check(ops, 0)
	if res.Decided != res.Partitions || res.Unknown {
		t.Fatalf("unique writes not decided by zones: %+v", res)
	}
	return res.Ok
}

// TestZonesAgreeWithPorcupine: on every drawn history, the zones' verdict
// is porcupine's.
func TestZonesAgreeWithPorcupine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ops := genRegisterHistory(t)
		if got, want := zonesVerdict(t, ops), porcupineVerdict(ops); got != want {
			t.Fatalf("zones say linearizable=%v, porcupine %v, on %+v", got, want, ops)
		}
	})
}

// The same comparison on 5,000 histories of a fixed seed, where both
// verdicts must occur often (rapid's own seed changes from run to run).
func TestZonesAgreeWithPorcupineOnBothVerdicts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var ok, bad int
	for range 5000 {
		var ops []Op
		cur, next, at := uint64(0), uint64(1), int64(10)
		for i := range 1 + rng.IntN(10) {
			at += rng.Int64N(4)
			op := Op{Client: i % 4, Page: 7, Call: at - rng.Int64N(4), Return: at + rng.Int64N(4)}
			if rng.IntN(2) == 0 {
				op.Kind, op.Value, cur = KindWrite, next, next
				next++
			} else {
				op.Kind, op.Value = KindRead, cur
			}
			ops = append(ops, op)
		}
		var reads []int
		for i, op := range ops {
			if op.Kind == KindRead {
				reads = append(reads, i)
			}
		}
		if len(reads) > 0 && rng.IntN(3) > 0 {
			i := reads[rng.IntN(len(reads))]
			ops[i].Value = rng.Uint64N(next) // any written value, or 0: maybe the right one
		}
		want := porcupineVerdict(ops)
		if got := zonesVerdict(t, ops); got != want {
			t.Fatalf("zones say linearizable=%v, porcupine %v, on %+v", got, want, ops)
		}
		if want {
			ok++
		} else {
			bad++
		}
	}
	if ok < 500 || bad < 500 {
		t.Fatalf("%d linearizable and %d not: both verdicts must be common", ok, bad)
	}
}

func TestZonesCases(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []Op
		ok   bool
	}{
		{"stale read after a completed write", []Op{w(0, 1, 5, 0, 10), r(1, 1, 0, 20, 30)}, false},
		{"read of the initial value before the write", []Op{r(1, 1, 0, 0, 5), w(0, 1, 5, 6, 10)}, true},
		{"read of a value never written", []Op{w(0, 1, 5, 0, 10), r(1, 1, 6, 20, 30)}, false},
		{"read over before its write was called", []Op{r(1, 1, 5, 0, 4), w(0, 1, 5, 5, 10)}, false},
		{"read returning as its write is called: concurrent", []Op{r(1, 1, 5, 0, 5), w(0, 1, 5, 5, 10)}, true},
		{"a write returning as the stale read is called: concurrent", []Op{w(0, 1, 5, 0, 10), r(1, 1, 0, 10, 30)}, true},
		{"two overlapping writes, read in both orders", []Op{
			w(0, 1, 5, 0, 10), w(1, 1, 6, 0, 10), r(2, 1, 5, 20, 30), r(3, 1, 6, 40, 50)}, false},
		{"two overlapping writes, the later read consistently", []Op{
			w(0, 1, 5, 0, 10), w(1, 1, 6, 0, 10), r(2, 1, 6, 20, 30), r(3, 1, 6, 40, 50)}, true},
		{"a write inside another value's lifetime", []Op{
			w(0, 1, 5, 0, 10), r(1, 1, 5, 20, 30), w(2, 1, 6, 12, 18), r(3, 1, 5, 40, 50)}, false},
		{"pages are separate registers", []Op{w(0, 1, 5, 0, 10), r(1, 2, 0, 20, 30)}, true},
	} {
		res, _ := Check(c.ops, 0)
		if res.Ok != c.ok || res.Decided != res.Partitions {
			t.Errorf("%s: %+v, want ok=%v decided by zones", c.name, res, c.ok)
		}
		if want := porcupineVerdict(c.ops); want != c.ok {
			t.Errorf("%s: porcupine says %v: the case is wrong", c.name, want)
		}
	}
}

// A page too concurrent for porcupine's search (140 clients, long
// overlapping intervals) is decided by zones; one stale read in it is found.
func TestZonesDecideLargeHistories(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ops []Op
	cur, next := uint64(0), uint64(1)
	for i := range 50_000 {
		at := int64(i) * 10
		op := Op{Client: i % 140, Page: 3, Call: at - rng.Int64N(3000), Return: at + rng.Int64N(3000)}
		if rng.IntN(4) == 0 {
			op.Kind, op.Value = KindWrite, next
			cur = next
			next++
		} else {
			op.Kind, op.Value = KindRead, cur
		}
		ops = append(ops, op)
	}
	res, _ := Check(ops, time.Second)
	if !res.Ok || res.Decided != 1 || res.Unknown {
		t.Fatalf("large linearizable history: %+v", res)
	}
	// Make one read, far from its neighbours' writes, return the first
	// value again.
	for i := 40_000; ; i++ {
		if ops[i].Kind == KindRead && ops[i].Value > 100 {
			ops[i].Value = 1
			break
		}
	}
	res, _ = Check(ops, time.Second)
	if res.Ok || len(res.BadPages) != 1 || res.BadPages[0] != 3 {
		t.Fatalf("a stale read in a large history: %+v", res)
	}
}

// Read-modify-writes: a chain of them is linearizable; two that read the
// same value and both took effect are a lost update.
func TestRMW(t *testing.T) {
	rmw := func(client int, read, wrote uint64, call, ret int64) Op {
		return Op{Client: client, Page: 1, Kind: KindRMW, Read: read, Value: wrote, Call: call, Return: ret}
	}
	chain := []Op{rmw(0, 0, 1, 0, 10), rmw(1, 1, 2, 5, 20), r(2, 1, 2, 25, 30), rmw(0, 2, 3, 15, 40)}
	if res, _ := Check(chain, 0); !res.Ok || res.Decided != 0 {
		t.Fatalf("a chain of rmws: %+v", res)
	}
	lost := []Op{rmw(0, 0, 1, 0, 10), rmw(1, 0, 2, 0, 10)}
	if res, _ := Check(lost, 0); res.Ok || len(res.BadPages) != 1 {
		t.Fatalf("a lost update: %+v", res)
	}
	if got := describeOperation(&regOp{rmw: true, write: true, read: 4, value: 9}, nil); got != "rmw 4 -> 9" {
		t.Fatalf("describeOperation = %q", got)
	}
}
