package protocols

import (
	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
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
	// World, for a built-in (no Deploy), is its simulated world: the run
	// loop whose nodes own their world, which simrunner.RunWorld runs
	// (`scalestore sim`).
	World simrunner.World
	// Processes, if set, is the protocol's own code for real processes
	// (`scalestore cluster`, `node`, `bench cluster`), for a built-in
	// that procrunner does not run. Entries that share one (the index
	// designs) share the pointer.
	Processes *cluster.Design
	// Swarm, for a built-in, are the runs of `make swarm` (`scalestore
	// protocols --list swarm`): each the `scalestore sim` flags of one
	// shape and its seeds; the Makefile adds the first seed, the faults
	// and --json. A plug-in's are one of 300 seeds for every workload it
	// supports on the generic runner.
	Swarm []string
	// MutantRun, for a built-in, is the `scalestore sim` flags that run
	// one of its mutants for `make mutants` (`--list mutant-runs`): the
	// shape, workload and seeds whose checks must catch it; the Makefile
	// adds --mutate, the faults and --json. A plug-in's is 200 seeds of
	// the mutant's workload.
	MutantRun func(m protocolapi.Mutant) string
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

// Find returns the registration of the protocol named name in es.
func Find(es []Entry, name string) (Entry, bool) {
	for _, e := range es {
		if e.Protocol.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}
