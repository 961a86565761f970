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

// A frame is checked against the link it travelled on, as behind a real
// transport: one whose sender or receiver bytes name other nodes (a node
// outside the world too) is a fault of the receiving end, never delivered
// to anyone, and never a panic.
func TestFrameMustNameItsLink(t *testing.T) {
	w := sim.New(1, 3, sim.DefaultLatency, sim.FaultPlan{})
	var faults faultLog
	w.OnFault = faults.hook
	var got []protocol.Message
	for i := range 3 {
		w.Attach(protocol.NodeID(i), receiverFunc(func(m *protocol.Message, _ []byte) { got = append(got, *m) }))
	}
	for _, mutate := range []func(frame []byte){
		func(frame []byte) { frame[2] = 2 },   // From: node 2 instead of 0
		func(frame []byte) { frame[3] = 2 },   // To: node 2 instead of 1
		func(frame []byte) { frame[3] = 200 }, // To: no such node
	} {
		w.MutateFrame = mutate
		w.Send(msg(0, 1, 7), nil)
	}
	w.MutateFrame = nil
	w.Send(msg(0, 1, 8), nil)
	drain(t, w)
	want := []string{
		"node 1: sim: a frame on link 0->1 claims to come from node 2, dropped",
		"node 1: sim: a frame on link 0->1 is for node 2, dropped",
		"node 1: sim: a frame on link 0->1 is for node 200, dropped",
	}
	if len(faults) != len(want) {
		t.Fatalf("faults %q, want %d", faults, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(faults[i], want[i]) {
			t.Errorf("fault %d = %q, want %q", i, faults[i], want[i])
		}
	}
	if len(got) != 1 || got[0].PID != 8 || w.Messages != 1 {
		t.Fatalf("delivered %+v (Messages = %d), want only the intact frame", got, w.Messages)
	}
}

// Failed keeps the first fault, with its time and node, whether OnFault is
// set or Step panicked with it; the world itself goes on.
func TestFailedKeepsTheFirstFault(t *testing.T) {
	w := sim.New(1, 2, sim.DefaultLatency, sim.FaultPlan{})
	var faults faultLog
	w.OnFault = faults.hook
	ran := false
	w.At(0, 10, func() {})
	drain(t, w)
	if err := w.Failed(); err != nil {
		t.Fatalf("Failed = %v before any fault", err)
	}
	w.At(1, 20, func() { panic("first") })
	w.At(0, 30, func() { panic("second") })
	w.At(0, 40, func() { ran = true })
	drain(t, w)
	err := w.Failed()
	if err == nil || !strings.HasPrefix(err.Error(), "t=20ns node 1: panic in node 1: first\n") {
		t.Fatalf("Failed = %v, want the first fault", err)
	}
	if len(faults) != 2 || !ran {
		t.Fatalf("faults %d, later event ran %v: the world did not go on", len(faults), ran)
	}

	w = sim.New(1, 2, sim.DefaultLatency, sim.FaultPlan{})
	w.At(0, 5, func() { panic("unhooked") })
	func() {
		defer func() { _ = recover() }()
		w.Step()
	}()
	if err := w.Failed(); err == nil || !strings.Contains(err.Error(), "unhooked") {
		t.Fatalf("without OnFault, Failed = %v", err)
	}
}

// A message costs no allocation once the world's pools are warm: the frame
// lives in the event, the decoded message in the world, the payload in a
// recycled page.
func TestMessagesDoNotAllocate(t *testing.T) {
	w := sim.New(1, 2, sim.DefaultLatency, sim.FaultPlan{})
	var n int
	sink := receiverFunc(func(m *protocol.Message, p []byte) { n += len(p) + int(m.Pred) })
	w.Attach(0, sink)
	w.Attach(1, sink)
	w.MutateFrame = func(frame []byte) {}
	page := make([]byte, protocol.PageSize)
	grant := &protocol.Message{Type: protocol.TTransferReply, From: 0, To: 1, PID: 3, Mode: protocol.ModeShared}
	xfer := &protocol.Message{Type: protocol.TTransfer, From: 1, To: 0, PID: 3, Mode: protocol.ModeExclusive, Epoch: 4, K: 1, Pred: 2}
	round := func() {
		w.Send(grant, page)
		w.Send(xfer, nil)
		for w.Step() {
		}
	}
	round() // warm the pools
	if a := testing.AllocsPerRun(1000, round); a != 0 {
		t.Fatalf("%v allocations per two messages", a)
	}
}

// BenchmarkSendStep is one message with a page through the codec and the
// scheduler.
func BenchmarkSendStep(b *testing.B) {
	w := sim.New(1, 2, sim.DefaultLatency, sim.FaultPlan{})
	sink := receiverFunc(func(*protocol.Message, []byte) {})
	w.Attach(0, sink)
	w.Attach(1, sink)
	page := make([]byte, protocol.PageSize)
	m := &protocol.Message{Type: protocol.TTransferReply, From: 0, To: 1, PID: 3, Mode: protocol.ModeShared}
	b.ReportAllocs()
	for b.Loop() {
		w.Send(m, page)
		w.Step()
	}
}

// BenchmarkTimerStep: a world of 4 nodes whose only events are periodic
// timers (the page provider's ticks are most of the swarm's events).
func BenchmarkTimerStep(b *testing.B) {
	w := sim.New(1, 4, sim.Latency{}, sim.FaultPlan{})
	for i := range 4 {
		var tick func()
		tick = func() { w.After(protocol.NodeID(i), 20_000+int64(i)*7, tick) }
		w.After(protocol.NodeID(i), int64(i), tick)
	}
	b.ResetTimer()
	for range b.N {
		w.Step()
	}
}
