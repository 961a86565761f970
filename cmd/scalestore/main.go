// Command scalestore is ScaleStore-Go's command line: simulated clusters
// that fuzz the coherence protocol (sim), the paper's scenarios as message
// charts (scenario), and later the engine and real clusters.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `scalestore: a distributed page store kept coherent by ScaleStore's directory protocol.

Usage:
  scalestore <command> [flags]

Commands:
  sim        run the page-register workload on a simulated cluster, with fault
             injection, invariant checks after every step and a porcupine
             linearizability check of the history
  protocols  list every registered protocol with what it supports
             ('scalestore sim --protocol NAME' runs any of them)
  scenario   run one of the paper's scenarios and print its message chart
             ('scalestore scenario list' names them)
  compare    ScaleStore and SELCC side by side on the same simulated workload
             and seeds: throughput, messages and verbs per operation, latency,
             memory-side handler calls, fairness
  figure     the seed papers' evaluation figures, simulated (SELCC's, the
             NAM-tree's, Cell's; 'scalestore figure list' names them)
  model      the NAM-tree paper's analytic model beside the simulated costs
  kv         a single-node store in a directory: put, get, delete, scan
  crashtest  kill writers of a store at random moments and check that the
             next open finds every acknowledged write or refuses the store
  ycsb       YCSB point lookups and updates on the store or an in-memory baseline
  node       one node of a real cluster (tcp, shm or ibverbs transport)
  etcd       an etcd server for a cluster's membership on this host (node --etcd),
             for trying it out: production runs a real etcd cluster
  cluster    start N node processes on this host, run YCSB inside them, check
             the history with porcupine
  bench      'bench transport': TCP, Unix socket and shared memory between two processes;
             'bench memory': this machine's dependent-load latency (what bounds a lookup in memory);
             'bench io': random reads of a loaded store through the engine's I/O path (what bounds it on disk);
             'bench cluster': the cluster across node counts, transports, mixes, shared and partitioned

Run 'scalestore <command> --help' for the flags of a command.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "sim":
		return runSim(args[1:], stdout, stderr)
	case "protocols":
		return runProtocols(args[1:], stdout, stderr)
	case "scenario":
		return runScenario(args[1:], stdout, stderr)
	case "compare":
		return runCompare(args[1:], stdout, stderr)
	case "figure":
		return runFigure(args[1:], stdout, stderr)
	case "model":
		return runModel(args[1:], stdout, stderr)
	case "ycsb":
		return runYCSB(args[1:], stdout, stderr)
	case "kv":
		return runKV(args[1:], os.Stdin, stdout, stderr)
	case "crashtest":
		return runCrashtest(args[1:], stdout, stderr)
	case "node":
		return runNode(args[1:], os.Stdin, stdout, stderr)
	case "cluster":
		return runCluster(args[1:], stdout, stderr)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case "etcd":
		return runEtcd(args[1:], stdout, stderr)
	case "bench-peer":
		return runBenchPeer(args[1:], os.Stdin, stdout, stderr)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "scalestore: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// parseNoArgs parses a command's flags and refuses arguments after them.
// ok false means the command ends with code: 0 after -h, 2 after a bad
// flag or an argument it does not take (the flag package or this said why
// on stderr).
func parseNoArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}
