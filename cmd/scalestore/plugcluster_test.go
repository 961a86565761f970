package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestClusterPlugin: the plug-in protocols MSI (messages), SEL (verbs to
// memory nodes of its layout) and GAM in both modes (TSO checked by its own
// history check) run on processes over shm and tcp through the process
// runner: a checked run with accesses, no violation, every node's counters
// summed, and the final read in the history.
func TestClusterPlugin(t *testing.T) {
	bin := scalestoreBinary(t)
	for _, proto := range []string{"msi", "sel", "gam-seq", "gam-tso"} {
		for _, kind := range []string{"shm", "tcp"} {
			t.Run(proto+"/"+kind, func(t *testing.T) {
				workload := "rmw"
				if proto == "gam-tso" {
					workload = "register" // TSO's writes do not read
				}
				out, err := exec.Command(bin, "cluster", "--protocol", proto, "--nodes", "2", "--threads", "2", "--transport", kind,
					"--records", "16", "--read-ratio", "0.5", "--workload", workload, "--duration", "600ms", "--check", "--json", "--quiet").CombinedOutput()
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				var res clusterResult
				lastJSON(t, out, &res)
				if res.Protocol != proto || res.Violations != 0 || !res.Checked || res.Ops == 0 || res.HistoryOps < int(res.Ops)+16 || len(res.Counters) == 0 {
					t.Fatalf("protocol %q violations %d checked %v ops %d history %d counters %v\n%s",
						res.Protocol, res.Violations, res.Checked, res.Ops, res.HistoryOps, res.Counters, out)
				}
				if proto == "sel" && res.MemoryNodes != 2 {
					t.Fatalf("sel's layout: %d nodes above the workers, want its 2 memory nodes\n%s", res.MemoryNodes, out)
				}
			})
		}
	}
}

// TestClusterPluginMutant: mutants on processes are caught. SEL's readers
// that skip the latch read a line torn by a writer's two WRITEs, which the
// reader's own check reports: the node's violation, printed, exit 1. MSI's
// home that forgets an evicted line's value loses writes, which porcupine
// sees in the history.
func TestClusterPluginMutant(t *testing.T) {
	bin := scalestoreBinary(t)
	for _, tc := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"--protocol", "sel", "--mutate", "reader-skips-latch", "--transport", "shm", "--records", "1"},
			[]string{"protocol violations", "torn line"}},
		{[]string{"--protocol", "msi", "--mutate", "forget-writeback", "--transport", "tcp", "--records", "8", "--cache-lines", "2", "--json"},
			[]string{"linearizable: "}},
	} {
		t.Run(tc.args[1], func(t *testing.T) {
			args := append([]string{"cluster", "--nodes", "2", "--threads", "2", "--read-ratio", "0.5", "--duration", "1s", "--check", "--quiet"}, tc.args...)
			out, err := exec.Command(bin, args...).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("the mutant was not caught: %v\n%s", err, out)
			}
			for _, want := range tc.wants {
				if !strings.Contains(string(out), want) {
					t.Fatalf("no %q in the output:\n%s", want, out)
				}
			}
			if tc.args[1] == "msi" {
				var res clusterResult
				lastJSON(t, out, &res)
				if res.Violations == 0 || !res.Checked {
					t.Fatalf("porcupine found no lost write: violations %d checked %v\n%s", res.Violations, res.Checked, out)
				}
			}
		})
	}
}

// TestClusterPluginRefusals: what the process runner does not run is
// refused with the reason, before any process starts.
func TestClusterPluginRefusals(t *testing.T) {
	bin := scalestoreBinary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--protocol", "nam-cg"}, "built in"},
		{[]string{"--protocol", "no-such"}, "unknown protocol"},
		{[]string{"--protocol", "msi", "--kill", "1@1s"}, "--kill"},
		{[]string{"--protocol", "msi", "--elastic"}, "--elastic is not for a plug-in protocol"},
		{[]string{"--protocol", "msi", "--workload", "nam-cg"}, "runs register and rmw"},
		{[]string{"--protocol", "gam-tso", "--workload", "rmw"}, "does not support the rmw workload"},
		{[]string{"--protocol", "msi", "--mutate", "no-such"}, "has no mutant"},
		{[]string{"--protocol", "sel", "--opt", "no-such=1"}, "has no option"},
	} {
		out, err := exec.Command(bin, append([]string{"cluster", "--duration", "2s"}, tc.args...)...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v, want exit 2 and %q:\n%s", tc.args, err, tc.want, out)
		}
	}
}
