package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"text/tabwriter"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore/ycsb"
)

const benchMemoryUsage = `Usage: scalestore bench memory [--sizes LIST] [--loads N] [--json]

Measures this machine's memory latency the way a B-tree lookup meets it: a
chain of dependent loads (each address comes from the previous load), one per
64-byte line of a working set in random order, so neither the prefetcher nor
out-of-order execution can hide a miss. Each size runs twice: on ordinary 4 KiB
pages and on transparent huge pages (MADV_HUGEPAGE, as the engine maps its
page memory).

A lookup in memory is a handful of such misses per tree level (hash table
bucket, frame, page header, slots, value), so ns/load bounds what a single
thread can reach: at 250 ns, ten dependent misses are 2.5 µs, 400K lookups/s.

Flags:
`

func runBenchMemory(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench memory", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchMemoryUsage); fs.PrintDefaults() }
	sizes := fs.String("sizes", "1MiB,8MiB,64MiB,512MiB", "comma-separated working-set sizes")
	loads := fs.Int("loads", 5_000_000, "dependent loads timed per size and page kind")
	asJSON := fs.Bool("json", false, "print one JSON object: size -> {small_pages_ns, huge_pages_ns}")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *loads <= 0 {
		fmt.Fprintf(stderr, "bench memory: unexpected arguments %q or --loads %d\n", fs.Args(), *loads)
		return 2
	}
	type row struct {
		Size       string  `json:"size"`
		SmallPages float64 `json:"small_pages_ns"`
		HugePages  float64 `json:"huge_pages_ns"`
	}
	var rows []row
	for _, s := range strings.Split(*sizes, ",") {
		n, err := ycsb.ParseSize(strings.TrimSpace(s))
		if err != nil || n < 4096 {
			fmt.Fprintf(stderr, "bench memory: --sizes: %q: want a size of at least 4KiB (%v)\n", s, err)
			return 2
		}
		r := row{Size: strings.TrimSpace(s)}
		for _, huge := range []bool{false, true} {
			ns, err := chaseLatency(int(n), *loads, huge)
			if err != nil {
				fmt.Fprintf(stderr, "bench memory: %v\n", err)
				return 1
			}
			if huge {
				r.HugePages = ns
			} else {
				r.SmallPages = ns
			}
		}
		rows = append(rows, r)
	}
	if *asJSON {
		b, _ := json.Marshal(rows)
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "working set\tns/load, 4 KiB pages\tns/load, huge pages\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t\n", r.Size, r.SmallPages, r.HugePages)
	}
	tw.Flush()
	return 0
}

// chaseLatency times loads dependent loads through a random cycle over the
// cache lines of a fresh anonymous mapping of size bytes.
func chaseLatency(size, loads int, huge bool) (float64, error) {
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return 0, fmt.Errorf("mapping %d bytes: %w", size, err)
	}
	defer unix.Munmap(mem)
	advice := unix.MADV_NOHUGEPAGE
	if huge {
		advice = unix.MADV_HUGEPAGE
	}
	_ = unix.Madvise(mem, advice) // advice only, before the first touch
	const line = 64
	lines := size / line
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), size/8)
	order := rand.New(rand.NewPCG(1, 2)).Perm(lines) // fixed seed: the same cycle every run
	for i, l := range order {
		words[l*line/8] = uint64(order[(i+1)%lines] * line / 8)
	}
	p := uint64(0)
	for range min(loads, lines) { // warm the TLB and caches once round
		p = words[p]
	}
	start := time.Now()
	for range loads {
		p = words[p]
	}
	elapsed := time.Since(start)
	if p == 1 { // keep the chain live; never true (indices are line-aligned)
		return 0, errors.New("impossible")
	}
	return float64(elapsed.Nanoseconds()) / float64(loads), nil
}
