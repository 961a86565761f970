package sim_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// arrival is one delivered message as a receiver saw it.
type arrival struct {
	at      int64
	from    protocol.NodeID
	to      protocol.NodeID
	pid     protocol.PID
	payload []byte
}

// recorder is a sim.Receiver that keeps copies of what it got.
type recorder struct {
	w    *sim.World
	got  []arrival
	hook func(m *protocol.Message)
}

func (r *recorder) Deliver(m *protocol.Message, payload []byte) {
	r.got = append(r.got, arrival{at: r.w.Now(), from: m.From, to: m.To, pid: m.PID, payload: bytes.Clone(payload)})
	if r.hook != nil {
		r.hook(m)
	}
}

func msg(from, to protocol.NodeID, pid int) *protocol.Message {
	return &protocol.Message{Type: protocol.TInvalidateAck, From: from, To: to, PID: protocol.PID(pid)}
}

// carrying is a message of a type that travels with n payload bytes (0, a
// page, or whole eviction entries), as the codec's rules require.
func carrying(from, to protocol.NodeID, pid int, n int) *protocol.Message {
	switch {
	case n == protocol.PageSize:
		return &protocol.Message{Type: protocol.TTransferReply, From: from, To: to, PID: protocol.PID(pid), Mode: protocol.ModeShared}
	case n > 0:
		return &protocol.Message{Type: protocol.TEvict, From: from, To: to, Count: uint16(n / protocol.EvictEntrySize)}
	}
	return msg(from, to, pid)
}

// newWorld makes a world of n nodes, all attached to one recorder.
func newWorld(seed uint64, n int, plan sim.FaultPlan) (*sim.World, *recorder) {
	w := sim.New(seed, n, sim.DefaultLatency, plan)
	r := &recorder{w: w}
	for i := range n {
		w.Attach(protocol.NodeID(i), r)
	}
	return w, r
}

// drain steps until no event is left, failing if that takes too long.
func drain(t *testing.T, w *sim.World) {
	t.Helper()
	for i := 0; w.Step(); i++ {
		if i > 10_000_000 {
			t.Fatal("world did not drain")
		}
	}
}

var jittery = sim.FaultPlan{Name: "jittery", Jitter: 50_000, DelayProb: 0.5, DelayMax: 200_000}

func TestEventsRunInTimeThenSeqOrder(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{})
	var order []string
	var times []int64
	rec := func(name string) func() {
		return func() { order = append(order, name); times = append(times, w.Now()) }
	}
	w.At(0, 300, rec("300a"))
	w.At(1, 100, rec("100a"))
	w.At(0, 300, rec("300b"))
	w.At(0, 200, rec("200a"))
	w.At(1, 100, rec("100b"))
	w.After(1, 300, rec("300c"))
	w.At(0, 100, func() {
		rec("100c")()
		// Scheduled from inside an event: same time runs after the events
		// already waiting at that time; a past time is clamped to now.
		w.After(0, 0, rec("100d"))
		w.At(1, 5, rec("100e-past"))
		w.After(0, 200, rec("300d"))
	})
	w.At(1, 0, rec("0a"))
	drain(t, w)
	want := []string{"0a", "100a", "100b", "100c", "100d", "100e-past", "200a", "300a", "300b", "300c", "300d"}
	if !slices.Equal(order, want) {
		t.Fatalf("order = %v\nwant    %v", order, want)
	}
	wantTimes := []int64{0, 100, 100, 100, 100, 100, 200, 300, 300, 300, 300}
	if !slices.Equal(times, wantTimes) {
		t.Fatalf("times = %v, want %v", times, wantTimes)
	}
	if w.Steps != uint64(len(want)) || w.Pending() != 0 {
		t.Fatalf("Steps = %d, Pending = %d", w.Steps, w.Pending())
	}
	if w.Step() {
		t.Fatal("Step on an empty world returned true")
	}
}

