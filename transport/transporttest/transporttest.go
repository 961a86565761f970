// Package transporttest is the conformance suite every transport.Transport
// passes: ordering per pair, payloads, size and peer checks, the one-sided
// verbs and their errors, and Close. A transport's own tests call Run with a
// factory that builds a connected cluster.
//
// It may import transport and protocol only (and the standard library).
package transporttest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Factory builds a connected cluster of len(handlers) nodes, node i calling
// handlers[i], and returns its transports in node order. The suite closes
// them; the factory registers any other cleanup with t.Cleanup.
type Factory func(t testing.TB, handlers []transport.Handler) []transport.Transport

// Run runs the whole suite.
func Run(t *testing.T, f Factory) {
	t.Run("Ordering", func(t *testing.T) { testOrdering(t, f) })
	t.Run("Sizes", func(t *testing.T) { testSizes(t, f) })
	t.Run("OneSided", func(t *testing.T) { testOneSided(t, f) })
	t.Run("Atomics", func(t *testing.T) { testAtomics(t, f) })
	t.Run("Close", func(t *testing.T) { testClose(t, f) })
}

type received struct {
	from    protocol.NodeID
	seq     uint64
	payload []byte
}

type inbox struct {
	mu   sync.Mutex
	msgs []received
	cond *sync.Cond
}

func newInbox() *inbox {
	b := &inbox{}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *inbox) handler() transport.Handler {
	return func(from protocol.NodeID, frame, payload []byte) {
		r := received{from: from, seq: binary.LittleEndian.Uint64(frame[8:]), payload: bytes.Clone(payload)}
		b.mu.Lock()
		b.msgs = append(b.msgs, r)
		b.cond.Broadcast()
		b.mu.Unlock()
	}
}

// wait waits until n messages arrived or the deadline passed.
func (b *inbox) wait(t testing.TB, n int) []received {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.msgs) < n {
		if time.Now().After(deadline) {
			t.Fatalf("got %d messages, want %d", len(b.msgs), n)
		}
		b.mu.Unlock()
		time.Sleep(time.Millisecond)
		b.mu.Lock()
	}
	return append([]received(nil), b.msgs...)
}

func frame(seq uint64) []byte {
	f := make([]byte, protocol.FrameSize)
	f[0] = 0xA5
	binary.LittleEndian.PutUint64(f[8:], seq)
	return f
}

func payloadFor(from protocol.NodeID, seq uint64) []byte {
	n := int(seq*37) % (transport.MaxPayload + 1)
	if seq%5 == 0 {
		n = 0
	}
	if seq%7 == 0 {
		n = transport.MaxPayload
	}
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(uint64(from)*31 + seq + uint64(i))
	}
	return p
}

// testOrdering: two senders to one receiver, and the receiver back; each
// pair's messages arrive complete, in order, with their payloads.
func testOrdering(t *testing.T, f Factory) {
	const n = 300
	boxes := []*inbox{newInbox(), newInbox(), newInbox()}
	ts := f(t, []transport.Handler{boxes[0].handler(), boxes[1].handler(), boxes[2].handler()})
	defer closeAll(t, ts)
	var wg sync.WaitGroup
	send := func(from, to protocol.NodeID) {
		defer wg.Done()
		for seq := range uint64(n) {
			if err := ts[from].Send(to, frame(seq), payloadFor(from, seq)); err != nil {
				t.Errorf("send %d->%d #%d: %v", from, to, seq, err)
				return
			}
		}
	}
	wg.Add(3)
	go send(1, 0)
	go send(2, 0)
	go send(0, 1)
	wg.Wait()
	check := func(box *inbox, want int, senders ...protocol.NodeID) {
		msgs := box.wait(t, want)
		next := map[protocol.NodeID]uint64{}
		for _, m := range msgs {
			if m.seq != next[m.from] {
				t.Fatalf("from %d: got seq %d, want %d (per-pair order broken)", m.from, m.seq, next[m.from])
			}
			if !bytes.Equal(m.payload, payloadFor(m.from, m.seq)) {
				t.Fatalf("from %d seq %d: payload of %d bytes differs", m.from, m.seq, len(m.payload))
			}
			next[m.from]++
		}
		for _, s := range senders {
			if next[s] != n {
				t.Fatalf("from %d: %d messages, want %d", s, next[s], n)
			}
		}
	}
	check(boxes[0], 2*n, 1, 2)
	check(boxes[1], n, 0)
}

func testSizes(t *testing.T, f Factory) {
	box := newInbox()
	ts := f(t, []transport.Handler{box.handler(), box.handler()})
	defer closeAll(t, ts)
	if err := ts[0].Send(1, make([]byte, protocol.FrameSize-1), nil); !errors.Is(err, transport.ErrFrameSize) {
		t.Errorf("short frame: %v, want ErrFrameSize", err)
	}
	if err := ts[0].Send(1, frame(0), make([]byte, transport.MaxPayload+1)); !errors.Is(err, transport.ErrFrameSize) {
		t.Errorf("long payload: %v, want ErrFrameSize", err)
	}
	if err := ts[0].Send(7, frame(0), nil); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Errorf("unknown peer: %v, want ErrUnknownPeer", err)
	}
	if err := ts[0].Send(0, frame(0), nil); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Errorf("send to self: %v, want ErrUnknownPeer", err)
	}
	// The transport still works after refusing.
	if err := ts[0].Send(1, frame(42), []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if m := box.wait(t, 1); m[0].seq != 42 || string(m[0].payload) != "ok" {
		t.Fatalf("got %+v", m[0])
	}
}

