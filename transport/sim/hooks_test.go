package sim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// faultLog collects what OnFault reports.
type faultLog []string

func (l *faultLog) hook(_ int64, node protocol.NodeID, err error) {
	*l = append(*l, fmt.Sprintf("node %d: %v", node, err))
}

//go:noinline
func coroutineBodyThatPanics() { panic("coroutine boom") }

//go:noinline
func deferThatPanics() { panic("unwinding boom") }

// A coroutine's panic happens in iter.Pull's goroutine and is re-raised in
// the scheduler's: the fault's stack must still be the body's, showing the
// function that panicked.
func TestCoroutinePanicKeepsBodyStack(t *testing.T) {
	w := sim.New(1, 2, sim.DefaultLatency, sim.FaultPlan{})
	var faults faultLog
	w.OnFault = faults.hook
	co := w.Spawn(1, 0, func(*sim.Coroutine) { coroutineBodyThatPanics() })
	drain(t, w)
	if len(faults) != 1 || !strings.HasPrefix(faults[0], "node 1: panic in node 1: coroutine boom\n") {
		t.Fatalf("faults %q", faults)
	}
	if !strings.Contains(faults[0], "coroutineBodyThatPanics") {
		t.Fatalf("the fault's stack does not show where the body panicked:\n%s", faults[0])
	}
	if !co.Done() {
		t.Fatal("the panicking coroutine is not done")
	}
}

// Stop unwinds a parked body; a panic while it unwinds (a deferred call)
// is a fault of its node too, never a crash of Stop's caller.
func TestCoroutinePanicOnStop(t *testing.T) {
	w := sim.New(1, 2, sim.DefaultLatency, sim.FaultPlan{})
	var faults faultLog
	w.OnFault = faults.hook
	co := w.Spawn(0, 0, func(co *sim.Coroutine) {
		defer deferThatPanics()
		co.Park()
	})
	drain(t, w) // parks
	co.Stop()
	if len(faults) != 1 || !strings.HasPrefix(faults[0], "node 0: panic in node 0: unwinding boom\n") ||
		!strings.Contains(faults[0], "deferThatPanics") {
		t.Fatalf("faults %q", faults)
	}
	if !co.Done() {
		t.Fatal("the stopped coroutine is not done")
	}
	co.Stop() // idempotent, no second fault
	if len(faults) != 1 {
		t.Fatalf("a second Stop reported %q", faults[1:])
	}
}