func TestMessageLatencyAndCounters(t *testing.T) {
	w, r := newWorld(1, 2, sim.FaultPlan{})
	w.Send(msg(0, 1, 1), nil)
	page := make([]byte, protocol.PageSize)
	w.Send(carrying(1, 0, 2, len(page)), page)
	drain(t, w)
	if len(r.got) != 2 {
		t.Fatalf("delivered %d messages, want 2", len(r.got))
	}
	lat := sim.DefaultLatency
	if r.got[0].at != lat.Message || r.got[0].to != 1 || r.got[0].pid != 1 {
		t.Fatalf("small message: %+v, want at %d to node 1", r.got[0], lat.Message)
	}
	wantPage := lat.Message + lat.PerKiB*protocol.PageSize/1024
	if r.got[1].at != wantPage || r.got[1].to != 0 || len(r.got[1].payload) != protocol.PageSize {
		t.Fatalf("page message: at %d to %d len %d, want at %d to 0 len %d",
			r.got[1].at, r.got[1].to, len(r.got[1].payload), wantPage, protocol.PageSize)
	}
	if w.Messages != 2 || w.PageBytes != protocol.PageSize {
		t.Fatalf("Messages = %d, PageBytes = %d", w.Messages, w.PageBytes)
	}
}

func TestSendOutsideWorldPanics(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{})
	for _, m := range []*protocol.Message{msg(0, 2, 0), msg(2, 0, 0)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Send %d->%d in a 2-node world did not panic", m.From, m.To)
				}
			}()
			w.Send(m, nil)
		}()
	}
}

// checkLinkFIFO fails unless, for every link, PIDs arrive in increasing order.
func checkLinkFIFO(t *testing.T, got []arrival) {
	t.Helper()
	last := map[[2]protocol.NodeID]int64{}
	for i, a := range got {
		k := [2]protocol.NodeID{a.from, a.to}
		if prev, ok := last[k]; ok && int64(a.pid) <= prev {
			t.Fatalf("link %d->%d: arrival %d has PID %d after PID %d (at %d)", a.from, a.to, i, a.pid, prev, a.at)
		}
		last[k] = int64(a.pid)
	}
}

func TestPerLinkFIFOUnderJitter(t *testing.T) {
	plans := map[string]sim.FaultPlan{"jittery": jittery}
	heavy, err := sim.Plan("heavy", seqDraw(42))
	if err != nil {
		t.Fatal(err)
	}
	heavy.StallProb = 0 // stalls have their own test
	plans["heavy"] = heavy
	for _, name := range []string{"jittery", "heavy"} {
		t.Run(name+"/burst", func(t *testing.T) {
			w, r := newWorld(7, 2, plans[name])
			for i := range 1000 {
				w.Send(msg(0, 1, i), nil)
			}
			drain(t, w)
			if len(r.got) != 1000 {
				t.Fatalf("delivered %d, want 1000", len(r.got))
			}
			checkLinkFIFO(t, r.got)
		})
		t.Run(name+"/spread", func(t *testing.T) {
			// Sends spread over time, so a later message would often draw an
			// earlier arrival than its predecessor without the FIFO rule.
			w, r := newWorld(8, 2, plans[name])
			sent := make([]int64, 1000)
			for i := range 1000 {
				w.At(0, int64(i)*37, func() { sent[i] = w.Now(); w.Send(msg(0, 1, i), nil) })
			}
			drain(t, w)
			if len(r.got) != 1000 {
				t.Fatalf("delivered %d, want 1000", len(r.got))
			}
			checkLinkFIFO(t, r.got)
			delayed := 0
			for _, a := range r.got {
				min := sent[a.pid] + sim.DefaultLatency.Message
				if a.at < min {
					t.Fatalf("PID %d arrived at %d, before send time %d + latency", a.pid, a.at, sent[a.pid])
				}
				if a.at > min {
					delayed++
				}
			}
			if delayed == 0 {
				t.Fatal("no message was delayed: the plan's jitter was not applied")
			}
		})
	}
}

