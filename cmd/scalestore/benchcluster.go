package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/protocols"
)

const benchClusterUsage = `Usage: scalestore bench cluster [--protocols scalestore,selcc] [--nodes 1,2,3]
       [--transports shm,tcp] [--mixes 1,0.95,0.5] [--modes shared,partitioned]
       [--duration 3s] [--json]

Runs 'scalestore cluster' (node processes on this host, YCSB inside them)
for every combination of node count, transport, read ratio and mode, and
prints one table: ops/s, cache hit ratio, remote page fetches and
invalidations per operation, and the remote fetch p50/p99. First it measures
the transports' own page fetch p50 ('bench transport', least of three runs
of --transport-duration each, since shm's is bimodal: fast while its reader
polls, slow once it parks), so each row can be read against the floor of
its transport. "shared" is every node working on all the keys; "partitioned"
is each node on its own share (the paper's Fig. 7 pair); a single node is
the same either way and runs once per transport and mix.

--protocols puts the protocols side by side on the same shapes: scalestore
(the B-tree under YCSB) and selcc ('cluster --protocol selcc': --nodes
compute nodes caching --records lines of one memory node, each operation
reading or writing one line). A SELCC row's remote fetches are its misses
(an acquire: FAA or CAS and the READ of the line), read against the
transport's own FAA+READ p50 (over shm the cold one: lines no CPU cache
holds, as a miss's are). SELCC runs the shared mode and durability none
only.

It prints a progress line per run on stderr and takes about (--duration +
2 s) a run.

Flags:
`

// benchClusterRow is one run of the table.
type benchClusterRow struct {
	Protocol         string  `json:"protocol"`
	Durability       string  `json:"durability"`
	Nodes            int     `json:"nodes"`
	Transport        string  `json:"transport"`
	ReadRatio        float64 `json:"read_ratio"`
	Mode             string  `json:"mode"`
	Threads          int     `json:"threads"`
	OpsPerSec        float64 `json:"ops_per_sec"`
	HitRatio         float64 `json:"cache_hit_ratio"`
	FetchesPerOp     float64 `json:"remote_fetches_per_op"`
	InvalidationsOp  float64 `json:"invalidations_per_op"`
	FetchP50us       float64 `json:"remote_fetch_p50_us"`
	FetchP99us       float64 `json:"remote_fetch_p99_us"`
	TransportFetchUs float64 `json:"transport_page_fetch_p50_us"`
}

