package gam_test

import (
	"testing"

	"github.com/scalestore-go/scalestore/gam"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
)

// throughput runs p on 4 nodes with workers threads a node, without
// faults, and returns the accesses per simulated second (simulated time:
// the same on every machine, so a test may compare it).
func throughput(t *testing.T, p protocolapi.Protocol, workers int, readRatio float64) float64 {
	t.Helper()
	cfg := simrunner.DefaultConfig()
	cfg.Nodes, cfg.Workers, cfg.Keys, cfg.CacheLines = 4, workers, 64, 0
	cfg.Ops, cfg.ReadRatio, cfg.Faults = 6_000, readRatio, "none"
	res, err := simrunner.Run(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatalf("%s %d workers: %v", p.Name, workers, res.Violations)
	}
	return float64(res.Ops) / (float64(res.SimNanos) / 1e9)
}

// The serial queue is what limits GAM's thread scaling (SELCC Fig. 13,
// 14): with the default service time, a node's throughput stops growing
// once its worker thread is busy, below 1e9/Service accesses a second a
// node; without a service time the same runs keep scaling.
func TestThreadScaling(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 16 simulations")
	}
	threads := []int{1, 4, 16, 32}
	curve := func(p protocolapi.Protocol, readRatio float64) []float64 {
		var out []float64
		for _, w := range threads {
			out = append(out, throughput(t, p, w, readRatio))
		}
		t.Logf("%s read=%.2f: Mops/s at %v threads a node: %.2f", p.Name, readRatio, threads, mops(out))
		return out
	}
	seqQ := curve(gam.New(gam.Options{Mode: gam.SEQ, Cost: gam.DefaultCost}), 0.95)
	tsoQ := curve(gam.New(gam.Options{Mode: gam.TSO, Cost: gam.DefaultCost}), 0.95)
	seqFree := curve(gam.New(gam.Options{Mode: gam.SEQ}), 0.95)
	seqW := curve(gam.New(gam.Options{Mode: gam.SEQ, Cost: gam.DefaultCost}), 0.5)
	tsoW := curve(gam.New(gam.Options{Mode: gam.TSO, Cost: gam.DefaultCost}), 0.5)
	bound := 4 * 1e9 / float64(gam.DefaultCost.Service)
	for _, c := range [][]float64{seqQ, tsoQ, seqW, tsoW} {
		if c[3] > bound || c[3] > 1.2*c[2] {
			t.Errorf("with the serial queue, 32 threads give %.2f Mops/s, 16 give %.2f (bound %.2f): the queue does not limit it", c[3]/1e6, c[2]/1e6, bound/1e6)
		}
	}
	if seqQ[2] < 2*seqQ[0] {
		t.Errorf("SEQ does not scale at all before the queue fills: %.2f", mops(seqQ))
	}
	if seqFree[3] < 1.5*seqQ[3] || seqFree[3] < 1.4*seqFree[2] {
		t.Errorf("without a service time SEQ should keep scaling: %.2f against %.2f", mops(seqFree), mops(seqQ))
	}
	if tsoW[0] < 1.3*seqW[0] {
		t.Errorf("TSO's writes do not wait, so one thread is faster than SEQ's: %.2f against %.2f", mops(tsoW), mops(seqW))
	}
}

func mops(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / 1e6
	}
	return out
}