func TestCrossLinkReordering(t *testing.T) {
	w, r := newWorld(3, 3, jittery)
	const n = 1000
	for i := range n {
		from := protocol.NodeID(0)
		if i%2 == 1 {
			from = 2
		}
		w.Send(msg(from, 1, i), nil)
	}
	drain(t, w)
	if len(r.got) != n {
		t.Fatalf("delivered %d, want %d", len(r.got), n)
	}
	checkLinkFIFO(t, r.got)
	reordered := 0
	for i := 1; i < n; i++ {
		if r.got[i].pid < r.got[i-1].pid {
			reordered++
		}
	}
	if reordered == 0 {
		t.Fatal("messages on two links arrived exactly in global send order despite jitter")
	}
}

func TestSendCopiesPayload(t *testing.T) {
	w, r := newWorld(1, 2, sim.FaultPlan{})
	buf := []byte("original payload bytes, 2 evict entries..")[:2*protocol.EvictEntrySize]
	want := bytes.Clone(buf)
	w.Send(carrying(0, 1, 1, len(buf)), buf)
	for i := range buf {
		buf[i] = 'X'
	}
	page := bytes.Repeat([]byte{0x11}, protocol.PageSize)
	w.Send(carrying(0, 1, 2, len(page)), page)
	page[0], page[protocol.PageSize-1] = 0x22, 0x33
	drain(t, w)
	if len(r.got) != 2 {
		t.Fatalf("delivered %d, want 2", len(r.got))
	}
	if !bytes.Equal(r.got[0].payload, want) {
		t.Fatalf("receiver saw %q, want %q", r.got[0].payload, want)
	}
	if !bytes.Equal(r.got[1].payload, bytes.Repeat([]byte{0x11}, protocol.PageSize)) {
		t.Fatal("page payload changed after Send")
	}
	// Pooled buffers are reused: a later small payload must not carry
	// bytes of the earlier page.
	entry := bytes.Repeat([]byte{7}, protocol.EvictEntrySize)
	w.Send(carrying(1, 0, 3, len(entry)), entry)
	w.Send(msg(1, 0, 4), nil)
	drain(t, w)
	if got := r.got[2].payload; !bytes.Equal(got, entry) {
		t.Fatalf("reused buffer: receiver saw %v, want %v", got, entry)
	}
	if got := r.got[3].payload; len(got) != 0 {
		t.Fatalf("empty payload delivered as %d bytes", len(got))
	}
}

// scenario runs a fixed sequence of operations and returns the world's hash
// and every delivery time.
func scenario(t *testing.T, seed uint64, plan sim.FaultPlan) (uint64, []int64, uint64) {
	w, r := newWorld(seed, 4, plan)
	// Every delivery of an even PID answers it, so the run depends on the
	// arrival order, not only on the sends.
	r.hook = func(m *protocol.Message) {
		if m.PID%2 == 0 && m.PID < 10_000 {
			n := 0
			if m.PID%4 == 0 {
				n = protocol.PageSize
			}
			w.Send(carrying(m.To, m.From, int(m.PID)+10_001, n), make([]byte, n))
		}
	}
	for i := range 300 {
		from, to := protocol.NodeID(i%4), protocol.NodeID((i*7+1)%4)
		if from == to {
			to = (to + 1) % 4
		}
		w.At(from, int64(i)*50, func() { w.Send(msg(from, to, i), nil) })
	}
	co := w.Spawn(2, 10, func(co *sim.Coroutine) {
		for range 20 {
			co.Sleep(int64(w.Rand() % 1000))
			w.Send(msg(2, 3, 20_000), nil)
		}
	})
	drain(t, w)
	if !co.Done() {
		t.Fatal("coroutine did not finish")
	}
	times := make([]int64, len(r.got))
	for i, a := range r.got {
		times[i] = a.at<<20 | int64(a.pid)
	}
	return w.Hash(), times, w.Steps
}

