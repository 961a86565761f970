package scenarios

import "fmt"

// ScaleStoreFigures are the ScaleStore paper's evaluation figures on the
// simulator under the paper model (PaperModel: Table 1's latencies, 20
// workers a node, an operation's CPU calibrated from this engine). They
// reproduce trends, not the absolute figures of the paper's EDR cluster:
// docs/figures.md sets them side by side.
var ScaleStoreFigures = []Figure{
	{Name: "scalestore-fig6", Paper: "ScaleStore Fig. 6",
		About:   "anticipatory chaining against FIFO queues and polling: one worker on each of 5 nodes, all writing one page (contended) or 1,000 pages uniformly (uncontended); an operation takes 3 us of the worker's CPU (Fig6OpNanos)",
		Systems: []string{"chaining", "fifo", "polling"},
		Base:    fig6Base,
		Nodes:   []int{5}, XKey: "access",
		NodePoints: func(b SimConfig, nodes []int) []FigurePoint {
			var ps []FigurePoint
			for _, n := range nodes {
				for _, contended := range []bool{true, false} {
					c := b
					c.Nodes, c.Ops = n, 1000*n
					label := "uncontended"
					c.Pages = 1000
					if contended {
						c.Pages, label = 1, "contended"
					}
					ps = append(ps, FigurePoint{fmt.Sprintf("nodes=%d access=%s", n, label), c})
				}
			}
			return ps
		}},
	{Name: "scalestore-fig6-op", Paper: "ScaleStore Fig. 6, by operation CPU",
		About:   "Fig. 6's contended page under an operation CPU of 0.5 to 6 us: where chaining's one access a transfer overtakes the batches the FIFO queue and polling leave the holder",
		Systems: []string{"chaining", "fifo", "polling"},
		Base:    fig6Base,
		Nodes:   []int{5}, XKey: "op_us",
		NodePoints: func(b SimConfig, nodes []int) []FigurePoint {
			var ps []FigurePoint
			for _, n := range nodes {
				for _, op := range []int64{500, 1_000, 1_500, 2_000, 2_300, 3_000, 4_000, 6_000} {
					c := b
					c.Nodes, c.Ops, c.Pages = n, 1000*n, 1
					c.OpNanos, c.WriteNanos = op, op
					ps = append(ps, FigurePoint{fmt.Sprintf("nodes=%d op_us=%.1f", n, float64(op)/1000), c})
				}
			}
			return ps
		}},
	{Name: "scalestore-fig7", Paper: "ScaleStore Fig. 7",
		About:   "scale-out on a fixed data set (each node caches 150/280 of it): nodes 1-5, partitioned and random accesses, 0%, 5%, 50% and 95% (update heavy) writes",
		Systems: []string{SystemScaleStore},
		Base:    paperBase,
		Nodes:   []int{1, 2, 3, 4, 5}, XKey: "nodes",
		NodePoints: func(b SimConfig, nodes []int) []FigurePoint {
			var ps []FigurePoint
			for _, part := range []bool{true, false} {
				for _, rr := range []float64{1, 0.95, 0.5, 0.05} {
					for _, n := range nodes {
						c := b
						c.Nodes, c.ReadRatio, c.Partitioned, c.Ops = n, rr, part, fig7Ops(n)
						c.CachePages = fig7CachePages
						c.OpNanos, c.WriteNanos = fig7ReadNanos, fig7WriteNanos
						mode := "random"
						if part {
							mode = "partitioned"
						}
						ps = append(ps, FigurePoint{fmt.Sprintf("access=%s writes=%.0f%% nodes=%d", mode, 100*(1-rr), n), c})
					}
				}
			}
			return ps
		}},
	{Name: "scalestore-fig8", Paper: "ScaleStore Fig. 8",
		About:   "skew: read-only on 5 nodes, random accesses, a data set 1.5x the cluster's memory (the rest on SSD), zipf 0 to 0.99",
		Systems: []string{SystemScaleStore},
		Base:    paperBase,
		Nodes:   []int{5}, XKey: "zipf",
		NodePoints: func(b SimConfig, nodes []int) []FigurePoint {
			var ps []FigurePoint
			for _, n := range nodes {
				for _, z := range []float64{0, 0.5, 0.9, 0.99} {
					c := b
					c.Nodes, c.ReadRatio, c.Zipf, c.Ops = n, 1, z, paperOpsPerNode*n
					c.Pages = c.CachePages * n * 3 / 2
					ps = append(ps, FigurePoint{fmt.Sprintf("nodes=%d zipf=%.2f", n, z), c})
				}
			}
			return ps
		}},
	{Name: "scalestore-fig9", Paper: "ScaleStore Fig. 9",
		About:   "workload shift: 5 nodes on their own partitions, each moving to the next node's partition halfway; throughput per tenth of the run, read-only and 50% writes",
		Systems: []string{SystemScaleStore},
		Base:    paperBase,
		Nodes:   []int{5}, Timeline: true,
		NodePoints: func(b SimConfig, nodes []int) []FigurePoint {
			var ps []FigurePoint
			for _, n := range nodes {
				for _, rr := range []float64{1, 0.5} {
					c := b
					c.Nodes, c.ReadRatio, c.Partitioned, c.ShiftAt, c.Ops = n, rr, true, 0.5, 2*paperOpsPerNode*n
					c.Warmup = 0
					ps = append(ps, FigurePoint{fmt.Sprintf("nodes=%d writes=%.0f%%", n, 100*(1-rr)), c})
				}
			}
			return ps
		}},
	{Name: "scalestore-fig10", Paper: "ScaleStore Fig. 10",
		About:   "elasticity: 2 storage nodes and 3 compute nodes (cache, no pages) of which 1, then 2, then 3 work, then 2, then 1; throughput per tenth of the run",
		Systems: []string{SystemScaleStore},
		Base:    paperBase,
		Nodes:   []int{3}, Timeline: true,
		NodePoints: func(b SimConfig, nodes []int) []FigurePoint {
			var ps []FigurePoint
			for _, n := range nodes {
				for _, rr := range []float64{1, 0.5} {
					c := b
					c.Nodes, c.ComputeNodes, c.Elastic, c.ReadRatio = 2, max(n, 2), true, rr
					// Each compute node caches an eighth of the data set (the
					// paper's 10 GB of 250 GB would leave it next to nothing
					// on this scale), so the data stays on the storage nodes.
					c.CachePages, c.Ops, c.Warmup = c.Pages/8, 3*paperOpsPerNode*max(n, 2), 0
					ps = append(ps, FigurePoint{fmt.Sprintf("compute=%d writes=%.0f%%", max(n, 2), 100*(1-rr)), c})
				}
			}
			return ps
		}},
	scaleStoreGAM,
}

