package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const benchClusterUsage = `Usage: scalestore bench cluster [--nodes 1,2,3] [--transports shm,tcp]
       [--mixes 1,0.95,0.5] [--modes shared,partitioned] [--duration 3s] [--json]

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

It prints a progress line per run on stderr and takes about (--duration +
2 s) a run.

Flags:
`

// benchClusterRow is one run of the table.
type benchClusterRow struct {
	Durability       string  `json:"durability"`
	Nodes            int     `json:"nodes"`
	Transport        string  `json:"transport"`
	ReadRatio        float64 `json:"read_ratio"`
	Mode             string  `json:"mode"`
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
	nodesFlag := fs.String("nodes", "1,2,3", "node counts")
	transports := fs.String("transports", "shm,tcp", "transports")
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
	modeList := strings.Split(*modes, ",")
	for _, m := range modeList {
		if m != "shared" && m != "partitioned" {
			fmt.Fprintf(stderr, "bench cluster: --modes: %q is neither shared nor partitioned\n", m)
			return 2
		}
	}

	floor := map[string]float64{}
	for i := range 3 {
		fmt.Fprintf(stderr, "bench cluster: transports' page fetch, run %d of 3\n", i+1)
		res, err := benchTransports(*tdur, 0, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "bench cluster: bench transport: %v\n", err)
			return 1
		}
		for _, tr := range []string{"shm", "tcp"} {
			v := res[tr+".page_fetch_p50_us"]
			if f, ok := floor[tr]; !ok || v < f {
				floor[tr] = v
			}
		}
	}

	var rows []benchClusterRow
	for _, dur := range strings.Split(*durabilities, ",") {
		if dur != "none" && dur != "process" {
			fmt.Fprintf(stderr, "bench cluster: --durability: %q is neither none nor process\n", dur)
			return 2
		}
		for _, tr := range strings.Split(*transports, ",") {
			for _, ratio := range ratios {
				for _, n := range nodeCounts {
					for _, mode := range modeList {
						if n == 1 && mode == "partitioned" && len(modeList) > 1 {
							continue // a single node is the same either way
						}
						a := []string{"--nodes", strconv.Itoa(n), "--transport", tr, "--read-ratio", strconv.FormatFloat(ratio, 'g', -1, 64),
							"--zipf", strconv.FormatFloat(*zipf, 'g', -1, 64), "--records", strconv.Itoa(*records),
							"--threads", strconv.Itoa(*threads), "--duration", duration.String(), "--key-order", *keyOrder, "--json", "--quiet",
							"--durability", dur}
						if mode == "partitioned" {
							a = append(a, "--partitioned")
						}
						fmt.Fprintf(stderr, "bench cluster: %d node(s), %s, read ratio %g, %s\n", n, tr, ratio, mode)
						var out, errOut bytes.Buffer
						if code := runCluster(a, &out, &errOut); code != 0 {
							fmt.Fprintf(stderr, "bench cluster: cluster %s: exit %d\n%s", strings.Join(a, " "), code, errOut.String())
							return 1
						}
						lines := strings.Split(strings.TrimSpace(out.String()), "\n")
						var res clusterResult
						if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
							fmt.Fprintf(stderr, "bench cluster: reading cluster's result: %v\n%s", err, out.String())
							return 1
						}
						row := benchClusterRow{Durability: dur, Nodes: n, Transport: tr, ReadRatio: ratio, Mode: mode, OpsPerSec: res.OpsPerSec,
							HitRatio: res.HitRatio, FetchP50us: res.FetchP50us, FetchP99us: res.FetchP99us, TransportFetchUs: floor[tr]}
						if n == 1 {
							row.Mode = "-"
						}
						if res.Ops > 0 {
							row.FetchesPerOp = float64(res.RemotePageFetches) / float64(res.Ops)
							row.InvalidationsOp = float64(res.Invalidations) / float64(res.Ops)
						}
						rows = append(rows, row)
					}
				}
			}
		}
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"transport_page_fetch_p50_us": floor, "rows": rows,
			"records": *records, "threads": *threads, "zipf": *zipf, "key_order": *keyOrder, "duration_sec": duration.Seconds()})
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "transports' own page fetch p50 (least of three): shm %.2fus, tcp %.1fus\n", floor["shm"], floor["tcp"])
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "durability\tnodes\ttransport\treads\tmode\tops/s\thit ratio\tfetches/op\tinval/op\tfetch p50 us\tfetch p99 us\tp50 / transport\t")
	for _, r := range rows {
		ratio := "-"
		if r.FetchP50us > 0 && r.TransportFetchUs > 0 {
			ratio = fmt.Sprintf("%.1fx", r.FetchP50us/r.TransportFetchUs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f%%\t%s\t%.0f\t%.3f\t%.4f\t%.4f\t%.1f\t%.1f\t%s\t\n", r.Durability, r.Nodes, r.Transport, 100*r.ReadRatio, r.Mode,
			r.OpsPerSec, r.HitRatio, r.FetchesPerOp, r.InvalidationsOp, r.FetchP50us, r.FetchP99us, ratio)
	}
	tw.Flush()
	return 0
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