func TestDeterminism(t *testing.T) {
	h1, t1, s1 := scenario(t, 99, jittery)
	h2, t2, s2 := scenario(t, 99, jittery)
	if h1 != h2 || s1 != s2 {
		t.Fatalf("same seed: hash %x vs %x, steps %d vs %d", h1, h2, s1, s2)
	}
	if !slices.Equal(t1, t2) {
		t.Fatal("same seed: delivery times differ")
	}
	h3, t3, _ := scenario(t, 100, jittery)
	if h3 == h1 {
		t.Fatal("different seeds gave the same hash under a jittery plan")
	}
	if slices.Equal(t1, t3) {
		t.Fatal("different seeds gave the same delivery times under a jittery plan")
	}
	// Without faults the seed matters only through Rand (the coroutine's
	// sleeps), so the hash still differs, but message-only runs agree.
	w1, _ := newWorld(1, 2, sim.FaultPlan{})
	w2, _ := newWorld(2, 2, sim.FaultPlan{})
	for _, w := range []*sim.World{w1, w2} {
		for i := range 10 {
			w.Send(msg(0, 1, i), nil)
		}
		drain(t, w)
	}
	if w1.Hash() != w2.Hash() {
		t.Fatal("fault-free message-only runs depend on the seed")
	}
	if w1.Hash() == sim.New(1, 2, sim.DefaultLatency, sim.FaultPlan{}).Hash() {
		t.Fatal("hash did not change after processing events")
	}
}

var stallPlan = sim.FaultPlan{Name: "stall", StallProb: 1, StallEvery: 1000, StallMax: 100_000}

// stallRun sends n messages, alternating links 0->1 and 2->1, one every
// 100 ns, through a world that stalls a node at every tick; it returns the
// send times and the arrivals.
func stallRun(t *testing.T, seed uint64) ([]int64, []arrival) {
	t.Helper()
	w, r := newWorld(seed, 3, stallPlan)
	const n = 1000
	sent := make([]int64, n)
	for i := range n {
		from := protocol.NodeID(0)
		if i%2 == 1 {
			from = 2
		}
		w.At(from, int64(i)*100, func() { sent[i] = w.Now(); w.Send(msg(from, 1, i), nil) })
	}
	// Stall ticks keep the world busy while faults are on.
	for steps := 0; len(r.got) < n; steps++ {
		if !w.Step() || steps > 1_000_000 {
			t.Fatalf("delivered %d of %d after %d steps", len(r.got), n, steps)
		}
	}
	w.StopFaults()
	drain(t, w) // terminates only if StopFaults ends the stall ticks
	if len(r.got) != n {
		t.Fatalf("delivered %d, want %d", len(r.got), n)
	}
	return sent, r.got
}

func TestStallsDelayButNeverLose(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sent, got := stallRun(t, seed)
			seen := make([]bool, len(sent))
			delayed := 0
			for _, a := range got {
				if seen[a.pid] {
					t.Fatalf("PID %d delivered twice", a.pid)
				}
				seen[a.pid] = true
				min := sent[a.pid] + sim.DefaultLatency.Message
				if a.at < min {
					t.Fatalf("PID %d arrived at %d, before %d", a.pid, a.at, min)
				}
				if a.at > min {
					delayed++
				}
			}
			if delayed == 0 {
				t.Fatal("no message was delayed by a stall")
			}
		})
	}
}

// TestStallsKeepLinkOrder: a stalled node's events must wait in order. Seeds
// 1, 4 and 5 fail today: an event held until the stall's end is re-queued
// with a fresh seq when it pops at that end and finds the stall extended,
// so a later message of its link, held directly until the new end (and
// re-queued earlier), overtakes it.
func TestStallsKeepLinkOrder(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			_, got := stallRun(t, seed)
			checkLinkFIFO(t, got)
		})
	}
}

