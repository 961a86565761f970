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
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/index/indexdesign"
	"github.com/scalestore-go/scalestore/internal/traceview"
	"github.com/scalestore-go/scalestore/mutation"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/protocols"
	"github.com/scalestore-go/scalestore/scenarios"
	"github.com/scalestore-go/scalestore/simrunner"
	simfaults "github.com/scalestore-go/scalestore/transport/sim"
)

const simUsage = `Usage: scalestore sim [flags]

Runs the page-register workload on a simulated cluster. Every node is a
directory for some pages, caches others and runs --workers worker coroutines;
workers read and write pages (writes carry unique values) through the buffer
manager's guards, which fetch, share, upgrade and invalidate pages through the
coherence protocol. A single-threaded seeded scheduler runs everything, so a
seed reproduces a run bit for bit (same trace_hash).

Checked after every step: single writer or many readers, every copy holds the
last completed write, exclusive grants follow the directory's order (chaining),
no protocol violation; at rest: the directories agree with the nodes; after the
final flush: each directory's SSD holds the last write; and porcupine checks
the history for linearizability, partitioned per page.

Also checked, at the end of a run: what the protocol's messages cost, case by
case (no case above its bound from the paper's message counts; no access that
needed a second grant after one that met its wish). A panic inside a simulated
node is a violation of its seed, not a crash.

On a violation it prints the seed, the command that replays it and writes
porcupine's visualization to scalestore-seed-N.html; the exit status is 1.
A seed whose history could be checked neither way within --check-timeout is
undecided: neither clean nor a violation. The run lists those seeds on stderr
with their replay commands and exits with status 3, unless --allow-undecided
is given (a run then counts them as clean and says so).

Flags:
`

type simFlags struct {
	cfg        simrunner.Config
	pages      int // the register workload's keys
	keys       int // the tree workloads' keys
	p          protocolapi.Protocol
	run        func(simrunner.Config) (simrunner.Result, error)
	seed       uint64
	seeds      int
	faults     string
	protocol   string
	historyOut string
	traceOut   string
	traceHTML  string
	vizDir     string
	json       bool
	quiet      bool
	allowUndec bool
	cpuProfile string
	checkWith  string
	model      string
}

