// Package ycsb drives YCSB-style workloads (paper §6.1: 8-byte keys,
// 128-byte values, point lookups and point updates) against an Engine and
// measures throughput and latency percentiles. Keys are chosen uniformly or
// with YCSB's scrambled zipfian (go-ycsb's generator).
//
// It imports no engine: cmd/scalestore plugs them in.
package ycsb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/pingcap/go-ycsb/pkg/generator"
	"github.com/pingcap/go-ycsb/pkg/util"

	"github.com/scalestore-go/scalestore/internal/tsc"
)

// Engine is a key-value store under test. It must be safe for concurrent
// use.
type Engine interface {
	Get(key, dst []byte) ([]byte, bool, error)
	Put(key, val []byte) error
}

// BatchGetter is an engine that can look up several keys in one call
// (Config.Batch): found[i] tells whether keys[i] is there and vals[i] is
// its value appended to vals[i][:0].
type BatchGetter interface {
	GetBatch(keys, vals [][]byte, found []bool) error
}

// ThreadEngine is an engine that hands each driver thread a handle of its
// own, for that thread alone (the embedded store's Session, which keeps a
// worker instead of taking one from a pool on every call); done releases
// it. Load and Run use it when the engine has it.
type ThreadEngine interface {
	Engine
	ForThread() (e Engine, done func())
}

// forThread is e's handle for one thread: its own when e is a
// ThreadEngine, else e itself.
func forThread(e Engine) (Engine, func()) {
	if te, ok := e.(ThreadEngine); ok {
		return te.ForThread()
	}
	return e, func() {}
}

type engineWithBatches interface {
	Engine
	BatchGetter
}

// MaxBatch bounds Config.Batch.
const MaxBatch = 256

// Config is one YCSB run.
type Config struct {
	Records   int
	ReadRatio float64
	Zipf      float64 // 0: uniform; YCSB's default is 0.99
	Threads   int
	Duration  time.Duration
	Warmup    time.Duration
	Seed      int64
	// Hashed uses the hashed key order (HashedKey) instead of the ordered
	// one (Key).
	Hashed bool
	// Batch, above 1, has each thread issue its reads Batch at a time
	// through the engine's GetBatch (an engine without one gets them one
	// by one), as a client with that many lookups outstanding would. Each
	// read of a batch is recorded with the batch's latency. Updates are
	// issued one at a time as they come.
	Batch int
	// Progress, when set, receives a progress line while loading and running.
	Progress io.Writer
	// OnMeasure and OnStop, when set, are called as the measured window
	// opens (after the warm-up) and closes, so an engine's own counters
	// (cache hits, SSD reads) can be read over the same window.
	OnMeasure, OnStop func()
	// Interrupt, when closed, ends Load and Run early with ErrInterrupted
	// (the operations under way finish first).
	Interrupt <-chan struct{}
}

// ErrInterrupted is returned by Load and Run when Config.Interrupt closed.
var ErrInterrupted = errors.New("ycsb: interrupted")

// interrupted reports whether cfg's Interrupt has closed.
func (cfg *Config) interrupted() bool {
	select {
	case <-cfg.Interrupt:
		return true
	default:
		return false
	}
}

// sleep waits for d or for Interrupt, and reports whether it was
// interrupted.
func (cfg *Config) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false
	case <-cfg.Interrupt:
		return true
	}
}

// ValueSize is the size of every value (paper §6.1).
const ValueSize = 128

