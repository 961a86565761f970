package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestYCSBSkipLoad: a run on a store loaded by an earlier run starts at
// once with --skip-load, and a store that does not hold exactly --records
// records is refused with a clear error instead of measuring another data
// set.
func TestYCSBSkipLoad(t *testing.T) {
	dir := t.TempDir()
	common := []string{"ycsb", "--data", dir, "--threads", "2", "--duration", "100ms", "--warmup", "20ms", "--cache", "256KiB", "--json"}
	runJSON := func(extra ...string) map[string]any {
		t.Helper()
		code, out, errOut := runCLI(append(append([]string{}, common...), extra...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var res map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			t.Fatalf("%v: last line is not JSON: %v\n%s", extra, err, out)
		}
		return res
	}
	loaded := runJSON("--records", "3000")
	if loaded["load_seconds"].(float64) <= 0 || loaded["ops"].(float64) <= 0 {
		t.Fatalf("first run: %v", loaded)
	}
	again := runJSON("--records", "3000", "--skip-load")
	if again["load_seconds"].(float64) != 0 || again["ops"].(float64) <= 0 || again["store_pages"] != loaded["store_pages"] {
		t.Fatalf("run with --skip-load: %v (first run %v)", again, loaded)
	}
	// Batched reads on a store 4x the cache: the batch's lookups miss,
	// park and read from the store, and every one counts.
	batched := runJSON("--records", "3000", "--skip-load", "--batch", "16", "--read-ratio", "1")
	if batched["batch"].(float64) != 16 || batched["ops"].(float64) <= 0 || batched["reads_from_ssd"].(float64) <= 0 {
		t.Fatalf("run with --batch 16: %v", batched)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--records", "3000", "--batch", "0"}, "--batch in 1..256"},
		{[]string{"--records", "4000", "--skip-load"}, "does not hold 4000 records"},
		{[]string{"--records", "2000", "--skip-load"}, "holds more than 2000 records"},
	} {
		code, _, errOut := runCLI(append(append([]string{}, common...), tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCLI("ycsb", "--records", "10", "--skip-load"); code != 2 || !strings.Contains(errOut, "--data") {
		t.Errorf("--skip-load in memory: exit %d, stderr %q", code, errOut)
	}
}
