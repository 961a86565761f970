package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/checker"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"sim", "--help"}, {"scenario", "--help"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || !strings.Contains(out+errOut, "Usage") {
			t.Errorf("%v: code %d, no usage:\n%s%s", args, code, out, errOut)
		}
	}
	if code, _, _ := runCLI(); code != 2 {
		t.Errorf("no command: exit %d, want 2", code)
	}
	if code, _, e := runCLI("frobnicate"); code != 2 || !strings.Contains(e, "unknown command") {
		t.Errorf("unknown command: %d %q", code, e)
	}
}

func TestSimBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "--nodes", "0"},
		{"sim", "--faults", "storm"},
		{"sim", "--protocol", "paxos"},
		{"sim", "--mutate", "nope"},
		{"sim", "--zipf", "1.2"},
		{"sim", "extra"},
		{"sim", "--seeds", "2", "--trace-out", "x"},
	} {
		if code, _, e := runCLI(args...); code != 2 || e == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, e)
		}
	}
}

// --json prints one object as the last line with the documented keys.
func TestSimJSON(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(dir, "h.jsonl")
	code, out, errOut := runCLI("sim", "--seed", "3", "--ops", "500", "--faults", "heavy", "--json", "--history-out", hist)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last line is not JSON: %v", err)
	}
	for _, k := range []string{"seeds", "ops", "violations", "first_failing_seed", "trace_hash", "sim_messages", "wall_seconds", "sim_messages_per_sec"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if m["ops"].(float64) != 500 || m["violations"].(float64) != 0 || m["first_failing_seed"] != nil {
		t.Errorf("unexpected summary %v", m)
	}
	f, err := os.Open(hist)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops, err := checker.ReadJSONLines(f)
	if err != nil || len(ops) != 500 {
		t.Fatalf("history: %d ops, %v", len(ops), err)
	}
}

// --double-faults lets crashes take both copies of a directory: the run
// passes its checks, says how many operations failed on a lost directory,
// and is refused where the simulator cannot run it.
func TestSimDoubleFaults(t *testing.T) {
	code, out, errOut := runCLI("sim", "--replicas", "2", "--crashes", "6", "--double-faults", "--seeds", "40", "--faults", "heavy", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if !strings.Contains(out+errOut, "failed on a directory that had lost both copies") {
		t.Errorf("no line for the operations on lost directories:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last line is not JSON: %v", err)
	}
	if n, _ := m["lost_directory_ops"].(float64); n == 0 || m["violations"].(float64) != 0 {
		t.Errorf("lost_directory_ops %v, violations %v: want some lost, none violated", m["lost_directory_ops"], m["violations"])
	}
	for _, args := range [][]string{
		{"sim", "--replicas", "2", "--crashes", "2", "--double-faults", "--workload", "btree"},
		{"sim", "--crashes", "2", "--double-faults"},
	} {
		if code, _, e := runCLI(args...); code != 2 || !strings.Contains(e, "double faults") {
			t.Errorf("%v: exit %d, stderr %q, want a refusal naming double faults", args, code, e)
		}
	}
}

// A violation exits 1 and prints the seed, the replay command and the
// visualization.
func TestSimViolationReport(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI("sim", "--seeds", "5", "--ops", "800", "--faults", "heavy", "--mutate", "skip-invalidation",
		"--viz-dir", dir, "--json")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "replay: scalestore sim --ops 800 --faults heavy --mutate skip-invalidation --viz-dir") ||
		!strings.Contains(errOut, "--seed 1") {
		t.Errorf("no replay command:\n%s", errOut)
	}
	var m map[string]any
	lines := strings.Split(strings.TrimSpace(out), "\n")
	_ = json.Unmarshal([]byte(lines[len(lines)-1]), &m)
	if m["violations"].(float64) != 1 || m["first_failing_seed"].(float64) != 1 {
		t.Errorf("summary %v", m)
	}
}

