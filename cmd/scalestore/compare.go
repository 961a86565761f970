package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/scalestore-go/scalestore/internal/plot"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/scenarios"
)

const compareUsage = `Usage:
  scalestore compare [--protocols scalestore,selcc] [--seeds N] [workload flags] [--json]

Runs the same simulated workload on the same seeds with each protocol and
prints one row per protocol. ScaleStore (and its chaining, fifo and polling
conflict handling) and SELCC run on their own run loops; every other
protocol of the registry (SEL, GAM in SEQ and TSO mode, the tutorial's MSI)
runs on the generic runner with the same workload: the compute nodes,
workers, pages as keys, cache pages as cache lines, operations, reads, skew
and locality. The row gives operations per simulated second, network
messages and one-sided verbs per operation, the median operation's latency in
message round trips, the messages handled where the data lives (ScaleStore:
its directories; SELCC: its memory nodes, which have no handler; a plug-in:
every message its roles handled, so SEL's 0), p50 and p99
simulated latency, and fairness (each compute node's share of the operations,
and the least share over the largest). ScaleStore's nodes are each compute
node and directory; SELCC adds --memory-nodes passive memory nodes. Every run
is checked as sim checks it; violations are counted in the row.

Flags:
`

func runCompare(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, compareUsage); fs.PrintDefaults() }
	cfg := scenarios.DefaultSimConfig()
	cfg.Nodes, cfg.Workers, cfg.Pages, cfg.CachePages, cfg.Faults = 4, 3, 48, 48, "none"
	protocols := fs.String("protocols", "scalestore,selcc", "protocols to run, comma-separated: scalestore, selcc, chaining, fifo, polling, or any protocol 'scalestore protocols' lists as generic (sel, gam-seq, gam-tso, ...)")
	seeds := fs.Int("seeds", 5, "seeds 1..N per protocol")
	asJSON := fs.Bool("json", false, "print the rows as one JSON array")
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "compute nodes (ScaleStore: nodes, each also a directory)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "worker coroutines per compute node")
	fs.IntVar(&cfg.Pages, "pages", cfg.Pages, "pages (lines) of the register workload")
	fs.IntVar(&cfg.CachePages, "cache-pages", cfg.CachePages, "cache frames per compute node")
	fs.IntVar(&cfg.Ops, "ops", cfg.Ops, "operations across the cluster, per seed")
	fs.Float64Var(&cfg.ReadRatio, "read-ratio", cfg.ReadRatio, "share of reads (0..1)")
	fs.Float64Var(&cfg.Zipf, "zipf", cfg.Zipf, "zipfian skew, 0 = uniform, up to 0.99")
	fs.Float64Var(&cfg.Locality, "locality", 0, "chance that an operation goes to its worker's previous page (SELCC Fig. 13: 0.5)")
	fs.StringVar(&cfg.Faults, "faults", cfg.Faults, "fault plan (none measures; heavy checks)")
	fs.BoolVar(&cfg.SingleWriter, "single-writer", false, "node 0 only writes, the other nodes only read")
	fs.Int64Var(&cfg.HandleCost, "handle-cost", 0, "simulated ns of CPU each message costs the node holding the data")
	skipStep := fs.Bool("skip-step-checks", false, "leave out the plug-in protocols' invariants after every step (thousands of keys: GAM's check walks them all at every step); at rest, the final reads and the history are still checked")
	reg, err := registry()
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 1
	}
	// the flags that set a protocol's options (SELCC's --memory-nodes,
	// --gamma, --no-priority), from the registry
	aliases := newOptionAliases(fs, reg)
	var opts []string
	fs.Func("opt", "a protocol's own option name=value, given to every protocol compared that has it (repeatable; 'scalestore protocols --json' lists them), e.g. memory-nodes=2", func(v string) error {
		if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
			return fmt.Errorf("want name=value, got %q", v)
		}
		opts = append(opts, v)
		return nil
	})
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	if *seeds < 1 {
		fmt.Fprintln(stderr, "compare: --seeds: want at least 1")
		return 2
	}
	systems := strings.Split(*protocols, ",")
	options, err := pluginOptions(reg, systems, opts)
	if err == nil {
		err = aliases.give(reg, systems, options)
	}
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 2
	}
	rows, err := scenarios.CompareWith(reg, cfg, systems, *seeds, "", scenarios.CompareOptions{Options: options, SkipStepChecks: *skipStep})
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 2
	}
	return printRows(rows, *asJSON, stdout)
}

