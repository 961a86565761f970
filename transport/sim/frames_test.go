package sim

import (
	"bytes"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

type frameLog struct {
	w   *World
	got []string
}

func (l *frameLog) DeliverFrame(from protocol.NodeID, frame, payload []byte) {
	l.got = append(l.got, string(rune('0'+from))+":"+string(frame[:2])+":"+string(payload))
}

func frame(s string) []byte {
	f := make([]byte, protocol.FrameSize)
	copy(f, s)
	return f
}

// Opaque frames arrive in per-link FIFO order, bytes intact, are counted
// and hashed, and reach a node sending to itself.
func TestFramesFIFOAndHashed(t *testing.T) {
	run := func(last string) (uint64, []string) {
		w := New(7, 2, DefaultLatency, FaultPlan{Name: "heavy", Jitter: 5_000, DelayProb: 0.5, DelayMax: 100_000})
		logs := []*frameLog{{w: w}, {w: w}}
		w.AttachFrames(0, logs[0])
		w.AttachFrames(1, logs[1])
		for i := range 20 {
			w.SendFrame(0, 1, frame(string(rune('a'+i))+"x"), []byte{byte('A' + i)})
		}
		w.SendFrame(1, 1, frame(last), nil)
		for w.Step() {
		}
		if w.Messages != 21 || w.PageBytes != 20 {
			t.Fatalf("messages %d, payload bytes %d; want 21 and 20", w.Messages, w.PageBytes)
		}
		return w.Hash(), logs[1].got
	}
	h1, got := run("zz")
	var fromZero []string
	for _, g := range got {
		if strings.HasPrefix(g, "0:") {
			fromZero = append(fromZero, g)
		}
	}
	for i, g := range fromZero {
		want := "0:" + string(rune('a'+i)) + "x:" + string(rune('A'+i))
		if g != want {
			t.Fatalf("frame %d arrived as %q, want %q (FIFO per link)", i, g, want)
		}
	}
	if len(got) != 21 {
		t.Fatalf("%d frames arrived, want 21", len(got))
	}
	h2, _ := run("zz")
	h3, _ := run("zy")
	if h1 != h2 {
		t.Fatalf("same run, hashes %x and %x", h1, h2)
	}
	if h1 == h3 {
		t.Fatalf("a frame's bytes changed and the hash did not")
	}
}

// A bad frame is a fault of its sender, never a panic; a frame to a node
// without a frame receiver is a fault of the receiver.
func TestFramesRefused(t *testing.T) {
	w := New(1, 2, DefaultLatency, FaultPlan{Name: "none"})
	var faults []string
	w.OnFault = func(_ int64, _ protocol.NodeID, err error) { faults = append(faults, err.Error()) }
	w.SendFrame(0, 5, frame("a"), nil)
	w.SendFrame(0, 1, []byte("short"), nil)
	w.SendFrame(0, 1, frame("a"), bytes.Repeat([]byte{1}, protocol.PageSize+1))
	w.SendFrame(0, 1, frame("a"), nil)
	for w.Step() {
	}
	if len(faults) != 4 {
		t.Fatalf("faults %q, want 4", faults)
	}
	for i, want := range []string{"outside the world", "of 5 bytes", "more than a page", "without a frame receiver"} {
		if !strings.Contains(faults[i], want) {
			t.Errorf("fault %d %q does not say %q", i, faults[i], want)
		}
	}
}

// A crashed node's frames are dropped, and DropMessages removes frames in
// flight.
func TestFramesCrashAndDrop(t *testing.T) {
	w := New(1, 3, DefaultLatency, FaultPlan{Name: "none"})
	logs := []*frameLog{{w: w}, {w: w}, {w: w}}
	for i := range logs {
		w.AttachFrames(protocol.NodeID(i), logs[i])
	}
	w.SendFrame(0, 1, frame("a"), nil)
	if n := w.DropMessages(); n != 1 {
		t.Fatalf("dropped %d, want 1", n)
	}
	w.Kill(2)
	w.SendFrame(0, 2, frame("b"), nil)
	w.SendFrame(2, 1, frame("c"), nil)
	w.SendFrame(0, 1, frame("d"), nil)
	for w.Step() {
	}
	if len(logs[1].got) != 1 || !strings.HasPrefix(logs[1].got[0], "0:d") || len(logs[2].got) != 0 {
		t.Fatalf("delivered %q and %q", logs[1].got, logs[2].got)
	}
}

// A frame a stall held back still arrives before one sent on its link
// after StopFaults lifted the stall (found by gam-tso's swarm: a grant
// overtaken by a later invalidation while the run settled).
func TestFIFOAcrossStopFaults(t *testing.T) {
	w := New(1, 2, DefaultLatency, FaultPlan{})
	log := &frameLog{w: w}
	w.AttachFrames(1, log)
	w.AttachFrames(0, &frameLog{w: w})
	w.Spend(1, 1_000_000) // node 1 busy for 1 ms: what arrives waits
	w.SendFrame(0, 1, frame("a"), nil)
	w.At(0, 100_000, func() { // a is held back until 1 ms
		if len(log.got) != 0 {
			t.Errorf("a stalled node handled %q", log.got)
		}
		w.StopFaults()
		w.SendFrame(0, 1, frame("b"), nil)
	})
	for w.Step() {
	}
	if strings.Join(log.got, ",") != "0:a\x00:,0:b\x00:" {
		t.Fatalf("arrived %q: want a, then b (per-link FIFO)", log.got)
	}
}