// offHeap maps n bytes outside the Go heap, as registered memory must be.
func offHeap(t testing.TB, n int) []byte {
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	return mem
}

func testOneSided(t *testing.T, f Factory) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := f(t, []transport.Handler{nop, nop})
	defer closeAll(t, ts)
	mem := offHeap(t, 2*protocol.PageSize)
	r, err := ts[1].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	if r.Node != 1 || r.Len != uint64(len(mem)) {
		t.Fatalf("region %+v: want node 1, len %d", r, len(mem))
	}
	page := bytes.Repeat([]byte("scalestore"), 410)[:protocol.PageSize]
	if err := ts[0].Write(r, 100, page); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[100:100+len(page)], page) {
		t.Fatal("write did not land in the registered memory")
	}
	got := make([]byte, len(page))
	if err := ts[0].Read(got, r, 100); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, page) {
		t.Fatal("read returned other bytes")
	}
	binary.LittleEndian.PutUint64(mem[8192-8:], 5)
	if prev, err := ts[0].CompareAndSwap(r, 8192-8, 4, 9); err != nil || prev != 5 {
		t.Fatalf("failing CAS: prev %d err %v, want 5", prev, err)
	}
	if prev, err := ts[0].CompareAndSwap(r, 8192-8, 5, 9); err != nil || prev != 5 {
		t.Fatalf("CAS: prev %d err %v, want 5", prev, err)
	}
	if prev, err := ts[0].FetchAndAdd(r, 8192-8, 3); err != nil || prev != 9 {
		t.Fatalf("FAA: prev %d err %v, want 9", prev, err)
	}
	if v := binary.LittleEndian.Uint64(mem[8192-8:]); v != 12 {
		t.Fatalf("word is %d after CAS and FAA, want 12", v)
	}
	bad := r
	bad.Key ^= 0x5a5a5a5a
	if err := ts[0].Read(got[:8], bad, 0); !errors.Is(err, transport.ErrAccess) {
		t.Errorf("read with a wrong key: %v, want ErrAccess", err)
	}
	if err := ts[0].Write(bad, 0, got[:8]); !errors.Is(err, transport.ErrAccess) {
		t.Errorf("write with a wrong key: %v, want ErrAccess", err)
	}
	if _, err := ts[0].FetchAndAdd(bad, 0, 1); !errors.Is(err, transport.ErrAccess) {
		t.Errorf("FAA with a wrong key: %v, want ErrAccess", err)
	}
	if err := ts[0].Read(got[:16], r, r.Len-8); !errors.Is(err, transport.ErrAccess) {
		t.Errorf("read past the end: %v, want ErrAccess", err)
	}
	if err := ts[0].Write(r, ^uint64(0)-2, got[:16]); !errors.Is(err, transport.ErrAccess) {
		t.Errorf("write with an overflowing offset: %v, want ErrAccess", err)
	}
	if _, err := ts[0].CompareAndSwap(r, 4, 0, 1); !errors.Is(err, transport.ErrMisaligned) {
		t.Errorf("misaligned CAS: %v, want ErrMisaligned", err)
	}
	if mem[0] != 0 || mem[4] != 0 {
		t.Errorf("a refused verb changed memory")
	}
}

// testAtomics: two nodes add to one word concurrently and take a latch word
// with CAS; no update is lost.
func testAtomics(t *testing.T, f Factory) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := f(t, []transport.Handler{nop, nop, nop})
	defer closeAll(t, ts)
	mem := offHeap(t, protocol.PageSize)
	r, err := ts[2].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	var wg sync.WaitGroup
	for _, node := range []int{0, 1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if _, err := ts[node].FetchAndAdd(r, 0, 1); err != nil {
					t.Error(err)
					return
				}
				// Increment word 8 with a CAS loop.
				for {
					var cur [8]byte
					if err := ts[node].Read(cur[:], r, 8); err != nil {
						t.Error(err)
						return
					}
					v := binary.LittleEndian.Uint64(cur[:])
					prev, err := ts[node].CompareAndSwap(r, 8, v, v+1)
					if err != nil {
						t.Error(err)
						return
					}
					if prev == v {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if a, b := binary.LittleEndian.Uint64(mem[0:]), binary.LittleEndian.Uint64(mem[8:]); a != 2*n || b != 2*n {
		t.Fatalf("FAA word %d, CAS word %d; want %d each", a, b, 2*n)
	}
}

func testClose(t *testing.T, f Factory) {
	box := newInbox()
	ts := f(t, []transport.Handler{box.handler(), box.handler()})
	if err := ts[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := ts[0].Send(1, frame(1), nil); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("send after close: %v, want ErrClosed", err)
	}
	// The peer's sends to a closed node fail or are dropped; they never hang.
	done := make(chan error, 1)
	go func() {
		var err error
		for range 50 {
			if err = ts[1].Send(0, frame(2), nil); err != nil {
				break
			}
		}
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("sending to a closed peer hung")
	}
	if err := ts[1].Close(); err != nil {
		t.Fatal(err)
	}
}

func closeAll(t testing.TB, ts []transport.Transport) {
	for i, tr := range ts {
		if err := tr.Close(); err != nil {
			t.Errorf("closing node %d: %v", i, err)
		}
	}
}