// TestStallKeepsLinkOrderAtStallEnd: with stalls that never overlap, a
// message arriving exactly when the receiver's stall ends (it was sent
// before the held messages were re-queued, so its seq is smaller) must
// still come after the held messages of its link.
func TestStallKeepsLinkOrderAtStallEnd(t *testing.T) {
	// Ticks every 1 ms, stalls of at most 110 us: no extension. One message
	// a nanosecond makes an arrival coincide with the stall's end. With
	// seed 1 the first tick stalls the receiver, node 1.
	plan := sim.FaultPlan{Name: "stall", StallProb: 1, StallEvery: 1_000_000, StallMax: 100_000}
	w, r := newWorld(1, 2, plan)
	const start, n = 1_000_000, 115_000
	for i := range n {
		w.At(0, start+int64(i), func() { w.Send(msg(0, 1, i), nil) })
	}
	for steps := 0; len(r.got) < n; steps++ {
		if !w.Step() || steps > 10_000_000 {
			t.Fatalf("delivered %d of %d", len(r.got), n)
		}
	}
	w.StopFaults()
	drain(t, w)
	if len(r.got) != n {
		t.Fatalf("delivered %d, want %d", len(r.got), n)
	}
	if r.got[0].at == start+sim.DefaultLatency.Message {
		t.Fatal("the receiver was not stalled: the test does not exercise a stall's end")
	}
	checkLinkFIFO(t, r.got)
}

func TestCoroutineSleep(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{})
	w.At(0, 1000, func() {}) // move the clock first
	w.Step()
	var times []int64
	co := w.Spawn(1, 50, func(co *sim.Coroutine) {
		times = append(times, w.Now())
		co.Sleep(100)
		times = append(times, w.Now())
		co.Sleep(200)
		times = append(times, w.Now())
	})
	if co.Done() || len(times) != 0 {
		t.Fatal("coroutine ran before the scheduler resumed it")
	}
	drain(t, w)
	want := []int64{1050, 1150, 1350}
	if !slices.Equal(times, want) {
		t.Fatalf("times = %v, want %v", times, want)
	}
	if !co.Done() {
		t.Fatal("coroutine not Done after its body returned")
	}
}

func TestCoroutineParkWake(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{})
	resumes := 0
	var at []int64
	co := w.Spawn(0, 0, func(co *sim.Coroutine) {
		for range 3 {
			resumes++
			at = append(at, w.Now())
			co.Park()
		}
		resumes++
	})
	drain(t, w)
	if resumes != 1 || co.Done() {
		t.Fatalf("after first run: resumes = %d, done = %v; want 1, false", resumes, co.Done())
	}
	if w.Pending() != 0 {
		t.Fatalf("a parked coroutine left %d events scheduled", w.Pending())
	}
	// Two Wakes before it runs resume it once.
	w.At(0, 500, func() { co.Wake(); co.Wake() })
	drain(t, w)
	if resumes != 2 {
		t.Fatalf("after double Wake: resumes = %d, want 2", resumes)
	}
	if at[1] != 500 {
		t.Fatalf("woken coroutine ran at %d, want 500 (the time of Wake)", at[1])
	}
	// A Wake from inside an event and a later one each resume it.
	w.At(0, 700, co.Wake)
	w.At(0, 900, co.Wake)
	drain(t, w)
	if resumes != 4 || !co.Done() {
		t.Fatalf("resumes = %d, done = %v; want 4, true", resumes, co.Done())
	}
	if !slices.Equal(at, []int64{0, 500, 700}) {
		t.Fatalf("resume times = %v", at)
	}
	co.Wake() // on a finished coroutine: nothing scheduled
	if w.Pending() != 0 {
		t.Fatal("Wake on a finished coroutine scheduled an event")
	}
}

func TestCoroutineWakeWhileSleeping(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{})
	var at []int64
	co := w.Spawn(0, 0, func(co *sim.Coroutine) {
		co.Sleep(1000)
		at = append(at, w.Now())
	})
	w.At(0, 10, co.Wake) // already scheduled: no extra resume
	drain(t, w)
	if !slices.Equal(at, []int64{1000}) || !co.Done() {
		t.Fatalf("resume times = %v, done = %v; want [1000], true", at, co.Done())
	}
}

