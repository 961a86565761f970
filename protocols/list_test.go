package protocols

import (
	"strings"
	"testing"
)

// Every protocol registers, the built-ins and the plug-ins, listed by name.
func TestRegistry(t *testing.T) {
	r, err := Registry()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(r.Names(), " ")
	if got != "cell msi nam-cg nam-fg nam-hybrid scalestore selcc" {
		t.Fatalf("registered %q", got)
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
