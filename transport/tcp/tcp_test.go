package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/transporttest"
)

func asInterfaces(ts []*Transport) []transport.Transport {
	out := make([]transport.Transport, len(ts))
	for i, tr := range ts {
		out[i] = tr
	}
	return out
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t testing.TB, handlers []transport.Handler) []transport.Transport {
		return asInterfaces(startCluster(t, handlers, nil))
	})
}

func TestConformanceTLS(t *testing.T) {
	pki := newPKI(t)
	transporttest.Run(t, func(t testing.TB, handlers []transport.Handler) []transport.Transport {
		return asInterfaces(startCluster(t, handlers, func(c *Config) {
			c.TLS = pki.config(t, "node")
		}))
	})
}

// TestWriteAfterSend: a Write is ordered after an earlier Send to the same
// peer, so the handler of message k sees the word the Write before it
// left, k-1, never k.
func TestWriteAfterSend(t *testing.T) {
	var mem []byte
	var mu sync.Mutex
	var seen []uint64
	nop := func(protocol.NodeID, []byte, []byte) {}
	h := func(from protocol.NodeID, frame, payload []byte) {
		mu.Lock()
		seen = append(seen, binary.LittleEndian.Uint64(mem))
		mu.Unlock()
	}
	mem = offHeap(t, protocol.PageSize) // before the cluster: unmapped after it closes
	ts := startCluster(t, []transport.Handler{nop, h}, nil)
	r, err := ts[1].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for k := uint64(1); k <= n; k++ {
		if err := ts[0].Send(1, msgFrame(k), nil); err != nil {
			t.Fatal(err)
		}
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], k)
		if err := ts[0].Write(r, 0, w[:]); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Fatalf("%d messages handled before the last Write returned, want %d", len(seen), n)
	}
	for i, v := range seen {
		if v != uint64(i) {
			t.Fatalf("message %d saw word %d, want %d (a Write overtook a Send)", i+1, v, i)
		}
	}
}

// TestLongVerbs: reads and writes longer than one frame are split and
// land whole; verbs on the node's own region are served in place.
func TestLongVerbs(t *testing.T) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	mem := offHeap(t, 64*protocol.PageSize)
	ts := startCluster(t, []transport.Handler{nop, nop}, nil)
	r, err := ts[1].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, 3*maxVerbData+123)
	for i := range src {
		src[i] = byte(i * 7)
	}
	for _, tr := range ts { // remote, then local
		clear(mem)
		if err := tr.Write(r, 8, src); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mem[8:8+len(src)], src) {
			t.Fatalf("node %d: long write did not land", tr.Self())
		}
		got := make([]byte, len(src))
		if err := tr.Read(got, r, 8); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("node %d: long read differs", tr.Self())
		}
		if prev, err := tr.FetchAndAdd(r, 0, 5); err != nil || prev != 0 {
			t.Fatalf("node %d: FAA prev %d err %v", tr.Self(), prev, err)
		}
		if prev, err := tr.CompareAndSwap(r, 0, 5, 7); err != nil || prev != 5 {
			t.Fatalf("node %d: CAS prev %d err %v", tr.Self(), prev, err)
		}
		if err := tr.Read(got[:8], r, uint64(len(mem))); !errors.Is(err, transport.ErrAccess) {
			t.Fatalf("node %d: read past the end: %v", tr.Self(), err)
		}
		bad := r
		bad.Key++
		if err := tr.Read(got[:0], bad, 0); !errors.Is(err, transport.ErrAccess) {
			t.Fatalf("node %d: empty read with a wrong key: %v", tr.Self(), err)
		}
	}
	if _, err := ts[0].Register(mem[1:9]); err == nil {
		t.Fatal("registered memory that is not 8-byte aligned")
	}
	if _, err := ts[0].FetchAndAdd(transport.Region{Node: 9, Key: 1, Len: 8}, 0, 1); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Fatalf("verb on a non-member: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	if _, err := New(Config{Listen: "127.0.0.1:0"}); err == nil {
		t.Error("no handler accepted")
	}
	if _, err := New(Config{Handler: nop, Listen: "256.0.0.1:1"}); err == nil {
		t.Error("bad listen address accepted")
	}
	tr, err := New(Config{Handler: nop, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetPeerAddr(0, "x"); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Errorf("SetPeerAddr(self): %v", err)
	}
	tr.Close()
	if err := tr.SetPeerAddr(1, "127.0.0.1:1"); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("SetPeerAddr after Close: %v", err)
	}
	if _, err := tr.Register(make([]byte, 8)); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Register after Close: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
