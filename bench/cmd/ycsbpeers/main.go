// Command ycsbpeers runs the project's YCSB driver on ScaleStore and on its
// peers (tidwall/btree in memory, cockroachdb/pebble on disk) in one
// process, one after the other, and prints a Markdown table of the results.
// docs/bench.md explains the set-up and holds a measured table.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/scalestore-go/scalestore/bench/peers"
	"github.com/scalestore-go/scalestore/ycsb"
)

const usage = `Usage: ycsbpeers [flags]

Runs the YCSB driver of github.com/scalestore-go/scalestore/ycsb (8-byte
keys, 128-byte random values, paper §6.1) on each engine in turn: loads
--records records, then runs every mix at every thread count for --warmup
(not measured) and --duration, and prints a Markdown table (engine, mix,
threads, ops/s, p50 and p99 latency in µs) on stdout. Progress goes to stderr.

Engines:
  scalestore  the embedded API: the B-tree on the buffer manager; pages in
              memory (Options.InMemory), or with --scalestore-disk in the
              O_DIRECT store in a temporary directory; --cache frames
  btree       tidwall/btree in memory under a reader-writer lock (the baseline
              of 'scalestore ycsb --engine btree')
  pebble      cockroachdb/pebble in a temporary directory: --cache block
              cache, 64 MiB memtables, bloom filters, WAL disabled (or with
              --pebble-wal written but never synced), writes with NoSync;
              flushed and compacted after the load

--sync compares durable writes: every update of the measured runs returns
only once it would survive a power failure (scalestore: on disk, its redo
log synced, with group commit; pebble: WAL on, pebble.Sync). The btree
engine keeps nothing on disk and is left out of such a run's meaning.

Mixes (YCSB core workloads, point operations only):
  a  50% reads / 50% updates, zipf 0.99
  b  95% reads / 5% updates, zipf 0.99
  c  100% reads, uniform

Each engine is loaded once and runs the mixes in the order given, so list
read-only mixes first to read the loaded values.

On a shared machine other processes steal CPU time: every run measures how
much (from /proc/stat), repeats itself up to --retries times while others
took more than 5% of the CPUs, keeps the quietest attempt, and the table
ends with a warning if even that one was noisy. --json rows carry the share
as other_cpu.

Flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ycsbpeers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	engines := fs.String("engines", strings.Join(peers.EngineNames, ","), "comma list of engines: scalestore, btree, pebble")
	mixes := fs.String("mixes", "c,b,a", "comma list of mixes: a, b, c")
	threads := fs.String("threads", "1,2", "comma list of worker goroutine counts")
	records := fs.Int("records", 1_000_000, "records to load")
	duration := fs.Duration("duration", 5*time.Second, "measured time of each run")
	warmup := fs.Duration("warmup", time.Second, "unmeasured time before each run")
	cache := fs.String("cache", "1GiB", "scalestore's buffer pool and pebble's block cache (KiB, MiB, GiB suffixes)")
	tmpdir := fs.String("tmpdir", "", "where on-disk engines make their temporary directories (empty: $TMPDIR or /tmp)")
	onDisk := fs.Bool("scalestore-disk", false, "put scalestore's pages in a temporary directory instead of in memory")
	wal := fs.Bool("pebble-wal", false, "keep pebble's write-ahead log (written, not synced) instead of disabling it")
	syncRuns := fs.Bool("sync", false, "make every update of the measured runs durable before it returns: scalestore on disk with its redo log synced, pebble with its WAL synced (pebble.Sync); the load is unsynced on both")
	retries := fs.Int("retries", 3, "repeat a run up to this many times while other processes take over 5% of the CPUs, keeping the quietest")
	asJSON := fs.Bool("json", false, "also print one JSON object per measurement on stdout as it is measured")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ycsbpeers: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg := peers.Config{Records: *records, Duration: *duration, Warmup: *warmup, Retries: *retries, Log: stderr}
	var err error
	if cfg.Engines, err = peers.ParseEngines(*engines); err != nil {
		return usageError(stderr, "--engines", err)
	}
	if cfg.Mixes, err = peers.ParseMixes(*mixes); err != nil {
		return usageError(stderr, "--mixes", err)
	}
	if cfg.Threads, err = peers.ParseThreads(*threads); err != nil {
		return usageError(stderr, "--threads", err)
	}
	if cfg.Engine.Cache, err = ycsb.ParseSize(*cache); err != nil {
		return usageError(stderr, "--cache", err)
	}
	if *records < 1 || *duration <= 0 || *warmup < 0 || *retries < 0 {
		return usageError(stderr, "--records/--duration/--warmup/--retries", errors.New("want records >= 1, duration > 0, warmup >= 0, retries >= 0"))
	}
	cfg.Engine.TempDir = *tmpdir
	cfg.Engine.ScalestoreOnDisk = *onDisk
	cfg.Engine.PebbleWAL = *wal
	cfg.Engine.Sync = *syncRuns
	if isTerminal(stderr) {
		cfg.LiveProgress = stderr
	}
	fmt.Fprintf(stderr, "ycsbpeers: %s, %d CPUs, %s\n", runtime.Version(), runtime.NumCPU(), strings.Join(args, " "))

	var each func(peers.Row)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		each = func(r peers.Row) { _ = enc.Encode(r) }
	}
	rows, err := peers.Run(cfg, each)
	if len(rows) > 0 {
		if *asJSON {
			fmt.Fprintln(stdout)
		}
		if werr := peers.WriteTable(stdout, rows); werr != nil {
			fmt.Fprintf(stderr, "ycsbpeers: %v\n", werr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "ycsbpeers: %v\n", err)
		return 1
	}
	return 0
}

func usageError(stderr io.Writer, flagName string, err error) int {
	fmt.Fprintf(stderr, "ycsbpeers: %s: %v (see --help)\n", flagName, err)
	return 2
}

// isTerminal reports whether w is a terminal: the driver's live load
// counter rewrites its line with carriage returns, which only a terminal
// shows well.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
