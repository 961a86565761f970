package tcp

import (
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// BenchmarkRoundTrip: a 64-byte frame from node 0 to node 1 and back, one
// at a time, over loopback TCP within one process.
func BenchmarkRoundTrip(b *testing.B) {
	pong := make(chan struct{}, 1)
	var ts []*Transport
	ping := func(from protocol.NodeID, frame, payload []byte) {
		if err := ts[1].Send(0, frame, nil); err != nil {
			b.Error(err)
		}
	}
	back := func(protocol.NodeID, []byte, []byte) { pong <- struct{}{} }
	ts = startCluster(b, []transport.Handler{back, ping}, nil)
	frame := msgFrame(1)
	roundTrip := func() {
		if err := ts[0].Send(1, frame, nil); err != nil {
			b.Fatal(err)
		}
		<-pong
	}
	for range 100 { // connect both ways and warm up
		roundTrip()
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		roundTrip()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "roundtrips/s")
}

// BenchmarkFetchAndAdd: one remote atomic at a time.
func BenchmarkFetchAndAdd(b *testing.B) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	mem := offHeap(b, protocol.PageSize)
	ts := startCluster(b, []transport.Handler{nop, nop}, nil)
	r, err := ts[1].Register(mem)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for b.Loop() {
		if _, err := ts[0].FetchAndAdd(r, 0, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}
