package protocols

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/scalestore-go/scalestore/examples/msi"
	"github.com/scalestore-go/scalestore/gam"
	"github.com/scalestore-go/scalestore/index/indexdesign"
	"github.com/scalestore-go/scalestore/index/indexproc"
	"github.com/scalestore-go/scalestore/index/nam"
	"github.com/scalestore-go/scalestore/mutation"
	selccproto "github.com/scalestore-go/scalestore/protocol/selcc"
	"github.com/scalestore-go/scalestore/protocol/selcc/selccproc"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/scenarios"
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

// builtIns describes the systems whose nodes own their simulated world:
// World is scenarios' run loop that builds it, which simrunner.RunWorld
// runs, and BuiltIn the `scalestore sim` flags that select it. Their code
// for processes is a cluster.Design of their own packages.
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
			Supports: protocolapi.Supports{Workloads: []string{name}, Processes: true}, Options: indexOptions(name)},
			Dirs: indexDirs, Processes: indexDesign, World: scenarios.IndexWorld(name),
			Swarm: []string{"--workload " + name + " --seeds 300 --keys 200 --ops 2000"},
			MutantRun: func(m protocolapi.Mutant) string {
				run := fmt.Sprintf("--seeds 200 --workload %s --keys 200 --ops 2000", name)
				if indexdesign.IsCell(name) {
					// Cell's split mutants need splits: meganodes of more
					// than 12 nodes split.
					run += " --cell-mega-nodes 12"
				}
				return run
			}}
	}
	cell := index("cell", "Cell: meganodes, client- or server-side search, locality selector")
	// Cell's meganodes split as well, in a run of their own.
	cell.Swarm = append(cell.Swarm, "--workload cell --seeds 300 --keys 200 --ops 2000 --cell-mega-nodes 12")
	all := []Entry{
		// ScaleStore is the product itself: its code is the module's
		// (the root package, actors, bufmgr, btree, cluster, ...) and
		// its name the command's, so it declares no directories (the
		// naming rule's test knows it).
		{Protocol: protocolapi.Protocol{Name: "scalestore", Summary: "ScaleStore's directory protocol with anticipatory chaining (SIGMOD'22); --protocol fifo|polling for its baselines",
			BuiltIn: "--protocol chaining", Mutants: scalestore, Options: scaleStoreOptions,
			Supports: protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW, protocolapi.WorkloadBTree},
				Crashes: true, Elastic: true, Processes: true}}, World: scenarios.ScaleStoreWorld(),
			Swarm: []string{
				"--seeds 300 " + narrow,
				"--seeds 300 --crashes 3 " + narrow,
				"--seeds 300 --crashes 3 --workload rmw " + narrow,
				"--seeds 300 --crashes 3 --workload btree " + narrowTree,
				"--seeds 300 --crashes 3 --workload btree --keys 20000 " + narrowTree,
				"--seeds 1500 " + wide,
			},
			MutantRun: scaleStoreMutantRun},
		{Protocol: protocolapi.Protocol{Name: "selcc", Summary: "SELCC's latch-word coherence over one-sided verbs on passive memory nodes",
			BuiltIn: "--protocol selcc", Mutants: selcc, Options: []protocolapi.Option{
				{Name: selccproto.OptionMemoryNodes, Default: strconv.Itoa(selccproto.DefaultMemoryNodes), Flag: selccproto.OptionMemoryNodes,
					About: "passive memory nodes holding the lines (--nodes are the compute nodes)"},
				{Name: selccproto.OptionGamma, Default: strconv.Itoa(selccproto.DefaultGamma), Flag: selccproto.OptionGamma,
					About: "local-handover threshold of the lease (SELCC §5.3.1; 0 or below: off)"},
				{Name: selccproto.OptionPriority, Default: "on", Flag: "no-priority", FlagValue: "off",
					About: "the starved-writer priority (SELCC §5.3.2): on or off"}},
			Supports: protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW, protocolapi.WorkloadBTree},
				Processes: true}}, Dirs: selccDirs, Processes: selccproc.Design(), World: scenarios.SELCCWorld(),
			Swarm: []string{
				"--protocol selcc --seeds 300 " + narrow,
				"--protocol selcc --workload rmw --seeds 300 " + narrow,
				"--protocol selcc --workload btree --seeds 300 " + narrowTree,
				"--protocol selcc --seeds 1500 " + wide,
				"--protocol selcc --workload rmw --seeds 1500 " + wide,
			},
			MutantRun: func(m protocolapi.Mutant) string {
				return "--seeds 200 --protocol selcc --workload register --keys 1000 --crashes 0 " + mutantShape(12)
			}},
		index("nam-cg", "NAM-tree, coarse-grained: the index on memory servers, RPCs (docs/indexes.md)"),
		index("nam-fg", "NAM-tree, fine-grained: one-sided verbs on the memory servers' nodes"),
		index("nam-hybrid", "NAM-tree, hybrid: inner nodes by RPC, leaves by one-sided verbs"),
		cell,
	}
	return all
}

