package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/procrunner"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/protocols"
)

const protocolsUsage = `Usage: scalestore protocols [--json]

Lists every registered protocol (package protocols is the one list of
registrations) with what it supports: the workloads, node crashes, elastic
membership, runs on processes (every plug-in protocol does, through the
process runner: 'scalestore cluster --protocol NAME'), its mutants, and how
the simulator runs it: "generic" (simrunner's roles and Env, any protocol
built on protocolapi) or "world" (a built-in whose nodes own their simulated
world, which its registration gives and simrunner runs). 'scalestore sim
--protocol NAME' runs any of them.

Flags:
`

// registry is every protocol the CLI knows.
func registry() (*protocolapi.Registry, error) { return protocols.Registry() }

type protocolRow struct {
	Name      string               `json:"name"`
	Runner    string               `json:"runner"`
	Workloads []string             `json:"workloads"`
	Crashes   bool                 `json:"crashes"`
	Elastic   bool                 `json:"elastic"`
	Processes bool                 `json:"processes"`
	Mutants   []string             `json:"mutants"`
	Scenarios []string             `json:"scenarios"`
	Options   []protocolapi.Option `json:"options"`
	Summary   string               `json:"summary"`
}

func runProtocols(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("protocols", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, protocolsUsage); fs.PrintDefaults() }
	asJSON := fs.Bool("json", false, "print one JSON array")
	list := fs.String("list", "", "for scripts: 'swarm' prints the 'scalestore sim' flags of every run of 'make swarm', a line each (every protocol's), 'mutant-runs' a line 'MUTANT FLAGS' for every mutant of every protocol (the flags that run it: 'make mutants'); 'runs' a line 'PROTOCOL WORKLOAD' for every workload of every protocol on the generic runner, 'mutants' a line 'PROTOCOL MUTANT WORKLOAD' for every mutant of those")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	reg, err := registry()
	if err != nil {
		fmt.Fprintf(stderr, "protocols: %v\n", err)
		return 1
	}
	switch *list {
	case "":
	case "swarm", "mutant-runs":
		for _, line := range scriptRuns(protocols.Entries(), *list == "swarm") {
			fmt.Fprintln(stdout, line)
		}
		return 0
	case "runs", "mutants":
		for _, p := range reg.All() {
			if p.Deploy == nil {
				continue
			}
			if *list == "mutants" {
				for _, m := range p.Mutants {
					w := m.Workload
					if w == "" {
						w = protocolapi.WorkloadRegister
					}
					fmt.Fprintf(stdout, "%s %s %s\n", p.Name, m.Name, w)
				}
				continue
			}
			for _, w := range p.Supports.Workloads {
				if w != protocolapi.WorkloadBTree { // not on the generic runner yet
					fmt.Fprintf(stdout, "%s %s\n", p.Name, w)
				}
			}
		}
		return 0
	default:
		fmt.Fprintf(stderr, "protocols: --list %q: swarm, mutant-runs, runs or mutants\n", *list)
		return 2
	}
	var rows []protocolRow
	es := protocols.Entries()
	for _, p := range reg.All() {
		row := protocolRow{Name: p.Name, Runner: "generic", Workloads: p.Supports.Workloads, Crashes: p.Supports.Crashes,
			Elastic: p.Supports.Elastic, Processes: p.Supports.Processes || procrunner.Check(p) == nil, Mutants: p.MutantNames(), Summary: p.Summary,
			Options: p.Options}
		if e, _ := protocols.Find(es, p.Name); e.World != nil {
			row.Runner = "world"
		}
		for _, s := range p.Scenarios {
			row.Scenarios = append(row.Scenarios, s.Name)
		}
		rows = append(rows, row)
	}
	if *asJSON {
		b, _ := json.Marshal(rows)
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "-"
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUNNER\tWORKLOADS\tCRASHES\tELASTIC\tPROCESSES\tMUTANTS\tSUMMARY")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Name, r.Runner, strings.Join(r.Workloads, ","),
			yes(r.Crashes), yes(r.Elastic), yes(r.Processes), len(r.Mutants), r.Summary)
	}
	tw.Flush()
	return 0
}

// scriptRuns are the lines of --list swarm (swarm true) or mutant-runs:
// a built-in's from its registration, a plug-in's from its workloads and
// mutants on the generic runner.
func scriptRuns(es []protocols.Entry, swarm bool) []string {
	var out []string
	for _, e := range es {
		p := e.Protocol
		switch {
		case swarm && p.Deploy == nil:
			out = append(out, e.Swarm...)
		case swarm:
			for _, w := range p.Supports.Workloads {
				if w != protocolapi.WorkloadBTree { // not on the generic runner yet
					out = append(out, fmt.Sprintf("--protocol %s --workload %s --seeds 300", p.Name, w))
				}
			}
		default:
			for _, m := range p.Mutants {
				if m.Workload == "" {
					m.Workload = protocolapi.WorkloadRegister
				}
				if p.Deploy == nil {
					out = append(out, m.Name+" "+e.MutantRun(m))
				} else {
					out = append(out, fmt.Sprintf("%s --protocol %s --workload %s --seeds 200", m.Name, p.Name, m.Workload))
				}
			}
		}
	}
	return out
}

// builtInProtocols are the --protocol values of ScaleStore's own loop
// (its conflict handling), which are not registered names.
var builtInProtocols = []string{"chaining", "fifo", "polling"}

// designOf is the process design of the registered protocol name in es
// (nil: none), selected by --workload when byWorkload, else by --protocol.
func designOf(es []protocols.Entry, name string, byWorkload bool) *cluster.Design {
	for _, e := range es {
		if e.Protocol.Name == name && e.Processes != nil && e.Processes.ByWorkload == byWorkload {
			return e.Processes
		}
	}
	return nil
}

// designNames lists the registered protocols with a process design that
// sel accepts, in the order of the registrations.
func designNames(es []protocols.Entry, sel func(*cluster.Design) bool) []string {
	var out []string
	for _, e := range es {
		if e.Processes != nil && sel(e.Processes) {
			out = append(out, e.Protocol.Name)
		}
	}
	return out
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// protocolArg finds sim's --protocol flag in args: its value, and the
// args' positions it spans (-1 when absent).
func protocolArg(args []string) (value string, at, n int) {
	for i, a := range args {
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "protocol" {
			continue
		}
		if hasVal {
			return val, i, 1
		}
		if i+1 < len(args) {
			return args[i+1], i, 2
		}
	}
	return "", -1, 0
}

// dispatchSim routes `sim --protocol NAME` through the registry: a
// plug-in protocol to the generic runner (run true), a built-in one to its
// own loop's flags (the args rewritten). An unknown name is left for sim's
// own flag check, which lists the registered names.
func dispatchSim(args []string, stdout, stderr io.Writer) (rewritten []string, code int, run bool) {
	name, at, n := protocolArg(args)
	if at < 0 {
		return args, 0, false
	}
	for _, b := range builtInProtocols {
		if name == b {
			return args, 0, false
		}
	}
	reg, err := registry()
	if err != nil {
		fmt.Fprintf(stderr, "sim: %v\n", err)
		return nil, 1, true
	}
	p, ok := reg.Lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "sim: --protocol %q: want chaining, fifo, polling or a registered protocol (%s)\n", name, strings.Join(reg.Names(), ", "))
		return nil, 2, true
	}
	if p.Deploy != nil {
		return nil, runPlugSim(p, args, stdout, stderr), true
	}
	out := append(append(append([]string(nil), args[:at]...), strings.Fields(p.BuiltIn)...), args[at+n:]...)
	return out, 0, false
}
