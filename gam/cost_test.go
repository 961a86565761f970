package gam_test

import (
	"testing"

	"github.com/scalestore-go/scalestore/gam"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
)

// throughput runs p with workers threads a node and returns the accesses
// per simulated second.
func throughput(t *testing.T, p protocolapi.Protocol, workers int, readRatio float64) float64 {
	t.Helper()
	cfg := simrunner.DefaultConfig()
	cfg.Nodes, cfg.Workers, cfg.Keys, cfg.CacheLines = 4, workers, 128, 0
	cfg.Ops, cfg.ReadRatio, cfg.Faults = 8_000, readRatio, "none"
	res, err := simrunner.Run(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatalf("%s %d workers: %v", p.Name, workers, res.Violations)
	}
	return float64(res.Ops) / (float64(res.SimNanos) / 1e9)
}

func TestThreadScaling(t *testing.T) {
	for _, mode := range []gam.Mode{gam.SEQ, gam.TSO} {
		for _, cost := range []gam.Cost{gam.DefaultCost, {Service: 0}} {
			p := gam.New(gam.Options{Mode: mode, Cost: cost})
			for _, rr := range []float64{0.95, 0.5} {
				var line []float64
				for _, w := range []int{1, 2, 4, 8, 16, 32} {
					line = append(line, throughput(t, p, w, rr)/1e6)
				}
				t.Logf("%s service=%d read=%.2f Mops/s by threads 1..32: %.2f", mode, cost.Service, rr, line)
			}
		}
	}
}
