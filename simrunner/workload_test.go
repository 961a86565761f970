package simrunner

import (
	"testing"
)

// The workload's shapes the figures use: locality repeats a worker's key,
// an operation's CPU paces the workers, the result separates the
// workload from the final reads, and the step checks can be left out
// while the checks at rest still run.
func TestWorkloadShapes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Ops, cfg.Keys, cfg.Faults = 400, 64, "none"
	plain, err := Run(toy(), cfg)
	if err != nil || plain.Failed() {
		t.Fatalf("%v %v", err, plain.Violations)
	}
	if plain.WorkloadOps != cfg.Ops || plain.Ops != cfg.Ops+cfg.Keys {
		t.Fatalf("workload %d of %d operations: want %d and the %d final reads", plain.WorkloadOps, plain.Ops, cfg.Ops, cfg.Keys)
	}
	// (The toy's final reads are node 0's, its home's, sent to itself:
	// no message on the network.)
	if plain.WorkloadMessages == 0 || plain.WorkloadMessages > plain.Messages {
		t.Fatalf("workload messages %d of %d", plain.WorkloadMessages, plain.Messages)
	}
	// The same key again, per worker.
	repeats := func(res Result) float64 {
		prev := map[int]uint64{}
		same := 0
		for _, op := range res.History.Ops()[:res.WorkloadOps] {
			if k, ok := prev[op.Client]; ok && k == op.Page {
				same++
			}
			prev[op.Client] = op.Page
		}
		return float64(same) / float64(res.WorkloadOps)
	}
	loc := cfg
	loc.Locality = 0.5
	local, err := Run(toy(), loc)
	if err != nil || local.Failed() {
		t.Fatalf("%v %v", err, local.Violations)
	}
	if r, p := repeats(local), repeats(plain); r < 0.4 || r > 0.6 || p > 0.1 {
		t.Errorf("an access to the worker's previous key: %.2f with locality 0.5, %.2f without: want about 0.5 and 1/64", r, p)
	}
	// 10 us of CPU an access, back to back: 2,000 ns of pause and a
	// round trip no longer decide the pace.
	paced := cfg
	paced.OpNanos = 10_000
	slow, err := Run(toy(), paced)
	if err != nil || slow.Failed() {
		t.Fatalf("%v %v", err, slow.Violations)
	}
	perWorker := cfg.Ops / (cfg.Nodes * cfg.Workers)
	if min := int64(perWorker) * paced.OpNanos; slow.SimNanos < min {
		t.Errorf("%d accesses a worker of 10 us each took %d ns: want %d at least", perWorker, slow.SimNanos, min)
	}
	for _, op := range slow.History.Ops()[:slow.WorkloadOps] {
		if op.Return-op.Call < paced.OpNanos {
			t.Fatalf("an access of %d ns with 10 us of CPU: its latency must count the CPU, as the built-in loops' do", op.Return-op.Call)
		}
	}
	if _, err := Run(toy(), Config{Nodes: 1, Workers: 1, Keys: 1, Locality: 2}); err == nil {
		t.Error("a locality of 2 must be refused")
	}
	// A mutant that breaks an invariant at some step: caught after every
	// step, and with the step checks left out only if the state still
	// breaks it at rest (the toy's does).
	bad := cfg
	bad.Mutant = "invariant"
	caught, err := Run(toy(), bad)
	if err != nil || !caught.Failed() {
		t.Fatalf("invariant mutant: %v, failed %v", err, caught.Failed())
	}
	bad.SkipStepChecks = true
	atRest, err := Run(toy(), bad)
	if err != nil || !atRest.Failed() {
		t.Fatalf("invariant mutant without step checks: %v, failed %v: the check at rest must still catch it", err, atRest.Failed())
	}
	if atRest.Steps <= caught.Steps {
		t.Errorf("without step checks the run went %d steps, with them %d: want it to run on to rest", atRest.Steps, caught.Steps)
	}
}
