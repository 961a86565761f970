package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProtocolsLists(t *testing.T) {
	code, out, errOut := runCLI("protocols")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"scalestore  world", "selcc", "nam-cg", "nam-fg", "nam-hybrid", "cell", "msi         generic"} {
		if !strings.Contains(out, want) {
			t.Errorf("protocols does not list %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI("protocols", "--json")
	var rows []protocolRow
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) < 7 {
		t.Fatalf("--json: %d %q", code, out)
	}
}

// sim --protocol NAME dispatches through the registry: a plug-in to the
// generic runner, a built-in to its world (simrunner.RunWorld).
func TestSimDispatchesThroughRegistry(t *testing.T) {
	code, out, errOut := runCLI("sim", "--protocol", "msi", "--seeds", "3", "--faults", "heavy", "--quiet")
	if code != 0 || !strings.Contains(out, "OK: no violation  seeds=3") || !strings.Contains(out, "protocol=msi") {
		t.Fatalf("msi: exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	code, _, errOut = runCLI("sim", "--protocol=msi", "--seeds", "5", "--faults", "heavy", "--mutate", "forget-writeback", "--viz-dir", dir)
	if code != 1 || !strings.Contains(errOut, "history not linearizable") || !strings.Contains(errOut, "replay: scalestore sim --protocol=msi") {
		t.Fatalf("mutant: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "scalestore-seed-1.html")); err != nil {
		t.Errorf("no porcupine visualization: %v", err)
	}
	html := filepath.Join(dir, "trace.html")
	code, _, errOut = runCLI("sim", "--protocol", "msi", "--ops", "200", "--trace-html", html, "--watch-page", "3")
	if b, err := os.ReadFile(html); code != 0 || err != nil || !strings.Contains(string(b), "home node 3") {
		t.Fatalf("trace-html: exit %d, %v\n%s", code, err, errOut)
	}
	code, out, errOut = runCLI("sim", "--protocol", "scalestore", "--ops", "100")
	if code != 0 || !strings.Contains(out, "protocol=chaining") {
		t.Fatalf("scalestore: exit %d\n%s%s", code, out, errOut)
	}
	for _, tc := range []struct{ args, want string }{
		{"--protocol msi --crashes 1", "does not support node crashes"},
		{"--protocol msi --elastic", "does not support elastic membership"},
		{"--protocol msi --workload btree", "does not support the btree workload"},
		{"--protocol msi --mutate skip-invalidation", `no mutant "skip-invalidation"`},
		{"--protocol nope", "or a registered protocol (cell, "},
		{"--protocol msi --opt mode=tso", `protocol msi has no option "mode"`},
		{"--protocol msi --opt mode", "want name=value"},
	} {
		code, _, errOut := runCLI(append([]string{"sim"}, strings.Fields(tc.args)...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestProtocolsListForScripts(t *testing.T) {
	code, out, _ := runCLI("protocols", "--list", "runs")
	if code != 0 || !strings.Contains(out, "msi register\nmsi rmw\n") {
		t.Fatalf("--list runs: %d %q", code, out)
	}
	code, out, _ = runCLI("protocols", "--list", "mutants")
	if code != 0 || !strings.Contains(out, "msi forget-writeback register\n") || strings.Contains(out, "skip-invalidation") {
		t.Fatalf("--list mutants: %d %q", code, out)
	}
	if code, _, errOut := runCLI("protocols", "--list", "x"); code != 2 || !strings.Contains(errOut, "runs or mutants") {
		t.Fatalf("--list x: %d %q", code, errOut)
	}
}

// make swarm and make mutants run what the registry lists: every mutant of
// every protocol once for each workload it is registered under, and a
// swarm run of every plug-in workload.
func TestProtocolsListSwarmAndMutantRuns(t *testing.T) {
	reg, err := registry()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, p := range reg.All() {
		for _, m := range p.Mutants {
			want[m.Name]++
		}
	}
	code, out, _ := runCLI("protocols", "--list", "mutant-runs")
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		m, args, ok := strings.Cut(line, " ")
		if !ok || !strings.Contains(args, "--seeds 200") {
			t.Errorf("mutant run %q: want 'MUTANT FLAGS' with 200 seeds", line)
		}
		got[m]++
	}
	if code != 0 || len(got) != len(want) {
		t.Fatalf("--list mutant-runs: exit %d, %d mutants, want %d", code, len(got), len(want))
	}
	for m, n := range want {
		if got[m] != n {
			t.Errorf("mutant %s: %d runs, want %d", m, got[m], n)
		}
	}
	code, out, _ = runCLI("protocols", "--list", "swarm")
	if code != 0 || !strings.Contains(out, "--protocol msi --workload rmw --seeds 300\n") || strings.Count(out, "\n") < len(reg.Names()) {
		t.Fatalf("--list swarm: %d\n%s", code, out)
	}
}

// A plug-in protocol's scenarios run through 'scenario' like the paper's.
func TestPlugInScenario(t *testing.T) {
	code, out, _ := runCLI("scenario", "list")
	if code != 0 || !strings.Contains(out, "msi-invalidate") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	html := filepath.Join(t.TempDir(), "s.html")
	code, out, errOut := runCLI("scenario", "msi-fetch", "--html", html)
	if code != 0 || !strings.Contains(out, "Fetch key=0 keep") || !strings.Contains(out, "WriteBack key=0 value=1") {
		t.Fatalf("msi-fetch: %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(html); err != nil {
		t.Fatal(err)
	}
}

// A built-in protocol's options come from its registration: --opt sets
// them, and the old flags its registration names (--gamma, --no-priority,
// --memory-nodes) are aliases that run the same seed bit for bit; a flag
// or an option the selected protocol does not have is refused.
func TestSimBuiltInOptions(t *testing.T) {
	hash := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(append([]string{"sim", "--seed", "2", "--ops", "300", "--json", "--quiet"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		var sum struct {
			TraceHash string `json:"trace_hash"`
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.TraceHash == "" {
			t.Fatalf("%v: no trace hash in %q: %v", args, out, err)
		}
		return sum.TraceHash
	}
	plain := hash("--protocol", "selcc")
	flags := hash("--protocol", "selcc", "--gamma", "2", "--no-priority", "--memory-nodes", "1")
	opts := hash("--protocol", "selcc", "--opt", "gamma=2", "--opt", "priority=off", "--opt", "memory-nodes=1")
	if flags != opts || flags == plain {
		t.Errorf("selcc: the alias flags run %s, the options %s, the defaults %s: want the first two equal and unlike the third", flags, opts, plain)
	}
	if a, b := hash("--workload", "nam-fg", "--memory-nodes", "3"), hash("--protocol", "nam-fg", "--opt", "memory-nodes=3"); a != b {
		t.Errorf("nam-fg: --memory-nodes 3 runs %s, --opt memory-nodes=3 %s", a, b)
	}
	for _, tc := range []struct{ args, want string }{
		{"--gamma 2", "--gamma: protocol scalestore has no option it sets"},
		{"--protocol selcc --opt bogus=1", `protocol selcc has no option "bogus"`},
		{"--protocol selcc --opt priority=maybe", "option priority=maybe: want on or off"},
		{"--protocol selcc --opt memory-nodes=0", "option memory-nodes=0: want at least 1"},
		{"--protocol selcc --gamma 2 --opt gamma=3", "--gamma and --opt gamma=3 disagree"},
	} {
		code, _, errOut := runCLI(append([]string{"sim"}, strings.Fields(tc.args)...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