func TestCoroutineStop(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{})
	reached, unwound := false, false
	co := w.Spawn(0, 0, func(co *sim.Coroutine) {
		defer func() { unwound = true }()
		co.Park()
		reached = true
	})
	drain(t, w)
	if co.Done() {
		t.Fatal("parked coroutine reported Done")
	}
	co.Stop()
	if !co.Done() {
		t.Fatal("Done false after Stop")
	}
	if reached {
		t.Fatal("Stop resumed the body past Park")
	}
	if !unwound {
		t.Fatal("Stop did not unwind the body (deferred call did not run)")
	}
	co.Wake()
	co.Stop() // second Stop is harmless
	if w.Pending() != 0 {
		t.Fatal("Wake after Stop scheduled an event")
	}

	// Stop on a sleeping coroutine: its pending resume event is a no-op.
	after := false
	co2 := w.Spawn(0, 0, func(co *sim.Coroutine) {
		co.Sleep(100)
		after = true
	})
	w.Step() // runs up to the Sleep
	co2.Stop()
	drain(t, w)
	if after || !co2.Done() {
		t.Fatalf("stopped sleeper: ran on = %v, done = %v", after, co2.Done())
	}

	// Stop before it ever ran.
	ran := false
	co3 := w.Spawn(0, 10, func(*sim.Coroutine) { ran = true })
	co3.Stop()
	drain(t, w)
	if ran || !co3.Done() {
		t.Fatalf("stopped before start: ran = %v, done = %v", ran, co3.Done())
	}
}

// Without OnFault, a coroutine's panic reaches Step's caller, with the
// node and the panic's value.
func TestCoroutinePanicPropagates(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{})
	w.Spawn(0, 0, func(*sim.Coroutine) { panic("boom") })
	defer func() {
		err, ok := recover().(error)
		if !ok || !strings.Contains(err.Error(), "panic in node 0: boom") {
			t.Fatalf("recovered %v, want the panic of node 0", err)
		}
	}()
	w.Step()
	t.Fatal("a coroutine's panic did not reach Step's caller")
}

// With OnFault, a panic of a receiver, an event function or a coroutine is
// a fault of its node, with the panic's value and stack, and the world goes
// on: the other events still run.
func TestPanicsAreFaults(t *testing.T) {
	w := sim.New(1, 3, sim.DefaultLatency, sim.FaultPlan{})
	var faults []string
	w.OnFault = func(at int64, node protocol.NodeID, err error) {
		faults = append(faults, fmt.Sprintf("node %d: %v", node, err))
	}
	r := &recorder{w: w}
	w.Attach(0, r)
	w.Attach(1, receiverFunc(func(*protocol.Message, []byte) { panic("receiver boom") }))
	w.Attach(2, r)
	w.Send(msg(0, 1, 1), nil)
	w.At(2, 5, func() { panic("event boom") })
	co := w.Spawn(0, 7, func(*sim.Coroutine) { panic("coroutine boom") })
	w.At(2, 1_000_000, func() { w.Send(msg(2, 0, 9), nil) })
	drain(t, w)
	want := []string{"node 2: panic in node 2: event boom", "node 0: panic in node 0: coroutine boom", "node 1: panic in node 1: receiver boom"}
	if len(faults) != len(want) {
		t.Fatalf("faults %q, want %d", faults, len(want))
	}
	for i, f := range faults {
		if !strings.HasPrefix(f, want[i]) || !strings.Contains(f, "goroutine") {
			t.Errorf("fault %d = %.120q, want %q with a stack", i, f, want[i])
		}
	}
	if !co.Done() {
		t.Error("the panicking coroutine is not done")
	}
	if len(r.got) != 1 || r.got[0].pid != 9 {
		t.Fatalf("the world did not go on after the faults: %+v", r.got)
	}
}

type receiverFunc func(*protocol.Message, []byte)

func (f receiverFunc) Deliver(m *protocol.Message, p []byte) { f(m, p) }

