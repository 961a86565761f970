package tcp

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// TestPeerKilledAndRestarted: node 1 closes while node 0 streams to it;
// node 0's sends and verbs fail with ErrPeerDown within the peer timeout;
// a node 1 restarted on the same address is reconnected to, both ways.
func TestPeerKilledAndRestarted(t *testing.T) {
	const timeout = 400 * time.Millisecond
	cols := []*collector{newCollector(), newCollector()}
	tweak := func(c *Config) { c.PeerTimeout = timeout }
	mem := offHeap(t, protocol.PageSize)
	ts := startCluster(t, []transport.Handler{cols[0].handler, cols[1].handler}, tweak)
	r, err := ts[1].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts[0].FetchAndAdd(r, 0, 1); err != nil {
		t.Fatal(err)
	}

	// Stream from 0 to 1 in the background until a send fails.
	streamErr := make(chan error, 1)
	go func() {
		payload := make([]byte, protocol.PageSize)
		for seq := uint64(0); ; seq++ {
			if err := ts[0].Send(1, msgFrame(seq), payload); err != nil {
				streamErr <- err
				return
			}
		}
	}()
	cols[1].waitSeq(t, 0, 100)
	addr1 := ts[1].Addr().String()
	killed := time.Now()
	if err := ts[1].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-streamErr:
		if !errors.Is(err, transport.ErrPeerDown) {
			t.Fatalf("send to a killed peer: %v, want ErrPeerDown", err)
		}
		// Unreachable for the timeout, then at most a backoff step and a
		// dial: well within 10x.
		if d := time.Since(killed); d > 10*timeout {
			t.Fatalf("send failed only after %v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sending to a killed peer hung")
	}
	start := time.Now()
	if _, err := ts[0].FetchAndAdd(r, 0, 1); !errors.Is(err, transport.ErrPeerDown) {
		t.Fatalf("verb on a killed peer: %v, want ErrPeerDown", err)
	}
	if d := time.Since(start); d > 2*timeout {
		t.Fatalf("verb on a down peer took %v", d)
	}

	// Restart node 1 on the same address.
	cfg := testConfig(1, 2, cols[1].handler)
	cfg.Listen = addr1
	cfg.Peers[0] = ts[0].Addr().String()
	cfg.PeerTimeout = timeout
	var again *Transport
	for deadline := time.Now().Add(5 * time.Second); ; {
		if again, err = New(cfg); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer again.Close()
	deadline := time.Now().Add(10 * time.Second)
	for seq := uint64(1 << 40); ; seq++ {
		err := ts[0].Send(1, msgFrame(seq), nil)
		if err == nil {
			cols[1].waitSeq(t, 0, seq)
			break
		}
		if !errors.Is(err, transport.ErrPeerDown) || time.Now().After(deadline) {
			t.Fatalf("send to the restarted peer: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := again.Send(0, msgFrame(7), nil); err != nil {
		t.Fatal(err)
	}
	cols[0].waitSeq(t, 1, 7)
	r2, err := again.Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	if prev, err := ts[0].FetchAndAdd(r2, 0, 1); err != nil || prev != 1 {
		t.Fatalf("verb on the restarted peer: prev %d, %v", prev, err)
	}
}

// TestVerbTimeout: a peer that accepts but never answers makes a verb fail
// with ErrPeerDown after the peer timeout instead of hanging.
func TestVerbTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	block := make(chan struct{})
	var unblock sync.Once
	col := newCollector()
	nop := func(protocol.NodeID, []byte, []byte) {}
	slow := func(from protocol.NodeID, frame, payload []byte) {
		<-block
		col.handler(from, frame, payload)
	}
	mem := offHeap(t, protocol.PageSize) // unmapped after the transports close
	ts := startCluster(t, []transport.Handler{nop, slow}, func(c *Config) { c.PeerTimeout = timeout; c.QueueLen = 4 })
	defer unblock.Do(func() { close(block) }) // before the cleanups close the transports
	r, err := ts[1].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	// The message stalls node 1's receive loop; the verb behind it waits.
	if err := ts[0].Send(1, msgFrame(1), nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := ts[0].FetchAndAdd(r, 0, 1); !errors.Is(err, transport.ErrPeerDown) {
		t.Fatalf("verb behind a stalled handler: %v", err)
	}
	if d := time.Since(start); d < timeout || d > 5*timeout {
		t.Fatalf("verb gave up after %v, want about %v", d, timeout)
	}
	// A full queue fails the send after the timeout too. The kernel's
	// socket buffers take a lot first, so fill with pages.
	start = time.Now()
	page := make([]byte, protocol.PageSize)
	for {
		err := ts[0].Send(1, msgFrame(2), page)
		if errors.Is(err, transport.ErrPeerDown) {
			break
		}
		if err != nil || time.Since(start) > 20*time.Second {
			t.Fatalf("send to a stalled peer: %v after %v", err, time.Since(start))
		}
	}
	// Once the handler returns, the nodes find each other again.
	unblock.Do(func() { close(block) })
	deadline := time.Now().Add(10 * time.Second)
	for seq := uint64(1000); ; seq++ {
		if err := ts[0].Send(1, msgFrame(seq), nil); err == nil {
			col.waitSeq(t, 0, seq)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node 0 never got back to node 1")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := ts[0].FetchAndAdd(r, 0, 1); err != nil {
		t.Fatal(err)
	}
}