func runSim(args []string, stdout, stderr io.Writer) int {
	args, code, done := dispatchSim(args, stdout, stderr)
	if done {
		return code
	}
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, simUsage); fs.PrintDefaults() }
	d := scenarios.DefaultSimConfig()
	var f simFlags
	f.cfg = simrunner.DefaultConfig()
	fs.Uint64Var(&f.seed, "seed", 1, "the seed of a single run")
	fs.IntVar(&f.seeds, "seeds", 0, "run N seeds, --seed S to S+N-1 (S defaults to 1), and stop at the first violation")
	fs.IntVar(&f.cfg.Nodes, "nodes", d.Nodes, "nodes in the cluster (1..256)")
	fs.IntVar(&f.cfg.Workers, "workers", d.Workers, "worker coroutines per node")
	fs.StringVar(&f.cfg.Workload, "workload", d.Workload, "register (pages as registers, blind writes), rmw (every write reads first: a lost update is a violation) btree (the paper's B-tree; history per key), or a protocol that is its own workload: the index designs (gets, puts, deletes and scans of --keys keys on --nodes compute nodes and --memory-nodes memory servers; history per key, a scan a read of every key it covers; see docs/indexes.md and 'scalestore protocols')")
	fs.IntVar(&f.keys, "keys", d.Keys, "keys of the btree workload and the index designs")
	fs.IntVar(&f.pages, "pages", d.Pages, "pages of the register workload, spread over all directories")
	fs.IntVar(&f.cfg.CacheLines, "cache-pages", d.CachePages, "cache frames per node")
	fs.IntVar(&f.cfg.Ops, "ops", d.Ops, "operations across the whole cluster")
	fs.Float64Var(&f.cfg.ReadRatio, "read-ratio", d.ReadRatio, "share of reads (0..1)")
	fs.Float64Var(&f.cfg.Zipf, "zipf", d.Zipf, "zipfian skew of page choice, 0 = uniform, up to 0.99")
	fs.StringVar(&f.faults, "faults", d.Faults, "fault plan: "+simfaults.PlanNames+" (each seed varies the intensities; lossy adds reads that fail for good, and the operations on those pages fail instead of the node)")
	fs.StringVar(&f.protocol, "protocol", "chaining", "ScaleStore's conflict handling: chaining (the paper), fifo or polling (baselines: its option "+scenarios.OptionConflict+"); or any registered protocol ('scalestore protocols'; 'sim --protocol NAME --help' for a plug-in's flags)")
	fs.StringVar(&f.cfg.Mutant, "mutate", "", "break one protocol rule on purpose: "+strings.Join(mutationNames(), ", "))
	fs.StringVar(&f.historyOut, "history-out", "", "write the checked history as JSON lines to this file (last seed run)")
	fs.StringVar(&f.traceOut, "trace-out", "", "write every network message to this file (single seed)")
	fs.StringVar(&f.traceHTML, "trace-html", "", "write the run's messages as a self-contained HTML trace viewer to this file (single seed; with --watch-page only that page's messages, each with its directory state after it; at most 20,000 messages)")
	fs.IntVar(&f.cfg.Watch, "watch-page", -1, "with --trace-out: also trace every directory decision and copy change of this page index; with --trace-html: show only this page's messages and its directory state")
	fs.StringVar(&f.vizDir, "viz-dir", ".", "directory for porcupine's HTML visualization of a failing seed")
	fs.DurationVar(&f.cfg.CheckTimeout, "check-timeout", time.Minute, "bound on porcupine's search per seed (0 = none)")
	fs.BoolVar(&f.allowUndec, "allow-undecided", false, "exit 0 although some seeds' histories could not be decided within --check-timeout (they are still listed)")
	fs.BoolVar(&f.json, "json", false, "print one JSON object as the last line")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress line")
	fs.StringVar(&f.model, "model", "default", "simulated hardware: default (Table 1's latencies, workers pause 0-2 us between operations and spend no CPU) or paper (the paper's evaluation: 20 workers a node unless --workers is given, each operation 820 ns of the worker's CPU, 1,500 ns for a write, calibrated from this engine's ycsb; see docs/figures.md)")
	fs.IntVar(&f.cfg.Crashes, "crashes", 0, "crash this many random nodes during the workload (evenly spread); each restarts after 20-220 us with an empty cache and its directory restored from its SSD. Writes are then written through to their directory's SSD before they are acknowledged (with --workload btree every page an operation changed, a split's in a crash-safe order), and a view change fences every message in flight (docs/protocol.md, \"Node crashes\")")
	fs.BoolVar(&f.cfg.Elastic, "elastic", false, "with --compute-nodes C: Fig. 10's schedule, 1 -> C -> 1 working compute nodes (joins and leaves at equal steps of the operations); a leaving node hands back every page it holds and is checked to hold none")
	fs.StringVar(&f.checkWith, "checker", "zones", "how histories are checked: zones (pages whose writes are unique are decided in O(n log n) by Gibbons-Korach zones, the rest by porcupine) or porcupine (every page searched by porcupine: the reference verdict, which can take minutes at 256 nodes)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (simulation and checks) to this file")
	reg, err := registry()
	if err != nil {
		fmt.Fprintf(stderr, "sim: %v\n", err)
		return 1
	}
	var opts map[string]string
	optionFlag(fs, &opts)
	aliases := newOptionAliases(fs, reg)
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	f.cfg.Faults = f.faults
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch f.model {
	case "default":
	case "paper":
		if !set["workers"] {
			f.cfg.Workers = scenarios.PaperWorkers
		}
		f.cfg.OpNanos, f.cfg.WriteNanos = scenarios.PaperReadNanos, scenarios.PaperWriteNanos
	default:
		fmt.Fprintf(stderr, "sim: --model %q: default or paper\n", f.model)
		return 2
	}
	switch f.checkWith {
	case "zones":
	case "porcupine":
		f.cfg.PorcupineOnly = true
	default:
		fmt.Fprintf(stderr, "sim: --checker %q: zones or porcupine\n", f.checkWith)
		return 2
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "sim: --cpuprofile: %v\n", err)
			return 2
		}
		defer stop()
	}
	if opts == nil {
		opts = map[string]string{}
	}
	if code := f.selectProtocol(reg, set["protocol"], opts, stderr); code != 0 {
		return code
	}
	if f.cfg.Options, err = aliases.options(f.p, opts); err != nil {
		fmt.Fprintf(stderr, "sim: %v\n", err)
		return 2
	}
	f.cfg.Keys = f.keys
	if f.cfg.Workload == protocolapi.WorkloadRegister || f.cfg.Workload == protocolapi.WorkloadRMW {
		f.cfg.Keys = f.pages
	}
	return simMain(&f, args, stdout, stderr)
}

