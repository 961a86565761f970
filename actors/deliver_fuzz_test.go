package actors

import (
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

// fakeEnv is a world in which nothing arrives: it records what the node
// sends and completes storage operations at once.
type fakeEnv struct {
	rnd  uint64
	sent []protocol.Message
	t    *testing.T
}

func (e *fakeEnv) Now() int64 { return 0 }
func (e *fakeEnv) Rand() uint64 {
	e.rnd ^= e.rnd << 13
	e.rnd ^= e.rnd >> 7
	e.rnd ^= e.rnd << 17
	return e.rnd
}
func (e *fakeEnv) Send(m protocol.Message, payload []byte) {
	if err := m.Validate(); err != nil {
		e.t.Fatalf("node sent an invalid message %v: %v", m, err)
	}
	if len(payload) != m.PayloadLen() {
		e.t.Fatalf("node sent %v with %d payload bytes", m, len(payload))
	}
	e.sent = append(e.sent, m)
}
func (e *fakeEnv) ReadPage(slot uint64, buf []byte, done func(error))  { done(nil) }
func (e *fakeEnv) WritePage(slot uint64, buf []byte, done func(error)) { done(nil) }
func (e *fakeEnv) After(delay int64, fn func())                        {}

type countObserver struct {
	nopObserver
	violations int
}

func (c *countObserver) Violation(protocol.NodeID, error) { c.violations++ }

// FuzzDeliver: whatever valid-looking frames a peer sends, in whatever order,
// the node reports violations but never panics, and never sends an invalid
// frame itself.
func FuzzDeliver(f *testing.F) {
	seed := func(ms ...protocol.Message) []byte {
		var out []byte
		for _, m := range ms {
			var b [protocol.FrameSize]byte
			protocol.Encode(b[:], &m)
			out = append(out, b[:]...)
		}
		return out
	}
	pid := protocol.MakePID(0, 0)
	f.Add(seed(protocol.Message{Type: protocol.TRequest, From: 1, To: 0, Mode: protocol.ModeShared, PID: pid}))
	f.Add(seed(
		protocol.Message{Type: protocol.TRequest, From: 2, To: 0, Mode: protocol.ModeExclusive, PID: pid},
		protocol.Message{Type: protocol.TTransfer, From: 2, To: 0, Mode: protocol.ModeExclusive, PID: pid},
		protocol.Message{Type: protocol.TEvict, From: 1, To: 0, Count: 1},
		protocol.Message{Type: protocol.TEvictData, From: 1, To: 0, PID: pid},
		protocol.Message{Type: protocol.TInvalidate, From: 3, To: 0, PID: pid},
		protocol.Message{Type: protocol.TGrant, From: 1, To: 0, Mode: protocol.ModeShared, PID: protocol.MakePID(1, 0)},
		protocol.Message{Type: protocol.TEvictReply, From: 1, To: 0, Count: 1},
		protocol.Message{Type: protocol.TAllocReply, From: 1, To: 0, PID: protocol.MakePID(1, 3)},
		protocol.Message{Type: protocol.TDone, From: 2, To: 0, Mode: protocol.ModeExclusive, PID: pid},
	))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range []protocol.Variant{protocol.Chaining, protocol.FIFO} {
			env := &fakeEnv{rnd: 88172645463325252, t: t}
			obs := &countObserver{}
			n := New(Config{ID: 0, Variant: v, CacheFrames: 4, SSDPages: 4}, env, obs, make([]byte, 4*protocol.PageSize))
			for range 3 {
				n.Directory().Allocate(1)
			}
			payload := make([]byte, protocol.PageSize)
			for i := 0; i+protocol.FrameSize <= len(data); i += protocol.FrameSize {
				m, err := protocol.Decode(data[i : i+protocol.FrameSize])
				if err != nil || m.To != 0 {
					continue
				}
				k := m.PayloadLen()
				if k > len(payload) {
					continue
				}
				// Batch payloads get the fuzzer's bytes after the frame.
				p := payload[:k]
				copy(p, data[i+protocol.FrameSize:])
				n.Deliver(&m, p)
			}
		}
	})
}
