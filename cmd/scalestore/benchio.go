package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore"
	"github.com/scalestore-go/scalestore/storage/nvme"
)

const benchIOUsage = `Usage: scalestore bench io --data DIR [--depth N] [--duration D] [--pattern P] [--json]

Measures the random 4 KiB reads that the store in DIR (loaded before, e.g.
by 'scalestore ycsb --data DIR') gets from its disk through the engine's own
I/O path: storage/nvme's O_DIRECT reads on io_uring, each page's checksum
verified. It reads the pages the store has written (the region fio's
same-disk baseline reads), uniformly at random, for --duration in each of
the patterns --pattern names (both: depth and workers; all: the three):

  depth    one goroutine keeps --depth reads in flight (fio's pattern:
           --ioengine=io_uring --iodepth=N)
  workers  --depth goroutines with one read each, submitting on one shared
           ring and woken by a reaper goroutine: the engine's pattern for
           --threads N workers that miss the cache, without the engine
  poll     --depth goroutines with one read each that never sleep: while its
           read is out, each reaps the ring itself (no system call) and
           yields; it keeps every CPU busy, and shows what the sleeps and
           wake-ups of 'workers' cost

'depth' is what Go and the store get from the disk at that depth (compare
it with fio's figure for the command printed at the end); 'workers' is the
I/O the engine's workers do, with none of the engine's work between reads.
Set next to 'ycsb --threads N' on the same store (its ssd_reads_per_sec),
they tell how much of a gap to fio is the engine's own. Each pattern prints
reads/s and the process's CPU time a read. The store is only read.

Flags:
`

// maxBenchDepth bounds --depth: as many goroutines and buffers.
const maxBenchDepth = 1024

// ioRun is one measured way of reading.
type ioRun struct {
	Pattern     string  `json:"pattern"`
	Reads       uint64  `json:"reads"`
	Seconds     float64 `json:"seconds"`
	ReadsPerSec float64 `json:"reads_per_sec"`
	CPUus       float64 `json:"cpu_us_per_read"` // user + system time of the process
}

