package protocols

import (
	"slices"
	"strings"
	"testing"
)

// Every protocol registers, the built-ins and the plug-ins, listed by name.
func TestRegistry(t *testing.T) {
	r, err := Registry()
	if err != nil {
		t.Fatal(err)
	}
	// The built-ins and the example at least; every plug-in of the list
	// once (a new protocol adds its line to list.go and nothing here).
	names := r.Names()
	for _, want := range []string{"cell", "msi", "nam-cg", "nam-fg", "nam-hybrid", "scalestore", "selcc"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not registered (registered: %q)", want, names)
		}
	}
	if len(names) != len(builtIns())+len(plugIns) {
		t.Fatalf("registered %q: want the %d built-ins and the %d plug-ins", names, len(builtIns()), len(plugIns))
	}
	if !slices.IsSorted(names) {
		t.Fatalf("names %q are not sorted", names)
	}
	msi, _ := r.Lookup("msi")
	if msi.Deploy == nil || len(msi.Mutants) < 2 {
		t.Fatalf("msi: %+v", msi)
	}
	ss, _ := r.Lookup("scalestore")
	if ss.Deploy != nil || ss.BuiltIn == "" || len(ss.Mutants) == 0 || !ss.Supports.Crashes {
		t.Fatalf("scalestore: %+v", ss)
	}
	for _, p := range r.All() {
		for _, m := range p.Mutants {
			if strings.HasPrefix(m.Name, "selcc-") != (p.Name == "selcc") {
				t.Errorf("mutant %s listed under %s", m.Name, p.Name)
			}
		}
	}
}

// Every built-in says how make swarm and make mutants run it (a plug-in's
// runs follow from its workloads and mutants).
func TestBuiltInsListTheirRuns(t *testing.T) {
	for _, e := range Entries() {
		if e.Protocol.Deploy != nil {
			continue
		}
		if len(e.Swarm) == 0 || len(e.Protocol.Mutants) > 0 && e.MutantRun == nil {
			t.Errorf("%s: swarm %q, mutant runs %v", e.Protocol.Name, e.Swarm, e.MutantRun != nil)
			continue
		}
		for _, m := range e.Protocol.Mutants {
			if run := e.MutantRun(m); !strings.Contains(run, "--seeds 200") || !strings.Contains(run, "--workload ") {
				t.Errorf("%s: mutant %s runs with %q", e.Protocol.Name, m.Name, run)
			}
		}
	}
}
