package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/scalestore-go/scalestore"
	"github.com/scalestore-go/scalestore/storage/nvme"
	"github.com/scalestore-go/scalestore/ycsb"
)

const ycsbUsage = `Usage: scalestore ycsb [flags]

Loads --records records (8-byte keys, 128-byte random values, paper §6.1),
warms up, then runs point lookups and point updates for --duration on
--threads goroutines and prints throughput and latency percentiles.

  --engine scalestore   the B-tree on the buffer manager (the embedded store)
  --engine btree        tidwall/btree in memory (the baseline)

Without --data the scalestore engine keeps its pages in memory. With
--data the store stays in DIR; --skip-load reuses the records an earlier
run loaded there (same --records) and starts the run at once.

--batch N has each thread issue its reads N at a time in one call
(scalestore.DB.GetBatch, which walks the N lookups together so that their
cache misses overlap), as a client with N lookups outstanding would; each
read is recorded with its batch's latency. The btree engine has no batch
call and gets the reads one by one. The default, 1, is one lookup per call
(the paper's setup).

Each thread of the scalestore engine works through a session of its own
(scalestore.Session). An operation's latency runs from the end of the
thread's previous one (one clock read per operation) and is counted on the
CPU's time-stamp counter where the kernel trusts it, else on the monotonic
clock ("clock" in --json).

With --data every update is durable before it counts as done: its record
is synced to the store's redo log, and updates that wait together share one
sync (group commit). --no-sync hands the records to the OS instead (they
survive the process being killed, not a power failure). The load always
runs unsynced and is made durable before the run starts.

Ctrl-C (or SIGTERM) stops the load or the run, and the store in --data is
still closed cleanly (exit status 130); a store that was not closed recovers
at the next open.

Flags:
`

