package tcp

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// startPollers runs a goroutine per transport that calls Poll until the
// test ends, as a node's waiting workers do; it returns their count of
// frames consumed.
func startPollers(t testing.TB, ts ...*Transport) *atomic.Int64 {
	var polled atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, tr := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				polled.Add(int64(tr.Poll()))
			}
		}()
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
	return &polled
}

// TestPollSharesTheConnectionInOrder: two pollers consume node 1's
// inbound connection between its reader's turns, and the handler still
// sees every message once, in order, with its payload whole, whether the
// sender wrote it itself (TrySend) or through its writer (Send). After the
// peer closes, Poll consumes nothing and the reader has ended.
func TestPollSharesTheConnectionInOrder(t *testing.T) {
	var mu sync.Mutex
	var seqs []uint64
	var bad atomic.Int64
	h := func(from protocol.NodeID, frame, payload []byte) {
		seq := frameSeq(frame)
		if len(payload) != int(seq%(transport.MaxPayload+1)) {
			bad.Add(1)
		}
		for i, b := range payload {
			if b != byte(seq+uint64(i)) {
				bad.Add(1)
				break
			}
		}
		mu.Lock()
		seqs = append(seqs, seq)
		mu.Unlock()
	}
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := startCluster(t, []transport.Handler{nop, h}, nil)
	polled := startPollers(t, ts[1], ts[1])
	const n = 20_000
	payload := make([]byte, transport.MaxPayload)
	direct := 0
	for i := range uint64(n) {
		p := payload[:i%(transport.MaxPayload+1)]
		for j := range p {
			p[j] = byte(i + uint64(j))
		}
		if i%3 != 0 {
			ok, err := ts[0].TrySend(1, msgFrame(i), p)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				direct++
				continue
			}
		}
		if err := ts[0].Send(1, msgFrame(i), p); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := len(seqs)
		mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages arrived", got, n)
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	for i, s := range seqs {
		if s != uint64(i) {
			mu.Unlock()
			t.Fatalf("message %d is %d: out of order or twice", i, s)
		}
	}
	mu.Unlock()
	if bad.Load() != 0 {
		t.Fatalf("%d payloads arrived damaged", bad.Load())
	}
	if direct == 0 {
		t.Error("TrySend never wrote directly")
	}
	if polled.Load() == 0 {
		t.Error("the pollers consumed nothing")
	}
	t.Logf("%d of %d messages written by TrySend, %d consumed by pollers", direct, n, polled.Load())

	ts[0].Close()
	deadline = time.Now().Add(5 * time.Second)
	for {
		ts[1].inMu.Lock()
		up := len(ts[1].inbound)
		ts[1].inMu.Unlock()
		if up == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the inbound connection is still served 5 s after the peer closed")
		}
		time.Sleep(time.Millisecond)
	}
	if got := ts[1].Poll(); got != 0 {
		t.Fatalf("Poll after the peer closed consumed %d frames", got)
	}
}

// TestTrySendNeverWaits: while the receiver's handler is blocked, the
// sockets fill and TrySend starts reporting false without waiting (a
// partial write's rest goes to the writer); Send queues behind it. Once the
// handler runs again, every message arrives once, in order.
func TestTrySendNeverWaits(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var seqs []uint64
	block := func(from protocol.NodeID, frame, payload []byte) {
		<-release
		mu.Lock()
		seqs = append(seqs, frameSeq(frame))
		mu.Unlock()
	}
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := startCluster(t, []transport.Handler{nop, block}, nil)
	exchangeWarm(t, ts[0])
	page := make([]byte, transport.MaxPayload)
	sent := uint64(0)
	start := time.Now()
	for {
		ok, err := ts[0].TrySend(1, msgFrame(sent), page)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		sent++
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d pages written directly in 10 s and the sockets never filled", sent)
		}
	}
	if sent == 0 {
		t.Fatal("TrySend refused an idle connection")
	}
	for range 10 {
		if err := ts[0].Send(1, msgFrame(sent), page); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	if ok, _ := ts[0].TrySend(1, msgFrame(sent), page); ok {
		t.Fatal("TrySend wrote while messages were queued")
	}
	close(release)
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := len(seqs)
		mu.Unlock()
		if uint64(got) >= sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages arrived", got, sent)
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, s := range seqs {
		if s != uint64(i) {
			t.Fatalf("message %d is %d: out of order or twice", i, s)
		}
	}
	t.Logf("%d pages written directly before the sockets filled", sent-10)
}

// exchangeWarm waits until tr's connection to node 1 is up (TrySend needs
// it), using Send's queue.
func exchangeWarm(t *testing.T, tr *Transport) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := tr.peer(1)
		p.wmu.Lock()
		up := p.direct != nil
		p.wmu.Unlock()
		if up {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection to node 1 after 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
