package peers

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scalestore-go/scalestore/ycsb"
)

// Mix is one YCSB workload: the share of point lookups (the rest are
// updates of existing keys) and how keys are chosen.
type Mix struct {
	Name      string
	ReadRatio float64
	Zipf      float64 // 0: uniform
}

// Mixes are the YCSB core workloads the driver can express (point lookups
// and updates only; no inserts, scans or read-modify-writes).
var Mixes = map[string]Mix{
	"a": {Name: "a", ReadRatio: 0.50, Zipf: 0.99},
	"b": {Name: "b", ReadRatio: 0.95, Zipf: 0.99},
	"c": {Name: "c", ReadRatio: 1.00, Zipf: 0},
}

// Describe says what the mix is, for legends and help.
func (m Mix) Describe() string {
	keys := "uniform"
	if m.Zipf > 0 {
		keys = fmt.Sprintf("zipf %.2f", m.Zipf)
	}
	if m.ReadRatio == 1 {
		return "100% reads, " + keys
	}
	return fmt.Sprintf("%.0f%% reads / %.0f%% updates, %s", 100*m.ReadRatio, 100*(1-m.ReadRatio), keys)
}

// ParseMixes reads a comma list of mix names such as "c,b,a".
func ParseMixes(s string) ([]Mix, error) {
	var out []Mix
	for _, name := range splitList(s) {
		m, ok := Mixes[strings.ToLower(name)]
		if !ok {
			return nil, fmt.Errorf("mix %q: want a, b or c", name)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no mixes in %q", s)
	}
	return out, nil
}

// ParseEngines reads a comma list of engine names.
func ParseEngines(s string) ([]string, error) {
	names := splitList(s)
	for _, n := range names {
		if !slices.Contains(EngineNames, n) {
			return nil, fmt.Errorf("engine %q: want one of %s", n, strings.Join(EngineNames, ", "))
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no engines in %q", s)
	}
	return names, nil
}

// ParseThreads reads a comma list of thread counts such as "1,2".
func ParseThreads(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("thread count %q: want an integer >= 1", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no thread counts in %q", s)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Config is one comparison: every engine runs every mix at every thread
// count.
type Config struct {
	Engines  []string
	Mixes    []Mix
	Threads  []int
	Records  int
	Duration time.Duration
	Warmup   time.Duration
	Engine   EngineOptions // Records is filled in from Config.Records
	// Log, when set, receives a line per phase (load, settle, each run).
	Log io.Writer
	// Retries is how many times a run is repeated, at most, while other
	// processes take more than a few percent of the CPUs.
	Retries int
	// LiveProgress, when set, receives the driver's in-place load counter
	// (carriage returns: meant for a terminal).
	LiveProgress io.Writer
}

// Row is one measurement: an engine on a mix at a thread count.
type Row struct {
	Engine  string  `json:"engine"`
	Mix     string  `json:"mix"`
	Threads int     `json:"threads"`
	Records int     `json:"records"`
	Read    float64 `json:"read_ratio"`
	Zipf    float64 `json:"zipf"`
	ycsb.Result
	// OtherCPU is the share of the machine's CPU time that other processes
	// used during the run (warm-up included): on a shared machine it says
	// how far to trust the row. Negative when it could not be measured.
	OtherCPU float64 `json:"other_cpu"`
}

// seed makes every engine see the same values and the same key sequence.
const seed = 42

// Run measures every engine on every mix at every thread count, calling
// each (if set) as every row is measured. Each engine is loaded once, then
// runs the mixes in the order given: put read-only mixes first if the
// loaded values should be the ones read.
func Run(cfg Config, each func(Row)) ([]Row, error) {
	if cfg.Records < 1 || len(cfg.Threads) == 0 || len(cfg.Mixes) == 0 || len(cfg.Engines) == 0 {
		return nil, fmt.Errorf("want records >= 1 and at least one engine, mix and thread count")
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "ycsbpeers: "+format+"\n", args...)
		}
	}
	eo := cfg.Engine
	eo.Records = cfg.Records
	var rows []Row
	for _, name := range cfg.Engines {
		got, err := runEngine(name, eo, cfg, logf, each)
		rows = append(rows, got...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

func runEngine(name string, eo EngineOptions, cfg Config, logf func(string, ...any), each func(Row)) (rows []Row, err error) {
	e, err := Open(name, eo)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	// Load on as many goroutines as the widest run uses: loading is not
	// what is compared, only what has to happen first.
	loadThreads := slices.Max(cfg.Threads)
	logf("%s: loading %d records on %d threads", name, cfg.Records, loadThreads)
	load, err := ycsb.Load(e, ycsb.Config{Records: cfg.Records, Threads: loadThreads, Seed: seed, Progress: cfg.LiveProgress})
	if err != nil {
		return nil, fmt.Errorf("%s: load: %w", name, err)
	}
	logf("%s: loaded in %.1fs", name, load.Seconds())
	if s, ok := e.(settler); ok {
		start := time.Now()
		if err := s.Settle(); err != nil {
			return nil, fmt.Errorf("%s: settle after load: %w", name, err)
		}
		logf("%s: flushed and compacted in %.1fs", name, time.Since(start).Seconds())
	}
	if f, ok := e.(loadFinisher); ok {
		if err := f.LoadDone(); err != nil {
			return nil, fmt.Errorf("%s: after the load: %w", name, err)
		}
	}
	for _, m := range cfg.Mixes {
		for _, t := range cfg.Threads {
			r, err := measure(e, name, m, t, cfg, logf)
			if err != nil {
				return rows, err
			}
			r.LoadSecs = load.Seconds()
			rows = append(rows, r)
			if each != nil {
				each(r)
			}
		}
	}
	return rows, nil
}

// measure runs one mix at one thread count. When other processes took
// more than noisyShare of the CPUs it runs again, up to cfg.Retries times,
// and keeps the quietest attempt: on a shared machine that is the one
// closest to what the engine does alone.
func measure(e Engine, name string, m Mix, threads int, cfg Config, logf func(string, ...any)) (Row, error) {
	var best Row
	for attempt := 0; ; attempt++ {
		before, sampled := sampleCPU()
		res, err := ycsb.Run(e, ycsb.Config{
			Records: cfg.Records, ReadRatio: m.ReadRatio, Zipf: m.Zipf,
			Threads: threads, Duration: cfg.Duration, Warmup: cfg.Warmup, Seed: seed,
		})
		if err != nil {
			return best, fmt.Errorf("%s: mix %s, %d threads: %w", name, m.Name, threads, err)
		}
		other := -1.0
		if after, ok := sampleCPU(); ok && sampled {
			other = otherCPU(before, after)
		}
		r := Row{Engine: name, Mix: m.Name, Threads: threads, Records: cfg.Records, Read: m.ReadRatio, Zipf: m.Zipf, Result: res, OtherCPU: other}
		logf("%s: mix %s, %d threads: %.0f ops/s, p50 %.2fus, p99 %.2fus%s", name, m.Name, threads, res.OpsPerSec, res.P50us, res.P99us, describeOther(other))
		if attempt == 0 || other < best.OtherCPU {
			best = r
		}
		if other <= noisyShare || attempt >= cfg.Retries {
			return best, nil
		}
		logf("%s: mix %s, %d threads: again, to find a quieter moment (%d of %d retries)", name, m.Name, threads, attempt+1, cfg.Retries)
	}
}

// otherCPU is the share of all CPUs that processes other than this one
// kept busy between two samples.
func otherCPU(before, after cpuSample) float64 {
	wall := after.at.Sub(before.at).Seconds() * float64(runtime.NumCPU())
	if wall <= 0 {
		return -1
	}
	other := ((after.machine - before.machine) - (after.us - before.us)).Seconds() / wall
	return min(max(other, 0), 1)
}

func describeOther(other float64) string {
	if other < 0 {
		return ""
	}
	return fmt.Sprintf(", other processes used %.0f%% of the CPUs", 100*other)
}

// noisyShare is the share of the CPUs taken by other processes above which
// WriteTable warns that its figures are low.
const noisyShare = 0.05

// WriteTable writes rows as a Markdown table, followed by a legend of the
// mixes that appear in it and, if other processes took a noticeable share
// of the CPUs during some run, a warning saying so.
func WriteTable(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| engine | mix | threads | ops/s | p50 µs | p99 µs |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|\n")
	var seen []string
	noisy := 0.0
	for _, r := range rows {
		noisy = max(noisy, r.OtherCPU)
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %.2f | %.2f |\n", r.Engine, r.Mix, r.Threads, group(int64(r.OpsPerSec+0.5)), r.P50us, r.P99us)
		if !slices.Contains(seen, r.Mix) {
			seen = append(seen, r.Mix)
		}
	}
	if len(seen) > 0 {
		b.WriteString("\nMixes: ")
		for i, name := range seen {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s = %s", name, Mixes[name].Describe())
		}
		b.WriteString(".\n")
	}
	if noisy > noisyShare {
		fmt.Fprintf(&b, "\nWarning: other processes used up to %.0f%% of the CPUs during these runs; the figures are lower than on an idle machine.\n", 100*noisy)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	return nil
}

// group writes n with thousands separators: throughputs span four orders
// of magnitude here and are easier to compare grouped.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
