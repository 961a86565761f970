package resp

import (
	"strings"
	"testing"
	"time"
)

// The default on Linux is the event loops, but not under TLS.
func TestLoopChosen(t *testing.T) {
	s, _ := startServer(t, Config{})
	if s.loops == nil {
		t.Fatal("the default server has no event loop")
	}
	g, _ := startServer(t, Config{Loop: LoopGoroutine})
	if g.loops != nil {
		t.Fatal("Loop goroutine has event loops")
	}
	serverTLS, _ := testTLS(t)
	tl, _ := startServer(t, Config{TLS: serverTLS})
	if tl.loops != nil {
		t.Fatal("a TLS server has event loops")
	}
	if _, err := Listen(Config{Addr: "127.0.0.1:0", Loop: "io_uring"}, newFakeEngine()); err == nil ||
		!strings.Contains(err.Error(), "Config.Loop") {
		t.Fatalf("Loop io_uring: %v", err)
	}
}

// gatedEngine is a fakeEngine whose Put of the key "gated" waits until
// the test opens the gate: a write-through that blocks.
type gatedEngine struct {
	*fakeEngine
	entered chan struct{}
	gate    chan struct{}
}

func (e *gatedEngine) Put(key, val []byte) error {
	if string(key) == "gated" {
		e.entered <- struct{}{}
		<-e.gate
	}
	return e.fakeEngine.Put(key, val)
}

// Modify waits as Put does: SET of a value that fits one entry is a
// Modify (big.go: it must see whether the old value is in chunks).
func (e *gatedEngine) Modify(key []byte, fn func(old []byte, found bool) ([]byte, bool, bool)) error {
	if string(key) == "gated" {
		e.entered <- struct{}{}
		<-e.gate
	}
	return e.fakeEngine.Modify(key, fn)
}

// With OffloadWrites, a write that blocks holds up neither its loop's
// other connections nor its own replies' order; without it, it holds up
// the loop (one loop here), which is why a node whose writes go through
// to a store sets it.
func TestOffloadWrites(t *testing.T) {
	for _, offload := range []bool{true, false} {
		e := &gatedEngine{fakeEngine: newFakeEngine(), entered: make(chan struct{}, 1), gate: make(chan struct{})}
		s, err := Listen(Config{Addr: "127.0.0.1:0", Loop: LoopEpoll, Loops: 1, OffloadWrites: offload}, e)
		if err != nil {
			t.Fatal(err)
		}
		a := dialRaw(t, s.Addr())
		b := dialRaw(t, s.Addr())
		a.send(cmd("PING") + cmd("SET", "gated", "1") + cmd("GET", "gated") + cmd("SET", "k", "2"))
		if offload {
			// The replies before the write go out before it blocks.
			a.expect("+PONG\r\n")
		}
		<-e.entered
		b.send(cmd("SET", "x", "3") + cmd("GET", "x"))
		if offload {
			b.expect("+OK\r\n")
			b.expect("$1\r\n3\r\n")
		} else {
			b.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			var one [1]byte
			if n, _ := b.nc.Read(one[:]); n != 0 {
				t.Fatalf("without offload, a connection of the blocked loop was answered: %q", one[:n])
			}
		}
		close(e.gate)
		if !offload {
			a.expect("+PONG\r\n")
		}
		a.expect("+OK\r\n")
		a.expect("$1\r\n1\r\n")
		a.expect("+OK\r\n")
		if !offload {
			b.expect("+OK\r\n")
			b.expect("$1\r\n3\r\n")
		}
		// Moved to a goroutine of its own, a goes on.
		a.send(cmd("GET", "k"))
		a.expect("$1\r\n2\r\n")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if v, _ := e.get("k"); v != "2" {
			t.Fatalf("k = %q", v)
		}
	}
}
