package scenarios

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/simrunner"
)

// acceptanceConfig is the configuration of the swarm command.
func acceptanceConfig(seed uint64) SimConfig {
	return SimConfig{Seed: seed, Nodes: 4, Workers: 3, Pages: 48, CachePages: 12, Ops: 2000, ReadRatio: 0.6,
		Zipf: 0.9, Faults: "heavy", Protocol: protocol.Chaining}
}

func seedsFor(t *testing.T, long, short int) int {
	if testing.Short() {
		return short
	}
	return long
}

// The swarm: many seeds under heavy faults, every check on, no violation.
// (The 300-seed run of the acceptance criteria is `make swarm`.)
func TestSwarm(t *testing.T) {
	for _, v := range []protocol.Variant{protocol.Chaining, protocol.FIFO, protocol.Polling} {
		// The acceptance swarm's 300 seeds for the paper's protocol; fewer
		// for the baselines.
		n := seedsFor(t, 100, 10)
		if v == protocol.Chaining {
			n = seedsFor(t, 300, 20)
		}
		for seed := uint64(1); seed <= uint64(n); seed++ {
			cfg := acceptanceConfig(seed)
			cfg.Protocol = v
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() {
				t.Fatalf("%v seed %d: %v (linearizable=%v)\nreplay: scalestore sim --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9 --faults heavy --protocol %v --seed %d",
					v, seed, res.Violations, res.Linearizable, v, seed)
			}
			if res.Ops != cfg.Ops {
				t.Fatalf("%v seed %d: %d of %d operations ran", v, seed, res.Ops, cfg.Ops)
			}
		}
	}
}

