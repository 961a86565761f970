package indexproc

import (
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// sink is a transport that records what is sent and serves no verb.
type sink struct {
	self protocol.NodeID
	sent []protocol.Message
}

func (s *sink) Self() protocol.NodeID { return s.self }
func (s *sink) Send(to protocol.NodeID, frame, payload []byte) error {
	m, err := protocol.Decode(frame)
	if err != nil {
		return err
	}
	s.sent = append(s.sent, m)
	return nil
}
func (s *sink) Register(mem []byte) (transport.Region, error) {
	return transport.Region{Node: s.self, Len: uint64(len(mem))}, nil
}
func (s *sink) Read([]byte, transport.Region, uint64) error  { return transport.ErrAccess }
func (s *sink) Write(transport.Region, uint64, []byte) error { return transport.ErrAccess }
func (s *sink) CompareAndSwap(transport.Region, uint64, uint64, uint64) (uint64, error) {
	return 0, transport.ErrAccess
}
func (s *sink) FetchAndAdd(transport.Region, uint64, uint64) (uint64, error) {
	return 0, transport.ErrAccess
}
func (s *sink) Close() error { return nil }

func frameOf(m protocol.Message) []byte {
	var f [protocol.FrameSize]byte
	protocol.Encode(f[:], &m)
	return f[:]
}

// TestIndexNodeRefusesBadMessages: a memory server and a compute node
// given garbage, a forged sender, the wrong message type and a reply that
// nobody waits for count and log each, never panic; a malformed call gets
// a refusal reply.
func TestIndexNodeRefusesBadMessages(t *testing.T) {
	for _, wl := range []string{"nam-hybrid", "cell"} {
		tr := &sink{self: 1}
		srv, err := NewNode(Config{ID: 1, Workload: wl, Memory: true, Computes: 1, Servers: 1, Keys: 100, Threads: 1,
			NewTransport: func(transport.Handler) (transport.Transport, error) { return tr, nil }})
		if err != nil {
			t.Fatal(err)
		}
		srv.handle(0, []byte("garbage"), nil)
		srv.handle(0, frameOf(protocol.Message{Type: protocol.TIndexCall, From: 5, To: 1, PID: 1, Count: 3}), []byte{1, 2, 3})
		srv.handle(0, frameOf(protocol.Message{Type: protocol.TIndexReply, From: 0, To: 1, PID: 1, Count: 3}), []byte{1, 2, 3})
		if got := srv.Bad.Load(); got != 3 {
			t.Errorf("%s server: %d refused, want 3", wl, got)
		}
		srv.handle(0, frameOf(protocol.Message{Type: protocol.TIndexCall, From: 0, To: 1, PID: 7, Count: 3}), []byte{1, 2, 3})
		if len(tr.sent) != 1 || tr.sent[0].Type != protocol.TIndexReply || tr.sent[0].PID != 7 {
			t.Errorf("%s server: a malformed call got %v, want one refusal reply", wl, tr.sent)
		}
		srv.Close()

		ctr := &sink{self: 0}
		cmp, err := NewNode(Config{ID: 0, Workload: wl, Computes: 1, Servers: 1, Keys: 100, Threads: 1,
			NewTransport: func(transport.Handler) (transport.Transport, error) { return ctr, nil }})
		if err != nil {
			t.Fatal(err)
		}
		cmp.handle(1, frameOf(protocol.Message{Type: protocol.TIndexReply, From: 1, To: 0, PID: 99, Count: 3}), []byte{1, 2, 3})
		cmp.handle(1, frameOf(protocol.Message{Type: protocol.TIndexCall, From: 1, To: 0, PID: 1, Count: 3}), []byte{1, 2, 3})
		if got := cmp.Bad.Load(); got != 2 || len(ctr.sent) != 0 {
			t.Errorf("%s compute node: %d refused, %d sent; want 2 and 0", wl, got, len(ctr.sent))
		}
		cmp.Close()
	}
}
