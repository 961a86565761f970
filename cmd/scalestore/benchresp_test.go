package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// bench resp against redis-server and one node, in-process, with tiny
// settings: both targets report positive SET and GET rates.
func TestBenchRESPSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: bench resp starts redis-server and a scalestore node")
	}
	for _, prog := range []struct{ name, pkg string }{{"redis-benchmark", "redis-tools"}, {"redis-server", "redis-server"}} {
		if _, err := exec.LookPath(prog.name); err != nil {
			t.Skipf("%s is not installed (Debian package %s)", prog.name, prog.pkg)
		}
	}
	// The node target runs the scalestore binary, which a test binary
	// (os.Executable) is not.
	bin := scalestoreBinary(t)
	var stdout, stderr bytes.Buffer
	code := runBenchRESP([]string{"--bin", bin, "--requests", "2000", "--pipelines", "1", "--targets", "redis,scalestore", "--ops", "", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var res struct {
		Rows []benchRESPRow `json:"rows"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout.String())
	}
	seen := map[string]bool{}
	for _, r := range res.Rows {
		seen[r.Target] = true
		if !(r.SetRPS > 0) || !(r.GetRPS > 0) || r.Pipeline != 1 || r.Requests != 2000 {
			t.Errorf("row %+v: want positive rates at -P 1, 2000 requests", r)
		}
		if !(r.SetVsRedis > 0) || !(r.GetVsRedis > 0) {
			t.Errorf("row %+v: want the ratios to redis", r)
		}
		t.Logf("%s: SET %.0f req/s, GET %.0f req/s", r.Target, r.SetRPS, r.GetRPS)
	}
	if len(res.Rows) != 2 || !seen["redis"] || !seen["scalestore"] {
		t.Errorf("rows %+v: want one for redis and one for scalestore", res.Rows)
	}
	if !strings.Contains(stderr.String(), "running scalestore -P 1") {
		t.Errorf("no progress line on stderr:\n%s", stderr.String())
	}
}

// Without redis-benchmark the command names the package to install.
func TestBenchRESPMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var stdout, stderr bytes.Buffer
	if code := runBenchRESP([]string{"--targets", "redis"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "redis-tools") {
		t.Errorf("exit %d, stderr %q: want 1 and the package redis-tools", code, stderr.String())
	}
}

func TestBenchRESPFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--targets", "redis,memcached"},
		{"--targets", "redis-goroutine"},
		{"--targets", "scalestore-goroutine-goroutine"},
		{"--pipelines", "0"},
		{"--clients", "0"},
		{"--clients", "1", "--targets", "scalestore-2shm"},
		{"--clients", "2", "--targets", "scalestore-3tcp"},
		{"--load-requests", "0"},
		{"--pipelines", "none,1"},
		{"--ops", "mset,lpush"},
		{"--op-requests", "-1"},
		{"--transfer-time", "0s"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runBenchRESP(args, &stdout, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, stderr.String())
		}
	}
	code, out, _ := runCLI("bench", "help")
	if code != 0 || !strings.Contains(out, "Usage: scalestore bench resp") {
		t.Errorf("bench help: exit %d, no bench resp usage:\n%s", code, out)
	}
}

// Each row's ratios are to the redis row of the same promise (durability
// process to appendfsync everysec, sync to always), the remote-node row's
// to one node, and the loading rows to each other.
func TestRESPRatiosMatchPromises(t *testing.T) {
	rows := []benchRESPRow{
		{Target: "redis", Pipeline: 1, SetRPS: 100, GetRPS: 200},
		{Target: "redis-aof-everysec", Pipeline: 1, SetRPS: 80, GetRPS: 160},
		{Target: "redis-aof", Pipeline: 1, SetRPS: 50, GetRPS: 100},
		{Target: "scalestore", Pipeline: 1, SetRPS: 90, GetRPS: 100},
		{Target: "scalestore-data", Pipeline: 1, SetRPS: 40, GetRPS: 80},
		{Target: "scalestore-sync", Pipeline: 1, SetRPS: 25, GetRPS: 50},
		{Target: "scalestore-remote", Pipeline: 1, SetRPS: 45, GetRPS: 90},
		{Target: "scalestore-data", Pipeline: 16, SetRPS: 400, GetRPS: 800},
		{Target: "load-redis-aof-everysec", Pipeline: 16, SetRPS: 300},
		{Target: "load-scalestore-data", Pipeline: 16, SetRPS: 150},
	}
	for i := range rows {
		tg, _ := benchRESPTarget(rows[i].Target)
		rows[i].Promise = tg.promise
	}
	respRatios(rows)
	want := map[string]struct {
		set, get float64
		base     string
	}{
		"redis":                   {1, 1, "redis"},
		"redis-aof-everysec":      {0.8, 0.8, "redis"},
		"redis-aof":               {0.5, 0.5, "redis"},
		"scalestore":              {0.9, 0.5, "redis"},
		"scalestore-data":         {0.5, 0.5, "redis-aof-everysec"},
		"scalestore-sync":         {0.5, 0.5, "redis-aof"},
		"scalestore-remote":       {0.5, 0.9, "scalestore"},
		"load-redis-aof-everysec": {0, 0, ""},
		"load-scalestore-data":    {0.5, 0, "load-redis-aof-everysec"},
	}
	for _, r := range rows {
		if r.Pipeline == 16 && r.Target == "scalestore-data" {
			if r.SetVsRedis != 0 || r.SetBaseline != "" {
				t.Errorf("%+v: a ratio without its baseline at -P 16", r)
			}
			continue
		}
		w := want[r.Target]
		if r.SetVsRedis != w.set || r.GetVsRedis != w.get || r.SetBaseline+r.GetBaseline == "" && w.base != "" ||
			(r.SetBaseline != "" && r.SetBaseline != w.base) || (r.GetBaseline != "" && r.GetBaseline != w.base) {
			t.Errorf("%s: SET %.2fx GET %.2fx against %q/%q; want %.2fx %.2fx against %q", r.Target, r.SetVsRedis, r.GetVsRedis, r.SetBaseline, r.GetBaseline, w.set, w.get, w.base)
		}
	}
	var out bytes.Buffer
	printRESPTable(&out, rows, 50, 100000, 128)
	if !strings.Contains(out.String(), "| scalestore-sync | power loss (durability sync) | 1 | 25 | 50 | 0.50x | 0.50x | redis-aof |") {
		t.Errorf("the table has no promise and baseline for scalestore-sync:\n%s", out.String())
	}
}

// A scalestore target with the suffix -goroutine is the same target, its
// nodes serving RESP with a goroutine per connection; its promise and
// baseline are the target's.
func TestBenchRESPGoroutineTargets(t *testing.T) {
	for _, name := range []string{"scalestore-goroutine", "scalestore-data-goroutine", "scalestore-remote-goroutine", "load-scalestore-data-goroutine"} {
		tg, ok := benchRESPTarget(name)
		base, _ := benchRESPTarget(strings.TrimSuffix(name, goroutineSuffix))
		if base.name == "" {
			base, _ = benchRESPTarget("scalestore")
		}
		if !ok || !tg.goroutine || tg.name != name || tg.promise != base.promise || tg.base != base.base || tg.load != base.load {
			t.Errorf("%s: %+v, %v; want the goroutine variant of %+v", name, tg, ok, base)
		}
	}
	for _, name := range []string{"redis-goroutine", "redis-aof-goroutine", "scalestore-goroutine-goroutine", "nosuch-goroutine"} {
		if tg, ok := benchRESPTarget(name); ok {
			t.Errorf("%s: %+v, want no such target", name, tg)
		}
	}
}

func TestParseRedisBenchmarkCSV(t *testing.T) {
	out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","344827.59","1.977","0.496","1.967","3.471","3.927","4.063"
"GET","526315.81","1.227","0.496","1.127","2.175","2.503","2.687"
`
	rps, err := parseRedisBenchmarkCSV([]byte(out))
	if err != nil || rps["SET"] != 344827.59 || rps["GET"] != 526315.81 {
		t.Errorf("got %v, %v", rps, err)
	}
	for _, bad := range []string{"", `"test","rps"` + "\n", `"SET","n/a"` + "\n", `"SET","0.00"` + "\n"} {
		if _, err := parseRedisBenchmarkCSV([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	for line, want := range map[string]bool{
		"Could not connect to Redis at 127.0.0.1:1: Connection refused": true,
		"Error from server: ERR unknown command":                        true,
		"WARNING: Could not fetch server CONFIG":                        false,
		"":                                                              false,
	} {
		if got := isRedisBenchmarkError(line); got != want {
			t.Errorf("isRedisBenchmarkError(%q) = %v", line, got)
		}
	}
}

// The rows of issue 49's targets, with tiny settings: MSET and INCR on
// redis and one node, transfers on redis and two nodes, each with a
// positive rate, the ratio to its redis row, and the goals where the issue
// sets one; the transfer rows also with latencies (the run itself checks
// that the two accounts still sum to what they started with).
func TestBenchRESPOps(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: bench resp starts redis-server and scalestore nodes")
	}
	for _, prog := range []struct{ name, pkg string }{{"redis-benchmark", "redis-tools"}, {"redis-server", "redis-server"}} {
		if _, err := exec.LookPath(prog.name); err != nil {
			t.Skipf("%s is not installed (Debian package %s)", prog.name, prog.pkg)
		}
	}
	bin := scalestoreBinary(t)
	var stdout, stderr bytes.Buffer
	code := runBenchRESP([]string{"--bin", bin, "--pipelines", "none", "--targets", "redis,scalestore", "--op-requests", "2000",
		"--transfer-time", "200ms", "--clients", "4", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var res struct {
		Rows []benchRESPRow `json:"rows"`
		Ops  []benchOpRow   `json:"ops"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout.String())
	}
	if len(res.Rows) != 0 {
		t.Errorf("--pipelines none ran SET/GET rows: %+v", res.Rows)
	}
	count := map[string]int{}
	for _, r := range res.Ops {
		count[r.Op+" "+r.Target]++
		t.Logf("%+v", r)
		if !(r.RPS > 0) || r.Requests < 1 || !(r.VsRedis > 0) {
			t.Errorf("row %+v: want a positive rate and a ratio to redis", r)
		}
		switch r.Op {
		case "mset", "incr":
			wantP, wantGoal := 1, 0.5
			if r.Op == "incr" {
				wantP, wantGoal = 16, 0.7
			}
			if r.Pipeline != wantP || r.Goal != wantGoal || r.Requests != 2000 || r.Clients != 4 {
				t.Errorf("row %+v: want -P %d, goal %.1f, 2000 requests, 4 clients", r, wantP, wantGoal)
			}
		case "transfer":
			if !(r.P50Ms > 0) || r.P99Ms < r.P50Ms {
				t.Errorf("row %+v: want latencies, p99 >= p50", r)
			}
		}
	}
	want := map[string]int{"mset redis": 1, "mset scalestore": 1, "incr redis": 1, "incr scalestore": 1,
		"transfer redis": 2, "transfer scalestore-2tcp": 3}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d rows of %s, want %d (rows %v)", count[k], k, n, count)
		}
	}
}

func TestOpRatiosAndTable(t *testing.T) {
	rows := []benchOpRow{
		{Op: "mset", Target: "redis", How: "redis-benchmark -t mset -P 1", Clients: 50, Pipeline: 1, Requests: 1000, RPS: 100, Goal: 0.5},
		{Op: "mset", Target: "scalestore", How: "redis-benchmark -t mset -P 1", Clients: 50, Pipeline: 1, Requests: 1000, RPS: 40, Goal: 0.5},
		{Op: "transfer", Target: "redis", How: "2 clients", Clients: 2, Pipeline: 1, Requests: 10, RPS: 200, P50Ms: 0.1, P99Ms: 1, Aborts: 3},
		{Op: "transfer", Target: "redis", How: "1 client", Clients: 1, Pipeline: 1, Requests: 10, RPS: 100, P50Ms: 0.1, P99Ms: 1},
		{Op: "transfer", Target: "scalestore-2tcp", How: "2 clients, one per node", Clients: 2, Pipeline: 1, Requests: 5, RPS: 50, P50Ms: 0.5, P99Ms: 2.25, Aborts: 7},
		{Op: "incr", Target: "scalestore", Clients: 50, Pipeline: 16, RPS: 10, Goal: 0.7},
	}
	opRatios(rows)
	for i, want := range []float64{1, 0.4, 1, 1, 0.25, 0} {
		if rows[i].VsRedis != want {
			t.Errorf("%s %s %s: ratio %.2f, want %.2f", rows[i].Op, rows[i].Target, rows[i].How, rows[i].VsRedis, want)
		}
	}
	var out bytes.Buffer
	printOpTable(&out, rows)
	for _, line := range []string{
		"| mset | scalestore | redis-benchmark -t mset -P 1 | 50 | 1 | 1,000 | 40 | - | - | - | 0.40x | >= 0.5x |",
		"| mset | redis | redis-benchmark -t mset -P 1 | 50 | 1 | 1,000 | 100 | - | - | - | 1.00x | - |",
		"| transfer | scalestore-2tcp | 2 clients, one per node | 2 | 1 | 5 | 50 | 0.500 | 2.250 | 7 | 0.25x | - |",
		"| incr | scalestore |  | 50 | 16 | 0 | 10 | - | - | - | - | >= 0.7x |",
	} {
		if !strings.Contains(out.String(), line+"\n") {
			t.Errorf("no line %q in the table:\n%s", line, out.String())
		}
	}
}