// The read-modify-write swarm: writes that depend on what they read, so a
// lost update (an upgrade that missed a change) is a violation.
func TestSwarmReadModifyWrite(t *testing.T) {
	for seed := uint64(1); seed <= uint64(seedsFor(t, 100, 10)); seed++ {
		cfg := acceptanceConfig(seed)
		cfg.Workload = "rmw"
		res, err := RunSim(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed() || res.Undecided() {
			t.Fatalf("seed %d: %v (linearizable=%v undecided=%v)\nreplay: scalestore sim --workload rmw --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9 --faults heavy --seed %d",
				seed, res.Violations, res.Linearizable, res.Undecided(), seed)
		}
		if res.Ops != cfg.Ops {
			t.Fatalf("seed %d: %d of %d operations ran", seed, res.Ops, cfg.Ops)
		}
	}
}

// The swarm must exercise what it claims to check: conflicts, declined
// evictions (owner stability), dirty pulls, storage retries, optimistic
// restarts.
func TestSwarmExercisesTheProtocol(t *testing.T) {
	var agg SimResult
	for seed := uint64(1); seed <= 10; seed++ {
		res, err := RunSim(acceptanceConfig(seed))
		if err != nil || res.Failed() {
			t.Fatalf("seed %d: %v %v", seed, err, res.Violations)
		}
		agg.EvictDeclined += res.EvictDeclined
		agg.Pulls += res.Pulls
		agg.IORetries += res.IORetries
		agg.OptimisticRetry += res.OptimisticRetry
		agg.RemoteFetches += res.RemoteFetches
	}
	if agg.EvictDeclined == 0 || agg.Pulls == 0 || agg.IORetries == 0 || agg.OptimisticRetry == 0 || agg.RemoteFetches == 0 {
		t.Fatalf("swarm did not exercise the protocol: %+v", agg)
	}
}

// Every mutation breaks one rule; the swarm must catch each within 200 seeds.
func TestMutantsAreCaught(t *testing.T) {
	for _, m := range mutation.Names {
		caught := uint64(0)
		for seed := uint64(1); seed <= 200 && caught == 0; seed++ {
			cfg := acceptanceConfig(seed)
			cfg = MutantShape(m, cfg)
			cfg.Mutate = m
			if mutation.SELCC(m) {
				cfg.System = SystemSELCC
			}
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() {
				caught = seed
			}
		}
		if caught == 0 {
			t.Errorf("mutation %s survived 200 seeds", m)
		} else {
			t.Logf("mutation %s caught at seed %d", m, caught)
		}
	}
	// And the mutation is off again afterwards.
	res, err := RunSim(acceptanceConfig(1))
	if err != nil || res.Failed() {
		t.Fatalf("clean run after the mutants failed: %v %v", err, res.Violations)
	}
}

// A seed reproduces a run bit for bit; another seed gives another run.
func TestDeterminism(t *testing.T) {
	a, _ := RunSim(acceptanceConfig(7))
	b, _ := RunSim(acceptanceConfig(7))
	c, _ := RunSim(acceptanceConfig(8))
	if a.TraceHash != b.TraceHash || a.Messages != b.Messages {
		t.Fatalf("same seed, different runs: %x/%d vs %x/%d", a.TraceHash, a.Messages, b.TraceHash, b.Messages)
	}
	if a.TraceHash == c.TraceHash {
		t.Fatalf("different seeds, same trace hash %x", a.TraceHash)
	}
	var ha, hb bytes.Buffer
	_ = a.History.WriteJSONLines(&ha)
	_ = b.History.WriteJSONLines(&hb)
	if ha.String() != hb.String() {
		t.Fatal("same seed, different histories")
	}
}

// 256 nodes, the most a PID can address, run to the end linearizable.
func TestScale256(t *testing.T) {
	if testing.Short() {
		t.Skip("256 nodes")
	}
	res, err := RunSim(SimConfig{Seed: 1, Nodes: 256, Workers: 1, Pages: 1024, CachePages: 64, Ops: 20000,
		ReadRatio: 0.5, Faults: "default", Protocol: protocol.Chaining})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() || res.Ops != 20000 {
		t.Fatalf("256 nodes: ops %d violations %v linearizable %v", res.Ops, res.Violations, res.Linearizable)
	}
}

// The history is written in the documented JSON lines and checks out.
func TestHistoryFormat(t *testing.T) {
	res, err := RunSim(acceptanceConfig(3))
	if err != nil || res.Failed() {
		t.Fatal(err, res.Violations)
	}
	var b bytes.Buffer
	if err := res.History.WriteJSONLines(&b); err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(b.String(), "\n", 2)[0]
	if !strings.HasPrefix(first, `{"client":`) || !strings.Contains(first, `,"page":`) || !strings.Contains(first, `,"call":`) {
		t.Fatalf("unexpected line %q", first)
	}
	ops, err := checker.ReadJSONLines(&b)
	if err != nil || len(ops) != 2000 {
		t.Fatalf("read back %d ops: %v", len(ops), err)
	}
	if r, _ := checker.Check(ops, 0); !r.Ok {
		t.Fatalf("exported history not linearizable: %+v", r)
	}
	// A forged stale read makes it fail.
	for i := range ops {
		if ops[i].Kind == "read" && ops[i].Value != 0 {
			ops[i].Value = 1 << 60
			break
		}
	}
	if r, _ := checker.Check(ops, 0); r.Ok {
		t.Fatal("a forged read was accepted")
	}
}

func TestConfigErrors(t *testing.T) {
	bad := []func(*SimConfig){
		func(c *SimConfig) { c.Nodes = 0 },
		func(c *SimConfig) { c.Nodes = 257 },
		func(c *SimConfig) { c.CachePages = 1 },
		func(c *SimConfig) { c.ReadRatio = 2 },
		func(c *SimConfig) { c.Zipf = 1.5 },
		func(c *SimConfig) { c.Faults = "storm" },
		func(c *SimConfig) { c.Mutate = "nope" },
	}
	for i, f := range bad {
		cfg := DefaultSimConfig()
		f(&cfg)
		if _, err := RunSim(cfg); err == nil {
			t.Errorf("case %d: bad configuration accepted", i)
		}
	}
}

// TestShapeSwarm varies the cluster's shape as well as the seed: node and
// worker counts, cache sizes down to barely more frames than workers, skew,
// read ratio, fault plan and protocol variant. Tiny caches with many workers
// found the liveness bugs the fixed-shape swarm missed.
func TestShapeSwarm(t *testing.T) {
	x := uint64(0x9E3779B97F4A7C15)
	next := func(n int) int {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(n))
	}
	shapes := seedsFor(t, 120, 10)
	for i := range shapes {
		workers := 1 + next(4)
		cfg := SimConfig{
			Nodes: 1 + next(6), Workers: workers, Pages: 1 + next(40), CachePages: workers + 1 + next(8),
			Ops: 800, ReadRatio: float64(next(10)) / 10, Zipf: float64(next(10)) / 10,
			Faults:   []string{"none", "default", "heavy"}[next(3)],
			Protocol: protocol.Variant(next(3)), WatchPage: -1,
		}
		for seed := uint64(1); seed <= 3; seed++ {
			cfg.Seed = seed
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatalf("shape %d: %v", i, err)
			}
			if res.Failed() {
				t.Fatalf("shape %d seed %d %+v: %v\nreplay: scalestore sim --nodes %d --workers %d --pages %d --cache-pages %d --ops %d --read-ratio %v --zipf %v --faults %s --protocol %v --seed %d",
					i, seed, cfg, res.Violations, cfg.Nodes, cfg.Workers, cfg.Pages, cfg.CachePages, cfg.Ops, cfg.ReadRatio, cfg.Zipf, cfg.Faults, cfg.Protocol, seed)
			}
		}
	}
}

