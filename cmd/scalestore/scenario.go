package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/scenarios"
)

const scenarioUsage = `Usage:
  scalestore scenario list
  scalestore scenario NAME [--protocol chaining|fifo|polling] [--requesters N] [--json]

Runs one of the paper's scenarios on a small simulated cluster without faults
and prints its message sequence as a chart: time, sender -> receiver, the
message, and the directory's metadata for the page after the receiver handled
it. Only the scenario's own messages are shown (its set-up is not).

The selcc-* scenarios run SELCC instead (its paper's Fig. 7 and 8; --protocol
does not apply): four compute nodes and one passive memory node, and the chart
has every invalidation message and every one-sided verb (CAS, FAA, READ,
WRITE) with the line's latch word, each node's memo and memory's copy after.

Flags:
`

func runScenario(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenario", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, scenarioUsage); fs.PrintDefaults() }
	proto := fs.String("protocol", "chaining", "conflict handling: chaining, fifo or polling")
	requesters := fs.Int("requesters", 3, "requesters of the chaining scenario")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
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
		return 0
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
