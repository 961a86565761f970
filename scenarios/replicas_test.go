package scenarios

import (
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/mutation"
)

// With two replicas, any node may crash, node 0 (which creates the B-tree
// and holds its catalog) included, and two nodes in a row once the
// directories are replicated again: no acknowledged write is lost, every
// history is linearizable, and after the final flush every current replica
// holds the last write. `sim --crashes 3 --replicas 2 --seeds 300 --faults
// heavy` is the long run (docs/replication.md).
func TestReplicaSwarm(t *testing.T) {
	seeds := uint64(seedsFor(t, 30, 6))
	for _, workload := range []string{"register", "rmw", "btree"} {
		var crashes, node0, whileDown, rerep, unknown, ops int
		for seed := uint64(1); seed <= seeds; seed++ {
			cfg := acceptanceConfig(seed)
			cfg.Workload, cfg.Keys, cfg.Crashes, cfg.Replicas = workload, 1000, 3, 2
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() || res.Undecided() {
				t.Fatalf("%s seed %d: %v (bad pages %v)\nreplay: scalestore sim --workload %s --crashes 3 --replicas 2 --nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9 --faults heavy --seed %d",
					workload, seed, res.Violations, res.BadPages, workload, seed)
			}
			crashes += len(res.Crashes)
			for _, c := range res.Crashes {
				if c.Node == 0 {
					node0++
				}
			}
			whileDown += res.CrashesWhileDown
			rerep += res.Rereplications
			unknown += res.UnknownOps
			ops += res.Ops
		}
		if crashes < int(seeds)*2 || node0 == 0 || rerep == 0 {
			t.Fatalf("%s: %d crashes (%d of node 0), %d re-replications in %d seeds: the crashes missed what they test",
				workload, crashes, node0, rerep, seeds)
		}
		t.Logf("%s: %d seeds, %d operations, %d crashes (%d of node 0, %d while another node was down), %d re-replications, %d writes of unknown outcome",
			workload, seeds, ops, crashes, node0, whileDown, rerep, unknown)
	}
}

// Each replica mutant is caught by the checks within 100 seeds of its
// shape (scenarios.MutantShape: 10 crashes a run, 8 frames a node).
func TestReplicaMutantsAreCaught(t *testing.T) {
	for _, m := range []string{mutation.ReplicaAckBeforeBackup, mutation.ReplicaPromoteUnfenced, mutation.ReplicaCopyUnlatched, mutation.ReplicaReturnStale} {
		caught := uint64(0)
		var why []string
		for seed := uint64(1); seed <= 100 && caught == 0; seed++ {
			cfg := MutantShape(m, acceptanceConfig(seed))
			cfg.Mutate = m
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() {
				caught, why = seed, res.Violations
			}
		}
		if caught == 0 {
			t.Errorf("mutation %s survived 100 seeds", m)
			continue
		}
		first := "history not linearizable"
		if len(why) > 0 {
			first = why[0]
		}
		t.Logf("mutation %s caught at seed %d: %s", m, caught, first)
	}
}

// One replica keeps the behaviour of a run without the option: the same
// trace hash.
func TestOneReplicaIsToday(t *testing.T) {
	cfg := acceptanceConfig(7)
	cfg.Crashes = 3
	a, err := RunSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Replicas = 1
	b, err := RunSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.TraceHash != b.TraceHash {
		t.Fatalf("--replicas 1 changed the run: %x vs %x", b.TraceHash, a.TraceHash)
	}
	cfg.Replicas = 2
	c, err := RunSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.TraceHash == a.TraceHash || c.Failed() {
		t.Fatalf("--replicas 2: hash %x (one replica %x), violations %v", c.TraceHash, a.TraceHash, c.Violations)
	}
	d, _ := RunSim(cfg)
	if d.TraceHash != c.TraceHash {
		t.Fatalf("--replicas 2 is not deterministic: %x vs %x", d.TraceHash, c.TraceHash)
	}
}

// Double faults: crashes may take both copies of a directory. Its pages
// then fail at once with an error naming the nodes that held them (out of
// the history: they did not happen), the other pages serve, and once a
// node with the copies returns the directory serves again, with every
// acknowledged write.
func TestReplicaDoubleFaults(t *testing.T) {
	seeds := uint64(seedsFor(t, 30, 6))
	lost, ops := 0, 0
	msg := ""
	for _, workload := range []string{"register", "rmw"} {
		for seed := uint64(1); seed <= seeds; seed++ {
			cfg := acceptanceConfig(seed)
			cfg.Workload, cfg.Crashes, cfg.Replicas, cfg.DoubleFaults = workload, 6, 2, true
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() || res.Undecided() {
				t.Fatalf("%s seed %d: %v (bad pages %v)", workload, seed, res.Violations, res.BadPages)
			}
			lost += res.LostOps
			ops += res.Ops
			if msg == "" {
				msg = res.LostError
			}
		}
	}
	if lost == 0 || lost >= ops/2 {
		t.Fatalf("%d of %d operations failed on a directory that lost both copies", lost, ops)
	}
	if !strings.Contains(msg, "lost both copies") || !strings.Contains(msg, "its primary") || !strings.Contains(msg, "the page's directory is down") {
		t.Fatalf("the error does not say which directory and nodes: %q", msg)
	}
	t.Logf("%d operations, %d failed on a directory that lost both copies; e.g. %q", ops, lost, msg)
}