func runBenchCluster(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchClusterUsage); fs.PrintDefaults() }
	protocolsFlag := fs.String("protocols", "scalestore", "protocols, separated by commas: scalestore and/or selcc")
	nodesFlag := fs.String("nodes", "1,2,3", "node counts (compute nodes for selcc)")
	over := fs.String("oversubscribed", "3x2", "NxT: for scalestore, every transport and mix, also the shared and the partitioned run of N nodes of T workers, more busy workers than this machine's cores (make run's old shape; the warning's figure); empty: none")
	transports := fs.String("transports", "shm,tcp", "transports, comma-separated: tcp, shm, auto, ibverbs (a binary built with -tags ibverbs on a host with an RDMA device; it has no page-fetch floor, which 'bench transport' measures for tcp and shm only)")
	mixes := fs.String("mixes", "1,0.95,0.5", "read ratios")
	modes := fs.String("modes", "shared,partitioned", "shared, partitioned or both")
	duration := fs.Duration("duration", 3*time.Second, "measured time of each run")
	tdur := fs.Duration("transport-duration", 500*time.Millisecond, "measured time of each 'bench transport' test (three runs)")
	records := fs.Int("records", 100000, "records")
	threads := fs.Int("threads", 1, "worker threads per node")
	zipf := fs.Float64("zipf", 0.99, "zipfian constant (0: uniform)")
	keyOrder := fs.String("key-order", "ordered", "ordered or hashed")
	asJSON := fs.Bool("json", false, "print one JSON object (the rows and the transports' floors) instead of the table")
	durabilities := fs.String("durability", "none", "durability settings to run each row with, separated by commas: none and/or process (write-through; its cost)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	nodeCounts, err := parseInts(*nodesFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bench cluster: --nodes: %v\n", err)
		return 2
	}
	ratios, err := parseFloats(*mixes)
	if err != nil {
		fmt.Fprintf(stderr, "bench cluster: --mixes: %v\n", err)
		return 2
	}
	// Besides ScaleStore, the protocols whose process design takes part
	// (cluster.Design.Bench): each row of one runs shared, with
	// durability none, and its fetches are compared with FAA+READ.
	entries := protocols.Entries()
	benched := designNames(entries, func(d *cluster.Design) bool { return d.Bench })
	protocolList := strings.Split(*protocolsFlag, ",")
	var missTitles []string
	for _, p := range protocolList {
		if p != "scalestore" && !slices.Contains(benched, p) {
			fmt.Fprintf(stderr, "bench cluster: --protocols: %q is neither scalestore nor %s\n", p, strings.Join(benched, " nor "))
			return 2
		}
		if d := designOf(entries, p, false); d != nil && !slices.Contains(missTitles, d.Title) {
			missTitles = append(missTitles, d.Title)
		}
	}
	for _, tr := range strings.Split(*transports, ",") {
		if err := checkTransport("bench cluster", tr); err != nil {
			fmt.Fprintf(stderr, "bench cluster: --transports: %v\n", err)
			return 2
		}
	}
	modeList := strings.Split(*modes, ",")
	for _, m := range modeList {
		if m != "shared" && m != "partitioned" {
			fmt.Fprintf(stderr, "bench cluster: --modes: %q is neither shared nor partitioned\n", m)
			return 2
		}
	}

	// floor: the page fetch p50 by transport; missFloor: FAA+READ's
	// (SELCC's miss), over shm the cold one.
	floor, missFloor := map[string]float64{}, map[string]float64{}
	for i := range 3 {
		fmt.Fprintf(stderr, "bench cluster: transports' page fetch, run %d of 3\n", i+1)
		res, err := benchTransports(*tdur, min(*tdur/5, 100*time.Millisecond), 0, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "bench cluster: bench transport: %v\n", err)
			return 1
		}
		for _, tr := range []string{"shm", "tcp"} {
			v := res[tr+".page_fetch_p50_us"]
			if f, ok := floor[tr]; !ok || v < f {
				floor[tr] = v
			}
			m := res[tr+".faa_read_p50_us"]
			if tr == "shm" {
				m = res["shm.faa_read_cold_p50_us"]
			}
			if f, ok := missFloor[tr]; !ok || m < f {
				missFloor[tr] = m
			}
		}
	}

	overNodes, overThreads := 0, 0
	if *over != "" {
		if _, err := fmt.Sscanf(*over, "%dx%d", &overNodes, &overThreads); err != nil || overNodes < 2 || overThreads < 1 {
			fmt.Fprintf(stderr, "bench cluster: --oversubscribed %q: want NxT, N >= 2 nodes of T >= 1 workers (e.g. 3x2)\n", *over)
			return 2
		}
	}
	var rows []benchClusterRow
	for _, dur := range strings.Split(*durabilities, ",") {
		if dur != "none" && dur != "process" {
			fmt.Fprintf(stderr, "bench cluster: --durability: %q is neither none nor process\n", dur)
			return 2
		}
	}
	for _, proto := range protocolList {
		for _, dur := range strings.Split(*durabilities, ",") {
			verbs := proto != "scalestore" // a design's row: its misses are verbs
			if verbs && dur != "none" {
				continue
			}
			for _, tr := range strings.Split(*transports, ",") {
				for _, ratio := range ratios {
					for _, n := range nodeCounts {
						for _, mode := range modeList {
							if n == 1 && mode == "partitioned" && len(modeList) > 1 || verbs && mode == "partitioned" {
								continue // a single node is the same either way; a design runs shared
							}
							row, err := benchClusterRun(proto, dur, tr, ratio, n, mode, *zipf, *records, *threads, *duration, *keyOrder, stderr)
							if err != nil {
								fmt.Fprintf(stderr, "bench cluster: %v\n", err)
								return 1
							}
							row.TransportFetchUs = floor[tr]
							if verbs {
								row.TransportFetchUs = missFloor[tr]
							}
							rows = append(rows, row)
						}
					}
					if proto != "scalestore" || overNodes == 0 {
						continue
					}
					for _, mode := range []string{"shared", "partitioned"} {
						row, err := benchClusterRun(proto, dur, tr, ratio, overNodes, mode, *zipf, *records, overThreads, *duration, *keyOrder, stderr)
						if err != nil {
							fmt.Fprintf(stderr, "bench cluster: %v\n", err)
							return 1
						}
						row.TransportFetchUs = floor[tr]
						rows = append(rows, row)
					}
				}
			}
		}
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"transport_page_fetch_p50_us": floor, "transport_faa_read_p50_us": missFloor, "rows": rows,
			"records": *records, "threads": *threads, "zipf": *zipf, "key_order": *keyOrder, "duration_sec": duration.Seconds()})
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "transports' own page fetch p50 (least of three): shm %.2fus, tcp %.1fus\n", floor["shm"], floor["tcp"])
	if len(missTitles) > 0 {
		fmt.Fprintf(stdout, "transports' own FAA+READ p50 (a %s miss's verbs; least of three): shm %.2fus (cold lines), tcp %.1fus\n",
			strings.Join(missTitles, " or "), missFloor["shm"], missFloor["tcp"])
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(stdout, "busy: the workers of all nodes against this machine's %d cores (more than the cores: a fetch waits for the OS to schedule its peer)\n", runtime.NumCPU())
	fmt.Fprintln(tw, "protocol\tdurability\tnodes\tthreads\tbusy\ttransport\treads\tmode\tops/s\thit ratio\tfetches/op\tinval/op\tfetch p50 us\tfetch p99 us\tp50 / transport\t")
	for _, r := range rows {
		ratio := "-"
		if r.FetchP50us > 0 && r.TransportFetchUs > 0 {
			ratio = fmt.Sprintf("%.1fx", r.FetchP50us/r.TransportFetchUs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d/%d\t%s\t%.0f%%\t%s\t%.0f\t%.3f\t%.4f\t%.4f\t%.1f\t%.1f\t%s\t\n", r.Protocol, r.Durability, r.Nodes, r.Threads,
			r.Nodes*r.Threads, runtime.NumCPU(), r.Transport, 100*r.ReadRatio, r.Mode,
			r.OpsPerSec, r.HitRatio, r.FetchesPerOp, r.InvalidationsOp, r.FetchP50us, r.FetchP99us, ratio)
	}
	tw.Flush()
	return 0
}

// benchClusterRun runs one 'cluster' of the table and reads its result.
func benchClusterRun(proto, dur, tr string, ratio float64, n int, mode string, zipf float64, records, threads int,
	duration time.Duration, keyOrder string, stderr io.Writer) (benchClusterRow, error) {
	a := []string{"--protocol", proto, "--nodes", strconv.Itoa(n), "--transport", tr, "--read-ratio", strconv.FormatFloat(ratio, 'g', -1, 64),
		"--zipf", strconv.FormatFloat(zipf, 'g', -1, 64), "--records", strconv.Itoa(records),
		"--threads", strconv.Itoa(threads), "--duration", duration.String(), "--json", "--quiet"}
	if proto == "scalestore" {
		a = append(a, "--key-order", keyOrder, "--durability", dur)
	}
	if mode == "partitioned" {
		a = append(a, "--partitioned")
	}
	fmt.Fprintf(stderr, "bench cluster: %s, %d node(s), %s, read ratio %g, %s\n", proto, n, tr, ratio, mode)
	var out, errOut bytes.Buffer
	if code := runCluster(a, &out, &errOut); code != 0 {
		return benchClusterRow{}, fmt.Errorf("cluster %s: exit %d\n%s", strings.Join(a, " "), code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res clusterResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		return benchClusterRow{}, fmt.Errorf("reading cluster's result: %v\n%s", err, out.String())
	}
	row := benchClusterRow{Protocol: proto, Durability: dur, Nodes: n, Threads: threads, Transport: tr, ReadRatio: ratio, Mode: mode, OpsPerSec: res.OpsPerSec,
		HitRatio: res.HitRatio, FetchP50us: res.FetchP50us, FetchP99us: res.FetchP99us}
	if n == 1 {
		row.Mode = "-"
	}
	if res.Ops > 0 {
		row.FetchesPerOp = float64(res.RemotePageFetches) / float64(res.Ops)
		row.InvalidationsOp = float64(res.Invalidations) / float64(res.Ops)
	}
	return row, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 || v > 1 {
			return nil, fmt.Errorf("%q: want ratios in 0..1 separated by commas", s)
		}
		out = append(out, v)
	}
	return out, nil
}