func runBenchIO(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench io", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchIOUsage); fs.PrintDefaults() }
	dir := fs.String("data", "", "directory of a store loaded before (required)")
	depth := fs.Int("depth", 32, "reads in flight: the ring's depth, and the number of workers")
	duration := fs.Duration("duration", 5*time.Second, "measured time of each pattern")
	pattern := fs.String("pattern", "both", "depth, workers, poll, both or all (see above)")
	asJSON := fs.Bool("json", false, "print one JSON object as the last line")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "bench io: unexpected arguments %q\n", fs.Args())
		return 2
	case *dir == "":
		fmt.Fprintln(stderr, "bench io: --data DIR is required (a store loaded by 'scalestore ycsb --data DIR')")
		return 2
	case *depth < 1 || *depth > maxBenchDepth:
		fmt.Fprintf(stderr, "bench io: --depth %d: want 1 to %d\n", *depth, maxBenchDepth)
		return 2
	case *duration <= 0:
		fmt.Fprintln(stderr, "bench io: --duration must be positive")
		return 2
	case !strings.Contains(" depth workers poll both all ", " "+*pattern+" "):
		fmt.Fprintf(stderr, "bench io: --pattern %q: want depth, workers, poll, both or all\n", *pattern)
		return 2
	}
	path := filepath.Join(*dir, scalestore.StoreFile)
	if _, err := os.Stat(path); err != nil {
		fmt.Fprintf(stderr, "bench io: no store in %s (load one with 'scalestore ycsb --data %s'): %v\n", *dir, *dir, err)
		return 2
	}
	pages, err := writtenPages(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "bench io: %v\n", err)
		return 1
	}
	if pages == 0 {
		fmt.Fprintf(stderr, "bench io: the store in %s holds no pages\n", *dir)
		return 2
	}
	s, err := nvme.Open(path, nvme.Options{QueueDepth: *depth})
	if errors.Is(err, nvme.ErrDirectUnsupported) {
		fmt.Fprintf(stderr, "bench io: note: %s refuses O_DIRECT, reads go through the page cache\n", *dir)
		s, err = nvme.Open(path, nvme.Options{QueueDepth: *depth, NoDirect: true})
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench io: %v\n", err)
		return 1
	}
	defer s.Close()
	if s.Engine() != "io_uring" {
		fmt.Fprintf(stderr, "bench io: note: io_uring is unavailable, reads use the %s engine\n", s.Engine())
	}
	bufs, err := unix.Mmap(-1, 0, *depth*nvme.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		fmt.Fprintf(stderr, "bench io: buffers: %v\n", err)
		return 1
	}
	defer unix.Munmap(bufs)

	var runs []ioRun
	for _, p := range []struct {
		name string
		run  func(*nvme.Store, []byte, uint64, int, time.Duration) (uint64, time.Duration, error)
	}{{"depth", readAtDepth}, {"workers", readByWorkers}, {"poll", readByPollers}} {
		chosen := *pattern == p.name || *pattern == "all" || (*pattern == "both" && p.name != "poll")
		if !chosen {
			continue
		}
		cpu0 := cpuTime()
		n, took, err := p.run(s, bufs, pages, *depth, *duration)
		if err != nil {
			fmt.Fprintf(stderr, "bench io: %s: %v\n", p.name, err)
			return 1
		}
		r := ioRun{Pattern: p.name, Reads: n, Seconds: took.Seconds(), ReadsPerSec: float64(n) / took.Seconds()}
		if n > 0 {
			r.CPUus = float64(cpuTime()-cpu0) / float64(n) / 1e3
		}
		runs = append(runs, r)
		fmt.Fprintf(stdout, "%-8s %9.0f reads/s  %5.1f µs CPU a read  (%d reads at depth %d over %d pages)\n",
			r.Pattern, r.ReadsPerSec, r.CPUus, r.Reads, *depth, pages)
	}
	fmt.Fprintf(stdout, "fio on the same pages: fio --name=rr --filename=%s --readonly --offset=%d --size=%d --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=%d --runtime=10 --time_based\n",
		path, nvme.PageSize, pages*nvme.PageSize, *depth)
	if *asJSON {
		b, _ := json.Marshal(struct {
			Pages uint64  `json:"pages"`
			Depth int     `json:"depth"`
			Runs  []ioRun `json:"runs"`
		}{pages, *depth, runs})
		fmt.Fprintln(stdout, string(b))
	}
	return 0
}

// writtenPages is how many pages the store in dir has allocated (slots 0
// to n-1), read through the embedded API with a small cache.
func writtenPages(dir string) (uint64, error) {
	db, err := scalestore.Open(dir, scalestore.Options{CachePages: 64})
	if err != nil {
		return 0, err
	}
	n := db.Stats().Pages
	if err := db.Close(); err != nil {
		return 0, err
	}
	return n, nil
}

// cpuTime is the process's user and system time so far, in nanoseconds.
func cpuTime() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func page(bufs []byte, i int) []byte { return bufs[i*nvme.PageSize : (i+1)*nvme.PageSize] }

// readAtDepth keeps depth reads in flight from this goroutine alone.
func readAtDepth(s *nvme.Store, bufs []byte, pages uint64, depth int, d time.Duration) (uint64, time.Duration, error) {
	rng := rand.New(rand.NewPCG(1, uint64(depth)))
	var n uint64
	var readErr error
	free := make([]int, 0, depth)
	done := make([]func(error), depth)
	for i := range depth {
		free = append(free, i)
		done[i] = func(err error) {
			if err != nil && readErr == nil {
				readErr = err
			}
			n++
			free = append(free, i)
		}
	}
	start := time.Now()
	for time.Since(start) < d && readErr == nil {
		for len(free) > 0 {
			i := free[len(free)-1]
			free = free[:len(free)-1]
			if err := s.ReadAsync(rng.Uint64N(pages), page(bufs, i), done[i]); err != nil {
				return n, time.Since(start), err
			}
		}
		if _, err := s.Poll(1); err != nil {
			return n, time.Since(start), err
		}
	}
	took := time.Since(start)
	counted := n
	for s.InFlight() > 0 { // finish what is in flight before the next pattern
		if _, err := s.Poll(s.InFlight()); err != nil {
			return counted, took, err
		}
	}
	return counted, took, readErr
}

