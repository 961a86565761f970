package resp

import (
	"strings"
	"testing"
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