// Reads that fail for good (the lossy plan) fail the operations on their
// pages and nothing else: no violation, every operation accounted for,
// and the final flush finds the last write of every page on the SSDs (an
// unreadable copy is never written back over the SSD copy). The test also
// makes sure the faults fired, for every variant and for the B-tree.
func TestUnreadablePagesFailOnlyTheirOperations(t *testing.T) {
	type run struct {
		name string
		cfg  func(seed uint64) SimConfig
	}
	var runs []run
	for _, v := range []protocol.Variant{protocol.Chaining, protocol.FIFO, protocol.Polling} {
		runs = append(runs, run{v.String(), func(seed uint64) SimConfig {
			cfg := acceptanceConfig(seed)
			cfg.Faults, cfg.Protocol = "lossy", v
			return cfg
		}})
	}
	runs = append(runs, run{"btree", func(seed uint64) SimConfig {
		cfg := DefaultSimConfig()
		cfg.Seed, cfg.Workers, cfg.CachePages, cfg.Ops = seed, 3, 8, 3000
		cfg.Faults, cfg.Workload, cfg.Keys = "lossy", "btree", 20000
		return cfg
	}})
	for _, r := range runs {
		unreadable, failed := 0, 0
		for seed := uint64(1); seed <= uint64(seedsFor(t, 30, 8)); seed++ {
			cfg := r.cfg(seed)
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() {
				t.Fatalf("%s seed %d: %v (linearizable=%v)", r.name, seed, res.Violations, res.Linearizable)
			}
			if res.Ops != cfg.Ops {
				t.Fatalf("%s seed %d: %d of %d operations ran", r.name, seed, res.Ops, cfg.Ops)
			}
			unreadable += res.UnreadableReads
			failed += res.FailedOps
		}
		if unreadable == 0 || failed == 0 {
			t.Errorf("%s: the lossy plan injected %d unreadable reads and failed %d operations; want both above 0",
				r.name, unreadable, failed)
		}
	}
}

// SELCC on the swarm's configuration: heavy faults, no violation, memory
// nodes never run a handler, and every path of the protocol was taken.
func TestSELCCSwarm(t *testing.T) {
	var agg SimResult
	seeds := uint64(60)
	if testing.Short() {
		seeds = 15
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		for _, wl := range []string{"register", "rmw", "btree"} {
			if wl == "btree" && seed%4 != 0 {
				continue // a quarter of the seeds: a tree run takes three times as long
			}
			cfg := acceptanceConfig(seed)
			cfg.System, cfg.Workload, cfg.Keys = SystemSELCC, wl, 1000
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() {
				t.Fatalf("seed %d (%s): %v (replay: scalestore sim --protocol selcc --workload %s --seed %d --faults heavy ...)",
					seed, wl, res.Violations, wl, seed)
			}
			if res.MemoryHandlerCalls != 0 {
				t.Fatalf("seed %d: memory nodes handled %d messages", seed, res.MemoryHandlerCalls)
			}
			s := &agg.SELCC
			s.HandOvers += res.SELCC.HandOvers
			s.Releases += res.SELCC.Releases
			s.Dropped += res.SELCC.Dropped
			s.Upgrades += res.SELCC.Upgrades
			s.UpgradeFallbacks += res.SELCC.UpgradeFallbacks
			s.HoldOffs += res.SELCC.HoldOffs
			agg.Evictions += res.Evictions
			agg.Verbs += res.Verbs
		}
	}
	s := agg.SELCC
	if s.HandOvers == 0 || s.Releases == 0 || s.Dropped == 0 || s.Upgrades == 0 || agg.Evictions == 0 || agg.Verbs == 0 {
		t.Fatalf("the swarm did not take every path: %+v, evictions %d, verbs %d", s, agg.Evictions, agg.Verbs)
	}
	t.Logf("%+v", s)
}