// readByWorkers runs depth goroutines that each submit one read on the
// shared ring (under a mutex, as the engine's workers do) and sleep until a
// reaper goroutine, waiting for completions outside the mutex, reports it.
func readByWorkers(s *nvme.Store, bufs []byte, pages uint64, depth int, d time.Duration) (uint64, time.Duration, error) {
	var (
		mu      sync.Mutex // serialises the store, but for WaitCompletions
		reads   atomic.Uint64
		stop    atomic.Bool
		live    atomic.Int32 // workers not returned yet
		errOnce sync.Once
		readErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { readErr = err })
		stop.Store(true)
	}
	kick := make(chan struct{}, 1) // the reaper sleeps here while nothing is in flight
	dead := make(chan struct{})    // closed when the reaper gives up: nobody reports reads
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		for {
			mu.Lock()
			inflight := s.InFlight()
			mu.Unlock()
			if inflight == 0 {
				if stop.Load() && live.Load() == 0 {
					return
				}
				select {
				case <-kick:
				case <-time.After(10 * time.Millisecond): // look at stop again
				}
				continue
			}
			err := s.WaitCompletions()
			if err == nil {
				mu.Lock()
				_, err = s.Poll(0)
				mu.Unlock()
			}
			if err != nil {
				fail(err)
				close(dead)
				return
			}
		}
	}()
	start := time.Now()
	live.Store(int32(depth))
	for w := range depth {
		go func() {
			defer live.Add(-1)
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			wake := make(chan error, 1)
			done := func(err error) { wake <- err }
			for !stop.Load() {
				mu.Lock()
				err := s.ReadAsync(rng.Uint64N(pages), page(bufs, w), done)
				if err == nil {
					err = s.Submit()
				}
				mu.Unlock()
				if err != nil {
					fail(err)
					return
				}
				select {
				case kick <- struct{}{}:
				default:
				}
				select {
				case err = <-wake:
				case <-dead:
					return
				}
				if err != nil {
					fail(err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	select {
	case <-time.After(d):
	case <-dead:
	}
	n, took := reads.Load(), time.Since(start)
	stop.Store(true)
	<-reaped
	for live.Load() > 0 { // the reaper has gone: the workers return at once
		time.Sleep(time.Millisecond)
	}
	return n, took, readErr
}

// readByPollers runs depth goroutines that each submit one read and, until
// it is done, reap the ring themselves (Poll(0) reads the completion queue
// without a system call) and yield: nobody sleeps, nobody is woken.
func readByPollers(s *nvme.Store, bufs []byte, pages uint64, depth int, d time.Duration) (uint64, time.Duration, error) {
	var (
		mu      sync.Mutex // serialises the store
		reads   atomic.Uint64
		stop    atomic.Bool
		errOnce sync.Once
		readErr error
		workers sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { readErr = err })
		stop.Store(true)
	}
	start := time.Now()
	for w := range depth {
		workers.Add(1)
		go func() {
			defer workers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			var done atomic.Bool
			var doneErr error // written before done is set
			report := func(err error) { doneErr = err; done.Store(true) }
			for !stop.Load() {
				done.Store(false)
				mu.Lock()
				err := s.ReadAsync(rng.Uint64N(pages), page(bufs, w), report)
				if err == nil {
					err = s.Submit()
				}
				mu.Unlock()
				for err == nil && !done.Load() {
					if mu.TryLock() {
						_, err = s.Poll(0)
						mu.Unlock()
					}
					if err == nil && !done.Load() {
						runtime.Gosched()
					}
				}
				if err == nil {
					err = doneErr
				}
				if err != nil {
					fail(err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(d)
	for !stop.Load() && time.Now().Before(deadline) {
		time.Sleep(min(10*time.Millisecond, time.Until(deadline)))
	}
	n, took := reads.Load(), time.Since(start)
	stop.Store(true)
	workers.Wait()
	return n, took, readErr
}
