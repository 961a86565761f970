package scenarios

import (
	"fmt"
	"os"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

type debugObs struct{ pid protocol.PID }

func (d debugObs) Violation(n protocol.NodeID, err error) {}
func (d debugObs) CopyChanged(n protocol.NodeID, pid protocol.PID, old, now protocol.Mode, data []byte) {
	if pid == d.pid {
		fmt.Printf("   copy node %d %v->%v\n", n, old, now)
	}
}
func (d debugObs) Accepted(dir protocol.NodeID, dec protocol.Decision) {
	if dec.PID == d.pid {
		fmt.Printf("   accept %+v\n", dec)
	}
}
func (d debugObs) Obtained(n protocol.NodeID, pid protocol.PID, m protocol.Mode, w int64) {}

func TestDebugSeed(t *testing.T) {
	if os.Getenv("DEBUG_SEED") == "" {
		t.Skip()
	}
	debugObserver = debugObs{protocol.PID(0)}
	var pid protocol.PID
	fmt.Sscanf(os.Getenv("DEBUG_PID"), "%d", &pid)
	debugObserver = debugObs{pid}
	cfg := DefaultSimConfig()
	fmt.Sscanf(os.Getenv("DEBUG_SEED"), "%d", &cfg.Seed)
	cfg.Faults = "none"
	cfg.Trace = os.Stdout
	res, _ := RunSim(cfg)
	fmt.Println(res.Violations)
}

func TestDebugSeedFull(t *testing.T) {
	if os.Getenv("DEBUG_FULL") == "" {
		t.Skip()
	}
	var pid protocol.PID
	fmt.Sscanf(os.Getenv("DEBUG_PID"), "%d", &pid)
	debugObserver = debugObs{pid}
	cfg := SimConfig{Nodes: 4, Workers: 3, Pages: 48, CachePages: 12, Ops: 2000, ReadRatio: 0.6, Zipf: 0.9, Faults: "heavy"}
	fmt.Sscanf(os.Getenv("DEBUG_FULL"), "%d", &cfg.Seed)
	cfg.Protocol, _ = protocol.ParseVariant(os.Getenv("DEBUG_PROTO"))
	cfg.Trace = os.Stdout
	res, _ := RunSim(cfg)
	fmt.Println(res.Violations)
}
