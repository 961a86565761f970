package protocols

import (
	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// Entry is one registration: the protocol, where its code is, and its
// optional hooks beyond protocolapi.
type Entry struct {
	Protocol protocolapi.Protocol
	// Dirs are the directories of the protocol's own packages, relative
	// to the module's root (slash-separated; a directory covers the
	// packages below it): besides this package's list, the only places
	// whose code may name the protocol (TestNamesStayHome enforces it).
	Dirs []string
	// Processes, if set, is the protocol's own code for real processes
	// (`scalestore cluster`, `node`, `bench cluster`), for a built-in
	// that procrunner does not run. Entries that share one (the index
	// designs) share the pointer.
	Processes *cluster.Design
}

// Registry returns a registry of every protocol, or the first that does
// not register (a name taken twice, a descriptor incomplete).
func Registry() (*protocolapi.Registry, error) {
	r := protocolapi.NewRegistry()
	for _, e := range Entries() {
		if err := r.Register(e.Protocol); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Designs returns the process designs of es, each once, in the order of
// es.
func Designs(es []Entry) []*cluster.Design {
	var out []*cluster.Design
	seen := map[*cluster.Design]bool{}
	for _, e := range es {
		if d := e.Processes; d != nil && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}
