package scenarios

import "testing"

// The selector's defenses against transient conditions (Cell §2.5): when
// the server stalls now and then, rejecting the stalls' samples keeps the
// selector on its split, and its tail stays where it was without stalls
// (the moving average without them sends searches away and back, p99
// about 40% higher); when the server stalls often, the stalls are the
// condition, and the defenses cost throughput (docs/indexes.md says
// both).
func TestCellSelectorSpikes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a figure's worth of runs (make test runs it in its plain pass)")
	}
	f, ok := IndexFigureByName("cell-selector-spikes")
	if !ok {
		t.Fatal("no figure cell-selector-spikes")
	}
	rows, err := RunIndexFigure(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]IndexBenchResult{}
	for _, r := range rows {
		at[r.Label] = r.IndexBenchResult
	}
	with, without := at["selector spikes=50x-200us-every-5000us"], at["selector-without-defenses spikes=50x-200us-every-5000us"]
	if with.P99us >= without.P99us || with.OpsPerSec < without.OpsPerSec {
		t.Errorf("rare stalls: defended %.0f ops/s p99 %.1f us, undefended %.0f ops/s p99 %.1f us: want the defended tail lower and no less throughput",
			with.OpsPerSec, with.P99us, without.OpsPerSec, without.P99us)
	}
	calm := at["selector spikes=none"]
	if with.P99us > 1.1*calm.P99us {
		t.Errorf("rare stalls: defended p99 %.1f us against %.1f without stalls: want within 10%%", with.P99us, calm.P99us)
	}
	for _, r := range rows {
		if r.ErrorMessage != "" {
			t.Errorf("%s: %s", r.Label, r.ErrorMessage)
		}
	}
}
