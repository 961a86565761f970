package scenarios

import (
	"fmt"

	"github.com/scalestore-go/scalestore/gam"
)

// scaleStoreGAM is ScaleStore §6.4's table: ScaleStore against GAM in
// GAM's own layout (every node a home and a cache), a single-node
// scale-up (1 and 20 threads) and a single-thread scale-out (2 and 4
// nodes), at 100% and 50% reads, under the paper model (every system's
// worker spends the paper model's CPU on an operation before its access).
// The data set fits in every node's memory, as the paper's 30 GB does.
var scaleStoreGAM = Figure{
	Name: "scalestore-gam", Paper: "ScaleStore §6.4",
	About:   "ScaleStore against GAM (TSO and SEQ, every node a home and a cache): 1 node of 1 and 20 threads, 2 and 4 nodes of 1 thread; 100% and 50% reads, uniform over 128 pages that every node caches",
	Systems: []string{SystemScaleStore, gam.NameTSO, gam.NameSEQ}, SkipStepChecks: true,
	Base: func() SimConfig {
		c := paperBase()
		c.Pages, c.CachePages = scaleStoreGAMPages, 2*scaleStoreGAMPages // in memory, no SSD
		return c
	},
	Points: func(b SimConfig) []FigurePoint {
		var ps []FigurePoint
		for _, rr := range []float64{1, 0.5} {
			for _, sh := range []struct {
				setup          string
				nodes, threads int
			}{{"scale-up", 1, 1}, {"scale-up", 1, 20}, {"scale-out", 2, 1}, {"scale-out", 4, 1}} {
				c := b
				c.ReadRatio, c.Nodes, c.Workers = rr, sh.nodes, sh.threads
				c.Ops = scaleStoreGAMOps * sh.nodes * sh.threads
				ps = append(ps, FigurePoint{fmt.Sprintf("reads=%.0f%% %s nodes=%d threads=%d", rr*100, sh.setup, sh.nodes, sh.threads), c})
			}
		}
		return ps
	},
}

// scaleStoreGAMOps is the operations of each thread in scalestore-gam.
const scaleStoreGAMOps = 2000

// scaleStoreGAMPages is scalestore-gam's data set: every node caches all
// of it, and a run's 2,000 operations a thread find it warm after the
// warm-up share (ScaleStore loads a page from its SSD on its first access).
const scaleStoreGAMPages = 128
