package scenarios

import (
	"fmt"
	"math"

	"github.com/scalestore-go/scalestore/index/indexdesign"
	"github.com/scalestore-go/scalestore/index/nam"
)

// IndexFigure is a named experiment of the index seed papers: points of
// RunIndexBench, one table.
type IndexFigure struct {
	Name, Paper, About string
	Points             func() []IndexPoint
}

// IndexPoint is one row of an index figure.
type IndexPoint struct {
	Label string
	Bench IndexBench
}

// IndexRow is a point with what it measured.
type IndexRow struct {
	Label string `json:"label"`
	IndexBench
	IndexBenchResult
}

// namFigBase: the NAM-tree paper's §6.1 set-up, scaled to the simulator:
// 4 memory servers, 100,000 keys in nodes of up to 16 entries, a server
// spending 2 us of CPU a call and its NIC 0.2 us a verb, 4 ms measured.
func namFigBase(wl string, clients int) IndexBench {
	return IndexBench{Workload: wl, Servers: 4, Clients: clients, Keys: 100_000, Fanout: 16,
		HandleCost: 2_000, VerbCost: 200, Duration: 4_000_000, Seed: 1}
}

// cellFigBase: Cell's Fig. 4 set-up: one server core (6.3 us a
// server-side search: the paper's 158K searches/s), its NIC 0.7 us a READ
// (1.44M READs/s), one meganode level of about six node levels (100,000
// keys, nodes of up to 8 entries), no client caching.
func cellFigBase(search string, clients int) IndexBench {
	return IndexBench{Workload: indexdesign.Cell, Servers: 1, Clients: clients, Keys: 100_000, Fanout: 8,
		HandleCost: 6_300, VerbCost: 700, Search: search, Duration: 10_000_000, Seed: 1}
}

// IndexFigures are the NAM-tree's and Cell's figures this simulator
// reproduces (trends: docs/indexes.md sets them beside the papers').
var IndexFigures = []IndexFigure{
	{Name: "nam-fig7", Paper: "NAM-tree Fig. 7-8", About: "throughput as clients grow: CG, FG and hybrid, point gets and scans of 100 keys, uniform and skewed (80/12/5/3%) partitions, 4 servers",
		Points: func() []IndexPoint {
			var ps []IndexPoint
			for _, skew := range []bool{false, true} {
				for _, scan := range []int{0, 100} {
					for _, wl := range []string{indexdesign.NAMCoarse, indexdesign.NAMFine, indexdesign.NAMHybrid} {
						for _, c := range []int{1, 4, 16, 64} {
							b := namFigBase(wl, c)
							b.Skewed, b.ScanLen = skew, scan
							q := "point"
							if scan > 0 {
								q = fmt.Sprintf("scan %d", scan)
							}
							ps = append(ps, IndexPoint{fmt.Sprintf("%s %s skew=%v clients=%d", wl, q, skew, c), b})
						}
					}
				}
			}
			return ps
		}},
	{Name: "cell-selector", Paper: "Cell Fig. 4, Table 2", About: "server-side, client-side and the locality selector as load grows on one server core (searches of one meganode, no caching)",
		Points: func() []IndexPoint {
			var ps []IndexPoint
			for _, c := range []int{1, 2, 4, 8, 16, 32, 64} {
				for _, s := range []string{"server", "client", "selector"} {
					ps = append(ps, IndexPoint{fmt.Sprintf("%s clients=%d", s, c), cellFigBase(s, c)})
				}
			}
			return ps
		}},
	{Name: "cell-selector-spikes", Paper: "Cell §2.5 (transient conditions)", About: "the locality selector with and without its outlier rejection and history expiry, when the server's CPU stalls now and then (50x for 200 us every 5 ms) or often (30x for 50 us every 500 us); 16 clients, otherwise cell-selector's setting",
		Points: func() []IndexPoint {
			var ps []IndexPoint
			for _, sp := range []Spikes{{}, {Every: 5_000_000, Len: 200_000, Factor: 50}, {Every: 500_000, Len: 50_000, Factor: 30}} {
				for _, s := range []string{"server", "client", "selector"} {
					for _, off := range []bool{false, true} {
						if off && s != "selector" {
							continue
						}
						b := cellFigBase(s, 16)
						b.Spikes, b.NoDefenses = sp, off
						label := s
						if off {
							label = "selector-without-defenses"
						}
						spikes := "none"
						if sp.Every > 0 {
							spikes = fmt.Sprintf("%dx-%dus-every-%dus", sp.Factor, sp.Len/1000, sp.Every/1000)
						}
						ps = append(ps, IndexPoint{fmt.Sprintf("%s spikes=%s", label, spikes), b})
					}
				}
			}
			return ps
		}},
	{Name: "cell-splits", Paper: "Cell Fig. 8", About: "8 clients search while 16 more idle or put new keys that grow the tree (nodes and meganodes split; meganodes past 64 nodes) on one server core: server-side searches against the locality selector; the searches' latency and the meganode splits done",
		Points: func() []IndexPoint {
			var ps []IndexPoint
			for _, bulk := range []bool{false, true} {
				for _, s := range []string{"server", "selector"} {
					b := cellFigBase(s, 8)
					b.Keys, b.MegaNodes, b.Duration = 40_000, 64, 40_000_000
					phase := "writers idle"
					if bulk {
						b.Writers, phase = 16, "16 writers put"
					}
					ps = append(ps, IndexPoint{fmt.Sprintf("%s, %s", s, phase), b})
				}
			}
			return ps
		}},
}