// pluginOptions gives each --opt name=value to every protocol of systems
// that declares the option; an option none of them has is an error.
func pluginOptions(reg *protocolapi.Registry, systems, opts []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, o := range opts {
		name, value, _ := strings.Cut(o, "=")
		taken := false
		for _, sys := range systems {
			p, ok := reg.Lookup(sys)
			if !ok || !slices.ContainsFunc(p.Options, func(x protocolapi.Option) bool { return x.Name == name }) {
				continue
			}
			if out[sys] == nil {
				out[sys] = map[string]string{}
			}
			out[sys][name], taken = value, true
		}
		if !taken {
			return nil, fmt.Errorf("--opt %s: none of %s has that option", o, strings.Join(systems, ", "))
		}
	}
	return out, nil
}

func printRows(rows []scenarios.CompareRow, asJSON bool, stdout io.Writer) int {
	if asJSON {
		b, _ := json.Marshal(rows)
		fmt.Fprintln(stdout, string(b))
	} else {
		writeCompareTable(stdout, rows)
	}
	for _, r := range rows {
		if r.Violations > 0 {
			return 1
		}
	}
	return 0
}

// writeCompareTable prints rows as a markdown table (docs/ takes it as is).
func writeCompareTable(w io.Writer, rows []scenarios.CompareRow) {
	label := rows[0].Label != ""
	if label {
		fmt.Fprint(w, "| point ")
	}
	fmt.Fprintln(w, "| protocol | ops/sim-s | msgs/op | verbs/op | RTTs p50 | data-side handler calls | p50 us | p99 us | fairness | node 0 p99 us | violations |")
	if label {
		fmt.Fprint(w, "|---")
	}
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if label {
			fmt.Fprintf(w, "| %s ", r.Label)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.2f | %.2f | %.1f | %d | %.1f | %.1f | %.2f | %.1f | %d |\n",
			r.Protocol, r.OpsPerSimSec, r.MessagesPerOp, r.VerbsPerOp, r.RoundTripsP50, r.MemoryHandlerCalls,
			r.P50us, r.P99us, r.Fairness, r.WriterP99us, r.Violations)
	}
}

const figureUsage = `Usage:
  scalestore figure list
  scalestore figure NAME [--seeds N] [--nodes LIST] [--svg FILE] [--json]

Runs one of the seed papers' evaluation figures in the simulator and prints
one table. SELCC's (selcc-*) and ScaleStore's (scalestore-*, and
scalestore-gam: its §6.4 table against GAM): their configurations, each on
the protocols it compares (as 'scalestore compare' runs them, plug-ins such
as SEL and GAM found in the registry; 'figure list' names each figure's
protocols and their options), --seeds seeds each. The
NAM-tree's and Cell's (nam-*, cell-*): a loaded tree, closed-loop clients
for a span of simulated time, one seed. The simulator reproduces trends,
not the papers' hardware: docs/figures.md, docs/selcc.md and docs/indexes.md have every
figure's table and what it shows.

Flags:
`

