package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/scalestore-go/scalestore/scenarios"
)

const modelUsage = `Usage: scalestore model nam [--servers S] [--keys D] [--fanout M] [--scan N] [--json]

The NAM-tree paper's analytic model (its Tables 1 and 2: index height,
bandwidth per query), extended by the round trips, server calls and network
bytes of each design (cg, fg, hybrid) for a point get and a range query of
--scan keys, printed beside the same figures simulated: a tree of --keys
keys loaded in random order on --servers memory servers, one client, no
contention. The model assumes nodes filled to ln 2 of --fanout (random
inserts); docs/indexes.md derives each formula.

Flags:
`

// modelRow is a design and query: the model and the simulation.
type modelRow struct {
	scenarios.NAMModel
	SimRoundTrips float64 `json:"sim_round_trips"`
	SimCalls      float64 `json:"sim_calls"`
	SimNetBytes   float64 `json:"sim_net_bytes"`
	SimWaits      float64 `json:"sim_waits"`
	// Error is |model - simulated| / simulated, of the round trips.
	Error float64 `json:"round_trip_error"`
}

func runModel(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("model", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, modelUsage); fs.PrintDefaults() }
	var p scenarios.NAMModelParams
	fs.IntVar(&p.Servers, "servers", 4, "memory servers (S)")
	fs.Uint64Var(&p.Keys, "keys", 100_000, "keys in the tree (D)")
	fs.IntVar(&p.Fanout, "fanout", 16, "most entries of a node (M; at most 29)")
	fs.IntVar(&p.Scan, "scan", 100, "keys a range query returns")
	headNodes := fs.Bool("head-nodes", true, "fg and hybrid leaves have head nodes (installed once after the load) and range queries prefetch through them; false: none")
	fs.IntVar(&p.HeadGroup, "head-group", 8, "with --head-nodes: the leaves a head node lists (the paper's n, 2..29)")
	asJSON := fs.Bool("json", false, "print one JSON object: the parameters and a row per design and query")
	if len(args) == 0 || args[0] != "nam" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fs.Usage()
			return 0
		}
		fmt.Fprintln(stderr, "model: want 'scalestore model nam' (the only model so far)")
		fs.Usage()
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if p.Servers < 1 || p.Keys < 100 || p.Fanout < 3 || p.Fanout > 29 || p.Scan < 1 || p.HeadGroup < 2 || p.HeadGroup > 29 {
		fmt.Fprintln(stderr, "model: want --servers >= 1, --keys >= 100, --fanout 3..29, --scan >= 1, --head-group 2..29")
		return 2
	}
	if !*headNodes {
		p.HeadGroup = 0
	}
	var rows []modelRow
	for _, m := range scenarios.ModelNAM(p) {
		b := scenarios.IndexBench{Workload: m.Design, Servers: p.Servers, Clients: 1, Keys: p.Keys, Fanout: p.Fanout,
			Duration: 2_000_000, Seed: 1, HeadGroup: p.HeadGroup}
		if m.Query == "range" {
			b.ScanLen = p.Scan
		}
		res, err := scenarios.RunIndexBench(b)
		if err != nil {
			fmt.Fprintf(stderr, "model: simulating %s %s: %v\n", m.Design, m.Query, err)
			return 1
		}
		rows = append(rows, modelRow{NAMModel: m, SimRoundTrips: res.RoundTrips, SimCalls: res.CallsPerOp, SimNetBytes: res.BytesPerOp, SimWaits: res.Waits,
			Error: math.Abs(m.RoundTrips-res.RoundTrips) / res.RoundTrips})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(struct {
			Params scenarios.NAMModelParams `json:"params"`
			Rows   []modelRow               `json:"rows"`
		}{p, rows}); err != nil {
			return 1
		}
		return 0
	}
	heads := "no head nodes"
	if p.HeadGroup > 0 {
		heads = fmt.Sprintf("fg and hybrid leaves with head nodes of %d leaves", p.HeadGroup)
	}
	fmt.Fprintf(stdout, "NAM-tree model: %d servers, %d keys, fanout %d, range queries of %d keys, %s\n\n", p.Servers, p.Keys, p.Fanout, p.Scan, heads)
	fmt.Fprintln(stdout, "| design | query | height | round trips (model / sim) | error | waited for (model / sim) | calls (model / sim) | net bytes (model / sim) | paper's bandwidth/query |")
	fmt.Fprintln(stdout, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(stdout, "| %s | %s | %.0f | %.2f / %.2f | %.0f%% | %.2f / %.2f | %.2f / %.2f | %.0f / %.0f | %.0f |\n", r.Design, r.Query, r.Height,
			r.RoundTrips, r.SimRoundTrips, 100*r.Error, r.Waits, r.SimWaits, r.Calls, r.SimCalls, r.NetBytes, r.SimNetBytes, r.MemBytes)
	}
	return 0
}
