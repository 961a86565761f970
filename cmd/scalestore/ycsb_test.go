package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestSSDVsFioScript runs bench/ssd-vs-fio.sh (make bench-ssd) on a tiny
// store: it loads the records once, prints a row per pair and the overall
// ratio, and refuses bad flags. It needs fio and a filesystem that takes
// O_DIRECT; without them it is skipped.
func TestSSDVsFioScript(t *testing.T) {
	if _, err := exec.LookPath("fio"); err != nil {
		t.Skip("fio not installed")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "bench", "ssd-vs-fio.sh"))
	if err != nil {
		t.Fatal(err)
	}
	bin := scalestoreBinary(t)
	data := filepath.Join(t.TempDir(), "ssd")
	cmd := exec.Command("bash", script, "--pairs", "2", "--records", "3000", "--cache", "256KiB",
		"--threads", "2", "--duration", "1", "--warmup", "0", "--data", data, "--bin", bin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "O_DIRECT") {
			t.Skipf("the temporary directory refuses O_DIRECT: %s", stderr.String())
		}
		t.Fatalf("script: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(stderr.String(), "loading 3000 records") {
		t.Errorf("the first run did not load the records: %s", stderr.String())
	}
	row := regexp.MustCompile(`(?m)^[12] +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9]+ +[0-9]+%/[0-9]+%`)
	if n := len(row.FindAllString(out, -1)); n != 2 {
		t.Errorf("%d pair rows, want 2:\n%s", n, out)
	}
	if !regexp.MustCompile(`overall: [0-9]+ ops/s against [0-9]+ IOPS, [0-9.]+x`).MatchString(out) {
		t.Errorf("no overall line:\n%s", out)
	}
	// A second call reuses the records instead of loading them again.
	again := exec.Command("bash", script, "--pairs", "1", "--records", "3000", "--cache", "256KiB",
		"--threads", "2", "--duration", "1", "--warmup", "0", "--data", data, "--bin", bin)
	both, err := again.CombinedOutput()
	if err != nil || strings.Contains(string(both), "loading") {
		t.Errorf("second call: %v\n%s", err, both)
	}
	if code := exec.Command("bash", script, "--pairs", "0").Run(); code == nil {
		t.Error("--pairs 0 accepted")
	}
}