func runFigure(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("figure", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, figureUsage); fs.PrintDefaults() }
	seeds := fs.Int("seeds", 3, "seeds 1..N per point and protocol")
	asJSON := fs.Bool("json", false, "print the rows as one JSON array")
	nodesList := fs.String("nodes", "", "scalestore-* figures: node counts, comma-separated (fig7: its x axis, default 1,2,3,4,5; the others: the cluster's size, default 5), e.g. 16 or 1,2,4,8,16,64")
	svgOut := fs.String("svg", "", "also draw the figure as an SVG line chart into this file (self-contained)")
	var name string
	rest := args
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	switch name {
	case "":
		fs.Usage()
		return 2
	case "list":
		for _, f := range scenarios.Figures {
			fmt.Fprintf(stdout, "%-14s %-20s %s [%s]\n", f.Name, f.Paper, f.About, figureSystems(f))
		}
		for _, f := range scenarios.ScaleStoreFigures {
			fmt.Fprintf(stdout, "%-18s %-20s %s [%s]\n", f.Name, f.Paper, f.About, figureSystems(f))
		}
		for _, f := range scenarios.IndexFigures {
			fmt.Fprintf(stdout, "%-14s %-20s %s\n", f.Name, f.Paper, f.About)
		}
		return 0
	}
	if f, ok := scenarios.IndexFigureByName(name); ok {
		return runIndexFigure(f, *asJSON, stdout, stderr)
	}
	f, err := scenarios.FigureByName(name)
	if err != nil {
		fmt.Fprintf(stderr, "figure: %v\n", err)
		return 2
	}
	if *seeds < 1 {
		fmt.Fprintln(stderr, "figure: --seeds: want at least 1")
		return 2
	}
	var nodes []int
	if *nodesList != "" {
		for _, part := range strings.Split(*nodesList, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil || n < 1 || n > 256 {
				fmt.Fprintf(stderr, "figure: --nodes %q: want node counts 1..256, comma-separated\n", *nodesList)
				return 2
			}
			nodes = append(nodes, n)
		}
	}
	reg, err := registry()
	if err != nil {
		fmt.Fprintf(stderr, "figure: %v\n", err)
		return 1
	}
	rows, err := scenarios.RunFigureIn(reg, f, *seeds, nodes, func(label string) {
		if isTerminal(stderr) {
			fmt.Fprintf(stderr, "\r%s: %-40s", f.Name, label)
		}
	})
	if isTerminal(stderr) {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "figure: %v\n", err)
		return 2
	}
	if *svgOut != "" {
		if err := writeFigureSVG(*svgOut, f, rows, *seeds); err != nil {
			fmt.Fprintf(stderr, "figure: --svg: %v\n", err)
			return 1
		}
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%s (%s): %s; %d seeds each\n\n", f.Name, f.Paper, f.About, *seeds)
		if f.Timeline {
			writeTimelineTable(stdout, rows)
			fmt.Fprintln(stdout)
		}
	}
	return printRows(rows, *asJSON, stdout)
}

