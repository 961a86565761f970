package actors

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// RemoteTrace breaks the remote page fetches of a cluster node into the
// hops this process can time on its own clock (EnableTrace):
//
//   - Queue: a message waiting in the outbox for the transport (only
//     messages that could not be sent at once, Queued of Sent);
//   - Handler: this node handling a request or transfer request from a
//     peer, from the frame's delivery to the handler returning (the reply
//     is in the transport by then, or queued);
//   - Wake: a parked worker, from the Wake that ends its wait to it
//     running again;
//   - Polled of Received: frames consumed by workers polling the
//     transport themselves (SetPoller) rather than by a reader goroutine.
//
// A remote fetch as the node times it (Observer.Obtained: the request to
// the reply handled) is its outbox queueing, the transport both ways, the
// peer's wait for a reader or poller and the peer's handler; the worker's
// wake-up follows. What remains after the hops timed here is the transport
// and the time a frame waits for a reader or poller.
type RemoteTrace struct {
	Queue, Handler, Wake *hdrhistogram.Snapshot
	Sent, Queued         uint64
	Received, Polled     uint64
}

// remoteTrace is a node's trace state.
type remoteTrace struct {
	mu                   sync.Mutex // guards the histograms
	queue, handler, wake *hdrhistogram.Histogram
	sent, queued         atomic.Uint64
	received, polled     atomic.Uint64
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000_000, 3) }

// EnableTrace starts timing the hops of remote fetches (RemoteTrace). It
// costs a clock read per message and wake-up; call it before the first
// worker runs.
func (l *Local) EnableTrace() {
	l.trace = &remoteTrace{queue: newHist(), handler: newHist(), wake: newHist()}
}

// record adds d to h.
func (t *remoteTrace) record(h *hdrhistogram.Histogram, d time.Duration) {
	t.mu.Lock()
	_ = h.RecordValue(int64(d))
	t.mu.Unlock()
}

// Trace reads the trace so far and starts it again; ok is false when the
// trace is off.
func (l *Local) Trace() (tr RemoteTrace, ok bool) {
	t := l.trace
	if t == nil {
		return tr, false
	}
	t.mu.Lock()
	tr = RemoteTrace{Queue: t.queue.Export(), Handler: t.handler.Export(), Wake: t.wake.Export(),
		Sent: t.sent.Swap(0), Queued: t.queued.Swap(0), Received: t.received.Swap(0), Polled: t.polled.Swap(0)}
	t.queue.Reset()
	t.handler.Reset()
	t.wake.Reset()
	t.mu.Unlock()
	return tr, true
}