// Result is what a run measured.
type Result struct {
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`
	Seconds   float64 `json:"seconds"`
	LoadSecs  float64 `json:"load_seconds"`
	// Clock is the clock that timed the operations (package tsc): "tsc"
	// or "monotonic".
	Clock string `json:"clock"`
}

// Key writes record i's key in the ordered key order: i itself, big
// endian, so that records are loaded in key order.
func Key(b []byte, i int64) []byte { return binary.BigEndian.AppendUint64(b[:0], uint64(i)) }

// HashedKey writes record i's key in the hashed key order (YCSB's default
// insertorder=hashed): i through a bijective 64-bit mixer (the finalizer of
// splitmix64: xor-shifts and multiplications by odd constants, each
// invertible), so keys stay unique but neither their order nor their
// spacing follows i.
func HashedKey(b []byte, i int64) []byte {
	x := uint64(i)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return binary.BigEndian.AppendUint64(b[:0], x)
}

// KeyFunc is Key or HashedKey.
type KeyFunc func(b []byte, i int64) []byte

// KeyOrder names a key order: "ordered" (Key, the default) or "hashed"
// (HashedKey).
func KeyOrder(name string) (KeyFunc, error) {
	switch name {
	case "", "ordered":
		return Key, nil
	case "hashed":
		return HashedKey, nil
	}
	return nil, fmt.Errorf("ycsb: key order %q: want ordered or hashed", name)
}

// key is the key function cfg.Hashed selects.
func (cfg *Config) key() KeyFunc {
	if cfg.Hashed {
		return HashedKey
	}
	return Key
}

// Load inserts records 0..Records-1 with random values, on Threads
// goroutines.
func Load(e Engine, cfg Config) (time.Duration, error) {
	start := time.Now()
	var done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	stop := make(chan struct{})
	if cfg.Progress != nil {
		go func() {
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					fmt.Fprintf(cfg.Progress, "\rload %d/%d records (%.0f%%) ", done.Load(), cfg.Records, 100*float64(done.Load())/float64(cfg.Records))
				}
			}
		}()
	}
	per := (cfg.Records + cfg.Threads - 1) / cfg.Threads
	keyOf := cfg.key()
	for t := range cfg.Threads {
		lo, hi := t*per, min((t+1)*per, cfg.Records)
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, release := forThread(e)
			defer release()
			r := rand.New(rand.NewSource(cfg.Seed + int64(t)))
			var kb [8]byte
			val := make([]byte, ValueSize)
			for i := lo; i < hi; i++ {
				if i%1024 == 0 && cfg.interrupted() {
					firstErr.CompareAndSwap(nil, ErrInterrupted)
					return
				}
				r.Read(val)
				if err := e.Put(keyOf(kb[:], int64(i)), val); err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("load record %d: %w", i, err))
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "\rload %d/%d records (100%%) in %.1fs\n", done.Load(), cfg.Records, time.Since(start).Seconds())
	}
	if err, _ := firstErr.Load().(error); err != nil {
		return time.Since(start), err
	}
	return time.Since(start), nil
}

// NewChooser picks record numbers in [0, records): uniformly (theta 0) or
// by YCSB's scrambled zipfian. go-ycsb's ScrambledZipfian has its zeta
// precomputed only for YCSB's constant 0.99 and otherwise sums it over 10^10
// items (minutes); other constants draw from a zipfian over the records
// themselves, scrambled with the same hash.
func NewChooser(records int64, theta float64) func(r *rand.Rand) int64 {
	switch {
	case theta <= 0:
		return func(r *rand.Rand) int64 { return r.Int63n(records) }
	case theta == generator.ZipfianConstant:
		z := generator.NewScrambledZipfian(0, records-1, theta)
		return func(r *rand.Rand) int64 { return z.Next(r) }
	}
	z := generator.NewZipfianWithItems(records, theta)
	return func(r *rand.Rand) int64 { return util.Hash64(z.Next(r)) % records }
}

// Run runs the mix for Warmup (not measured) and then Duration.
func Run(e Engine, cfg Config) (Result, error) {
	clock := tsc.Source() // before the first tsc.Ticks: it picks the clock
	var measuring atomic.Bool
	var stopFlag atomic.Bool
	var firstErr atomic.Value
	hists := make([]*hdrhistogram.Histogram, cfg.Threads)
	counts := make([]int64, cfg.Threads)
	var wg sync.WaitGroup
	for t := range cfg.Threads {
		hists[t] = newHistogram()
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, release := forThread(e)
			defer release()
			r := rand.New(rand.NewSource(cfg.Seed + 1000 + int64(t)))
			choose := NewChooser(int64(cfg.Records), cfg.Zipf)
			pick := func() int64 { return choose(r) }
			keyOf := cfg.key()
			var kb [8]byte
			val := make([]byte, ValueSize)
			buf := make([]byte, 0, ValueSize)
			h := hists[t]
			n := int64(0)
			// Each operation is timed in ticks of package tsc (the CPU's
			// time-stamp counter where it can be trusted, about 10 ns a
			// read in a VM against 30 for the monotonic clock), turned
			// into time at the end by the rate measured over the run.
			// And the clock is read once per operation, at its end: an
			// operation's latency runs from the end of the thread's
			// previous one, so it includes the driver's choice of the
			// key (a few tens of nanoseconds, a value's random bytes for
			// an update), a slight overstatement that saves a clock read
			// (about 3% of a lookup that hits in memory).
			if be, ok := e.(engineWithBatches); ok && cfg.Batch > 1 {
				n = runBatched(be, cfg, r, pick, h, &stopFlag, &measuring, &firstErr)
				counts[t] = n
				return
			}
			last := tsc.Ticks()
			for !stopFlag.Load() {
				key := keyOf(kb[:], pick())
				// No draw for a mix of reads alone (YCSB-C) or updates
				// alone: it would cost a few nanoseconds an operation.
				read := cfg.ReadRatio >= 1 || (cfg.ReadRatio > 0 && r.Float64() < cfg.ReadRatio)
				if !read {
					r.Read(val)
				}
				var err error
				if read {
					buf, _, err = e.Get(key, buf[:0])
				} else {
					err = e.Put(key, val)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				end := tsc.Ticks()
				if measuring.Load() {
					// max: counters of two CPUs may disagree by a few
					// ticks when the thread moves between them.
					_ = h.RecordValue(max(1, int64(end-last)))
					n++
				}
				last = end
			}
			counts[t] = n
		}()
	}
	stopped := cfg.sleep(cfg.Warmup)
	if cfg.OnMeasure != nil {
		cfg.OnMeasure()
	}
	span := tsc.Begin()
	measuring.Store(true)
	start := time.Now()
	end := start.Add(cfg.Duration)
	for !stopped && time.Now().Before(end) {
		stopped = cfg.sleep(min(250*time.Millisecond, time.Until(end)))
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "\rrun %.0fs/%.0fs ", time.Since(start).Seconds(), cfg.Duration.Seconds())
		}
	}
	stopFlag.Store(true)
	elapsed := time.Since(start)
	perNano := span.PerNano()
	if cfg.OnStop != nil {
		cfg.OnStop()
	}
	wg.Wait()
	if cfg.Progress != nil {
		fmt.Fprintln(cfg.Progress)
	}
	if err, _ := firstErr.Load().(error); err != nil {
		return Result{}, err
	}
	if stopped {
		return Result{}, ErrInterrupted
	}
	all := newHistogram()
	var res Result
	for t := range cfg.Threads {
		all.Merge(hists[t])
		res.Ops += counts[t]
	}
	res.Clock = clock
	res.Seconds = elapsed.Seconds()
	res.OpsPerSec = float64(res.Ops) / elapsed.Seconds()
	if perNano > 0 {
		// To the nanosecond: the histogram holds 3 significant digits.
		us := func(q float64) float64 { return math.Round(float64(all.ValueAtQuantile(q))/perNano) / 1000 }
		res.P50us, res.P99us, res.P999us = us(50), us(99), us(99.9)
	}
	return res, nil
}

// newHistogram records latencies in ticks of package tsc: up to 10^12 (at
// least 200 s at 5 GHz), to 3 significant digits.
func newHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(1, 1_000_000_000_000, 3) }

// runBatched is one thread's loop with Config.Batch: it draws Batch
// operations, issues the updates among them one by one and the reads in
// one GetBatch, and returns the operations it measured.
func runBatched(e engineWithBatches, cfg Config, r *rand.Rand, pick func() int64, h *hdrhistogram.Histogram, stop, measuring *atomic.Bool, firstErr *atomic.Value) int64 {
	b := min(cfg.Batch, MaxBatch)
	keyOf := cfg.key()
	keyMem := make([]byte, 8*b)
	keys := make([][]byte, 0, b)
	vals := make([][]byte, b)
	for i := range vals {
		vals[i] = make([]byte, 0, ValueSize)
	}
	found := make([]bool, b)
	val := make([]byte, ValueSize)
	var kb [8]byte
	n := int64(0)
	for !stop.Load() {
		keys = keys[:0]
		for range b {
			i := pick()
			if r.Float64() < cfg.ReadRatio {
				keys = append(keys, keyOf(keyMem[8*len(keys):8*len(keys)], i))
				continue
			}
			r.Read(val)
			start := tsc.Ticks()
			if err := e.Put(keyOf(kb[:], i), val); err != nil {
				firstErr.CompareAndSwap(nil, err)
				return n
			}
			if measuring.Load() {
				_ = h.RecordValue(int64(tsc.Ticks() - start))
				n++
			}
		}
		if len(keys) == 0 {
			continue
		}
		start := tsc.Ticks()
		if err := e.GetBatch(keys, vals[:len(keys)], found[:len(keys)]); err != nil {
			firstErr.CompareAndSwap(nil, err)
			return n
		}
		if measuring.Load() {
			_ = h.RecordValues(int64(tsc.Ticks()-start), int64(len(keys)))
			n += int64(len(keys))
		}
	}
	return n
}