// A seed porcupine could not decide is neither clean nor a violation: it
// is listed with its replay command and the run exits 3, or 0 with
// --allow-undecided.
func TestSimUndecidedSeeds(t *testing.T) {
	// 48 pages: porcupine must answer for every one before the 1 ns timer
	// fires, which its random select makes vanishingly unlikely.
	args := []string{"sim", "--workload", "rmw", "--seeds", "2", "--ops", "20000", "--pages", "48", "--check-timeout", "1ns", "--json"}
	code, out, errOut := runCLI(args...)
	if code != 3 {
		t.Fatalf("exit %d, want 3\n%s", code, errOut)
	}
	for _, want := range []string{"undecided: seed 1", "replay: scalestore sim --workload rmw --ops 20000 --pages 48 --check-timeout 1ns --seed 2",
		"2 of 2 seeds undecided [1 2]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	var m struct {
		Violations   int      `json:"violations"`
		Linearizable bool     `json:"linearizable"`
		Undecided    []uint64 `json:"undecided_seeds"`
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil || m.Violations != 0 || m.Linearizable || len(m.Undecided) != 2 {
		t.Errorf("summary %+v (%v)", m, err)
	}
	if code, _, errOut := runCLI(append(args, "--allow-undecided")...); code != 0 || !strings.Contains(errOut, "allowed by --allow-undecided") {
		t.Errorf("--allow-undecided: exit %d\n%s", code, errOut)
	}
}

// A panic inside a simulated node is a violation of its seed, with the
// replay command and the JSON summary, not a crash.
func TestSimPanicIsAViolation(t *testing.T) {
	code, out, errOut := runCLI("sim", "--seed", "6", "--ops", "400", "--mutate", "forget-owner-sharer", "--viz-dir", t.TempDir(), "--json")
	if code != 1 || !strings.Contains(errOut, "panic in node") || !strings.Contains(errOut, "replay: scalestore sim --ops 400 --mutate forget-owner-sharer") ||
		!strings.Contains(out, `"violations":1`) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestScenarioCLI(t *testing.T) {
	code, out, _ := runCLI("scenario", "list")
	if code != 0 || !strings.Contains(out, "exclusive-conflict") {
		t.Fatalf("list: %d %s", code, out)
	}
	code, out, _ = runCLI("scenario", "chaining", "--requesters", "6", "--json")
	if code != 0 {
		t.Fatalf("chaining: exit %d", code)
	}
	var m struct {
		Messages     int   `json:"messages"`
		RequestOrder []int `json:"request_order"`
		GrantOrder   []int `json:"grant_order"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.Messages == 0 || len(m.GrantOrder) != 6 {
		t.Fatalf("chaining JSON: %v %+v", err, m)
	}
	if code, _, _ := runCLI("scenario", "--protocol", "fifo", "base-case"); code != 0 {
		t.Fatal("flags before the name rejected")
	}
	if code, _, e := runCLI("scenario", "nope"); code != 2 || !strings.Contains(e, "unknown scenario") {
		t.Fatalf("unknown scenario: %d %s", code, e)
	}
}

// kv: 300 keys put in one process are all there in the next; a missing key
// says "not found".
func TestKVAcrossProcesses(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "scalestore")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, "put key%03d value number %d\n", i, i)
	}
	put := exec.Command(bin, "kv", "--data", dir)
	put.Stdin = strings.NewReader(in.String())
	if out, err := put.CombinedOutput(); err != nil || strings.Count(string(out), "OK\n") != 300 {
		t.Fatalf("put: %v\n%s", err, out)
	}
	in.Reset()
	for i := range 300 {
		fmt.Fprintf(&in, "get key%03d\n", i)
	}
	in.WriteString("get nosuchkey\n")
	get := exec.Command(bin, "kv", "--data", dir)
	get.Stdin = strings.NewReader(in.String())
	out, err := get.CombinedOutput()
	if err != nil {
		t.Fatalf("get: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 301 {
		t.Fatalf("%d lines of output", len(lines))
	}
	for i := range 300 {
		if lines[i] != fmt.Sprintf("value number %d", i) {
			t.Fatalf("key%03d: %q", i, lines[i])
		}
	}
	if lines[300] != "not found" {
		t.Fatalf("missing key: %q", lines[300])
	}
	one, err := exec.Command(bin, "kv", "--data", dir, "get", "key042").Output()
	if err != nil || string(one) != "value number 42\n" {
		t.Fatalf("get as arguments: %q %v", one, err)
	}
	if code, _, e := runCLI("kv"); code != 2 || !strings.Contains(e, "--data") {
		t.Fatalf("kv without --data: %d %q", code, e)
	}

	// A store with a corrupt leaf: scan stops there, salvage prints every
	// other key, names the range it lost, and fails.
	dir = t.TempDir()
	in.Reset()
	for i := range 3000 {
		fmt.Fprintf(&in, "put k%04d %s\n", i, strings.Repeat("v", 100))
	}
	put = exec.Command(bin, "kv", "--data", dir)
	put.Stdin = strings.NewReader(in.String())
	if out, err := put.CombinedOutput(); err != nil {
		t.Fatalf("put: %v\n%s", err, out)
	}
	f, err := os.OpenFile(filepath.Join(dir, "scalestore.db"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	const slot = 20 // a leaf: the few inner pages come first
	if _, err := f.WriteAt(bytes.Repeat([]byte{0x5A}, 4096), (slot+1)*4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "kv", "--data", dir, "scan", "k", "-").CombinedOutput(); err == nil || !strings.Contains(string(out), "unreadable") {
		t.Fatalf("scan across a corrupt leaf: %v\n%.300s", err, out)
	}
	out, err = exec.Command(bin, "kv", "--data", dir, "salvage", "k", "-").Output()
	if err == nil {
		t.Fatal("salvage with a lost range exited 0")
	}
	lines = strings.Split(strings.TrimSpace(string(out)), "\n")
	var lost []string
	keys := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "unreadable: keys ") {
			lost = append(lost, l)
		} else if strings.HasPrefix(l, "k") && strings.HasSuffix(l, " "+strings.Repeat("v", 100)) {
			keys++
		} else {
			t.Fatalf("salvage printed %q", l)
		}
	}
	if len(lost) != 1 || keys < 3000-100 || keys >= 3000 {
		t.Fatalf("salvage: %d keys and %d lost ranges %q, want all but one leaf's keys and that leaf", keys, len(lost), lost)
	}
}

// scenario --html and sim --trace-html write the trace viewer's page with
// the run's messages; a trace of several seeds, or of SELCC's sim, is
// refused with a reason.
func TestTraceHTML(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "exclusive.html")
	if code, _, e := runCLI("scenario", "exclusive-conflict", "--html", page); code != 0 {
		t.Fatalf("scenario --html: exit %d %s", code, e)
	}
	b, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(b), `"label":"Transfer X`) || !strings.Contains(string(b), `"nodes":3`) {
		t.Fatalf("scenario page: %v\n%.400s", err, b)
	}
	page = filepath.Join(dir, "sim.html")
	if code, _, e := runCLI("sim", "--seed", "3", "--ops", "300", "--watch-page", "2", "--trace-html", page, "--quiet"); code != 0 {
		t.Fatalf("sim --trace-html: exit %d %s", code, e)
	}
	b, err = os.ReadFile(page)
	if err != nil || !strings.Contains(string(b), "page index 2 (directory node 2)") || strings.Count(string(b), `"from":`) < 4 {
		t.Fatalf("sim page: %v\n%.400s", err, b)
	}
	if strings.Contains(string(b), "page=") {
		t.Fatal("a watched page's trace holds other pages' messages")
	}
	for _, args := range [][]string{
		{"sim", "--seeds", "2", "--trace-html", page},
		{"sim", "--protocol", "selcc", "--trace-html", page},
		{"sim", "--watch-page", "64", "--trace-html", page},
	} {
		if code, _, e := runCLI(args...); code != 2 || !strings.Contains(e, "--") {
			t.Errorf("%v: exit %d, %s", args, code, e)
		}
	}
}
