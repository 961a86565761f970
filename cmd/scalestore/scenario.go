package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/scalestore-go/scalestore/internal/traceview"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/scenarios"
)

const scenarioUsage = `Usage:
  scalestore scenario list
  scalestore scenario NAME [--protocol chaining|fifo|polling] [--requesters N] [--json] [--html FILE]

Runs one of the paper's scenarios on a small simulated cluster without faults
and prints its message sequence as a chart: time, sender -> receiver, the
message, and the directory's metadata for the page after the receiver handled
it. Only the scenario's own messages are shown (its set-up is not).

The scenarios of the protocols built on protocolapi ('scenario list' names
them with their protocol) run on the generic runner: every message of the
run, and the watched key's state after it.

The selcc-* scenarios run SELCC instead (its paper's Fig. 7 and 8; --protocol
does not apply): four compute nodes and one passive memory node, and the chart
has every invalidation message and every one-sided verb (CAS, FAA, READ,
WRITE) with the line's latch word, each node's memo and memory's copy after.

--html FILE also writes the chart as one self-contained HTML page (no network
access): a sequence diagram of the messages (and verbs), the page's directory
state after each step, stepped with the arrow keys (or j and k, Home, End).
'sim --trace-html' does the same for a whole simulated run.

Flags:
`

func runScenario(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenario", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, scenarioUsage); fs.PrintDefaults() }
	proto := fs.String("protocol", "chaining", "conflict handling: chaining, fifo or polling")
	requesters := fs.Int("requesters", 3, "requesters of the chaining scenario")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	htmlOut := fs.String("html", "", "also write the chart as a self-contained HTML trace viewer to this file")
	// Accept flags before and after the scenario name.
	var name string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		if name != "" {
			fmt.Fprintf(stderr, "scenario: unexpected argument %q\n", fs.Arg(0))
			return 2
		}
		name, rest = fs.Arg(0), fs.Args()[1:]
	}
	if name == "" {
		fs.Usage()
		return 2
	}
	if name == "list" {
		for _, s := range scenarios.Scenarios {
			fmt.Fprintf(stdout, "%-26s %-13s %s\n", s.Name, s.Paper, s.About)
		}
		plug, err := plugScenarios()
		if err != nil {
			fmt.Fprintf(stderr, "scenario: %v\n", err)
			return 1
		}
		for _, ps := range plug {
			fmt.Fprintf(stdout, "%-26s %-13s %s\n", ps.s.Name, ps.p.Name, ps.s.About)
		}
		return 0
	}
	if code, found := runPlugScenario(name, *htmlOut, *asJSON, stdout, stderr); found {
		return code
	}
	v, err := protocol.ParseVariant(*proto)
	if err != nil {
		fmt.Fprintf(stderr, "scenario: --protocol: %v\n", err)
		return 2
	}
	res, err := scenarios.RunScenario(scenarios.ScenarioConfig{Name: name, Protocol: v, Requesters: *requesters})
	if err != nil {
		fmt.Fprintf(stderr, "scenario: %v\n", err)
		return 2
	}
	if *htmlOut != "" {
		watch := "page " + res.PID + ": the directory's metadata"
		if res.Latched {
			watch = "line " + res.PID + ": latch word, memos and memory's copy"
		}
		tr := traceview.Trace{Title: "scenario " + res.Scenario + " (" + res.Protocol + ")", About: res.About, Watch: watch,
			Steps: viewSteps(res.Steps), Notes: append([]string{"at rest: " + res.AtRest}, res.Violations...)}
		tr.Nodes = viewNodes(tr.Steps)
		if err := writeTraceHTML(*htmlOut, tr); err != nil {
			fmt.Fprintf(stderr, "scenario: --html: %v\n", err)
			return 1
		}
	}
	if *asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(stdout, string(b))
	} else {
		scenarios.WriteChart(stdout, res)
	}
	if len(res.Violations) > 0 {
		return 1
	}
	return 0
}

// viewSteps turns chart steps into the trace viewer's.
func viewSteps(steps []scenarios.Step) []traceview.Step {
	out := make([]traceview.Step, len(steps))
	for i, s := range steps {
		out[i] = traceview.Step{At: s.At, From: s.From, To: s.To, Label: s.Message, Page: s.PageSent, State: s.Dir}
	}
	return out
}

// viewNodes is the number of node lanes the steps need.
func viewNodes(steps []traceview.Step) int {
	n := 1
	for _, s := range steps {
		n = max(n, s.From+1, s.To+1)
	}
	return n
}

// writeTraceHTML writes the trace viewer's page to path, whole or not at
// all (a temporary file renamed into place).
func writeTraceHTML(path string, t traceview.Trace) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := traceview.Write(f, t); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
