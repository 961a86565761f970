package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/scalestore-go/scalestore/internal/traceview"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
	simfaults "github.com/scalestore-go/scalestore/transport/sim"
)

const plugSimUsage = `Usage: scalestore sim --protocol NAME [flags]

Runs a protocol built on protocolapi (see 'scalestore protocols') with the
generic runner: --nodes nodes of --workers workers read and write --pages keys
(unique values; the rmw workload's writes read first) under a fault plan, with
the protocol's invariants after every step and at rest, a watchdog (no access
for 2 s of simulated time is a violation, with every node's state), a final
read of every key, and porcupine per key (or the protocol's own history
check). A seed reproduces a run bit for bit (same trace_hash).

On a violation it prints the seed, the violations, the command that replays
it, and writes porcupine's visualization to scalestore-seed-N.html; the exit
status is 1 (3 when a seed's history could not be decided in time).

Flags:
`

func runPlugSim(p protocolapi.Protocol, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, plugSimUsage); fs.PrintDefaults() }
	cfg := simrunner.DefaultConfig()
	d := p.Defaults
	for _, f := range []struct {
		dst *int
		v   int
	}{{&cfg.Nodes, d.Nodes}, {&cfg.Workers, d.Workers}, {&cfg.Keys, d.Keys}, {&cfg.CacheLines, d.CacheLines}} {
		if f.v > 0 {
			*f.dst = f.v
		}
	}
	var seeds int
	var traceOut, traceHTML, vizDir, historyOut string
	var asJSON, quiet, allowUndec bool
	fs.String("protocol", p.Name, "the protocol (see 'scalestore protocols')")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "the seed of a single run")
	fs.IntVar(&seeds, "seeds", 0, "run N seeds, --seed S to S+N-1, and stop at the first violation")
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "nodes running workers")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "worker coroutines per node")
	fs.IntVar(&cfg.Keys, "pages", cfg.Keys, "keys (registers, lines or pages) the workload accesses")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "the same as --pages")
	fs.IntVar(&cfg.CacheLines, "cache-pages", cfg.CacheLines, "cache lines per node (0: the protocol's default)")
	fs.IntVar(&cfg.Ops, "ops", cfg.Ops, "accesses across the cluster")
	fs.Float64Var(&cfg.ReadRatio, "read-ratio", cfg.ReadRatio, "share of reads (0..1)")
	fs.Float64Var(&cfg.Zipf, "zipf", cfg.Zipf, "zipfian skew of the key chosen, 0 = uniform, up to 0.99")
	fs.StringVar(&cfg.Faults, "faults", cfg.Faults, "fault plan: "+simfaults.PlanNames)
	fs.StringVar(&cfg.Workload, "workload", cfg.Workload, "register (reads and blind writes) or rmw (every write a read-modify-write)")
	fs.StringVar(&cfg.Mutant, "mutate", "", "break one rule on purpose: "+strings.Join(p.MutantNames(), ", "))
	optionFlag(fs, &cfg.Options)
	fs.IntVar(&cfg.Crashes, "crashes", 0, "node crashes (refused unless the protocol supports them)")
	fs.BoolVar(&cfg.Elastic, "elastic", false, "elastic membership (refused unless the protocol supports it)")
	fs.DurationVar(&cfg.CheckTimeout, "check-timeout", cfg.CheckTimeout, "bound on porcupine's search per seed (0 = none)")
	fs.StringVar(&traceOut, "trace-out", "", "write every message and verb to this file (single seed)")
	fs.StringVar(&traceHTML, "trace-html", "", "write the run's messages as a self-contained HTML trace viewer to this file (single seed; with --watch-page only that key's messages, each with its state after)")
	fs.IntVar(&cfg.Watch, "watch-page", -1, "with --trace-html: the key to watch")
	fs.StringVar(&vizDir, "viz-dir", ".", "directory for porcupine's HTML visualization of a failing seed")
	fs.StringVar(&historyOut, "history-out", "", "write the checked history as JSON lines to this file (last seed run)")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object as the last line")
	fs.BoolVar(&quiet, "quiet", false, "no progress line")
	fs.BoolVar(&allowUndec, "allow-undecided", false, "exit 0 although some seeds' histories could not be decided")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	first, n := cfg.Seed, 1
	if seeds > 0 {
		if first > math.MaxUint64-uint64(seeds)+1 {
			fmt.Fprintf(stderr, "sim: --seed %d --seeds %d runs past the last seed\n", first, seeds)
			return 2
		}
		n = seeds
	}
	if (traceOut != "" || traceHTML != "") && n > 1 {
		fmt.Fprintln(stderr, "sim: --trace-out and --trace-html need a single seed")
		return 2
	}
	if cfg.Watch >= cfg.Keys {
		fmt.Fprintf(stderr, "sim: --watch-page %d: the run has keys 0..%d\n", cfg.Watch, cfg.Keys-1)
		return 2
	}
	if err := simrunner.Check(p, cfg); err != nil {
		fmt.Fprintf(stderr, "sim: %v\n", err)
		return 2
	}
	if _, err := simfaults.Plan(cfg.Faults, func() uint64 { return 0 }); err != nil {
		fmt.Fprintf(stderr, "sim: --faults: %v\n", err)
		return 2
	}
	if traceOut != "" {
		file, err := os.Create(traceOut)
		if err != nil {
			fmt.Fprintf(stderr, "sim: %v\n", err)
			return 1
		}
		defer file.Close()
		cfg.Trace = file
	}
	var steps []traceview.Step
	if traceHTML != "" {
		cfg.Steps = &steps
	}
	type summary struct {
		Protocol         string                `json:"protocol"`
		Seeds            int                   `json:"seeds"`
		FirstSeed        uint64                `json:"first_seed"`
		LastSeed         uint64                `json:"last_seed"`
		Ops              int                   `json:"ops"`
		Messages         uint64                `json:"sim_messages"`
		Verbs            uint64                `json:"sim_verbs"`
		Violations       int                   `json:"violations"`
		FirstFailingSeed *uint64               `json:"first_failing_seed"`
		UndecidedSeeds   []uint64              `json:"undecided_seeds"`
		TraceHash        string                `json:"trace_hash,omitempty"`
		Faults           string                `json:"faults"`
		Workload         string                `json:"workload"`
		Mutate           string                `json:"mutate,omitempty"`
		WallSeconds      float64               `json:"wall_seconds"`
		SimulatedNanos   int64                 `json:"simulated_ns"`
		Counters         []protocolapi.Counter `json:"counters"`
		ReplayCommand    string                `json:"replay,omitempty"`
	}
	sum := summary{Protocol: p.Name, FirstSeed: first, Faults: cfg.Faults, Workload: cfg.Workload, Mutate: cfg.Mutant,
		UndecidedSeeds: []uint64{}}
	progress := !quiet && isTerminal(stderr) && n > 1
	start := time.Now()
	var last simrunner.Result
	_, failed, err := simrunner.Swarm(p, cfg, first, n, func(res simrunner.Result) {
		last = res
		sum.Seeds++
		sum.LastSeed = res.Seed
		sum.Ops += res.Ops
		sum.Messages += res.Messages
		sum.Verbs += res.Verbs
		sum.SimulatedNanos += res.SimNanos
		sum.Counters = addCounters(sum.Counters, res.Counters)
		if n == 1 {
			sum.TraceHash = fmt.Sprintf("%016x", res.TraceHash)
		}
		if res.Undecided() && !res.Failed() {
			sum.UndecidedSeeds = append(sum.UndecidedSeeds, res.Seed)
			fmt.Fprintf(stderr, "undecided: seed %d: linearizability not decided within --check-timeout %v; replay: %s\n",
				res.Seed, cfg.CheckTimeout, replayCommand(args, res.Seed))
		}
		if progress {
			fmt.Fprintf(stderr, "\rseed %d/%d  ops %d  messages %d ", res.Seed-first+1, n, sum.Ops, sum.Messages)
		}
	})
	if progress {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sim: %v\n", err)
		return 2
	}
	sum.WallSeconds = time.Since(start).Seconds()
	if failed != nil {
		sum.Violations = 1
		s := failed.Seed
		sum.FirstFailingSeed = &s
		sum.ReplayCommand = replayCommand(args, s)
		reportPlugFailure(failed, vizDir, sum.ReplayCommand, stderr)
	}
	if historyOut != "" {
		if err := writeHistory(historyOut, last.History); err != nil {
			fmt.Fprintf(stderr, "sim: --history-out: %v\n", err)
			return 1
		}
	}
	if traceHTML != "" {
		tr := traceview.Trace{Title: fmt.Sprintf("sim --protocol %s --seed %d (%s faults)", p.Name, first, cfg.Faults),
			About: fmt.Sprintf("%d nodes, %d workers a node, %d keys, %d cache lines a node, %d accesses, %.0f%% reads, zipf %.2f, mutant %q; trace hash %016x",
				cfg.Nodes, cfg.Workers, cfg.Keys, cfg.CacheLines, cfg.Ops, 100*cfg.ReadRatio, cfg.Zipf, cfg.Mutant, last.TraceHash),
			Steps: steps}
		tr.Nodes = max(viewNodes(steps), cfg.Nodes)
		if cfg.Watch >= 0 {
			tr.Watch = fmt.Sprintf("key %d", cfg.Watch)
		}
		if len(steps) >= simrunner.MaxSteps {
			tr.Notes = append(tr.Notes, fmt.Sprintf("only the first %d messages are shown: watch one key (--watch-page)", simrunner.MaxSteps))
		}
		for _, v := range last.Violations {
			tr.Notes = append(tr.Notes, "violation: "+v)
		}
		if len(steps) == 0 {
			fmt.Fprintln(stderr, "sim: --trace-html: no message to draw")
		} else if err := writeTraceHTML(traceHTML, tr); err != nil {
			fmt.Fprintf(stderr, "sim: --trace-html: %v\n", err)
			return 1
		}
	}
	w := stdout
	if asJSON {
		w = stderr
	}
	if !asJSON || !quiet {
		verdict := "OK: no violation"
		if len(sum.UndecidedSeeds) > 0 {
			verdict = fmt.Sprintf("UNDECIDED: no violation, %d seeds not decided", len(sum.UndecidedSeeds))
		}
		if failed != nil {
			verdict = fmt.Sprintf("VIOLATION at seed %d", failed.Seed)
		}
		fmt.Fprintf(w, "%s  seeds=%d (%d..%d) ops=%d messages=%d verbs=%d protocol=%s workload=%s faults=%s",
			verdict, sum.Seeds, sum.FirstSeed, sum.LastSeed, sum.Ops, sum.Messages, sum.Verbs, p.Name, cfg.Workload, cfg.Faults)
		if cfg.Mutant != "" {
			fmt.Fprintf(w, " mutate=%s", cfg.Mutant)
		}
		if sum.TraceHash != "" {
			fmt.Fprintf(w, " trace_hash=%s", sum.TraceHash)
		}
		fmt.Fprintf(w, " wall=%.2fs\n", sum.WallSeconds)
		fmt.Fprintf(w, "  simulated time %.1f ms", float64(sum.SimulatedNanos)/1e6)
		for _, c := range sum.Counters {
			fmt.Fprintf(w, ", %s %d", c.Name, c.Value)
		}
		fmt.Fprintln(w)
	}
	if asJSON {
		b, _ := json.Marshal(sum)
		fmt.Fprintln(stdout, string(b))
	}
	switch {
	case failed != nil:
		return 1
	case len(sum.UndecidedSeeds) > 0 && !allowUndec:
		fmt.Fprintf(stderr, "sim: %d seeds undecided %v (raise --check-timeout, or pass --allow-undecided); exit status 3\n",
			len(sum.UndecidedSeeds), sum.UndecidedSeeds)
		return 3
	}
	return 0
}

func reportPlugFailure(res *simrunner.Result, vizDir, replay string, stderr io.Writer) {
	fmt.Fprintf(stderr, "violation at seed %d (fault plan %s):\n", res.Seed, res.Plan)
	for _, v := range res.Violations {
		fmt.Fprintf(stderr, "  %s\n", v)
	}
	if res.ViolationCount > len(res.Violations) {
		fmt.Fprintf(stderr, "  ... and %d more\n", res.ViolationCount-len(res.Violations))
	}
	if !res.Linearizable && !res.LinearUnknown && len(res.BadKeys) > 0 {
		fmt.Fprintf(stderr, "  history not linearizable on keys %v\n", res.BadKeys)
	}
	if res.Info != nil && len(res.BadKeys) > 0 {
		path := fmt.Sprintf("%s/scalestore-seed-%d.html", strings.TrimRight(vizDir, "/"), res.Seed)
		if err := writeViz(path, res.Info); err != nil {
			fmt.Fprintf(stderr, "  could not write the visualization: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "  porcupine visualization: %s\n", path)
		}
	}
	fmt.Fprintf(stderr, "replay: %s\n", replay)
}
