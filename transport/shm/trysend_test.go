package shm

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// TestTrySend: TrySend never waits. While the receiver's handler is
// blocked the ring fills and TrySend reports false without sending; once
// the receiver drains, every message sent (by TrySend or Send) arrives in
// order.
func TestTrySend(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var got []uint64
	block := func(from protocol.NodeID, frame, payload []byte) {
		<-release
		mu.Lock()
		got = append(got, binary.LittleEndian.Uint64(frame[8:]))
		mu.Unlock()
	}
	ts := newCluster(t, []transport.Handler{func(protocol.NodeID, []byte, []byte) {}, block}, nil)
	defer ts[0].Close()
	defer ts[1].Close()
	page := make([]byte, transport.MaxPayload)
	sent := uint64(0)
	start := time.Now()
	for {
		ok, err := ts[0].TrySend(1, seqFrame(sent), page)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		sent++
		if sent > 1000 {
			t.Fatal("a 64 KiB ring took more than 1000 pages without filling")
		}
	}
	if time.Since(start) > time.Second {
		t.Fatalf("TrySend waited %v", time.Since(start))
	}
	if sent == 0 {
		t.Fatal("TrySend refused an empty ring")
	}
	close(release)
	if err := ts[0].Send(1, seqFrame(sent), nil); err != nil { // waits for room
		t.Fatal(err)
	}
	sent++
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == int(sent) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages arrived", n, sent)
		}
		time.Sleep(time.Millisecond)
	}
	for i, seq := range got {
		if seq != uint64(i) {
			t.Fatalf("message %d carries seq %d: order broken", i, seq)
		}
	}
	if _, err := ts[0].TrySend(7, seqFrame(0), nil); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Fatalf("TrySend to an unknown node: %v", err)
	}
}
