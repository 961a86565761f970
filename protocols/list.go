package protocols

import (
	"slices"

	"github.com/scalestore-go/scalestore/examples/msi"
	"github.com/scalestore-go/scalestore/gam"
	"github.com/scalestore-go/scalestore/index/indexproc"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol/selcc/selccproc"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/sel"
)

// plugIns are the protocols built on protocolapi: one line each, with the
// directory of the protocol's package.
var plugIns = []struct {
	protocol func() protocolapi.Protocol
	dir      string
}{
	{msi.Protocol, "examples/msi"},
	{sel.Protocol, "sel"},
	{gam.ProtocolSEQ, "gam"},
	{gam.ProtocolTSO, "gam"},
}

// Entries returns every registration in the order of this list: the
// built-ins, then the plug-ins. Their Designs are new (they hold the
// values of their flags): call it once for a command line.
func Entries() []Entry {
	var out []Entry
	out = append(out, builtIns()...)
	for _, p := range plugIns {
		out = append(out, Entry{Protocol: p.protocol(), Dirs: []string{p.dir}})
	}
	return out
}

// builtIns describes the systems that run through scenarios' own run
// loops (moving them onto simrunner is the next step): BuiltIn is the
// `scalestore sim` flags that select each one's loop. Their code for
// processes is a cluster.Design of their own packages.
func builtIns() []Entry {
	var scalestore, selcc []protocolapi.Mutant
	for _, name := range mutation.Names {
		m := protocolapi.Mutant{Name: name, Workload: workloadOf(name)}
		if mutation.SELCC(name) {
			selcc = append(selcc, m)
		} else {
			scalestore = append(scalestore, m)
		}
	}
	selccDirs := []string{"protocol/selcc", "linecache", "linetree"}
	// One Design runs the four index designs; the index/ tree is theirs.
	indexDesign, indexDirs := indexproc.Design(), []string{"index"}
	index := func(name, summary string) Entry {
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
		return Entry{Protocol: protocolapi.Protocol{Name: name, Summary: summary, BuiltIn: "--workload " + name, Mutants: ms,
			Supports: protocolapi.Supports{Workloads: []string{name}, Processes: true}}, Dirs: indexDirs, Processes: indexDesign}
	}
	all := []Entry{
		// ScaleStore is the product itself: its code is the module's
		// (the root package, actors, bufmgr, btree, cluster, ...) and
		// its name the command's, so it declares no directories (the
		// naming rule's test knows it).
		{Protocol: protocolapi.Protocol{Name: "scalestore", Summary: "ScaleStore's directory protocol with anticipatory chaining (SIGMOD'22); --protocol fifo|polling for its baselines",
			BuiltIn: "--protocol chaining", Mutants: scalestore,
			Supports: protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW, protocolapi.WorkloadBTree},
				Crashes: true, Elastic: true, Processes: true}}},
		{Protocol: protocolapi.Protocol{Name: "selcc", Summary: "SELCC's latch-word coherence over one-sided verbs on passive memory nodes",
			BuiltIn: "--protocol selcc", Mutants: selcc,
			Supports: protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW, protocolapi.WorkloadBTree},
				Processes: true}}, Dirs: selccDirs, Processes: selccproc.Design()},
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
