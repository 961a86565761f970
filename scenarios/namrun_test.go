package scenarios

import (
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/mutation"
)

func namConfig(workload string, seed uint64) SimConfig {
	cfg := DefaultSimConfig()
	cfg.Workload, cfg.Seed, cfg.Keys, cfg.Ops, cfg.Faults = workload, seed, 200, 2000, "heavy"
	if workload == "cell" {
		cfg.CellMegaNodes = 12 // meganodes split under every run
	}
	return cfg
}

// TestNAMWorkloads: each NAM-tree design and Cell with each search
// method, a few seeds under heavy faults, no violation and a
// linearizable history; the same seed twice is the same run.
func TestNAMWorkloads(t *testing.T) {
	for _, wl := range []string{"nam-cg", "nam-fg", "nam-hybrid", "cell", "cell/server", "cell/client"} {
		wl, search, _ := strings.Cut(wl, "/")
		var megaSplits, restarts uint64
		for seed := uint64(1); seed <= 10; seed++ {
			cfg := namConfig(wl, seed)
			cfg.CellSearch = search
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.ViolationCount > 0 || !res.Linearizable || res.Ops != 2000 {
				t.Fatalf("%s seed %d: %d ops, violations %v, linearizable %v", wl, seed, res.Ops, res.Violations, res.Linearizable)
			}
			megaSplits, restarts = megaSplits+res.CellMegaSplits, restarts+res.CellRestarts
			if seed == 1 {
				again, _ := RunSim(cfg)
				if again.TraceHash != res.TraceHash {
					t.Fatalf("%s seed 1 ran twice with trace hashes %x and %x", wl, res.TraceHash, again.TraceHash)
				}
			}
		}
		if wl == "cell" && (megaSplits < 20 || restarts == 0) {
			t.Fatalf("cell/%s: %d meganode splits and %d restarts in 10 seeds: the runs do not reach the split's paths", search, megaSplits, restarts)
		}
	}
}

// TestNAMMutantsCaught: every NAM-tree and Cell mutation is caught, under each
// workload it breaks, within 20 seeds (the acceptance is 200).
func TestNAMMutantsCaught(t *testing.T) {
	for name, workloads := range mutation.NAMNames {
		for _, wl := range workloads {
			caught := false
			for seed := uint64(1); seed <= 20 && !caught; seed++ {
				cfg := namConfig(wl, seed)
				cfg.Mutate = name
				res, err := RunSim(cfg)
				if err != nil {
					t.Fatal(err)
				}
				caught = res.ViolationCount > 0 || !res.Linearizable
			}
			if !caught {
				t.Errorf("mutation %s under %s: 20 seeds without a violation", name, wl)
			}
		}
	}
}
