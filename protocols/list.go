package protocols

import (
	"slices"

	"github.com/scalestore-go/scalestore/examples/msi"
	"github.com/scalestore-go/scalestore/gam"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/sel"
)

// plugIns are the protocols built on protocolapi: one line each.
var plugIns = []func() protocolapi.Protocol{
	msi.Protocol,
	sel.Protocol,
	gam.ProtocolSEQ,
	gam.ProtocolTSO,
}

// Registry returns a registry of every protocol, or the first that does
// not register (a name taken twice, a descriptor incomplete).
func Registry() (*protocolapi.Registry, error) {
	r := protocolapi.NewRegistry()
	for _, p := range builtIns() {
		if err := r.Register(p); err != nil {
			return nil, err
		}
	}
	for _, p := range plugIns {
		if err := r.Register(p()); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// builtIns describes the systems that run through scenarios' own run
// loops (moving them onto simrunner is the next step): BuiltIn is the
// `scalestore sim` flags that select each one's loop.
func builtIns() []protocolapi.Protocol {
	var scalestore, selcc []protocolapi.Mutant
	for _, name := range mutation.Names {
		m := protocolapi.Mutant{Name: name, Workload: workloadOf(name)}
		if mutation.SELCC(name) {
			selcc = append(selcc, m)
		} else {
			scalestore = append(scalestore, m)
		}
	}
	index := func(name, summary string) protocolapi.Protocol {
		var ms []protocolapi.Mutant
		for m, workloads := range mutation.NAMNames {
			if slices.Contains(workloads, name) {
				ms = append(ms, protocolapi.Mutant{Name: m, Workload: name})
			}
		}
		slices.SortFunc(ms, func(a, b protocolapi.Mutant) int {
			if a.Name < b.Name {
				return -1
			}
			return 1
		})
		return protocolapi.Protocol{Name: name, Summary: summary, BuiltIn: "--workload " + name, Mutants: ms,
			Supports: protocolapi.Supports{Workloads: []string{name}, Processes: true}}
	}
	all := []protocolapi.Protocol{
		{Name: "scalestore", Summary: "ScaleStore's directory protocol with anticipatory chaining (SIGMOD'22); --protocol fifo|polling for its baselines",
			BuiltIn: "--protocol chaining", Mutants: scalestore,
			Supports: protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW, protocolapi.WorkloadBTree},
				Crashes: true, Elastic: true, Processes: true}},
		{Name: "selcc", Summary: "SELCC's latch-word coherence over one-sided verbs on passive memory nodes",
			BuiltIn: "--protocol selcc", Mutants: selcc,
			Supports: protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW, protocolapi.WorkloadBTree},
				Processes: true}},
		index("nam-cg", "NAM-tree, coarse-grained: the index on memory servers, RPCs (docs/indexes.md)"),
		index("nam-fg", "NAM-tree, fine-grained: one-sided verbs on the memory servers' nodes"),
		index("nam-hybrid", "NAM-tree, hybrid: inner nodes by RPC, leaves by one-sided verbs"),
		index("cell", "Cell: meganodes, client- or server-side search, locality selector"),
	}
	return all
}

// workloadOf is the workload whose checks catch a built-in mutant.
func workloadOf(name string) string {
	switch name {
	case mutation.UpgradeIgnoresVersion:
		return protocolapi.WorkloadRMW
	case mutation.BTreeSplitNodeFirst:
		return protocolapi.WorkloadBTree
	}
	return protocolapi.WorkloadRegister
}
