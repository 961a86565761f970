package indexproc

import (
	"flag"
	"fmt"
	"io"

	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/index/indexdesign"
	"github.com/scalestore-go/scalestore/index/nam"
)

// defaultKeys is --records of `cluster --workload NAME` unless given: a
// history per key that porcupine checks in seconds.
const defaultKeys = 10_000

// Design is the index designs' code for `scalestore cluster --workload
// nam-cg|nam-fg|nam-hybrid|cell` and `node`: --nodes compute node
// processes (ids 0..C-1) and --memory-nodes memory servers (C..), gets,
// scans, puts and deletes of --records keys for --duration, and with
// --check porcupine per key on the whole history. A message a node
// refused (malformed, unexpected, a reply nobody waits for) is a
// violation. One Design runs every index design; its hooks get the
// design's registered name.
func Design() *cluster.Design {
	var search string
	var megaNodes, headGroup int
	var headNodes bool
	headsOf := func(name string) int {
		if headNodes && indexdesign.HeadNodes(name) {
			return headGroup
		}
		return 0
	}
	return &cluster.Design{
		Title:      "index",
		ByWorkload: true,
		ClusterFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&search, "search", "selector", "--workload cell: how clients search meganodes: selector, server or client")
			fs.BoolVar(&headNodes, "head-nodes", true, "--workload nam-fg or nam-hybrid: head nodes on the leaf level (paper §4.3): compute node 0 runs the background pass that installs and refreshes them (50ms between passes), and scans prefetch the leaves a head node lists in one batch of READs (in flight together over tcp, back to back over shm, where that measured faster); the run prints the round trips and READs per scan; false: none (the other workloads ignore it)")
			fs.IntVar(&headGroup, "head-group", nam.DefaultHeadGroup, fmt.Sprintf("with --head-nodes: the leaves a head node lists (2..%d)", nam.MaxFanout))
			fs.IntVar(&megaNodes, "cell-mega-nodes", 0, "--workload cell: a leaf meganode of more nodes than this splits in two (Cell's copy, relink, invalidate, run by its server while clients read it); 0: never")
		},
		NodeFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&search, "search", "selector", "--protocol cell: selector, server or client")
			fs.IntVar(&megaNodes, "cell-mega-nodes", 0, "--protocol cell, a memory server: a leaf meganode of more nodes than this splits (0: never)")
			fs.BoolVar(&headNodes, "head-nodes", true, "--protocol nam-fg or nam-hybrid: head nodes on the leaf level (compute node 0 runs the background pass; scans prefetch leaves through them); false: none")
			fs.IntVar(&headGroup, "head-group", nam.DefaultHeadGroup, fmt.Sprintf("an index design, with --head-nodes: the leaves a head node lists (2..%d)", nam.MaxFanout))
		},
		Plan: func(name string, c cluster.ClusterConfig) (cluster.Plan, error) {
			records := c.Records
			if !c.RecordsSet {
				records = defaultKeys
			}
			if headGroup < 2 || headGroup > nam.MaxFanout {
				return cluster.Plan{}, fmt.Errorf("--head-group %d: want 2..%d leaves per head node", headGroup, nam.MaxFanout)
			}
			if c.ScanLen < 1 {
				return cluster.Plan{}, fmt.Errorf("--scan-len %d: want at least 1 key", c.ScanLen)
			}
			return cluster.Plan{Records: records,
				NodeArgs: []string{"--keys", fmt.Sprint(records), "--computes", fmt.Sprint(c.Nodes),
					"--servers", fmt.Sprint(c.MemoryNodes), "--search", search, "--cell-mega-nodes", fmt.Sprint(megaNodes),
					"--head-nodes=" + fmt.Sprint(headNodes), "--head-group", fmt.Sprint(headGroup)},
				Running: fmt.Sprintf("%s: %d compute nodes of %d threads and %d memory servers over %s, %d keys; running for %v\n",
					name, c.Nodes, c.Threads, c.MemoryNodes, c.Transport, records, c.Duration),
				Dropped:   "the nodes refused %d messages (see the log)",
				HeadGroup: headsOf(name),
				Report: func(r cluster.Report) string {
					out := fmt.Sprintf("%s: %d memory servers; %d compute nodes over %s: %.0f ops/s  p50 %.1fus  p99 %.1fus  %s\n",
						r.Name, r.MemoryNodes, r.Nodes, r.Transport, r.OpsPerSec, r.P50us, r.P99us, r.Check)
					if indexdesign.IsNAM(r.Name) && r.Scans > 0 {
						heads := "no head nodes"
						if r.HeadGroup > 0 {
							heads = fmt.Sprintf("head nodes of %d leaves", r.HeadGroup)
						}
						out += fmt.Sprintf("  scans %d of 1..%d keys: mean %.1fus, round trips waited for per scan %.2f, READs %.2f (%s)\n",
							r.Scans, r.ScanLen, r.ScanMeanUs, r.ScanRoundTrips, r.ScanReads, heads)
					}
					return out
				}}, nil
		},
		Serve: func(name string, d cluster.DesignNode, in io.Reader, out io.Writer) error {
			if headGroup < 2 || headGroup > nam.MaxFanout {
				return fmt.Errorf("--head-group %d: want 2..%d leaves per head node", headGroup, nam.MaxFanout)
			}
			n, err := NewNode(Config{ID: d.ID, Workload: name, Memory: d.Memory, Computes: d.Computes, Servers: d.Servers,
				Keys: d.Keys, Threads: d.Threads, Search: search, MegaNodes: megaNodes, HeadGroup: headsOf(name),
				NewTransport: d.NewTransport, Logger: d.Logger})
			if err != nil {
				return err
			}
			defer n.Close()
			role := "compute"
			if d.Memory {
				role = "memory"
			}
			d.Logger.Info("index node started", "node", d.ID, "role", role, "workload", name, "transport", d.Transport)
			return Serve(n, in, out)
		},
	}
}