func runYCSB(args []string, stdout, stderr io.Writer) (code int) {
	fs := flag.NewFlagSet("ycsb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, ycsbUsage); fs.PrintDefaults() }
	engine := fs.String("engine", "scalestore", "scalestore or btree")
	var cfg ycsb.Config
	fs.IntVar(&cfg.Records, "records", 1_000_000, "records to load")
	fs.Float64Var(&cfg.ReadRatio, "read-ratio", 0.95, "share of point lookups (the rest are updates)")
	fs.Float64Var(&cfg.Zipf, "zipf", 0, "scrambled zipfian constant (0 = uniform; YCSB uses 0.99)")
	fs.IntVar(&cfg.Threads, "threads", 1, "worker goroutines")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured run time")
	fs.IntVar(&cfg.Batch, "batch", 1, fmt.Sprintf("reads per call, 1 to %d (see above)", ycsb.MaxBatch))
	fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "run time before measuring")
	cache := fs.String("cache", "1GiB", "buffer size of the scalestore engine (KiB, MiB, GiB suffixes)")
	dir := fs.String("data", "", "directory of the scalestore engine's store (empty: in memory)")
	asJSON := fs.Bool("json", false, "print one JSON object as the last line")
	noSync := fs.Bool("no-sync", false, "with --data: updates return once their log record is handed to the OS, without waiting for the device (see above)")
	checkpoint := fs.Int64("checkpoint-bytes", 0, "with --data: log bytes between checkpoints (0: the default, 64 MiB)")
	skipLoad := fs.Bool("skip-load", false, "with --data: the store already holds the --records records (an earlier run loaded them), so run at once")
	keyOrder := fs.String("key-order", "ordered", "ordered (record i is key i, loaded in key order) or hashed (YCSB's own default: keys scattered by a bijective hash of i, loaded in no order)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured run to this file")
	mutexProfile := fs.String("mutexprofile", "", "write a profile of lock contention during the measured run to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cfg.Records < 1 || cfg.Threads < 1 || cfg.ReadRatio < 0 || cfg.ReadRatio > 1 || cfg.Zipf < 0 || cfg.Zipf >= 1 || cfg.Batch < 1 || cfg.Batch > ycsb.MaxBatch {
		fmt.Fprintf(stderr, "ycsb: want --records >= 1, --threads >= 1, --read-ratio in 0..1, --zipf in [0, 1), --batch in 1..%d\n", ycsb.MaxBatch)
		return 2
	}
	cacheBytes, err := ycsb.ParseSize(*cache)
	if err != nil {
		fmt.Fprintf(stderr, "ycsb: --cache: %v\n", err)
		return 2
	}
	if _, err := ycsb.KeyOrder(*keyOrder); err != nil {
		fmt.Fprintf(stderr, "ycsb: --key-order: %v\n", err)
		return 2
	}
	cfg.Hashed = *keyOrder == "hashed"
	if isTerminal(stderr) {
		cfg.Progress = stderr
	}
	cfg.Seed = 42
	var e ycsb.Engine
	var db *scalestore.DB
	switch *engine {
	case "scalestore":
		opts := scalestore.Options{CachePages: int(cacheBytes / 4096), Slots: uint64(cfg.Records/8 + 4096), InMemory: *dir == "", CheckpointBytes: *checkpoint}
		if *dir != "" {
			if err := os.MkdirAll(*dir, 0o755); err != nil {
				fmt.Fprintf(stderr, "ycsb: %v\n", err)
				return 1
			}
			reserveIOProc()
		}
		if db, err = scalestore.Open(*dir, opts); err != nil {
			fmt.Fprintf(stderr, "ycsb: %v\n", err)
			return 1
		}
		reportRecovery(stderr, "ycsb", db)
		// Every page goes back to the store before the process ends, also
		// after Ctrl-C: a store left unclosed is refused by the next open.
		defer func() {
			if err := db.Close(); err != nil {
				fmt.Fprintf(stderr, "ycsb: closing the store: %v\n", err)
				if code == 0 {
					code = 1
				}
			}
		}()
		e = dbEngine{db}
	case "btree":
		e = ycsb.NewBaseline()
	default:
		fmt.Fprintf(stderr, "ycsb: --engine %q: want scalestore or btree\n", *engine)
		return 2
	}
	interrupt := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer func() { signal.Stop(sig); close(sig) }()
	go func() {
		if _, ok := <-sig; ok {
			close(interrupt)
		}
	}()
	cfg.Interrupt = interrupt
	var load time.Duration
	if *skipLoad {
		if err := checkLoaded(db, *dir, cfg.Records); err != nil {
			fmt.Fprintf(stderr, "ycsb: --skip-load: %v\n", err)
			return 2
		}
	} else {
		if db != nil {
			if err := db.SetNoSync(true); err != nil {
				fmt.Fprintf(stderr, "ycsb: %v\n", err)
				return 1
			}
		}
		if load, err = ycsb.Load(e, cfg); err != nil {
			return ycsbFailed(stderr, err, "the load stopped part-way: run without --skip-load to load again")
		}
	}
	if db != nil {
		if err := db.SetNoSync(*noSync); err != nil {
			fmt.Fprintf(stderr, "ycsb: %v\n", err)
			return 1
		}
	}
	// The engine's counters are read over the measured window only (the
	// warm-up's misses would inflate the SSD reads per second).
	var before, after scalestore.Stats
	if db != nil {
		cfg.OnMeasure = func() { before = db.Stats() }
		cfg.OnStop = func() { after = db.Stats() }
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "ycsb: %v\n", err)
			return 1
		}
		defer stop()
	}
	if *mutexProfile != "" {
		runtime.SetMutexProfileFraction(10)
		defer func() {
			if f, err := os.Create(*mutexProfile); err == nil {
				pprof.Lookup("mutex").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	res, err := ycsb.Run(e, cfg)
	if err != nil {
		return ycsbFailed(stderr, err, "no figures")
	}
	res.LoadSecs = load.Seconds()
	out := struct {
		Engine string `json:"engine"`
		ycsb.Result
		Records      int     `json:"records"`
		Threads      int     `json:"threads"`
		Batch        int     `json:"batch"`
		ReadRatio    float64 `json:"read_ratio"`
		Zipf         float64 `json:"zipf"`
		KeyOrder     string  `json:"key_order"`
		HitRatio     float64 `json:"cache_hit_ratio"`
		ReadsFromSSD uint64  `json:"reads_from_ssd"`
		SSDReadsSec  float64 `json:"ssd_reads_per_sec"`
		StorePages   uint64  `json:"store_pages"`
		SlowHits     uint64  `json:"slow_path_hits"`
	}{Engine: *engine, Result: res, Records: cfg.Records, Threads: cfg.Threads, Batch: cfg.Batch, ReadRatio: cfg.ReadRatio, Zipf: cfg.Zipf, KeyOrder: *keyOrder, HitRatio: 1}
	if db != nil {
		s := after
		hits, misses := s.CacheHits-before.CacheHits, s.CacheMisses-before.CacheMisses
		if hits+misses > 0 {
			out.HitRatio = float64(hits) / float64(hits+misses)
		}
		out.ReadsFromSSD = s.SSDReads - before.SSDReads
		out.SSDReadsSec = float64(out.ReadsFromSSD) / res.Seconds
		out.StorePages = s.Pages
		out.SlowHits = s.SlowHits - before.SlowHits
	}
	fmt.Fprintf(stdout, "%s: %.0f ops/s  p50 %.1fus  p99 %.1fus  p99.9 %.1fus  hit ratio %.3f  SSD reads %d  (%d records %s, %d threads, load %.1fs)\n",
		out.Engine, res.OpsPerSec, res.P50us, res.P99us, res.P999us, out.HitRatio, out.ReadsFromSSD, cfg.Records, *keyOrder, cfg.Threads, res.LoadSecs)
	if *asJSON {
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
	}
	if *dir != "" && out.ReadsFromSSD > 0 {
		// The fair baseline reads the pages this store wrote. The store
		// file is sparse, and a disk serves its holes without touching the
		// medium: fio over the whole file measured 2-3x the IOPS of the
		// written region here.
		fmt.Fprintf(stderr, "ycsb: same-disk baseline for these %.0f SSD reads/s: fio --name=rr --filename=%s --readonly --offset=%d --size=%d --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32 --runtime=10 --time_based\n",
			out.SSDReadsSec, filepath.Join(*dir, scalestore.StoreFile), nvme.PageSize, out.StorePages*nvme.PageSize)
	}
	return 0
}

// ycsbFailed reports err and returns the exit code: 130 for Ctrl-C (then
// what stopped, and the store is still closed on the way out), 1 otherwise.
func ycsbFailed(stderr io.Writer, err error, whatStopped string) int {
	if errors.Is(err, ycsb.ErrInterrupted) {
		fmt.Fprintf(stderr, "ycsb: interrupted (%s)\n", whatStopped)
		return 130
	}
	fmt.Fprintf(stderr, "ycsb: %v\n", err)
	return 1
}

// startCPUProfile profiles the process into path until the returned stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// checkLoaded makes sure the store holds records 0..records-1 and no more
// (the last and the next key tell), so a run with --skip-load measures the
// data set it claims to.
func checkLoaded(db *scalestore.DB, dir string, records int) error {
	if db == nil || dir == "" {
		return errors.New("needs --engine scalestore and --data DIR")
	}
	var kb [8]byte
	if _, ok, err := db.Get(ycsb.Key(kb[:], int64(records-1)), nil); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%s does not hold %d records: run once without --skip-load", dir, records)
	}
	if _, ok, err := db.Get(ycsb.Key(kb[:], int64(records)), nil); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%s holds more than %d records: pass the --records it was loaded with", dir, records)
	}
	return nil
}

// dbEngine gives each driver thread a session of its own
// (ycsb.ThreadEngine): cheaper per call than the DB's pool of workers.
type dbEngine struct{ *scalestore.DB }

func (d dbEngine) ForThread() (ycsb.Engine, func()) {
	s := d.NewSession()
	return s, s.Close
}
