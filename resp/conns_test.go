package resp

import (
	"net"
	"sync"
	"testing"
	"time"
)

// TestManyConnections opens 2,000 connections against a limit of 1,500:
// each is served or told "max number of clients reached", the server
// keeps serving, and what was stored before is intact.
func TestManyConnections(t *testing.T) {
	const total, limit = 2000, 1500
	s, e := startServer(t, Config{MaxConns: limit})
	first := dialRaw(t, s.Addr())
	first.send(cmd("SET", "before", "intact"))
	first.expect("+OK\r\n")

	conns := make([]net.Conn, total)
	replies := make([]string, total)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	work := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				nc, err := net.DialTimeout("tcp", s.Addr(), 10*time.Second)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				conns[i] = nc
				rc := &rawConn{t: t, nc: nc}
				rc.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, err := nc.Write([]byte(cmd("PING"))); err != nil {
					// A rejected connection may already be shut.
					replies[i] = "write: " + err.Error()
				}
				r, err := rc.read()
				if err != nil {
					replies[i] = "read: " + err.Error()
					continue
				}
				replies[i] = string(r.Raw)
			}
		}()
	}
	for i := range total {
		work <- i
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d dials failed, first: %v", len(errs), errs[0])
	}
	served, rejected := 0, 0
	for i, r := range replies {
		switch r {
		case "+PONG\r\n":
			served++
		case "-ERR max number of clients reached\r\n":
			rejected++
		default:
			t.Errorf("connection %d: %q", i, r)
		}
	}
	// "first" holds one of the slots.
	if served != limit-1 || rejected != total-limit+1 {
		t.Fatalf("served %d, rejected %d", served, rejected)
	}
	if st := s.Stats(); st.Conns != limit || st.ConnsTotal != total+1 {
		t.Fatalf("Stats = %+v", st)
	}
	for _, nc := range conns {
		if nc != nil {
			nc.Close()
		}
	}
	first.send(cmd("GET", "before"))
	first.expect("$6\r\nintact\r\n")
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Conns > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.Stats().Conns; n != 1 {
		t.Fatalf("%d connections served after the others closed", n)
	}
	// Slots are free again.
	again := dialRaw(t, s.Addr())
	again.send(cmd("GET", "before"))
	again.expect("$6\r\nintact\r\n")
	if v, _ := e.get("before"); v != "intact" {
		t.Fatalf("engine has %q", v)
	}
}

// Close closes open connections, idle or not, and returns once their
// handlers have (TestMain checks that no goroutine is left).
func TestCloseWithOpenConnections(t *testing.T) {
	e := newFakeEngine()
	s, err := Listen(Config{Addr: "127.0.0.1:0", Loop: testLoop}, e)
	if err != nil {
		t.Fatal(err)
	}
	idle := dialRaw(t, s.Addr())
	partial := dialRaw(t, s.Addr())
	partial.send("*2\r\n$3\r\nGET\r\n$10\r\nab")
	busy := dialRaw(t, s.Addr())
	busy.send(cmd("PING"))
	busy.expect("+PONG\r\n")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	idle.expectClosed()
	partial.expectClosed()
	busy.expectClosed()
	if n := s.Stats().Conns; n != 0 {
		t.Fatalf("%d connections after Close", n)
	}
}
