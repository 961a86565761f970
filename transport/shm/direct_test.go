//go:build linux

package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// waitMapped waits until from has mapped region r of its peer.
func waitMapped(t *testing.T, from *Transport, r transport.Region) *link {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l := from.peers[r.Node].live.Load(); l != nil {
			if m := l.remote.Load(); m != nil && (*m)[r.Key] != nil {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d never mapped region %#x of node %d", from.self, r.Key, r.Node)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDirectVerbs: memory of AllocMemory is mapped by the peer, whose verbs
// on it then work while the owner's reader serves nothing (it is held
// off), with the same results and errors as through the ring; a verb
// behind an unconsumed Send takes the ring and lands after the message.
func TestDirectVerbs(t *testing.T) {
	const n = 3*verbChunk + 64
	var mem []byte
	var sawOld atomic.Int32 // the handler saw memory before the Write behind its message
	handler1 := func(_ protocol.NodeID, frame, _ []byte) {
		if frame[0] == 'o' && mem[64] == 0 {
			sawOld.Add(1)
		}
	}
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := newCluster(t, []transport.Handler{nop, handler1}, nil)
	defer ts[0].Close()
	defer ts[1].Close()
	var err error
	if mem, err = ts[1].AllocMemory(n); err != nil {
		t.Fatal(err)
	}
	r, err := ts[1].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	waitMapped(t, ts[0], r)

	// Hold the owner's reader off: only direct verbs can complete.
	back := ts[1].peers[0].live.Load()
	back.inMu.Lock()
	src := make([]byte, n-128)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	if err := ts[0].Write(r, 128, src); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[128:], src) {
		t.Fatal("direct write differs")
	}
	got := make([]byte, len(src))
	if err := ts[0].Read(got, r, 128); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("direct read of %d bytes: %v", len(got), err)
	}
	if prev, err := ts[0].CompareAndSwap(r, 8, 0, 5); err != nil || prev != 0 {
		t.Fatalf("CAS: %d %v", prev, err)
	}
	if prev, err := ts[0].CompareAndSwap(r, 8, 0, 9); err != nil || prev != 5 {
		t.Fatalf("failed CAS: %d %v", prev, err)
	}
	if prev, err := ts[0].FetchAndAdd(r, 8, 3); err != nil || prev != 5 || binary.LittleEndian.Uint64(mem[8:]) != 8 {
		t.Fatalf("FAA: %d %v", prev, err)
	}
	if err := ts[0].Read(got[:8], r, n-4); !errors.Is(err, transport.ErrAccess) {
		t.Fatalf("read past the end: %v", err)
	}
	if _, err := ts[0].FetchAndAdd(r, 12, 1); !errors.Is(err, transport.ErrMisaligned) {
		t.Fatalf("misaligned FAA: %v", err)
	}
	if _, err := ts[0].CompareAndSwap(r, n, 0, 0); !errors.Is(err, transport.ErrAccess) {
		t.Fatalf("CAS past the end: %v", err)
	}

	// A Send the owner has not consumed: the Write behind it takes the
	// ring, so it waits for the reader and lands after the handler ran.
	frame := make([]byte, protocol.FrameSize)
	frame[0] = 'o'
	if err := ts[0].Send(1, frame, nil); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- ts[0].Write(r, 64, []byte{42}) }()
	select {
	case err := <-wrote:
		t.Fatalf("a Write behind an unconsumed Send completed before the Send was handled (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	back.inMu.Unlock()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if sawOld.Load() != 1 || mem[64] != 42 {
		t.Fatalf("the handler saw the write before its message (%d) or it did not land (%d)", sawOld.Load(), mem[64])
	}

	// The owner goes away: verbs fail, nothing faults.
	ts[1].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := ts[0].FetchAndAdd(r, 8, 1)
		if err != nil {
			if !errors.Is(err, transport.ErrPeerDown) && !errors.Is(err, transport.ErrClosed) {
				t.Fatalf("verb on a closed peer: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("verbs on a closed peer still succeed")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDirectRegionBeforeConnect: a region registered before the link came
// up is passed when it does, and plain registered memory stays on the ring.
func TestDirectRegionBeforeConnect(t *testing.T) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	log, _ := testLogger(t)
	paths := sockPaths(sockDir(t), 2)
	cfg := func(i int) Config {
		return Config{Self: protocol.NodeID(i), SocketPath: paths[protocol.NodeID(i)], Peers: paths,
			ClusterID: 7, Handler: nop, Logger: log, RingSize: MinRingSize}
	}
	t1, err := New(cfg(1))
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	mem, err := t1.AllocMemory(4096)
	if err != nil {
		t.Fatal(err)
	}
	r, err := t1.Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	plain := make([]byte, 4096)
	rp, err := t1.Register(plain)
	if err != nil {
		t.Fatal(err)
	}
	t0, err := New(cfg(0))
	if err != nil {
		t.Fatal(err)
	}
	defer t0.Close()
	waitConnected(t, t0, t1)
	l := waitMapped(t, t0, r)
	if m := l.remote.Load(); (*m)[rp.Key] != nil {
		t.Fatal("memory not from AllocMemory was passed")
	}
	if _, err := t0.FetchAndAdd(rp, 0, 2); err != nil || binary.LittleEndian.Uint64(plain) != 2 {
		t.Fatalf("ring FAA: %v", err)
	}
	if _, err := t0.FetchAndAdd(r, 0, 3); err != nil || binary.LittleEndian.Uint64(mem) != 3 {
		t.Fatalf("direct FAA: %v", err)
	}
}
