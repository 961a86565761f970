package simrunner

import (
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocolapi"
)

func crashingToy() protocolapi.Protocol {
	p := toy()
	p.Supports.Crashes, p.Supports.Elastic = true, true
	return p
}

// The runner crashes and restarts the nodes of a protocol whose cluster
// has the hooks: every crash restarts, a write it cut stays in the history
// as one of unknown outcome, and a cluster that drops those is caught.
func TestCrashes(t *testing.T) {
	cfg := small()
	cfg.Crashes, cfg.Ops = 4, 600
	crashes, unknown := 0, 0
	for seed := uint64(1); seed <= 10; seed++ {
		cfg.Seed = seed
		res, err := Run(crashingToy(), cfg)
		if err != nil || res.Failed() {
			t.Fatalf("seed %d: %v %v", seed, err, res.Violations)
		}
		for _, c := range res.Crashes {
			if c.Node == 0 || c.Restart <= c.At {
				t.Fatalf("seed %d: crash %+v: the home crashed, or no restart", seed, c)
			}
		}
		crashes += len(res.Crashes)
		unknown += res.UnknownOps
	}
	if crashes < 10 || unknown == 0 {
		t.Fatalf("%d crashes, %d writes of unknown outcome in 10 seeds: want crashes that cut writes", crashes, unknown)
	}
	// A timer a crashed node's role set (here 300 us after each access,
	// past any down time) never reaches its new role.
	timed := cfg
	timed.Options = map[string]string{"timer": "300000"}
	for seed := uint64(1); seed <= 5; seed++ {
		timed.Seed = seed
		if res, err := Run(crashingToy(), timed); err != nil || res.Failed() {
			t.Fatalf("seed %d with timers: %v %v", seed, err, res.Violations)
		}
	}
	cfg.Mutant = "forget-unknown"
	caught := false
	for seed := uint64(1); seed <= 10 && !caught; seed++ {
		cfg.Seed = seed
		res, err := Run(crashingToy(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		caught = res.Failed()
	}
	if !caught {
		t.Fatal("a cluster that says a cut write never happened was not caught in 10 seeds")
	}
	// Supports without the hooks, and refusals.
	p := crashingToy()
	deploy := p.Deploy
	p.Deploy = func(c protocolapi.Config) (protocolapi.Cluster, error) {
		cl, err := deploy(c)
		return struct{ protocolapi.Cluster }{cl}, err
	}
	cfg.Mutant = ""
	if _, err := Run(p, cfg); err == nil || !strings.Contains(err.Error(), "does not implement protocolapi.Crashable") {
		t.Errorf("a cluster without crash hooks: %v", err)
	}
	cfg.Elastic = true
	if _, err := Run(crashingToy(), cfg); err == nil || !strings.Contains(err.Error(), "one or the other") {
		t.Errorf("crashes and elastic together: %v", err)
	}
}

// Elastic membership: nodes 1 and 2 join and leave in turn, the last to
// join leaving first, and work only within their windows.
func TestElastic(t *testing.T) {
	cfg := small()
	cfg.Elastic, cfg.Ops = true, 1000
	res, err := Run(crashingToy(), cfg)
	if err != nil || res.Failed() {
		t.Fatalf("%v %v", err, res.Violations)
	}
	if len(res.Left) != 2 || res.Left[0].Node != 2 || res.Left[1].Node != 1 || res.Left[0].At > res.Left[1].At {
		t.Fatalf("left %+v: want node 2, then node 1", res.Left)
	}
	per := map[int]int{}
	for _, op := range res.History.Ops()[:res.WorkloadOps] {
		per[op.Client/cfg.Workers]++
	}
	if per[0] <= per[1] || per[1] <= per[2] || per[2] == 0 {
		t.Fatalf("accesses per node %v: want node 0 (always) above node 1 above node 2 (the shortest window)", per)
	}
}