// Every message travels encoded: what the encoder (here MutateFrame) does
// to the frame is what the receiver sees, and a frame or payload the
// codec's rules reject is a fault of the receiver, dropped, never delivered.
func TestMessagesTravelEncoded(t *testing.T) {
	w := sim.New(1, 2, sim.DefaultLatency, sim.FaultPlan{})
	var faults []string
	w.OnFault = func(_ int64, _ protocol.NodeID, err error) { faults = append(faults, err.Error()) }
	var got []protocol.Message
	w.Attach(1, receiverFunc(func(m *protocol.Message, _ []byte) { got = append(got, *m) }))
	fwd := protocol.Message{Type: protocol.TTransfer, From: 0, To: 1, PID: 5, Mode: protocol.ModeExclusive, Epoch: 3, K: 2, Pred: 0xABCDEF}
	w.Send(&fwd, nil)
	drain(t, w)
	if len(got) != 1 || got[0] != fwd {
		t.Fatalf("delivered %+v, want %+v", got, fwd)
	}
	w.MutateFrame = func(frame []byte) { clear(frame[28:32]) } // an encoder that drops Pred
	w.Send(&fwd, nil)
	drain(t, w)
	if len(got) != 2 || got[1].Pred != 0 {
		t.Fatalf("with Pred dropped on the wire the receiver saw %+v", got[1:])
	}
	w.MutateFrame = func(frame []byte) { frame[0] = 0 } // bad magic
	w.Send(&fwd, nil)
	w.MutateFrame = nil
	w.Send(carrying(0, 1, 1, protocol.PageSize), nil) // a page message without its page
	drain(t, w)
	if len(got) != 2 || len(faults) != 2 || !strings.Contains(faults[0], "bad magic") || !strings.Contains(faults[1], "payload of 0 bytes, want 4096") {
		t.Fatalf("delivered %d, faults %q", len(got), faults)
	}
	if w.Messages != 2 {
		t.Fatalf("Messages = %d: dropped frames counted", w.Messages)
	}
}

func TestMaybeYield(t *testing.T) {
	run := func(yieldProb float64) []string {
		w, _ := newWorld(1, 2, sim.FaultPlan{YieldProb: yieldProb})
		var order []string
		w.Spawn(0, 0, func(co *sim.Coroutine) {
			order = append(order, "a1")
			co.MaybeYield()
			order = append(order, "a2")
		})
		w.Spawn(1, 0, func(co *sim.Coroutine) { order = append(order, "b") })
		drain(t, w)
		return order
	}
	if got := run(0); !slices.Equal(got, []string{"a1", "a2", "b"}) {
		t.Fatalf("YieldProb 0: order %v", got)
	}
	if got := run(1); !slices.Equal(got, []string{"a1", "b", "a2"}) {
		t.Fatalf("YieldProb 1: order %v", got)
	}
}

// seqDraw is a deterministic draw function.
func seqDraw(seed uint64) func() uint64 {
	x := seed
	return func() uint64 {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		return z ^ z>>31
	}
}

func TestPlan(t *testing.T) {
	none, err := sim.Plan("none", seqDraw(1))
	if err != nil || none != (sim.FaultPlan{Name: "none"}) {
		t.Fatalf("Plan(none) = %+v, %v", none, err)
	}
	for _, name := range []string{"default", "heavy"} {
		a, err := sim.Plan(name, seqDraw(5))
		if err != nil {
			t.Fatalf("Plan(%s): %v", name, err)
		}
		if a.Name != name {
			t.Fatalf("Plan(%s).Name = %q", name, a.Name)
		}
		b, _ := sim.Plan(name, seqDraw(5))
		if a != b {
			t.Fatalf("Plan(%s) with the same draws differs:\n%+v\n%+v", name, a, b)
		}
		c, _ := sim.Plan(name, seqDraw(6))
		if a == c {
			t.Fatalf("Plan(%s) ignores its draws", name)
		}
		for _, p := range []float64{a.DelayProb, a.SpikeProb, a.IOErrorProb, a.YieldProb, a.SlowLinks, a.StallProb} {
			if p < 0 || p >= 1 {
				t.Fatalf("Plan(%s) has probability %v outside [0,1): %+v", name, p, a)
			}
		}
		if a.Jitter <= 0 || a.DelayMax <= 0 || a.YieldProb <= 0 {
			t.Fatalf("Plan(%s) injects no message faults: %+v", name, a)
		}
	}
	h, _ := sim.Plan("heavy", seqDraw(9))
	if h.StallProb < 0.1 || h.StallProb > 0.5 || h.StallEvery <= 0 || !h.Pressure {
		t.Fatalf("heavy plan: %+v", h)
	}
	for _, bad := range []string{"storm", "", "Heavy"} {
		if _, err := sim.Plan(bad, seqDraw(1)); err == nil {
			t.Fatalf("Plan(%q) succeeded", bad)
		}
	}
}

