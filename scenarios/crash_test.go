package scenarios

import (
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

// Node crashes under heavy faults: every crashed node restarts, no
// acknowledged write is lost (the invariants after every step, the final
// flush against the last acknowledged write, porcupine on the history with
// the cut writes of unknown outcome), for every variant and both register
// workloads. `make swarm` runs 300 seeds.
func TestCrashSwarm(t *testing.T) {
	seeds := uint64(seedsFor(t, 40, 8))
	for _, v := range []protocol.Variant{protocol.Chaining, protocol.FIFO, protocol.Polling} {
		for _, workload := range []string{"register", "rmw"} {
			var crashes, restarts, unknown, ops int
			for seed := uint64(1); seed <= seeds; seed++ {
				cfg := acceptanceConfig(seed)
				cfg.Protocol, cfg.Workload, cfg.Crashes = v, workload, 3
				res, err := RunSim(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if res.Failed() {
					t.Fatalf("%v %s seed %d: %v (bad pages %v)", v, workload, seed, res.Violations, res.BadPages)
				}
				crashes += len(res.Crashes)
				for _, c := range res.Crashes {
					if c.Restart > c.At {
						restarts++
					}
				}
				unknown += res.UnknownOps
				ops += res.Ops
			}
			// Each run crashes a node three times unless a crash point
			// finds the drawn node still down; all restart before the end.
			if crashes < int(seeds)*2 || restarts != crashes {
				t.Fatalf("%v %s: %d crashes and %d restarts in %d seeds", v, workload, crashes, restarts, seeds)
			}
			if unknown == 0 {
				t.Fatalf("%v %s: no write was ever cut by a crash: the crashes missed the write-through", v, workload)
			}
			t.Logf("%v %s: %d seeds, %d operations, %d crashes, %d writes of unknown outcome", v, workload, seeds, ops, crashes, unknown)
		}
	}
}

// A seed with crashes reproduces its run bit for bit.
func TestCrashDeterminism(t *testing.T) {
	cfg := acceptanceConfig(11)
	cfg.Crashes = 3
	a, _ := RunSim(cfg)
	b, _ := RunSim(cfg)
	if a.TraceHash != b.TraceHash || a.Messages != b.Messages || len(a.Crashes) != len(b.Crashes) {
		t.Fatalf("same seed, different runs: %x/%d vs %x/%d", a.TraceHash, a.Messages, b.TraceHash, b.Messages)
	}
	cfg.Crashes = 0
	c, _ := RunSim(cfg)
	if c.TraceHash == a.TraceHash {
		t.Fatal("crashes did not change the run")
	}
}

// Durability costs messages: with crashes on, every write is written
// through (a TPersist and its acknowledgement).
func TestWriteThroughCost(t *testing.T) {
	cfg := acceptanceConfig(5)
	cfg.Faults = "none"
	plain, err := RunSim(cfg)
	if err != nil || plain.Failed() {
		t.Fatal(err, plain.Violations)
	}
	cfg.Crashes = 1
	durable, err := RunSim(cfg)
	if err != nil || durable.Failed() {
		t.Fatal(err, durable.Violations)
	}
	if durable.Messages <= plain.Messages {
		t.Fatalf("write-through sent no more messages (%d) than the plain run (%d)", durable.Messages, plain.Messages)
	}
}

// The B-tree under crashes: every page an operation changed is written
// through before it returns, splits in the order that keeps every key
// reachable, and the final read of every key after the crashes finds
// every acknowledged write (porcupine per key, writes cut by a crash of
// unknown outcome). Crashes strike while write-throughs are in flight,
// mostly in splits. `make swarm` runs 300 seeds.
func TestCrashSwarmBTree(t *testing.T) {
	seeds := uint64(seedsFor(t, 40, 8))
	var crashes, unknown, ops int
	for seed := uint64(1); seed <= seeds; seed++ {
		for _, keys := range []int{1000, 20_000} {
			cfg := acceptanceConfig(seed)
			cfg.Workload, cfg.Keys, cfg.Crashes = "btree", keys, 3
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() || res.Undecided() {
				t.Fatalf("keys %d seed %d: %v (bad keys %v)\nreplay: scalestore sim --workload btree --keys %d --crashes 3 --nodes 4 --workers 3 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9 --faults heavy --seed %d",
					keys, seed, res.Violations, res.BadPages, keys, seed)
			}
			crashes += len(res.Crashes)
			unknown += res.UnknownOps
			ops += res.Ops
		}
	}
	if crashes < int(seeds)*4 || unknown == 0 {
		t.Fatalf("%d crashes, %d writes of unknown outcome in %d seeds: the crashes missed the write-throughs", crashes, unknown, seeds)
	}
	t.Logf("%d runs, %d operations, %d crashes, %d writes of unknown outcome", 2*seeds, ops, crashes, unknown)
}
