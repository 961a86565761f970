package sim_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// A verb takes one way there and one way back, with no CPU on the memory's
// side; an atomic adds the NIC's atomic latency, a READ the time its bytes
// take to come back.
func TestVerbLatency(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{})
	mem := make([]byte, protocol.PageSize)
	r := w.Register(1, mem)
	lat := sim.DefaultLatency
	var at []int64
	w.Read(0, make([]byte, 8), r, 0, func(err error) {
		if err != nil {
			t.Error(err)
		}
		at = append(at, w.Now())
	})
	drain(t, w)
	w.Read(0, make([]byte, protocol.PageSize), r, 0, func(error) { at = append(at, w.Now()) })
	drain(t, w)
	w.FetchAndAdd(0, r, 0, 1, func(uint64, error) { at = append(at, w.Now()) })
	drain(t, w)
	want := []int64{2 * lat.Verb, 2*lat.Verb + 2*lat.Verb + lat.PerKiB*4, 0}
	want[2] = want[1] + 2*lat.Verb + lat.Atomic
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("completions at %v, want %v", at, want)
		}
	}
	if verbs, bytes := w.VerbStats(); verbs != 3 || bytes != 8+protocol.PageSize {
		t.Fatalf("VerbStats = %d verbs, %d bytes", verbs, bytes)
	}
}

// RC ordering: a WRITE issued after a Send to the same peer lands after the
// Send was delivered, whatever the jitter; verbs to different peers may
// overtake each other.
func TestVerbsAreOrderedWithMessagesOnALink(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		w, r := newWorld(seed, 2, jittery)
		mem := make([]byte, 64)
		reg := w.Register(1, mem)
		var seen []byte
		r.hook = func(*protocol.Message) { seen = append(seen, mem[0]) }
		for i := range 20 {
			w.Send(msg(0, 1, i), nil)
			w.Write(0, reg, 0, []byte{byte(i + 1)}, func(error) {})
		}
		drain(t, w)
		for i, v := range seen {
			if int(v) != i {
				t.Fatalf("seed %d: message %d saw the memory at %d: a WRITE overtook a Send or fell behind the next", seed, i, v)
			}
		}
	}
}

// A stalled node's memory still serves verbs (its NIC works without its
// CPU); a stalled issuer gets its completion when the stall ends.
func TestVerbsDuringStalls(t *testing.T) {
	plan := sim.FaultPlan{Name: "stall", StallProb: 1, StallEvery: 1, StallMax: 1_000_000}
	for seed := uint64(1); seed <= 20; seed++ {
		w := sim.New(seed, 2, sim.DefaultLatency, plan)
		mem := make([]byte, 8)
		r := w.Register(1, mem)
		var actedAt, doneAt int64
		w.SetVerbTrace(func(at int64, v *sim.Verb) { actedAt = at })
		w.At(0, 10, func() {
			w.FetchAndAdd(0, r, 0, 5, func(prev uint64, err error) {
				if prev != 0 || err != nil {
					t.Errorf("FAA: %d %v", prev, err)
				}
				doneAt = w.Now()
			})
		})
		for w.Now() < 20_000_000 && w.Step() {
		}
		w.StopFaults()
		for w.Step() {
			if doneAt != 0 {
				break
			}
		}
		if binary.LittleEndian.Uint64(mem) != 5 || doneAt == 0 || doneAt < actedAt {
			t.Fatalf("seed %d: word %d, acted at %d, done at %d", seed, binary.LittleEndian.Uint64(mem), actedAt, doneAt)
		}
	}
}

// Bad verbs fail with the transport's errors and change nothing; every verb
// is in the trace and the hash.
func TestVerbErrorsAndTrace(t *testing.T) {
	w, _ := newWorld(1, 3, sim.FaultPlan{})
	mem := make([]byte, 64)
	r := w.Register(1, mem)
	var lines []string
	w.SetVerbTrace(func(at int64, v *sim.Verb) { lines = append(lines, v.String()) })
	errs := make([]error, 6)
	slot := func(i int) func(uint64, error) { return func(_ uint64, err error) { errs[i] = err } }
	bad := r
	bad.Key++
	w.CompareAndSwap(0, bad, 0, 0, 1, slot(0))
	w.CompareAndSwap(0, r, 4, 0, 1, slot(1))
	w.FetchAndAdd(0, r, 64, 1, slot(2))
	w.Read(0, make([]byte, 16), r, ^uint64(0)-4, func(err error) { slot(3)(0, err) })
	other := r
	other.Node = 2 // the key names a region of node 1
	w.Read(0, make([]byte, 8), other, 0, func(err error) { slot(4)(0, err) })
	w.CompareAndSwap(0, r, 8, 0, 7, slot(5))
	drain(t, w)
	want := []error{transport.ErrAccess, transport.ErrMisaligned, transport.ErrAccess, transport.ErrAccess, transport.ErrAccess, nil}
	for i, e := range want {
		if !errors.Is(errs[i], e) || (e == nil && errs[i] != nil) {
			t.Errorf("verb %d: %v, want %v", i, errs[i], e)
		}
	}
	for i, b := range mem {
		if b != 0 && (i < 8 || i >= 16) {
			t.Fatalf("a refused verb changed byte %d", i)
		}
	}
	if len(lines) != 6 || !strings.HasPrefix(lines[5], "CAS 0->1") || !strings.Contains(lines[5], "new=0x7 prev=0x0") {
		t.Fatalf("trace %q", lines)
	}
	h := w.Hash()
	w2, _ := newWorld(1, 3, sim.FaultPlan{})
	r2 := w2.Register(1, make([]byte, 64))
	w2.CompareAndSwap(0, r2, 8, 0, 7, func(uint64, error) {})
	drain(t, w2)
	if w2.Hash() == h {
		t.Fatal("verbs do not reach the hash")
	}
}

// From a coroutine the verbs block (transport.OneSided); from an event
// handler they refuse.
func TestCoroutineVerbs(t *testing.T) {
	w, _ := newWorld(1, 2, sim.FaultPlan{})
	verbs := sim.Verbs{W: w, Node: 0}
	r := w.Register(1, make([]byte, 64))
	var got []uint64
	for range 2 {
		w.Spawn(0, 0, func(co *sim.Coroutine) {
			for range 10 {
				for { // a CAS loop from two coroutines: no increment lost
					var b [8]byte
					if err := verbs.Read(b[:], r, 0); err != nil {
						t.Error(err)
						return
					}
					v := binary.LittleEndian.Uint64(b[:])
					if prev, err := verbs.CompareAndSwap(r, 0, v, v+1); err == nil && prev == v {
						got = append(got, v+1)
						break
					}
				}
			}
		})
	}
	drain(t, w)
	if len(got) != 20 || got[19] != 20 {
		t.Fatalf("increments %v", got)
	}
	var err error
	w.At(0, 0, func() { _, err = verbs.FetchAndAdd(r, 0, 1) })
	drain(t, w)
	if !errors.Is(err, sim.ErrNotInCoroutine) {
		t.Fatalf("a verb in an event handler: %v", err)
	}
}