func TestSELCCDeterminism(t *testing.T) {
	run := func(seed uint64) SimResult {
		cfg := acceptanceConfig(seed)
		cfg.System = SystemSELCC
		res, err := RunSim(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b, c := run(5), run(5), run(6)
	if a.TraceHash != b.TraceHash || a.Verbs != b.Verbs {
		t.Fatalf("same seed, different runs: %x vs %x", a.TraceHash, b.TraceHash)
	}
	if a.TraceHash == c.TraceHash {
		t.Fatal("another seed, the same run")
	}
}

// The zones and porcupine give the same verdict, and find the same bad
// pages, on simulated histories: clean runs and runs of every mutant of the
// register workloads, whose histories are often not linearizable.
func TestZonesAgreeWithPorcupineOnSimulatedHistories(t *testing.T) {
	seeds := uint64(seedsFor(t, 40, 8))
	bad := 0
	for _, m := range append([]string{""}, mutation.Names...) {
		if mutation.SELCC(m) || mutation.NAM(m) {
			continue
		}
		for seed := uint64(1); seed <= seeds; seed++ {
			cfg := acceptanceConfig(seed)
			cfg.Ops = 600
			cfg = MutantShape(m, cfg)
			cfg.Mutate = m
			cfg.SkipLinearizability = true
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ops := res.History.Ops()
			z, _ := checker.Check(ops, time.Minute)
			p, _ := checker.CheckPorcupine(ops, time.Minute)
			if z.Unknown || p.Unknown {
				t.Fatalf("mutant %q seed %d: undecided (zones %v, porcupine %v)", m, seed, z.Unknown, p.Unknown)
			}
			if z.Ok != p.Ok || !slices.Equal(z.BadPages, p.BadPages) {
				t.Fatalf("mutant %q seed %d: zones say ok=%v bad pages %v, porcupine ok=%v bad pages %v",
					m, seed, z.Ok, z.BadPages, p.Ok, p.BadPages)
			}
			if p.Decided != 0 || (cfg.Workload == "register" && z.Decided == 0) {
				t.Fatalf("mutant %q seed %d: zones decided %d pages, porcupine-only %d", m, seed, z.Decided, p.Decided)
			}
			if !p.Ok {
				bad++
			}
		}
	}
	if bad == 0 {
		t.Fatal("no history was found not linearizable: the comparison saw only one verdict")
	}
	t.Logf("%d histories not linearizable, the same verdict and bad pages from both", bad)
}

// The paper model's partitioned workload, with a shift halfway, under
// heavy faults: every check on, no violation.
func TestPaperModelSwarm(t *testing.T) {
	for seed := uint64(1); seed <= uint64(seedsFor(t, 20, 4)); seed++ {
		cfg := PaperModel(acceptanceConfig(seed))
		cfg.Workers, cfg.CachePages, cfg.Pages = 4, 16, 60
		cfg.Partitioned, cfg.ShiftAt = true, 0.5
		res, err := RunSim(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed() || res.Ops != cfg.Ops {
			t.Fatalf("seed %d: %d ops, violations %v", seed, res.Ops, res.Violations)
		}
	}
}

// Partitioned workers touch only their own node's pages until the shift,
// then only the next node's.
func TestPartitionPage(t *testing.T) {
	r := &simRun{cfg: SimConfig{Nodes: 3, Pages: 10, Ops: 100, ShiftAt: 0.5}, work: &simrunner.Workers{}}
	for i := range 10 {
		for node := range 3 {
			if p := r.partitionPage(i, node); p%3 != node || p >= 10 || p < 0 {
				t.Fatalf("page %d for node %d: %d", i, node, p)
			}
		}
	}
	r.work.Started = 51
	if p := r.partitionPage(4, 2); p%3 != 0 {
		t.Fatalf("after the shift node 2 got page %d, want node 0's share", p)
	}
}

// Elasticity (paper §6.6, Fig. 10): compute nodes join and leave a running
// cluster under heavy faults; every check holds, every operation
// completes, and each leaving node hands back its pages and is gone.
func TestElasticSwarm(t *testing.T) {
	for seed := uint64(1); seed <= uint64(seedsFor(t, 40, 6)); seed++ {
		cfg := acceptanceConfig(seed)
		cfg.Nodes, cfg.ComputeNodes, cfg.Elastic, cfg.Ops = 2, 3, true, 3000
		res, err := RunSim(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed() || res.Ops != cfg.Ops {
			t.Fatalf("seed %d: %d ops, violations %v", seed, res.Ops, res.Violations)
		}
		if len(res.Left) != 2 || res.Left[0].Node != 4 || res.Left[1].Node != 3 {
			t.Fatalf("seed %d: left %+v, want compute nodes 4 then 3", seed, res.Left)
		}
		for _, op := range res.History.Ops() {
			if node := op.Client / cfg.Workers; node < cfg.Nodes {
				t.Fatalf("seed %d: storage node %d ran an operation", seed, node)
			}
		}
	}
	if _, err := RunSim(SimConfig{Nodes: 2, ComputeNodes: 1, Elastic: true, Workers: 1, Pages: 4, CachePages: 4, Ops: 10}); err == nil {
		t.Fatal("an elastic run of one compute node was accepted")
	}
}

// wideConfig is the swarm's wide shape: more compute nodes and workers
// than lines of cache (8 nodes x 4 workers, 6 frames a node, 24 pages),
// where issue 36's stale reply showed.
func wideConfig(seed uint64) SimConfig {
	return SimConfig{Seed: seed, Nodes: 8, Workers: 4, Pages: 24, CachePages: 6, Ops: 3000, ReadRatio: 0.5,
		Zipf: 0.99, Faults: "heavy", Protocol: protocol.Chaining, WatchPage: -1}
}

// Issue 36: the final read's new thread on reply slot 0 restarted the
// slot's invalidation rounds and took an older round's dropped status for
// its reply, so it added its reader bit again after the holder's handover
// had set it. Seed 1497 of the wide shape replays it.
func TestSELCCStaleReplyRegression(t *testing.T) {
	cfg := wideConfig(1497)
	cfg.System = SystemSELCC
	res, err := RunSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatalf("%v\nreplay: scalestore sim --protocol selcc --nodes 8 --workers 4 --pages 24 --cache-pages 6 --ops 3000 --read-ratio 0.5 --zipf 0.99 --faults heavy --seed 1497", res.Violations)
	}
	if res.SELCC.HandOvers == 0 || res.SELCC.Dropped == 0 {
		t.Fatalf("the seed no longer takes the paths of the bug: %+v", res.SELCC)
	}
}

// The wide shape for both protocols (make swarm runs 1,500 seeds of each).
func TestWideSwarm(t *testing.T) {
	n := uint64(seedsFor(t, 40, 6))
	for _, sys := range []string{SystemScaleStore, SystemSELCC} {
		for _, wl := range []string{"register", "rmw"} {
			for seed := uint64(1); seed <= n; seed++ {
				cfg := wideConfig(seed)
				cfg.System, cfg.Workload = sys, wl
				res, err := RunSim(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if res.Failed() || res.Undecided() {
					p := "chaining"
					if sys == SystemSELCC {
						p = "selcc"
					}
					t.Fatalf("%s %s seed %d: %v\nreplay: scalestore sim --protocol %s --workload %s --nodes 8 --workers 4 --pages 24 --cache-pages 6 --ops 3000 --read-ratio 0.5 --zipf 0.99 --faults heavy --seed %d",
						p, wl, seed, res.Violations, p, wl, seed)
				}
			}
		}
	}
}
