//go:build linux

package resp

import (
	"bufio"
	"bytes"
	"net"
	"runtime"
	"sync"
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
	run := func(depth, rounds int) {
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

// An explicit loop count keeps every loop taking connections and never
// moves them.
func TestExplicitLoopsDoNotMove(t *testing.T) {
	s, _ := startServer(t, Config{Loop: LoopEpoll, Loops: 2})
	if s.homeLoops != 2 {
		t.Fatalf("Loops 2: %d home loops, want 2", s.homeLoops)
	}
}