// IndexFigureByName finds an index figure.
func IndexFigureByName(name string) (IndexFigure, bool) {
	for _, f := range IndexFigures {
		if f.Name == name {
			return f, true
		}
	}
	return IndexFigure{}, false
}

// RunIndexFigure runs every point of f.
func RunIndexFigure(f IndexFigure, progress func(string)) ([]IndexRow, error) {
	var rows []IndexRow
	for _, p := range f.Points() {
		if progress != nil {
			progress(p.Label)
		}
		res, err := RunIndexBench(p.Bench)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", p.Label, err)
		}
		rows = append(rows, IndexRow{p.Label, p.Bench, res})
	}
	return rows, nil
}

// NAMModel is the NAM-tree paper's analysis (its Tables 1 and 2) of one
// design and query, extended by round trips and server calls: what a
// query costs with D keys on S servers in nodes of up to M entries.
type NAMModel struct {
	Design string `json:"design"`
	Query  string `json:"query"`
	// RoundTrips: calls plus one-sided verbs; Calls: the servers' CPU
	// work; NetBytes: what crosses the network (verbs' data and calls'
	// payloads and 64-byte frames); MemBytes: the paper's bandwidth per
	// query (H*P plus the leaves read, at whichever side reads them).
	RoundTrips float64 `json:"round_trips"`
	Calls      float64 `json:"calls"`
	NetBytes   float64 `json:"net_bytes"`
	MemBytes   float64 `json:"mem_bytes"`
	Height     float64 `json:"height"`
	// Waits are the round trips the client waits for one after the
	// other: RoundTrips, less the READs a head node let it batch.
	Waits float64 `json:"waits"`
}

// NAMModelParams are the model's symbols (the paper's Table 1).
type NAMModelParams struct {
	Servers int    `json:"servers"` // S
	Keys    uint64 `json:"keys"`    // D
	Fanout  int    `json:"fanout"`  // M: the most entries of a node
	Scan    int    `json:"scan"`    // keys a range query returns
	// HeadGroup, above 0: FG and hybrid leaves have head nodes of that
	// many leaves (the paper's n), fresh, and range queries prefetch.
	HeadGroup int `json:"head_group"`
}

// fill is the expected share of a B-tree node's entries in use after
// random inserts (Yao: ln 2).
var fill = math.Ln2

// ModelNAM evaluates the model for every design, point and range.
func ModelNAM(p NAMModelParams) []NAMModel {
	m := fill * float64(p.Fanout) // entries per node
	height := func(keys float64) float64 {
		h := 1.0 // the leaves
		for n := keys / m; n > 1; n /= m {
			h++
		}
		return h
	}
	const req, hdr, entry = 32, 24, 16 // a call's payloads (the simulator counts no frames)
	call := func(entries float64) float64 { return req + hdr + entries*entry }
	P := float64(nam.NodeSize)
	hFG := height(float64(p.Keys))
	hCG := height(float64(p.Keys) / float64(p.Servers))
	leaves := 1 + float64(p.Scan-1)/m // leaves a scan of Scan keys touches
	scanCalls := math.Ceil(float64(p.Scan) / float64(nam.MaxScanEntries))
	// With head nodes a range query's leaf walk waits for the first leaf,
	// then for its sibling and its head node in one batch, then once per
	// group for the group's leaves and the next head node (the first
	// group's rest counts as one); heads are the head nodes it reads.
	walkWaits, heads := leaves, 0.0
	if n := float64(p.HeadGroup); n > 0 {
		switch {
		case leaves <= 2:
			walkWaits, heads = leaves, leaves-1
		default:
			walkWaits, heads = 3+(leaves-3)/n, 1+(leaves-3)/n
		}
	}
	var out []NAMModel
	for _, d := range []string{"cg", "fg", "hybrid"} {
		for _, q := range []string{"point", "range"} {
			r := NAMModel{Design: "nam-" + d, Query: q}
			switch {
			case d == "cg" && q == "point":
				r.Height, r.Calls, r.RoundTrips = hCG, 1, 1
				r.NetBytes, r.MemBytes = call(0), hCG*P
			case d == "cg":
				r.Height, r.Calls, r.RoundTrips = hCG, scanCalls, scanCalls
				r.NetBytes, r.MemBytes = scanCalls*call(0)+float64(p.Scan)*entry, hCG*P+(leaves-1)*P
			case d == "fg" && q == "point":
				r.Height, r.RoundTrips = hFG, hFG
				r.NetBytes, r.MemBytes = hFG*P, hFG*P
			case d == "fg":
				r.Height, r.RoundTrips = hFG, hFG-1+leaves+heads
				r.NetBytes, r.MemBytes = r.RoundTrips*P, r.RoundTrips*P
				r.Waits = hFG - 1 + walkWaits
			case q == "point": // hybrid: a locate call, then the leaf
				r.Height, r.Calls, r.RoundTrips = hFG, 1, 2
				r.NetBytes, r.MemBytes = call(0)+P, hFG*P
			default:
				r.Height, r.Calls, r.RoundTrips = hFG, 1, 1+leaves+heads
				r.NetBytes, r.MemBytes = call(0)+(leaves+heads)*P, (hFG-1)*P+(leaves+heads)*P
				r.Waits = 1 + walkWaits
			}
			if r.Waits == 0 {
				r.Waits = r.RoundTrips
			}
			out = append(out, r)
		}
	}
	return out
}
