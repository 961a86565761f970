package protocols

import (
	"testing"

	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/scenarios"
	"github.com/scalestore-go/scalestore/simrunner"
)

// Every built-in runs through simrunner as its world: with its options at
// their defaults a seed is the seed its run loop runs from SimConfig's
// defaults, bit for bit (the same trace hash and history), and an option
// set through the runner reaches the run loop.
func TestBuiltInWorlds(t *testing.T) {
	for _, e := range Entries() {
		p := e.Protocol
		if p.Deploy != nil {
			if e.World != nil {
				t.Errorf("%s: a plug-in with a world of its own", p.Name)
			}
			continue
		}
		if e.World == nil {
			t.Errorf("%s: a built-in without a simulated world", p.Name)
			continue
		}
		workload := p.Supports.Workloads[0]
		cfg := simrunner.DefaultConfig()
		cfg.Ops, cfg.Workload, cfg.Faults = 300, workload, "heavy"
		want := scenarios.DefaultSimConfig()
		want.Ops, want.Workload, want.Faults = 300, workload, "heavy"
		if workload == protocolapi.WorkloadRegister {
			cfg.Keys = want.Pages
		} else {
			cfg.Keys = want.Keys
		}
		if p.BuiltIn == "--protocol "+p.Name {
			want.System = p.Name
		}
		got, err := simrunner.RunWorld(p, e.World, cfg)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		base, err := scenarios.RunSim(want)
		if err != nil {
			t.Fatalf("%s: RunSim: %v", p.Name, err)
		}
		if got.TraceHash != base.TraceHash || got.Ops != base.Ops || got.History.Len() != base.History.Len() || got.Failed() || base.Failed() {
			t.Errorf("%s: through its world %016x (%d ops, violations %v), its run loop %016x (%d ops, violations %v)",
				p.Name, got.TraceHash, got.Ops, got.Violations, base.TraceHash, base.Ops, base.Violations)
		}
		t.Logf("%s: %016x, %d ops, counters %v", p.Name, got.TraceHash, got.Ops, got.Counters)
		if len(got.Counters) == 0 {
			t.Errorf("%s: no counters of its own", p.Name)
		}
		// An option changes the run: the first one, set away from its default.
		if len(p.Options) == 0 {
			t.Errorf("%s: no options", p.Name)
			continue
		}
		o := p.Options[0]
		other := map[string]string{"2": "1", "1": "2", "chaining": "fifo"}[o.Default]
		if other == "" {
			t.Fatalf("%s: no other value for option %s=%s in this test", p.Name, o.Name, o.Default)
		}
		cfg.Options = map[string]string{o.Name: other}
		changed, err := simrunner.RunWorld(p, e.World, cfg)
		if err != nil {
			t.Fatalf("%s --opt %s=%s: %v", p.Name, o.Name, other, err)
		}
		if changed.TraceHash == got.TraceHash {
			t.Errorf("%s: --opt %s=%s did not change the run (%016x)", p.Name, o.Name, other, got.TraceHash)
		}
		cfg.Options = map[string]string{"bogus": "1"}
		if _, err := simrunner.RunWorld(p, e.World, cfg); err == nil {
			t.Errorf("%s: an option it does not have was taken", p.Name)
		}
	}
}
