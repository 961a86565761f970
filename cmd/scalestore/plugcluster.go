package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/procrunner"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// optionFlag defines --opt name=value (repeatable) into *opts: a plug-in
// protocol's own options (sim, cluster, node).
func optionFlag(fs *flag.FlagSet, opts *map[string]string) {
	fs.Func("opt", "set one of the protocol's own options, name=value (repeat for more; 'scalestore protocols --json' lists them)", func(s string) error {
		name, val, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return fmt.Errorf("want name=value, got %q", s)
		}
		if *opts == nil {
			*opts = map[string]string{}
		}
		(*opts)[name] = val
		return nil
	})
}

// addCounters adds more to sum, counter by counter (by name, in the order
// first seen).
func addCounters(sum, more []protocolapi.Counter) []protocolapi.Counter {
	for _, c := range more {
		i := slices.IndexFunc(sum, func(s protocolapi.Counter) bool { return s.Name == c.Name })
		if i < 0 {
			sum = append(sum, c)
			continue
		}
		sum[i].Value += c.Value
	}
	return sum
}

// pluginFlags checks the cluster flags for plug-in protocol p and fills in
// what the command line left out: --records from the protocol's default
// keys, --workload register for the default. It refuses what the process
// runner does not do, with the reason.
func (f *clusterFlags) pluginFlags(fs *flag.FlagSet, p protocolapi.Protocol, stderr io.Writer) bool {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	refuse := func(format string, a ...any) bool {
		fmt.Fprintf(stderr, "cluster: --protocol %s: "+format+"\n", append([]any{p.Name}, a...)...)
		return false
	}
	for _, name := range []string{"kill", "elastic", "partitioned", "shift-every", "memory-nodes", "durability", "data"} {
		if set[name] {
			return refuse("--%s is not for a plug-in protocol (the process runner runs its layout's nodes, no crashes, no elastic membership, no store of pages)", name)
		}
	}
	if !set["records"] {
		f.records = p.Defaults.Keys
		if f.records < 1 {
			f.records = 64
		}
	}
	if f.workload == "ycsb" {
		f.workload = protocolapi.WorkloadRegister
	}
	if f.workload != protocolapi.WorkloadRegister && f.workload != protocolapi.WorkloadRMW {
		return refuse("--workload %q: the process runner runs register and rmw", f.workload)
	}
	if !p.Supports.Workload(f.workload) {
		return refuse("it does not support the %s workload (it supports %v)", f.workload, p.Supports.Workloads)
	}
	if !set["cache-lines"] {
		f.cacheLines = p.Defaults.CacheLines
	}
	_, lay, err := procrunner.Deploy(p, f.pluginConfig())
	if err != nil {
		return refuse("%v", err)
	}
	if lay.Nodes > 64 {
		return refuse("a layout of %d nodes: at most 64 processes", lay.Nodes)
	}
	f.plugin, f.memoryNodes = &p, lay.Nodes-f.nodes
	return true
}

// pluginConfig is the deployment every node of a plug-in protocol builds.
func (f *clusterFlags) pluginConfig() protocolapi.Config {
	return protocolapi.Config{Nodes: f.nodes, Workers: f.threads, Keys: f.records, CacheLines: f.cacheLines, Mutant: f.mutant, Options: f.opts}
}

// clusterRunPlugin runs 'cluster --protocol P' for a plug-in protocol:
// the nodes of its layout as processes, each a procrunner.Node (the first
// --nodes run --threads workers each, the others none), the register or
// rmw workload on --records keys for --duration, a final read of every
// key on node 0, and with --check the history checked (porcupine per key,
// or the protocol's own check). A violation a node found is counted and
// printed.
func clusterRunPlugin(f clusterFlags, stderr io.Writer) (clusterResult, error) {
	p := f.plugin
	args := []string{"--computes", fmt.Sprint(f.nodes), "--keys", fmt.Sprint(f.records), "--cache-lines", fmt.Sprint(f.cacheLines)}
	if f.mutant != "" {
		args = append(args, "--mutate", f.mutant)
	}
	for name, v := range f.opts {
		args = append(args, "--opt", name+"="+v)
	}
	res, _, err := runMemoryNodes(f, memoryNodeDesign{protocol: p.Name, name: p.Name, args: args, finalRead: true,
		running: fmt.Sprintf("%s: %d nodes running %d workers each, %d nodes of its own, over %s; the %s workload on %d keys for %v\n",
			p.Name, f.nodes, f.threads, f.memoryNodes, f.kind, f.workload, f.records, f.duration),
		dropped: "the nodes found %d protocol violations"}, stderr)
	return res, err
}

// printPluginFigures prints a plug-in protocol's run.
func printPluginFigures(stdout io.Writer, res clusterResult, check string) {
	fmt.Fprintf(stdout, "%s: %d nodes running workers and %d more over %s: %.0f ops/s  p50 %.1fus  p99 %.1fus  p99.9 %.1fus  %s\n",
		res.Protocol, res.Nodes, res.MemoryNodes, res.Transport, res.OpsPerSec, res.P50us, res.P99us, res.P999us, check)
	if len(res.Counters) > 0 {
		var parts []string
		for _, c := range res.Counters {
			parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.Value))
		}
		fmt.Fprintf(stdout, "  counters: %s\n", strings.Join(parts, ", "))
	}
}

// servePlugin runs a node of a plug-in protocol under 'scalestore cluster
// --protocol P' (--control).
func servePlugin(f nodeFlags, p protocolapi.Protocol, tc cluster.TransportConfig, log *slog.Logger, stdin io.Reader, stdout io.Writer) error {
	if !f.control {
		return fmt.Errorf("--protocol %s: a node of a plug-in protocol runs under 'scalestore cluster --protocol %s' (--control)", p.Name, p.Name)
	}
	cfg := protocolapi.Config{Nodes: f.computes, Workers: f.threads, Keys: int(f.keys), CacheLines: f.cacheLines, Mutant: f.mutant, Options: f.opts}
	n, err := procrunner.Start(procrunner.Config{Protocol: p, Deploy: cfg, ID: tc.Self, Seed: f.clusterID, NewTransport: tc.New})
	if err != nil {
		return err
	}
	defer n.Close()
	log.Info("plug-in protocol node started", "node", f.id, "protocol", p.Name, "workers", n.Workers(), "transport", tc.Resolve())
	return cluster.ServePlugin(n, stdin, stdout)
}

// lookupPlugin finds a registered protocol the process runner runs; an
// unknown or built-in name is an error with the reason.
func lookupPlugin(name string) (protocolapi.Protocol, error) {
	reg, err := registry()
	if err != nil {
		return protocolapi.Protocol{}, err
	}
	p, err := reg.Find(name)
	if err != nil {
		return p, err
	}
	if err := procrunner.Check(p); err != nil {
		return p, err
	}
	return p, nil
}
