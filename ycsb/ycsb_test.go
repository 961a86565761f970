package ycsb

import (
	"sync/atomic"
	"testing"
	"time"
)

// countingEngine counts the operations it serves.
type countingEngine struct {
	*Baseline
	ops atomic.Int64
}

func (e *countingEngine) Get(key, dst []byte) ([]byte, bool, error) {
	e.ops.Add(1)
	return e.Baseline.Get(key, dst)
}

// TestMeasuredWindow: OnMeasure and OnStop bracket exactly the measured
// run, so counters read in them cover the operations Run reports and not
// the warm-up's.
func TestMeasuredWindow(t *testing.T) {
	e := &countingEngine{Baseline: NewBaseline()}
	cfg := Config{Records: 1000, ReadRatio: 1, Threads: 2, Duration: 200 * time.Millisecond, Warmup: 200 * time.Millisecond, Seed: 1}
	if _, err := Load(e, cfg); err != nil {
		t.Fatal(err)
	}
	var atMeasure, atStop int64
	calls := 0
	cfg.OnMeasure = func() { atMeasure = e.ops.Load(); calls++ }
	cfg.OnStop = func() { atStop = e.ops.Load(); calls += 10 }
	res, err := Run(e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 11 {
		t.Fatalf("OnMeasure/OnStop called %d (want once each, 11)", calls)
	}
	if atMeasure == 0 {
		t.Fatal("no warm-up operation before OnMeasure")
	}
	window := atStop - atMeasure
	// The edges are not atomic with the workers (the scheduler may pause
	// the caller between a hook and the flag it sets), so allow slack; the
	// warm-up, as long as the run, must be outside the window.
	if d := window - res.Ops; d < -res.Ops/5 || d > res.Ops/5 {
		t.Fatalf("engine saw %d operations between OnMeasure and OnStop, Run reports %d", window, res.Ops)
	}
	if window > atStop*3/4 {
		t.Fatalf("window holds %d of %d operations: the warm-up leaked into it", window, atStop)
	}
}
