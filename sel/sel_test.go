package sel_test

import (
	"bytes"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/sel"
	"github.com/scalestore-go/scalestore/simrunner"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// seeds is the clean swarm's seeds a workload (go test ./sel/ -run
// TestSwarmClean -args -seeds 300 for the swarm).
var seeds = flag.Int("seeds", 100, "seeds of TestSwarmClean, per workload")

// swarmConfig is the swarm's shape: 4 compute nodes of 3 workers (and
// SEL's 2 memory nodes) on 48 keys, skewed, heavy faults.
func swarmConfig() simrunner.Config {
	cfg := simrunner.DefaultConfig()
	cfg.Nodes, cfg.Workers, cfg.Keys, cfg.CacheLines = 4, 3, 48, 0
	cfg.Ops, cfg.ReadRatio, cfg.Zipf, cfg.Faults = 2000, 0.6, 0.9, "heavy"
	return cfg
}

func TestRegisters(t *testing.T) {
	r := protocolapi.NewRegistry()
	if err := r.Register(sel.Protocol()); err != nil {
		t.Fatal(err)
	}
	if _, err := sel.ProtocolWith(sel.Options{LineSize: 24}); err == nil {
		t.Fatal("a line of 24 bytes was accepted")
	}
	if _, err := sel.ProtocolWith(sel.Options{MemoryNodes: -1}); err == nil {
		t.Fatal("-1 memory nodes were accepted")
	}
	if _, err := sel.ProtocolWith(sel.Options{BackoffBase: 10, BackoffMax: 5}); err == nil {
		t.Fatal("a back-off cap below its base was accepted")
	}
}

func TestDeployRefuses(t *testing.T) {
	p := sel.Protocol()
	for _, cfg := range []protocolapi.Config{
		{Nodes: 0, Workers: 1, Keys: 1},
		{Nodes: 255, Workers: 1, Keys: 1},
		{Nodes: 1, Workers: 0, Keys: 1},
		{Nodes: 1, Workers: 1, Keys: 0},
		{Nodes: 1, Workers: 1, Keys: 1, Mutant: "no-such"},
	} {
		if _, err := p.Deploy(cfg); err == nil {
			t.Errorf("%+v was deployed", cfg)
		}
	}
}

func swarm(t *testing.T, cfg simrunner.Config, seeds int) (runs int, failed *simrunner.Result, verbs uint64) {
	t.Helper()
	runs, failed, err := simrunner.Swarm(sel.Protocol(), cfg, 1, seeds, func(r simrunner.Result) { verbs += r.Verbs })
	if err != nil {
		t.Fatal(err)
	}
	return runs, failed, verbs
}

// The swarm: 100 seeds (-seeds) under heavy faults, register and rmw, no
// violation; it reaches every case of the latch, and the counters add up.
func TestSwarmClean(t *testing.T) {
	seeds := *seeds
	if testing.Short() {
		seeds = 10
	}
	for _, workload := range []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW} {
		cfg := swarmConfig()
		cfg.Workload = workload
		var verbs uint64
		var ops int
		k := map[string]uint64{}
		runs, failed, err := simrunner.Swarm(sel.Protocol(), cfg, 1, seeds, func(r simrunner.Result) {
			verbs += r.Verbs
			ops += r.Ops + r.Unavailable
			for _, c := range r.Counters {
				k[c.Name] += c.Value
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if failed != nil {
			t.Fatalf("%s: seed %d: %v (linearizable %v, bad keys %v)", workload, failed.Seed, failed.Violations, failed.Linearizable, failed.BadKeys)
		}
		if runs != seeds || verbs == 0 {
			t.Fatalf("%s: %d runs, %d verbs", workload, runs, verbs)
		}
		for _, name := range []string{"reads", "writes", "reads-met-writer", "cas-failed", "backoffs", "backoff-ns"} {
			if k[name] == 0 {
				t.Errorf("%s: the swarm never reached %s: %v", workload, name, k)
			}
		}
		// Every access completed once and released once, every reader
		// that met a writer undid its +1, every write wrote two halves,
		// every failed acquire backed off.
		if k["reads"]+k["writes"] != uint64(ops) || k["releases"] != k["reads"]+k["writes"]+k["reads-met-writer"] ||
			k["line-writes"] != 2*k["writes"] || k["backoffs"] != k["reads-met-writer"]+k["cas-failed"] {
			t.Errorf("%s: the counters do not add up over %d accesses: %v", workload, ops, k)
		}
		t.Logf("%s: %d seeds clean, %d verbs, counters %v", workload, runs, verbs, k)
	}
}

// Each mutant is caught within the swarm, by the check its comment names.
func TestMutantsCaught(t *testing.T) {
	for _, tc := range []struct {
		mutant, workload, want string
	}{
		{sel.MutantReaderSkipsLatch, protocolapi.WorkloadRegister, "torn line"},
		{sel.MutantReleaseBeforeWrite, protocolapi.WorkloadRegister, "has not landed"},
		{sel.MutantReleaseBeforeWrite, protocolapi.WorkloadRMW, "has not landed"},
		{sel.MutantWriterFAA, protocolapi.WorkloadRegister, "invariant"},
		{sel.MutantUnlockByWrite, protocolapi.WorkloadRegister, "invariant"},
		{sel.MutantReaderKeepsLatch, protocolapi.WorkloadRegister, "readers counted wrong"},
	} {
		cfg := swarmConfig()
		cfg.Mutant, cfg.Workload = tc.mutant, tc.workload
		runs, failed, _ := swarm(t, cfg, 30)
		if failed == nil {
			t.Fatalf("%s (%s): not caught in %d seeds", tc.mutant, tc.workload, runs)
		}
		if got := strings.Join(failed.Violations, "\n"); !strings.Contains(got, tc.want) {
			t.Fatalf("%s (%s): caught at seed %d, but not by %q: %v", tc.mutant, tc.workload, failed.Seed, tc.want, failed.Violations)
		}
		// The seed reproduces the violation bit for bit.
		again := cfg
		again.Seed = failed.Seed
		res, err := simrunner.Run(sel.Protocol(), again)
		if err != nil || res.TraceHash != failed.TraceHash || !slices.Equal(res.Violations, failed.Violations) {
			t.Fatalf("%s: seed %d again: hash %x, first %x (%v), violations %v", tc.mutant, failed.Seed, res.TraceHash, failed.TraceHash, err, res.Violations)
		}
		t.Logf("%s (%s): caught at seed %d (%d runs): %.300s", tc.mutant, tc.workload, failed.Seed, runs, failed.Violations[0])
	}
}

// A seed reproduces its run bit for bit; another seed does not.
func TestReproducible(t *testing.T) {
	cfg := swarmConfig()
	cfg.Seed = 5
	var trace1, trace2 bytes.Buffer
	cfg.Trace = &trace1
	a, err := simrunner.Run(sel.Protocol(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Trace = &trace2
	b, _ := simrunner.Run(sel.Protocol(), cfg)
	cfg.Seed, cfg.Trace = 6, nil
	c, _ := simrunner.Run(sel.Protocol(), cfg)
	if a.Failed() || a.TraceHash != b.TraceHash || !bytes.Equal(trace1.Bytes(), trace2.Bytes()) || a.Verbs != b.Verbs {
		t.Fatalf("seed 5 twice: hashes %x and %x, traces equal %v, %v", a.TraceHash, b.TraceHash, bytes.Equal(trace1.Bytes(), trace2.Bytes()), a.Violations)
	}
	if a.TraceHash == c.TraceHash {
		t.Fatalf("seeds 5 and 6 have the same hash %x", a.TraceHash)
	}
	if a.Messages != 0 {
		t.Fatalf("SEL sent %d messages; it has only verbs", a.Messages)
	}
	for _, verb := range []string{" CAS ", " FAA ", " READ ", " WRITE "} {
		if !strings.Contains(trace1.String(), verb) {
			t.Fatalf("the trace has no%sverb: %.300s", verb, trace1.String())
		}
	}
}

// latencies runs cfg and returns its read and write latencies (the final
// read of every key among the reads) and the share of its CASes that
// failed.
func latencies(t *testing.T, cfg simrunner.Config) (reads, writes []int64, casFailed float64, res simrunner.Result) {
	t.Helper()
	var trace bytes.Buffer
	cfg.Trace = &trace
	res, err := simrunner.Run(sel.Protocol(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatalf("%v", res.Violations)
	}
	for _, op := range res.History.Ops() {
		if op.Kind == checker.KindRead {
			reads = append(reads, op.Return-op.Call)
		} else {
			writes = append(writes, op.Return-op.Call)
		}
	}
	cas, failed := 0, 0
	for _, line := range strings.Split(trace.String(), "\n") {
		if strings.Contains(line, " CAS ") {
			cas++
			if !strings.HasSuffix(line, " prev=0x0") {
				failed++
			}
		}
	}
	return reads, writes, float64(failed) / float64(max(cas, 1)), res
}

// Without a conflict every access pays exactly its verbs' round trips,
// since there is no cache: a read one atomic round trip (FAA and READ
// posted together, the READ's completion behind the FAA's), a write that
// and one more for its WRITEs (the release is not waited for).
func TestCostsWithoutConflict(t *testing.T) {
	cfg := simrunner.DefaultConfig()
	cfg.Nodes, cfg.Workers, cfg.Keys, cfg.Ops, cfg.Faults = 1, 1, 64, 400, "none"
	reads, writes, _, res := latencies(t, cfg)
	lat := sim.DefaultLatency
	atomicRTT := 2*lat.Verb + lat.Atomic
	// The tail is the line but its first cache line, and lands last.
	writeRTT := 2*lat.Verb + lat.PerKiB*int64(sel.DefaultLineSize-64)/1024
	if len(reads) < 100 || len(writes) < 100 {
		t.Fatalf("%d reads, %d writes", len(reads), len(writes))
	}
	for _, l := range reads {
		if l != atomicRTT {
			t.Fatalf("a read took %d ns, want one atomic round trip, %d", l, atomicRTT)
		}
	}
	for _, l := range writes {
		if l != atomicRTT+writeRTT {
			t.Fatalf("a write took %d ns, want an atomic round trip and a WRITE's, %d", l, atomicRTT+writeRTT)
		}
	}
	// Verbs: FAA, READ, FAA a read; CAS, READ, two WRITEs, FAA a write.
	if want := uint64(3*len(reads) + 5*len(writes)); res.Verbs != want {
		t.Fatalf("%d verbs, want %d", res.Verbs, want)
	}
	t.Logf("read %d ns, write %d ns, %.2f verbs an access", atomicRTT, atomicRTT+writeRTT, float64(res.Verbs)/float64(res.Ops))
}

// Under write-heavy skew the latch is contended: more threads fail more
// CASes and wait longer for the hot lines.
func TestContentionUnderSkew(t *testing.T) {
	var fails []float64
	var p99s []int64
	for _, workers := range []int{1, 8} {
		cfg := simrunner.DefaultConfig()
		cfg.Nodes, cfg.Workers, cfg.Keys, cfg.Ops, cfg.Faults = 4, workers, 256, 3000, "none"
		cfg.ReadRatio, cfg.Zipf = 0.1, 0.99
		_, writes, failed, _ := latencies(t, cfg)
		slices.Sort(writes)
		fails = append(fails, failed)
		p99s = append(p99s, writes[len(writes)*99/100])
		t.Logf("%d threads: %.2f of the CASes failed, writes' p99 %d ns", 4*workers, failed, writes[len(writes)*99/100])
	}
	if fails[0] >= fails[1] || fails[1] < 0.2 || p99s[0] >= p99s[1] {
		t.Fatalf("failed CAS shares %v and writes' p99 %v at 4 and 32 threads: want both to grow with threads", fails, p99s)
	}
}

// The conflict's chart, verb by verb on key 0: node 0's read holds the
// shared latch, node 1's CAS finds its count and backs off, retries after
// node 0's release, writes both halves and releases behind them; node 2's
// read finds the writer's tag, undoes its +1 and retries.
func TestConflictScenario(t *testing.T) {
	res, err := simrunner.RunScenario(sel.Protocol(), "sel-conflict", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Result.Failed() {
		t.Fatalf("violations: %v", res.Result.Violations)
	}
	var got []string
	for _, s := range res.Steps {
		got = append(got, fmt.Sprintf("%d:%s", s.From, strings.Fields(s.Label)[0]))
		t.Logf("%6d %-90s | %s", s.At, s.Label, strings.ReplaceAll(strings.TrimSpace(s.State), "\n", " | "))
	}
	want := "0:FAA 0:READ 1:CAS 1:READ 0:FAA 1:CAS 1:READ 2:FAA 2:READ 1:WRITE 1:WRITE 1:FAA 2:FAA 2:FAA 2:READ 2:FAA"
	if strings.Join(got, " ") != want {
		t.Fatalf("verbs %s, want %s", strings.Join(got, " "), want)
	}
	word := uint64(sel.TagOf(1, 0)) << 32
	writer := fmt.Sprintf("%#x", word)
	for i, part := range map[int]string{
		2:  "prev=0x1",                                       // the writer's CAS meets the reader
		5:  "prev=0x0",                                       // and gets in after its release
		7:  "delta=0x1 prev=" + writer,                       // the second reader meets the writer
		11: fmt.Sprintf("delta=%#x prev=%#x", -word, word+1), // the release behind the WRITEs, the second reader's +1 in
		12: "delta=0xffffffffffffffff prev=",                 // the second reader's undo
	} {
		if !strings.Contains(res.Steps[i].Label, part) {
			t.Errorf("step %d is %q, want %q in it", i, res.Steps[i].Label, part)
		}
	}
	if st := res.Steps[7].State; !strings.Contains(st, "word (X n1/w0, 1 readers)") || !strings.Contains(st, "node 2: n2/w0 key 0 read-acquiring") {
		t.Errorf("after the second reader's FAA the chart shows %q", st)
	}
	if last := res.Steps[len(res.Steps)-1].State; !strings.Contains(last, "word (free, 0 readers), line version 1/1 value 1") {
		t.Errorf("the chart ends in %q", last)
	}
}

// BenchmarkSeed is one seed of the swarm (go test ./sel/ -run - -bench
// Seed -benchmem): simulated accesses a wall second, with the checks.
func BenchmarkSeed(b *testing.B) {
	cfg := swarmConfig()
	accesses := 0
	for i := range b.N {
		cfg.Seed = uint64(i + 1)
		res, err := simrunner.Run(sel.Protocol(), cfg)
		if err != nil || res.Failed() {
			b.Fatalf("seed %d: %v %v", cfg.Seed, err, res.Violations)
		}
		accesses += res.Ops
	}
	b.ReportMetric(float64(accesses)/b.Elapsed().Seconds(), "accesses/s")
}