func TestInject(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{IOErrorProb: 1})
	for i := range 100 {
		op := memfile.OpRead
		if i%2 == 1 {
			op = memfile.OpWrite
		}
		if err := w.Inject(op, uint64(i)); !errors.Is(err, storage.ErrTransient) {
			t.Fatalf("Inject(%d, %d) = %v, want ErrTransient", op, i, err)
		}
	}
	// Through a store backed by the world.
	s := memfile.New(4, w)
	buf := make([]byte, protocol.PageSize)
	if err := s.WritePage(0, buf); !errors.Is(err, storage.ErrTransient) {
		t.Fatalf("WritePage = %v, want ErrTransient", err)
	}
	w.StopFaults()
	for i := range 100 {
		if err := w.Inject(memfile.Op(i%2), uint64(i)); err != nil {
			t.Fatalf("Inject after StopFaults = %v", err)
		}
	}
	if err := s.WritePage(0, buf); err != nil {
		t.Fatalf("WritePage after StopFaults = %v", err)
	}

	w2, _ := newWorld(1, 2, sim.FaultPlan{})
	for i := range 100 {
		if err := w2.Inject(memfile.Op(i%2), uint64(i)); err != nil {
			t.Fatalf("Inject without IOErrorProb = %v", err)
		}
	}
}

func TestNodeEnvStorageLatency(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{})
	env := &sim.NodeEnv{W: w, ID: 1, Store: memfile.New(4, w)}
	page := bytes.Repeat([]byte{0x42}, protocol.PageSize)
	var wroteAt, readAt int64 = -1, -1
	got := make([]byte, protocol.PageSize)
	env.WritePage(2, page, func(err error) {
		if err != nil {
			t.Errorf("WritePage: %v", err)
		}
		wroteAt = env.Now()
		env.ReadPage(2, got, func(err error) {
			if err != nil {
				t.Errorf("ReadPage: %v", err)
			}
			readAt = env.Now()
		})
	})
	drain(t, w)
	lat := sim.DefaultLatency
	if wroteAt != lat.SSDWrite || readAt != lat.SSDWrite+lat.SSDRead {
		t.Fatalf("write done at %d, read done at %d; want %d and %d", wroteAt, readAt, lat.SSDWrite, lat.SSDWrite+lat.SSDRead)
	}
	if !bytes.Equal(got, page) {
		t.Fatal("read back differs")
	}
}

// hintLog is a sim.Prefetcher that keeps the pages it was hinted about.
type hintLog struct{ pids []protocol.PID }

func (h *hintLog) PrefetchFrame(frame []byte) {
	m, err := protocol.Decode(frame)
	if err != nil {
		panic(err)
	}
	h.pids = append(h.pids, m.PID)
}

// TestPrefetcherHearsOfTheNextMessage: while the world runs an event, the
// receiver of the next one (a message) is told which page it is about;
// nodes without a Prefetcher are not, and a hint changes no delivery.
func TestPrefetcherHearsOfTheNextMessage(t *testing.T) {
	w, r := newWorld(1, 3, sim.FaultPlan{})
	var at1 hintLog
	w.SetPrefetcher(1, &at1)
	w.Send(msg(0, 1, 7), nil)
	w.Send(msg(0, 2, 8), nil) // node 2 has no prefetcher
	w.Send(msg(2, 1, 9), nil)
	w.After(0, 0, func() {}) // runs first: message 7 is next
	drain(t, w)
	if len(r.got) != 3 {
		t.Fatalf("delivered %d messages, want 3", len(r.got))
	}
	// Hints come while the event before each message runs: for 7 during
	// the timer, for 9 during message 8 (7's and 8's arrivals are equal,
	// 9 is sent on another link at the same time).
	if want := []protocol.PID{7, 9}; !slices.Equal(at1.pids, want) {
		t.Fatalf("node 1 was hinted %v, want %v", at1.pids, want)
	}
}