// selectProtocol finds the registered protocol the command line runs and
// how: a workload that is a registered protocol's name is that protocol
// (the index designs), --protocol a registered protocol that runs through
// its own world (dispatchSim sent the plug-ins to the generic runner and
// rewrote the rest to their flags), or ScaleStore's conflict handling
// (its option OptionConflict).
func (f *simFlags) selectProtocol(reg *protocolapi.Registry, protocolSet bool, opts map[string]string, stderr io.Writer) int {
	name := f.protocol
	conflict := ""
	if _, err := protocol.ParseVariant(f.protocol); err == nil {
		name, conflict = scenarios.SystemScaleStore, f.protocol
	}
	if _, ok := reg.Lookup(f.cfg.Workload); ok {
		if protocolSet && f.protocol != f.cfg.Workload {
			fmt.Fprintf(stderr, "sim: --workload %s is the protocol %s: --protocol %s does not run it\n", f.cfg.Workload, f.cfg.Workload, f.protocol)
			return 2
		}
		name, conflict = f.cfg.Workload, ""
	}
	p, err := reg.Find(name)
	if err != nil {
		fmt.Fprintf(stderr, "sim: --protocol %q: want chaining, fifo, polling or a registered protocol: %v\n", f.protocol, err)
		return 2
	}
	e, _ := protocols.Find(protocols.Entries(), p.Name)
	if f.run, err = simrunner.Runner(p, e.World); err != nil {
		fmt.Fprintf(stderr, "sim: %v\n", err)
		return 2
	}
	if conflict != "" && protocolSet {
		if v, ok := opts[scenarios.OptionConflict]; ok && v != conflict {
			fmt.Fprintf(stderr, "sim: --protocol %s and --opt %s=%s disagree\n", conflict, scenarios.OptionConflict, v)
			return 2
		}
		opts[scenarios.OptionConflict] = conflict
	}
	f.p = p
	return 0
}

// optionAliases are the flags that set a registered protocol's options
// (protocolapi.Option.Flag: --memory-nodes, --gamma, --no-priority),
// each defined once on fs from the registry, so that sim names none.
type optionAliases map[string]*aliasValue

// aliasValue is one alias flag's value as given.
type aliasValue struct {
	value     string
	set, bool bool
}

func (a *aliasValue) String() string {
	if a == nil {
		return ""
	}
	return a.value
}

func (a *aliasValue) Set(v string) error { a.value, a.set = v, true; return nil }

// IsBoolFlag makes a flag whose option has a FlagValue a boolean flag.
func (a *aliasValue) IsBoolFlag() bool { return a.bool }

func newOptionAliases(fs *flag.FlagSet, reg *protocolapi.Registry) optionAliases {
	out := optionAliases{}
	// what each flag sets, and for which protocols, in the registry's order
	type target struct{ set, about string }
	var targets = map[string][]target{}
	whose := map[string]map[target][]string{}
	for _, p := range reg.All() {
		for _, o := range p.Options {
			if o.Flag == "" {
				continue
			}
			a := out[o.Flag]
			if a == nil {
				a = &aliasValue{value: o.Default, bool: o.FlagValue != ""}
				if a.bool {
					a.value = "false"
				}
				out[o.Flag], whose[o.Flag] = a, map[target][]string{}
			}
			t := target{"--opt " + o.Name, o.About}
			if a.bool {
				t.set = "--opt " + o.Name + "=" + o.FlagValue
			}
			if whose[o.Flag][t] == nil {
				targets[o.Flag] = append(targets[o.Flag], t)
			}
			whose[o.Flag][t] = append(whose[o.Flag][t], p.Name)
		}
	}
	for name, a := range out {
		var about []string
		for _, t := range targets[name] {
			about = append(about, fmt.Sprintf("%s of %s (%s)", t.set, strings.Join(whose[name][t], ", "), t.about))
		}
		fs.Var(a, name, "the same as "+strings.Join(about, "; "))
	}
	return out
}

