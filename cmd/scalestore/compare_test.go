package main

import (
	"strings"
	"testing"
)

// compare and figure list find the plug-in protocols through the
// registry; an option goes to the protocols that have it.
func TestComparePlugInProtocols(t *testing.T) {
	var out, errb strings.Builder
	code := run([]string{"compare", "--protocols", "selcc,sel,gam-seq,gam-tso", "--seeds", "1", "--ops", "300", "--opt", "memory-nodes=2"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	for _, name := range []string{"| selcc |", "| sel |", "| gam-seq |", "| gam-tso |"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("no row %q in\n%s", name, out.String())
		}
	}
	for _, bad := range [][]string{
		{"compare", "--protocols", "sel,gam-seq", "--opt", "bogus=1"}, // none has it
		{"compare", "--protocols", "raft"},
		{"compare", "--protocols", "sel", "--opt", "novalue"},
		{"compare", "--protocols", "sel,gam-seq", "--gamma", "2"},               // SELCC's flag, and no SELCC
		{"compare", "--protocols", "selcc", "--gamma", "2", "--opt", "gamma=3"}, // the flag and the option disagree
	} {
		out.Reset()
		errb.Reset()
		if code := run(bad, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", bad, code, errb.String())
		}
	}
	out.Reset()
	if code := run([]string{"figure", "list"}, &out, &errb); code != 0 {
		t.Fatalf("figure list: exit %d", code)
	}
	for _, want := range []string{"selcc-fig13", "selcc-fig14", "scalestore-gam", "gam-seq memory-nodes=2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("figure list does not show %q", want)
		}
	}
}
