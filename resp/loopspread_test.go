//go:build linux

package resp

import (
	"bufio"
	"bytes"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoopsSpreadPipelinedClients: with the default loop count, clients
// that send one request at a time stay on the home loop; once they
// pipeline, the home loop gives half of them to the extra loop (and no
// more, however long they pipeline); once they
// send one at a time again, the extra loop gives them back. Every reply
// arrives, in order, throughout.
func TestLoopsSpreadPipelinedClients(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	s, _ := startServer(t, Config{Loop: LoopEpoll})
	if len(s.loops) != 2 || s.homeLoops != 1 {
		t.Fatalf("%d loops, %d of them home; want 2 and 1", len(s.loops), s.homeLoops)
	}
	const clients = 4
	run := pingClients(t, s, clients)
	extra := func() int32 { return s.loops[1].held.Load() }
	run(1, 2*spreadWindow/clients+50)
	if n := extra(); n != 0 {
		t.Fatalf("after one request at a time, the extra loop holds %d connections", n)
	}
	run(16, 4*spreadWindow/clients+50)
	if n := extra(); n != clients/2 {
		t.Fatalf("after pipelined requests, the extra loop holds %d connections, want %d", n, clients/2)
	}
	run(1, 4*spreadWindow/clients+50)
	if n := extra(); n != 0 {
		t.Fatalf("after one request at a time again, the extra loop still holds %d connections", n)
	}
	if n := s.loops[0].held.Load(); n != clients {
		t.Fatalf("the home loop holds %d connections, want %d", n, clients)
	}
	if got := s.loopClients(); got != "4,0" {
		t.Fatalf("INFO's event_loop_clients is %q, want \"4,0\"", got)
	}
}

// pingClients dials n connections to s and returns run, which has each
// send rounds writes of depth PINGs and read the replies before the next.
func pingClients(t *testing.T, s *Server, clients int) (run func(depth, rounds int)) {
	conns := make([]net.Conn, clients)
	readers := make([]*bufio.Reader, clients)
	for i := range conns {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i], readers[i] = c, bufio.NewReader(c)
	}
	ping := []byte("*1\r\n$4\r\nPING\r\n")
	// run has every client send rounds writes of depth PINGs each and
	// read the depth replies before the next write.
	return func(depth, rounds int) {
		t.Helper()
		batch := bytes.Repeat(ping, depth)
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conns[i].SetDeadline(time.Now().Add(20 * time.Second))
				for range rounds {
					if _, err := conns[i].Write(batch); err != nil {
						errs <- err
						return
					}
					for range depth {
						line, err := readers[i].ReadString('\n')
						if err != nil {
							errs <- err
							return
						}
						if line != "+PONG\r\n" {
							errs <- &net.ParseError{Type: "reply", Text: line}
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

// TestLoopsSpreadWhenCommandsWait: clients that send one request at a
// time are spread all the same while the node's commands wait for the
// network (Config.Waits), as a cluster node's page fetches make them.
func TestLoopsSpreadWhenCommandsWait(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	var waits atomic.Uint64
	s, _ := startServer(t, Config{Loop: LoopEpoll, Waits: func() uint64 { return waits.Load() }})
	const clients = 4
	run := pingClients(t, s, clients)
	run(1, 2*spreadWindow/clients+50)
	if n := s.loops[1].held.Load(); n != 0 {
		t.Fatalf("with no waits, the extra loop holds %d connections", n)
	}
	// Every window from now on sees many waits.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				waits.Add(1 << 20)
			}
		}
	}()
	run(1, 4*spreadWindow/clients+50)
	close(stop)
	if n := s.loops[1].held.Load(); n != clients/2 {
		t.Fatalf("while commands wait, the extra loop holds %d connections, want %d", n, clients/2)
	}
}

// An explicit loop count keeps every loop taking connections and never
// moves them.
func TestExplicitLoopsDoNotMove(t *testing.T) {
	s, _ := startServer(t, Config{Loop: LoopEpoll, Loops: 2})
	if s.homeLoops != 2 {
		t.Fatalf("Loops 2: %d home loops, want 2", s.homeLoops)
	}
}