// give puts the alias flags given into out, the options by protocol of
// compare: each to every one of systems that has an option it sets. A flag
// that none of them has, or that disagrees with its --opt, is an error.
func (as optionAliases) give(reg *protocolapi.Registry, systems []string, out map[string]map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(as)) {
		if !as[name].set {
			continue
		}
		taken := false
		for _, sys := range systems {
			p, ok := reg.Lookup(sys)
			if !ok || !slices.ContainsFunc(p.Options, func(o protocolapi.Option) bool { return o.Flag == name }) {
				continue
			}
			set, err := as.set(p, out[sys], name)
			if err != nil {
				return err
			}
			if out[sys] == nil {
				out[sys] = map[string]string{}
			}
			maps.Copy(out[sys], set)
			taken = true
		}
		if !taken {
			return fmt.Errorf("--%s: none of %s has an option it sets", name, strings.Join(systems, ", "))
		}
	}
	return nil
}

// options are the options of p as the command line sets them (--opt, and
// the alias flags of p's options), every other one at its default. An
// alias flag given for a protocol that has no option it sets is an error.
func (as optionAliases) options(p protocolapi.Protocol, opts map[string]string) (map[string]string, error) {
	set := maps.Clone(opts)
	if set == nil {
		set = map[string]string{}
	}
	for _, name := range slices.Sorted(maps.Keys(as)) {
		if !as[name].set {
			continue
		}
		one, err := as.set(p, opts, name)
		if err != nil {
			return nil, err
		}
		maps.Copy(set, one)
	}
	cfg, err := p.WithDefaults(protocolapi.Config{Options: set})
	return cfg.Options, err
}

// set is the option of p that the alias flag name, given, sets (none for
// a boolean flag given false), checked against the options opts given.
func (as optionAliases) set(p protocolapi.Protocol, opts map[string]string, name string) (map[string]string, error) {
	i := slices.IndexFunc(p.Options, func(o protocolapi.Option) bool { return o.Flag == name })
	if i < 0 {
		return nil, fmt.Errorf("--%s: protocol %s has no option it sets", name, p.Name)
	}
	o := p.Options[i]
	v := as[name].value
	if o.FlagValue != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("--%s=%s: %w", name, v, err)
		}
		if !b {
			return nil, nil
		}
		v = o.FlagValue
	}
	if given, ok := opts[o.Name]; ok && given != v {
		return nil, fmt.Errorf("--%s and --opt %s=%s disagree", name, o.Name, given)
	}
	return map[string]string{o.Name: v}, nil
}

type simSummary struct {
	Seeds             int      `json:"seeds"`
	FirstSeed         uint64   `json:"first_seed"`
	LastSeed          uint64   `json:"last_seed"` // the last seed run (the failing one after a violation)
	Ops               int      `json:"ops"`
	Violations        int      `json:"violations"`
	FirstFailingSeed  *uint64  `json:"first_failing_seed"`
	TraceHash         string   `json:"trace_hash,omitempty"`
	SimMessages       uint64   `json:"sim_messages"`
	WallSeconds       float64  `json:"wall_seconds"`
	SimSeconds        float64  `json:"sim_seconds"`
	SimMessagesPerSec float64  `json:"sim_messages_per_sec"`
	CheckSeconds      float64  `json:"check_seconds"`
	Protocol          string   `json:"protocol"`
	Faults            string   `json:"faults"`
	Mutate            string   `json:"mutate,omitempty"`
	Nodes             int      `json:"nodes"`
	HitRatio          float64  `json:"cache_hit_ratio"`
	RemoteFetches     uint64   `json:"remote_page_fetches"`
	Evictions         uint64   `json:"evictions"`
	EvictionsDeclined uint64   `json:"evictions_declined"`
	DirtyPulls        uint64   `json:"dirty_pulls"`
	IORetries         uint64   `json:"io_retries"`
	UnreadableReads   int      `json:"unreadable_reads"`
	FailedOps         int      `json:"failed_ops"`
	Crashes           int      `json:"crashes"`
	UnknownOps        int      `json:"unknown_outcome_writes"`
	LostOps           int      `json:"lost_directory_ops,omitempty"` // --double-faults: failed on a directory that lost both copies
	SimulatedNanos    int64    `json:"simulated_ns"`
	Verbs             uint64   `json:"sim_verbs"`
	Scans             int      `json:"index_scans,omitempty"`
	MegaSplits        uint64   `json:"cell_meganode_splits,omitempty"`
	MegaMoved         uint64   `json:"cell_meganodes_moved,omitempty"`
	Restarts          uint64   `json:"cell_restarts,omitempty"`
	ScanRoundTrips    float64  `json:"scan_round_trips,omitempty"` // per scan: the round trips it waited for
	MemoryHandlers    uint64   `json:"memory_handler_calls"`
	Linearizable      bool     `json:"linearizable"`
	UndecidedSeeds    []uint64 `json:"undecided_seeds"`
	ReplayCommand     string   `json:"replay,omitempty"`

	scanWaits uint64 // the scans' round trips, summed
}