// figureSystems names a figure's systems, each with the options it runs
// with: "selcc, gam-seq memory-nodes=2".
func figureSystems(f scenarios.Figure) string {
	var out []string
	for _, sys := range f.Systems {
		s := sys
		opts := f.Options[sys]
		for _, name := range slices.Sorted(maps.Keys(opts)) {
			s += " " + name + "=" + opts[name]
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// writeTimelineTable prints each row's throughput per tenth of its run.
func writeTimelineTable(w io.Writer, rows []scenarios.CompareRow) {
	fmt.Fprint(w, "| point | protocol |")
	for i := range scenarios.TimelineWindows {
		fmt.Fprintf(w, " %d/%d |", i+1, scenarios.TimelineWindows)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|---|"+strings.Repeat("---:|", scenarios.TimelineWindows)+"\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s |", r.Label, r.Protocol)
		for _, v := range r.Timeline {
			fmt.Fprintf(w, " %s |", plot.Short(v))
		}
		fmt.Fprintln(w)
	}
}

// figureChart lays a figure's rows out as a chart: with XKey, the label's
// value of that key on the x axis and one line per rest of the label and
// protocol; with Timeline, the tenths of the run on the x axis and one line
// per row; otherwise one x position per label and one line per protocol.
func figureChart(f *scenarios.Figure, rows []scenarios.CompareRow, seeds int) plot.Chart {
	c := plot.Chart{Title: fmt.Sprintf("%s (%s), simulated, %d seeds", f.Name, f.Paper, seeds), YTitle: "operations per simulated second"}
	if f.Timeline {
		c.XTitle = "tenth of the run"
		for i := range scenarios.TimelineWindows {
			c.X = append(c.X, strconv.Itoa(i+1))
		}
		for _, r := range rows {
			name := r.Label
			if len(f.Systems) > 1 {
				name += " " + r.Protocol
			}
			c.Series = append(c.Series, plot.Series{Name: name, Y: r.Timeline})
		}
		return c
	}
	c.XTitle = f.XKey
	xIndex := map[string]int{}
	seriesIndex := map[string]int{}
	type point struct {
		series, x int
		y         float64
	}
	var pts []point
	for _, r := range rows {
		x, rest := r.Label, ""
		if f.XKey != "" {
			x, rest = splitLabel(r.Label, f.XKey)
		}
		name := rest
		if len(f.Systems) > 1 || name == "" {
			name = strings.TrimSpace(rest + " " + r.Protocol)
		}
		if _, ok := xIndex[x]; !ok {
			xIndex[x] = len(c.X)
			c.X = append(c.X, x)
		}
		if _, ok := seriesIndex[name]; !ok {
			seriesIndex[name] = len(c.Series)
			c.Series = append(c.Series, plot.Series{Name: name})
		}
		pts = append(pts, point{seriesIndex[name], xIndex[x], r.OpsPerSimSec})
	}
	for i := range c.Series {
		c.Series[i].Y = make([]float64, len(c.X))
		for j := range c.Series[i].Y {
			c.Series[i].Y[j] = math.NaN()
		}
	}
	for _, p := range pts {
		c.Series[p.series].Y[p.x] = p.y
	}
	return c
}

// splitLabel takes key's value out of a label of space-separated key=value
// fields: the value, and the other fields.
func splitLabel(label, key string) (value, rest string) {
	var others []string
	for _, field := range strings.Fields(label) {
		if k, v, ok := strings.Cut(field, "="); ok && k == key {
			value = v
			continue
		}
		others = append(others, field)
	}
	return value, strings.Join(others, " ")
}

func writeFigureSVG(path string, f *scenarios.Figure, rows []scenarios.CompareRow, seeds int) error {
	c := figureChart(f, rows, seeds)
	var b strings.Builder
	if err := c.WriteSVG(&b); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// runIndexFigure runs and prints a NAM-tree or Cell figure.
func runIndexFigure(f scenarios.IndexFigure, asJSON bool, stdout, stderr io.Writer) int {
	rows, err := scenarios.RunIndexFigure(f, func(label string) {
		if isTerminal(stderr) {
			fmt.Fprintf(stderr, "\r%s: %-50s", f.Name, label)
		}
	})
	if isTerminal(stderr) {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "figure: %v\n", err)
		return 1
	}
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(rows); err != nil {
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "%s (%s): %s\n\n", f.Name, f.Paper, f.About)
	if len(rows) > 0 && rows[0].MegaNodes > 0 {
		// The tree grows under the searches: their latency, and the splits.
		fmt.Fprintln(stdout, "| run | searches/s (simulated) | p50 us | p90 us | p99 us | server-side share | busiest server CPU | writers' puts | meganode splits | us per split |")
		fmt.Fprintln(stdout, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, r := range rows {
			fmt.Fprintf(stdout, "| %s | %.0f | %.1f | %.1f | %.1f | %.2f | %.0f%% | %d | %d | %.0f |\n", r.Label, r.OpsPerSec, r.P50us, r.P90us, r.P99us,
				r.ServerShare, 100*r.ServerLoad, r.WriterPuts, r.MegaSplits, r.SplitMicros)
		}
		return 0
	}
	fmt.Fprintln(stdout, "| run | ops/s (simulated) | p50 us | p99 us | round trips/op | calls/op | verbs/op | bytes/op | busiest server CPU | server-side share |")
	fmt.Fprintln(stdout, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(stdout, "| %s | %.0f | %.1f | %.1f | %.2f | %.2f | %.2f | %.0f | %.0f%% | %.2f |\n", r.Label, r.OpsPerSec, r.P50us, r.P99us,
			r.RoundTrips, r.CallsPerOp, r.VerbsPerOp, r.BytesPerOp, 100*r.ServerLoad, r.ServerShare)
	}
	return 0
}