// scaleStoreOptions are ScaleStore's own parameters, each also set by the
// `scalestore sim` flag of its name.
var scaleStoreOptions = []protocolapi.Option{
	{Name: scenarios.OptionConflict, Default: "chaining", About: "conflict handling: chaining (the paper's), fifo or polling (baselines); sim --protocol fifo|polling sets it"},
	{Name: scenarios.OptionReplicas, Default: "1", Flag: scenarios.OptionReplicas,
		About: "nodes keeping every directory's pages: 1, or 2 (a primary and a backup, written through to both, failover and re-replication: docs/replication.md)"},
	{Name: scenarios.OptionComputeNodes, Default: "0", Flag: scenarios.OptionComputeNodes,
		About: "compute nodes (cache, workers, no pages) beside the --nodes storage nodes, which then run no workers (paper §6.6); --elastic joins and leaves them"},
	{Name: scenarios.OptionPartitioned, Default: "off", Flag: scenarios.OptionPartitioned, FlagValue: "on",
		About: "on: each node's workers use only the pages whose directory is their own node (the paper's partitioned YCSB)"},
	{Name: scenarios.OptionDoubleFaults, Default: "off", Flag: scenarios.OptionDoubleFaults, FlagValue: "on",
		About: "on: crashes may take both copies of a directory (with --replicas 2, register and rmw): its pages fail at once with an error naming the nodes that held them, the other pages serve, and the history is checked without them"},
	{Name: scenarios.OptionMessageBudget, Default: "0", Flag: scenarios.OptionMessageBudget,
		About: "most messages per operation before the run is a violation (0: the calibrated budget of the swarm's configuration, none for others; -1: none)"},
}

// indexOptions are the parameters of the index design name, each also set
// by the `scalestore sim` flag of its name.
func indexOptions(name string) []protocolapi.Option {
	out := []protocolapi.Option{
		{Name: indexdesign.OptionMemoryNodes, Default: strconv.Itoa(indexdesign.DefaultMemoryNodes), Flag: indexdesign.OptionMemoryNodes,
			About: "memory servers holding the index"},
		{Name: indexdesign.OptionScanLen, Default: "12", Flag: indexdesign.OptionScanLen, About: "a scan covers 1 to this many keys"},
	}
	if indexdesign.HeadNodes(name) {
		out = append(out, protocolapi.Option{Name: indexdesign.OptionHeadNodes, Default: "on", Flag: indexdesign.OptionHeadNodes,
			About: "head nodes on the leaf level (a background pass installs them; scans prefetch leaves through them): on or off"},
			protocolapi.Option{Name: indexdesign.OptionHeadGroup, Default: strconv.Itoa(nam.DefaultHeadGroup), Flag: indexdesign.OptionHeadGroup,
				About: "the leaves a head node lists (2..29)"})
	}
	if indexdesign.IsCell(name) {
		out = append(out, protocolapi.Option{Name: indexdesign.OptionCellSearch, Default: "selector", Flag: indexdesign.OptionCellSearch,
			About: "how clients search leaf meganodes: selector (the locality selector, per request), server (one call per meganode) or client (one-sided READs)"},
			protocolapi.Option{Name: indexdesign.OptionCellCacheLevel, Default: "1", Flag: indexdesign.OptionCellCacheLevel,
				About: "clients cache the nodes of leaf meganodes at this level and above (0: none; leaves are never cached)"},
			protocolapi.Option{Name: indexdesign.OptionCellMegaNodes, Default: "0", Flag: indexdesign.OptionCellMegaNodes,
				About: "a leaf meganode of more nodes than this splits in two, with Cell's protocol, while clients read it (0: never)"})
	}
	return out
}

// The shapes of the built-ins' swarms: narrow (4 nodes of 3 workers, 48
// pages, 12 cached a node; the B-tree's pages are its own) and wide (more
// workers than lines of cache: issue 36).
const (
	narrow     = "--nodes 4 --workers 3 --pages 48 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9"
	narrowTree = "--nodes 4 --workers 3 --cache-pages 12 --ops 2000 --read-ratio 0.6 --zipf 0.9"
	wide       = "--nodes 8 --workers 4 --pages 24 --cache-pages 6 --ops 3000 --read-ratio 0.5 --zipf 0.99"
)

// mutantShape is the built-ins' mutants' shape with cachePages a node.
func mutantShape(cachePages int) string {
	return fmt.Sprintf("--nodes 4 --workers 3 --pages 48 --cache-pages %d --ops 2000 --read-ratio 0.6 --zipf 0.9", cachePages)
}

// scaleStoreMutantRun runs one of ScaleStore's mutants: a crash mutant
// with 10 crashes and a smaller cache (the B-tree's on 20,000 keys), a
// replica mutant with replicated directories as well.
func scaleStoreMutantRun(m protocolapi.Mutant) string {
	crashes, cache, keys, replicas := 0, 12, 1000, 1
	if mutation.Crash(m.Name) || mutation.Replica(m.Name) {
		crashes, cache = 10, 8
	}
	if mutation.Crash(m.Name) && m.Workload == protocolapi.WorkloadBTree {
		keys = 20000
	}
	if mutation.Replica(m.Name) {
		replicas = 2
	}
	return fmt.Sprintf("--seeds 200 --protocol chaining --workload %s --keys %d --crashes %d --replicas %d %s",
		m.Workload, keys, crashes, replicas, mutantShape(cache))
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