// simGCPercent is the GOGC of a run of many seeds, unless the environment
// sets one.
const simGCPercent = 400

func simMain(f *simFlags, args []string, stdout, stderr io.Writer) int {
	if f.seeds > 1 && os.Getenv("GOGC") == "" {
		// A seed's heap is small and dies with it: at the default 100 a
		// swarm of short seeds collects every few seeds and spends about a
		// fifth of its CPU on it (docs/bench.md, "The simulator").
		defer debug.SetGCPercent(debug.SetGCPercent(simGCPercent))
	}
	first, last := f.seed, f.seed
	if f.seeds > 0 {
		if f.seed > math.MaxUint64-uint64(f.seeds)+1 {
			fmt.Fprintf(stderr, "sim: --seed %d --seeds %d runs past the last seed\n", f.seed, f.seeds)
			return 2
		}
		last = first + uint64(f.seeds) - 1
	}
	// index: a protocol that is its own workload (the index designs)
	index := f.p.Name == f.cfg.Workload
	var sum simSummary
	sum.FirstSeed = first
	sum.Protocol, sum.Faults, sum.Mutate, sum.Nodes = f.protocol, f.faults, f.cfg.Mutant, f.cfg.Nodes
	if v := f.cfg.Options[scenarios.OptionConflict]; v != "" {
		sum.Protocol = v // ScaleStore's conflict handling, however it was set
	}
	var trace *os.File
	if f.traceOut != "" {
		if first != last {
			fmt.Fprintln(stderr, "sim: --trace-out needs a single seed")
			return 2
		}
		var err error
		if trace, err = os.Create(f.traceOut); err != nil {
			fmt.Fprintf(stderr, "sim: %v\n", err)
			return 1
		}
		defer trace.Close()
		f.cfg.Trace = trace
	}
	var steps []traceview.Step
	if f.traceHTML != "" {
		switch {
		case first != last:
			fmt.Fprintln(stderr, "sim: --trace-html needs a single seed")
			return 2
		case f.p.Name != scenarios.SystemScaleStore:
			fmt.Fprintf(stderr, "sim: --trace-html draws ScaleStore's messages (the register, rmw and btree workloads), not %s's; 'scalestore scenario list' lists the charts of its conflicts\n",
				f.p.Name)
			return 2
		case f.cfg.Watch >= f.pages:
			fmt.Fprintf(stderr, "sim: --watch-page %d: the run has pages 0..%d\n", f.cfg.Watch, f.pages-1)
			return 2
		}
		f.cfg.Steps = &steps
	}
	progress := !f.quiet && isTerminal(stderr) && first != last
	var shown time.Time
	if !f.quiet && isTerminal(stderr) && first == last {
		// One long run: a progress line at most every half second.
		f.cfg.Progress = func(done, total int) {
			if time.Since(shown) > 500*time.Millisecond {
				shown = time.Now()
				fmt.Fprintf(stderr, "\rops %d/%d ", done, total)
			}
		}
	}
	start := time.Now()
	var counters []protocolapi.Counter
	var lastRes simrunner.Result
	for seed := first; seed <= last; seed++ {
		cfg := f.cfg
		cfg.Seed = seed
		res, err := f.run(cfg)
		if err != nil {
			fmt.Fprintf(stderr, "sim: %v\n", err)
			return 2
		}
		lastRes = res
		sum.Seeds++
		sum.LastSeed = seed
		sum.Ops += res.Ops
		sum.SimMessages += res.Messages
		sum.SimSeconds += res.SimWall.Seconds()
		sum.CheckSeconds += res.CheckWall.Seconds()
		sum.Crashes += len(res.Crashes)
		sum.UnknownOps += res.UnknownOps
		sum.SimulatedNanos += res.SimNanos
		sum.Verbs += res.Verbs
		counters = addCounters(counters, res.Counters)
		if first == last {
			sum.TraceHash = fmt.Sprintf("%016x", res.TraceHash)
		}
		if res.Undecided() && !res.Failed() {
			sum.UndecidedSeeds = append(sum.UndecidedSeeds, seed)
			if progress {
				fmt.Fprintln(stderr)
			}
			fmt.Fprintf(stderr, "undecided: seed %d: linearizability not decided within --check-timeout %v (the invariants passed); replay: %s\n",
				seed, f.cfg.CheckTimeout, replayCommand(args, seed))
		}
		if progress {
			fmt.Fprintf(stderr, "\rseed %d/%d  ops %d  messages %d  violations %d ", seed-first+1, last-first+1, sum.Ops, sum.SimMessages, sum.Violations)
		}
		if res.Failed() {
			sum.Violations++
			s := seed
			sum.FirstFailingSeed = &s
			sum.ReplayCommand = replayCommand(args, seed)
			if progress {
				fmt.Fprintln(stderr)
			}
			reportFailure(&res, f, sum.ReplayCommand, stdout, stderr)
			break
		}
	}
	count := func(name string) uint64 {
		if i := slices.IndexFunc(counters, func(c protocolapi.Counter) bool { return c.Name == name }); i >= 0 {
			return counters[i].Value
		}
		return 0
	}
	sum.RemoteFetches, sum.Evictions = count(scenarios.CounterRemoteFetches), count(scenarios.CounterEvictions)
	sum.EvictionsDeclined, sum.DirtyPulls = count(scenarios.CounterEvictionsDeclined), count(scenarios.CounterDirtyPulls)
	sum.IORetries, sum.MemoryHandlers = count(scenarios.CounterIORetries), count(scenarios.CounterMemoryHandlerCalls)
	sum.UnreadableReads, sum.FailedOps = int(count(scenarios.CounterUnreadableReads)), int(count(scenarios.CounterFailedOps))
	sum.LostOps = int(count(scenarios.CounterLostOps))
	sum.Scans, sum.scanWaits = int(count(scenarios.CounterIndexScans)), count(scenarios.CounterScanRoundTrips)
	sum.MegaSplits, sum.MegaMoved, sum.Restarts = count(scenarios.CounterMegaSplits), count(scenarios.CounterMegaMoved), count(scenarios.CounterCellRestarts)
	if progress || !shown.IsZero() {
		fmt.Fprintln(stderr)
	}
	if f.historyOut != "" {
		if err := writeHistory(f.historyOut, lastRes.History); err != nil {
			fmt.Fprintf(stderr, "sim: --history-out: %v\n", err)
			return 1
		}
	}
	sum.WallSeconds = time.Since(start).Seconds()
	if sum.SimSeconds > 0 {
		sum.SimMessagesPerSec = float64(sum.SimMessages) / sum.SimSeconds
	}
	if hits, lookups := count(scenarios.CounterCacheHits), count(scenarios.CounterCacheHits)+count(scenarios.CounterCacheMisses); lookups > 0 {
		sum.HitRatio = float64(hits) / float64(lookups)
	}
	sum.Linearizable = sum.Violations == 0 && len(sum.UndecidedSeeds) == 0
	if sum.Scans > 0 {
		sum.ScanRoundTrips = float64(sum.scanWaits) / float64(sum.Scans)
	}
	if f.traceHTML != "" {
		if err := writeSimTraceHTML(f, lastRes, steps); err != nil {
			fmt.Fprintf(stderr, "sim: --trace-html: %v\n", err)
			return 1
		}
	}
	if sum.UndecidedSeeds == nil {
		sum.UndecidedSeeds = []uint64{}
	}
	if !f.json || !f.quiet {
		verdict := "OK: no violation"
		if len(sum.UndecidedSeeds) > 0 {
			verdict = fmt.Sprintf("UNDECIDED: no violation, %d seeds not decided", len(sum.UndecidedSeeds))
		}
		if sum.Violations > 0 {
			verdict = fmt.Sprintf("VIOLATION at seed %d", *sum.FirstFailingSeed)
		}
		w := stdout
		if f.json {
			w = stderr
		}
		what := "protocol=" + sum.Protocol
		if index {
			what = "workload=" + f.cfg.Workload
		}
		fmt.Fprintf(w, "%s  seeds=%d (%d..%d) ops=%d messages=%d sim=%.2fs (%.0f msg/s) check=%.2fs %s faults=%s",
			verdict, sum.Seeds, sum.FirstSeed, sum.LastSeed, sum.Ops, sum.SimMessages, sum.SimSeconds, sum.SimMessagesPerSec, sum.CheckSeconds, what, sum.Faults)
		if sum.TraceHash != "" {
			fmt.Fprintf(w, " trace_hash=%s", sum.TraceHash)
		}
		fmt.Fprintln(w)
		if index {
			fmt.Fprintf(w, "  one-sided verbs %d, memory-server calls %d, simulated time %.1f ms\n", sum.Verbs, sum.MemoryHandlers, float64(sum.SimulatedNanos)/1e6)
			if n, _ := strconv.Atoi(f.cfg.Options[indexdesign.OptionCellMegaNodes]); n > 0 {
				fmt.Fprintf(w, "  meganode splits %d (%d moved to another server), operations restarted by one %d\n", sum.MegaSplits, sum.MegaMoved, sum.Restarts)
			}
			if sum.Scans > 0 {
				heads := "no head nodes"
				if on, ok := f.cfg.Options[indexdesign.OptionHeadNodes]; ok && on != "off" && on != "false" {
					heads = fmt.Sprintf("head nodes of %s leaves", f.cfg.Options[indexdesign.OptionHeadGroup])
				}
				fmt.Fprintf(w, "  scans %d, round trips waited for per scan %.2f (%s)\n", sum.Scans, sum.ScanRoundTrips, heads)
			}
		} else {
			fmt.Fprintf(w, "  cache hit ratio %.2f, remote page fetches %d, evictions %d (declined %d, dirty pages pulled %d), storage retries %d, simulated time %.1f ms\n",
				sum.HitRatio, sum.RemoteFetches, sum.Evictions, sum.EvictionsDeclined, sum.DirtyPulls, sum.IORetries, float64(sum.SimulatedNanos)/1e6)
		}
		if !index && sum.Verbs > 0 && sum.Ops > 0 {
			// a protocol of one-sided verbs (SELCC's line caches)
			fmt.Fprintf(w, "  one-sided verbs %d (%.2f per operation), invalidations %d, handovers %d, shared releases %d, dropped %d, upgrade fallbacks %d, lease releases %d, memory-node handler calls %d\n",
				sum.Verbs, float64(sum.Verbs)/float64(sum.Ops), count(scenarios.CounterInvalidations), count(scenarios.CounterHandOvers),
				count(scenarios.CounterSharedReleases), count(scenarios.CounterDropped), count(scenarios.CounterUpgradeFallbacks),
				count(scenarios.CounterLeaseReleases), sum.MemoryHandlers)
		}
		if f.cfg.Elastic {
			fmt.Fprintf(w, "  elastic (last seed):")
			for _, l := range lastRes.Left {
				fmt.Fprintf(w, " node %d left at %.2f ms handing back %d pages;", l.Node, float64(l.At)/1e6, l.PagesHanded)
			}
			fmt.Fprintln(w)
		}
		if f.cfg.Crashes > 0 {
			fmt.Fprintf(w, "  node crashes %d, writes of unknown outcome %d (in the history as returning at the end)", sum.Crashes, sum.UnknownOps)
			if len(lastRes.Crashes) > 0 {
				fmt.Fprintf(w, "; last seed:")
				for _, c := range lastRes.Crashes {
					fmt.Fprintf(w, " node %d down %.3f-%.3f ms;", c.Node, float64(c.At)/1e6, float64(c.Restart)/1e6)
				}
			}
			fmt.Fprintln(w)
		}
		if sum.LostOps > 0 {
			fmt.Fprintf(w, "  operations that failed on a directory that had lost both copies %d (not in the history: they did not happen)\n", sum.LostOps)
		}
		if sum.UnreadableReads > 0 || sum.FailedOps > 0 {
			fmt.Fprintf(w, "  unreadable page reads %d; operations that failed on an unreadable page %d (not in the history: they did not happen)\n",
				sum.UnreadableReads, sum.FailedOps)
		}
	}
	if f.json {
		b, _ := json.Marshal(sum)
		fmt.Fprintln(stdout, string(b))
	}
	if sum.Violations > 0 {
		return 1
	}
	if len(sum.UndecidedSeeds) > 0 {
		if f.allowUndec {
			fmt.Fprintf(stderr, "sim: %d undecided seeds %v allowed by --allow-undecided: their histories were not checked for linearizability\n",
				len(sum.UndecidedSeeds), sum.UndecidedSeeds)
			return 0
		}
		fmt.Fprintf(stderr, "sim: %d of %d seeds undecided %v: their histories were not checked for linearizability "+
			"(raise --check-timeout, or pass --allow-undecided to accept that); exit status 3\n",
			len(sum.UndecidedSeeds), sum.Seeds, sum.UndecidedSeeds)
		return 3
	}
	return 0
}