// Fig6OpNanos is the CPU of an operation in Fig. 6's micro-benchmark. The
// paper does not give it, and it decides the figure: a node that holds the
// page keeps serving its own worker until a recall arrives, so the FIFO
// queue and polling gain the more accesses from each transfer the cheaper
// an access is, while chaining hands the page on after one
// (scalestore-fig6-op shows the whole range). It is calibrated from the
// one figure the paper reports about the FIFO run: "the directory has two
// times higher throughput than the remote nodes". In this model that
// ratio holds from 2.3 to 4 us an operation (the directory's share 0.33,
// each remote node's 0.17), and not at 2 us (0.25 against 0.19) or 6 us;
// 3 us is the middle of that range. The throughputs then follow, not
// fitted: chaining 24% above FIFO (the paper: 30%) and above polling.
const Fig6OpNanos = 3_000

// fig6Base is Fig. 6's micro-benchmark: the paper model with one worker a
// node, every page cached, writes only and each straight to the exclusive
// latch (Fig. 5's requests), each operation Fig6OpNanos.
func fig6Base() SimConfig {
	c := paperBase()
	c.Workers, c.CachePages, c.ReadRatio, c.DirectWrites = 1, 1024, 0, true
	c.OpNanos, c.WriteNanos = Fig6OpNanos, Fig6OpNanos
	return c
}

// fig7CachePages is Fig. 7's cache per node, of the 1,024 pages: the paper
// caches 150 GB of a 280 GB data set on each node, so that one node spills
// to the SSD and two hold it (each a 140 GB half, partitioned). The page
// provider here keeps a tenth of the frames free, so 548 frames (150/280)
// would leave 494 for a 512-page half and first fit at three nodes; 600
// leave 540.
const fig7CachePages = 600

// Fig. 7's CPU of an operation, from the paper's own partitioned figures
// (its hardware, its 280 GB tree): 50M lookups/s on 5 nodes of 20
// workers is 2 us a lookup; 20M updates/s is 5 us an update.
const (
	fig7ReadNanos  = 2_000
	fig7WriteNanos = 5_000
)

// fig7Ops is the operations of an n-node point of Fig. 7: long enough
// that the warm-up (the first 30%) settles the caches. A node's share of
// the pages (1,024/n) must have been touched (about p ln p uniform
// accesses for p pages), and the set-up's allocation leaves each node
// holding pages of the others', which the first accesses move home
// (evictions with pulls). With paperOpsPerNode a two-node run measured its
// cold misses, and the data set seemed cached only from three nodes on;
// 120,000/n operations a node give the two-node run its steady state.
func fig7Ops(n int) int { return n * max(paperOpsPerNode, 120_000/n) }

// paperOpsPerNode is the operations each node runs in a figure's point:
// enough for every worker to pass its share of the pages many times.
const paperOpsPerNode = 6000

// paperBase is the ScaleStore figures' starting point: the paper model,
// 1,024 pages of which a node caches 548 (the paper's 150 GB cache of a
// 280 GB data set), no faults (a figure measures; the swarm checks), and
// the first 30% of the operations left out as warm-up.
func paperBase() SimConfig {
	c := PaperModel(DefaultSimConfig())
	c.Pages, c.CachePages, c.ReadRatio, c.Zipf, c.Faults, c.Warmup = 1024, 548, 1, 0, "none", 0.3
	return c
}
