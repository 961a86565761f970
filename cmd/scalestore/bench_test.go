package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildScalestore builds the command into a temporary directory: the bench
// re-executes its own binary as the peer, which a test binary cannot be.
func buildScalestore(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "scalestore")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// bench transport --json between two real processes prints every key,
// each positive.
func TestBenchTransportJSON(t *testing.T) {
	bin := buildScalestore(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "bench", "transport", "--duration", "200ms", "--json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	var m map[string]float64
	if err := json.Unmarshal(stdout.Bytes(), &m); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout.String())
	}
	keys := []string{"shm_vs_tcp", "unix_vs_tcp", "duration_sec"}
	for _, tr := range []string{"tcp", "unix", "shm"} {
		for _, k := range []string{"round_trips_per_sec", "rtt_p50_us", "rtt_p99_us", "page_fetch_p50_us", "page_fetch_p99_us", "page_fetch_vs_rtt"} {
			keys = append(keys, tr+"."+k)
		}
	}
	for _, k := range keys {
		if v, ok := m[k]; !ok || !(v > 0) {
			t.Errorf("key %q: %v (present %v), want a positive number", k, v, ok)
		}
	}
	t.Logf("tcp %.0f, unix %.0f, shm %.0f round trips/s (shm/tcp %.1fx); shm page fetch p50 %.1fµs p99 %.1fµs",
		m["tcp.round_trips_per_sec"], m["unix.round_trips_per_sec"], m["shm.round_trips_per_sec"], m["shm_vs_tcp"],
		m["shm.page_fetch_p50_us"], m["shm.page_fetch_p99_us"])
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{{"bench", "--help"}, {"bench", "transport", "--help"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || !strings.Contains(out+errOut, "Usage: scalestore bench transport") {
			t.Errorf("%v: exit %d, no usage:\n%s%s", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{
		{"bench"},
		{"bench", "nosuch"},
		{"bench", "transport", "--duration", "0s"},
		{"bench", "transport", "extra"},
		{"bench-peer"},
	} {
		if code, _, e := runCLI(args...); code != 2 || e == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, e)
		}
	}
}

// Killing the bench kills its peer process (no orphan keeps spinning).
func TestBenchPeerDiesWithParent(t *testing.T) {
	bin := buildScalestore(t)
	cmd := exec.Command(bin, "bench", "transport", "--duration", "30s")
	// A killed bench cannot remove its socket directory: make it one the
	// test removes.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var peer int
	deadline := time.Now().Add(10 * time.Second)
	for peer == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no bench-peer child appeared")
		}
		time.Sleep(10 * time.Millisecond)
		peer = findChild(cmd.Process.Pid, "bench-peer")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for processAlive(peer) {
		if time.Now().After(deadline) {
			syscall.Kill(peer, syscall.SIGKILL)
			t.Fatalf("bench-peer %d outlived its parent by 10s", peer)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// findChild returns the pid of a child of parent whose command line
// contains word, or 0.
func findChild(parent int, word string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte(word)) {
			return pid
		}
	}
	return 0
}

// processAlive: the process exists and is not a zombie.
func processAlive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// bench memory prints a latency per size and page kind, and a working set
// far beyond the caches takes longer per load than one inside them.
func TestBenchMemory(t *testing.T) {
	code, out, errOut := runCLI("bench", "memory", "--sizes", "32KiB,256MiB", "--loads", "300000", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []struct {
		Size  string  `json:"size"`
		Small float64 `json:"small_pages_ns"`
		Huge  float64 `json:"huge_pages_ns"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("output: %v\n%s", err, out)
	}
	for _, r := range rows {
		if !(r.Small > 0) || !(r.Huge > 0) {
			t.Errorf("%s: %+v, want positive latencies", r.Size, r)
		}
	}
	if !(rows[1].Small > 2*rows[0].Small) {
		t.Errorf("256MiB at %.1f ns/load is not slower than 32KiB at %.1f: the chain is not dependent", rows[1].Small, rows[0].Small)
	}
	for _, args := range [][]string{{"bench", "memory", "--sizes", "1KiB"}, {"bench", "memory", "--loads", "0"}, {"bench", "memory", "x"}} {
		if code, _, e := runCLI(args...); code != 2 || e == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, e)
		}
	}
}
