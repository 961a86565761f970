package actors

import (
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/memfile"
)

// gatedSender records the PIDs of the frames it is given; the first Send
// waits until release is closed.
type gatedSender struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	pids    []protocol.PID
	calls   int
}

func (s *gatedSender) Send(_ protocol.NodeID, frame, _ []byte) error {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.release
	}
	s.mu.Lock()
	s.pids = append(s.pids, protocol.PID(binary.LittleEndian.Uint64(frame[8:16])))
	s.mu.Unlock()
	return nil
}

// A clean Close sends what the outbox still holds: a node that stops as
// soon as no peer holds its pages must still deliver the eviction answers
// (and pulled pages) it queued just before, or the peers leaving with it
// wait for them until their shutdown times out. Here the outbox is busy
// sending one message, with two more queued behind it, when Close begins.
func TestCloseSendsQueuedMessages(t *testing.T) {
	l, err := NewClusterNode(ClusterConfig{Config: Config{ID: 0, CacheFrames: 16}}, memfile.New(1<<10, nil))
	if err != nil {
		t.Fatal(err)
	}
	s := &gatedSender{entered: make(chan struct{}), release: make(chan struct{})}
	l.Connect(s)
	queue := func(slot uint64) {
		l.mu.Lock()
		l.out.add(&protocol.Message{Type: protocol.TEvictReply, From: 0, To: 1, PID: protocol.MakePID(1, slot)}, nil)
		l.mu.Unlock()
	}
	queue(1)
	select {
	case <-s.entered: // the outbox is in Send with the first message
	case <-time.After(10 * time.Second):
		t.Fatal("the outbox did not send the first message")
	}
	queue(2)
	queue(3)
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		l.out.mu.Lock()
		c := l.out.closed
		l.out.mu.Unlock()
		if c {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close did not close the outbox")
		}
	}
	close(s.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	want := []protocol.PID{protocol.MakePID(1, 1), protocol.MakePID(1, 2), protocol.MakePID(1, 3)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(s.pids, want) {
		t.Fatalf("the transport got %v, want %v: Close dropped messages the node had queued", s.pids, want)
	}
}