func reportFailure(res *simrunner.Result, f *simFlags, replay string, stdout, stderr io.Writer) {
	fmt.Fprintf(stderr, "violation at seed %d (fault plan %s):\n", res.Seed, res.Plan)
	for _, v := range res.Violations {
		fmt.Fprintf(stderr, "  %s\n", v)
	}
	if res.ViolationCount > len(res.Violations) {
		fmt.Fprintf(stderr, "  ... and %d more\n", res.ViolationCount-len(res.Violations))
	}
	if !res.Linearizable {
		if res.LinearUnknown {
			fmt.Fprintf(stderr, "  porcupine could not decide linearizability within --check-timeout\n")
		} else {
			fmt.Fprintf(stderr, "  history not linearizable on pages %v\n", res.BadKeys)
		}
	}
	if res.Info != nil {
		path := fmt.Sprintf("%s/scalestore-seed-%d.html", strings.TrimRight(f.vizDir, "/"), res.Seed)
		if err := writeViz(path, res.Info); err != nil {
			fmt.Fprintf(stderr, "  could not write the visualization: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "  porcupine visualization: %s\n", path)
		}
	}
	fmt.Fprintf(stderr, "replay: %s\n", replay)
}

// replayCommand rebuilds the command line for one seed.
func replayCommand(args []string, seed uint64) string {
	out := []string{"scalestore", "sim"}
	skip := false
	for _, a := range args {
		if skip {
			skip = false
			continue
		}
		name := strings.TrimLeft(a, "-")
		if k := strings.IndexByte(name, '='); k >= 0 {
			name = name[:k]
		}
		switch name {
		case "seed", "seeds", "json", "quiet", "history-out", "trace-out", "allow-undecided":
			if !strings.Contains(a, "=") && (name == "seed" || name == "seeds" || name == "history-out" || name == "trace-out") {
				skip = true
			}
			continue
		}
		out = append(out, a)
	}
	return strings.Join(append(out, fmt.Sprintf("--seed %d", seed)), " ")
}

func writeHistory(path string, h *checker.History) error {
	if h == nil {
		return errors.New("no history recorded")
	}
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := h.WriteJSONLines(file); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func mutationNames() []string { return mutation.Names }

// writeSimTraceHTML writes one seed's messages as the trace viewer's page.
func writeSimTraceHTML(f *simFlags, res simrunner.Result, steps []traceview.Step) error {
	c := f.cfg
	tr := traceview.Trace{
		Title: fmt.Sprintf("sim --seed %d (%s, %s faults)", f.seed, f.protocol, f.faults),
		About: fmt.Sprintf("%d nodes, %d workers a node, %d pages, %d frames a node, %d operations, %.0f%% reads, zipf %.2f; trace hash %016x",
			c.Nodes, c.Workers, f.pages, c.CacheLines, c.Ops, 100*c.ReadRatio, c.Zipf, res.TraceHash),
		Nodes: c.Nodes, Steps: steps,
	}
	if c.Watch >= 0 {
		// Pages are allocated round-robin over the directories.
		tr.Watch = fmt.Sprintf("page index %d (directory node %d): its directory's metadata", c.Watch, c.Watch%c.Nodes)
	}
	if len(steps) >= scenarios.MaxSteps {
		tr.Notes = append(tr.Notes, fmt.Sprintf("only the first %d messages are shown: watch one page (--watch-page) or run fewer operations", scenarios.MaxSteps))
	}
	for i, v := range res.Violations {
		if i == 20 {
			tr.Notes = append(tr.Notes, fmt.Sprintf("... and %d more violations", len(res.Violations)-20))
			break
		}
		tr.Notes = append(tr.Notes, "violation: "+v)
	}
	return writeTraceHTML(f.traceHTML, tr)
}
