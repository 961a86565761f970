package resp

import (
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// tool finds a Redis command-line tool, or skips the test.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (Debian: apt-get install redis-tools): %v", name, err)
	}
	return p
}

// run runs a tool against s and returns its standard output; it fails the
// test if the tool fails or writes to standard error.
func run(t *testing.T, s *Server, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, tool(t, name), append([]string{"-h", host, "-p", port}, args...)...)
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, stdout.String(), stderr.String())
	}
	if stderr.Len() > 0 {
		t.Fatalf("%s %v wrote to stderr:\n%s", name, args, stderr.String())
	}
	return stdout.String()
}

func TestRedisCLI(t *testing.T) {
	tool(t, "redis-cli")
	s, e := startServer(t, Config{})
	if got := run(t, s, 10*time.Second, "redis-cli", "set", "greeting", "hello"); got != "OK\n" {
		t.Fatalf("redis-cli set: %q", got)
	}
	if got := run(t, s, 10*time.Second, "redis-cli", "get", "greeting"); got != "hello\n" {
		t.Fatalf("redis-cli get: %q", got)
	}
	if got := run(t, s, 10*time.Second, "redis-cli", "nosuch"); !strings.HasPrefix(got, "ERR unknown command 'nosuch'") {
		t.Fatalf("redis-cli nosuch: %q", got)
	}

	// --scan lists every key once.
	c := dialRaw(t, s.Addr())
	var b strings.Builder
	var want []string
	for i := range 1000 {
		k := "scan:" + strings.Repeat("x", i%5) + ":" + string(rune('a'+i%26)) + ":" + itoa(i)
		want = append(want, k)
		b.WriteString(cmd("SET", k, "v"))
	}
	c.send(b.String())
	for range 1000 {
		c.expect("+OK\r\n")
	}
	want = append(want, "greeting")
	slices.Sort(want)
	if e.len() != len(want) {
		t.Fatalf("engine has %d keys, want %d", e.len(), len(want))
	}
	got := strings.Split(strings.TrimSuffix(run(t, s, 20*time.Second, "redis-cli", "--scan"), "\n"), "\n")
	if !slices.Equal(got, want) {
		t.Fatalf("redis-cli --scan listed %d keys, want %d", len(got), len(want))
	}
	got = strings.Split(strings.TrimSuffix(run(t, s, 20*time.Second, "redis-cli", "--scan", "--pattern", "scan:xx:*"), "\n"), "\n")
	var wantXX []string
	for _, k := range want {
		if strings.HasPrefix(k, "scan:xx:") {
			wantXX = append(wantXX, k)
		}
	}
	if !slices.Equal(got, wantXX) {
		t.Fatalf("redis-cli --scan --pattern listed %d keys, want %d", len(got), len(wantXX))
	}
	if got := run(t, s, 10*time.Second, "redis-cli", "dbsize"); got != itoa(len(want))+"\n" {
		t.Fatalf("redis-cli dbsize: %q", got)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestRedisBenchmark(t *testing.T) {
	tool(t, "redis-benchmark")
	s, e := startServer(t, Config{})
	for _, pipeline := range []string{"1", "16"} {
		out := run(t, s, 60*time.Second, "redis-benchmark", "-t", "set,get", "-n", "2000", "-c", "10", "-P", pipeline, "-q")
		for _, w := range []string{"SET: ", "GET: "} {
			if !strings.Contains(out, w) {
				t.Fatalf("redis-benchmark -P %s output lacks %q:\n%s", pipeline, w, out)
			}
		}
		if strings.Contains(strings.ToLower(out), "error") || strings.Contains(out, "WARNING") {
			t.Fatalf("redis-benchmark -P %s:\n%s", pipeline, out)
		}
	}
	if v, ok := e.get("key:__rand_int__"); !ok || len(v) != 3 {
		t.Fatalf("benchmark key = %q, %v", v, ok)
	}
	if st := s.Stats(); st.Errors != 0 {
		t.Fatalf("Stats = %+v", st)
	}
}

// TestTenThousandConnections has redis-benchmark (another process, so
// the file descriptor limit is not shared) hold 10,000 connections, the
// default MaxConns, open at once. It takes about 10 s, most of it
// redis-benchmark opening its connections (as long against redis-server),
// so it runs only with RESP_TEST_10K=1.
func TestTenThousandConnections(t *testing.T) {
	if os.Getenv("RESP_TEST_10K") == "" {
		t.Skip("set RESP_TEST_10K=1 to run (about 10 s)")
	}
	tool(t, "redis-benchmark")
	s, _ := startServer(t, Config{})
	out := run(t, s, 120*time.Second, "redis-benchmark", "-t", "ping_mbulk", "-n", "20000", "-c", "10000", "-q")
	if !strings.Contains(out, "PING_MBULK: ") || strings.Contains(strings.ToLower(out), "error") {
		t.Fatalf("redis-benchmark -c 10000:\n%s", out)
	}
	if st := s.Stats(); st.Errors != 0 || st.ConnsTotal < 10000 {
		t.Fatalf("Stats = %+v", st)
	}
}
