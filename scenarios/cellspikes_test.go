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
	rows, at := runIndexFigure(t, "cell-selector-spikes")
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

// Cell Fig. 8's claim: while writers grow the tree, searches that the
// selector moves to the client side free the server's CPU, so that the
// meganode splits finish sooner and the writers put more, and the
// searches' tail stays lower than server-side searches'.
func TestCellSplitsFigure(t *testing.T) {
	_, at := runIndexFigure(t, "cell-splits")
	server, selector := at["server, 16 writers put"], at["selector, 16 writers put"]
	if server.MegaSplits == 0 || selector.MegaSplits == 0 {
		t.Fatalf("meganode splits: %d server-side, %d with the selector: the writers do not grow the tree enough", server.MegaSplits, selector.MegaSplits)
	}
	if selector.SplitMicros >= server.SplitMicros || selector.WriterPuts <= server.WriterPuts {
		t.Errorf("a split takes %.0f us with the selector, %.0f server-side; the writers put %d against %d: want the selector's splits shorter and more puts",
			selector.SplitMicros, server.SplitMicros, selector.WriterPuts, server.WriterPuts)
	}
	if selector.P90us >= server.P90us {
		t.Errorf("search p90 %.1f us with the selector, %.1f server-side: want the selector's lower", selector.P90us, server.P90us)
	}
	if idle := at["server, writers idle"]; idle.MegaSplits != 0 || idle.WriterPuts != 0 {
		t.Errorf("idle writers: %d puts, %d splits", idle.WriterPuts, idle.MegaSplits)
	}
}

// runIndexFigure runs the index figure name and returns its rows, and
// their results by label.
func runIndexFigure(t *testing.T, name string) ([]IndexRow, map[string]IndexBenchResult) {
	t.Helper()
	f, ok := IndexFigureByName(name)
	if !ok {
		t.Fatalf("no figure %s", name)
	}
	rows, err := RunIndexFigure(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]IndexBenchResult{}
	for _, r := range rows {
		at[r.Label] = r.IndexBenchResult
	}
	return rows, at
}
