package resp

import (
	"strings"
	"testing"
	"time"
)

// testLoop is the Config.Loop startServer gives servers whose test did
// not set one ("": the default).
var testLoop string

// testOffload is Config.OffloadWrites for startServer's servers.
var testOffload bool

// The bad-input and connection tests run against both ways of serving
// connections (the default run covers the default one).
func TestBadInputBothPaths(t *testing.T) {
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"MalformedRESP", TestMalformedRESP},
		{"EmptyCommands", TestEmptyCommands},
		{"UnknownCommand", TestUnknownCommand},
		{"Limits", TestLimits},
		{"HugeBulkLength", TestHugeBulkLength},
		{"BigCommand", TestBigCommand},
		{"HugeInline", TestHugeInline},
		{"IdleTimeout", TestIdleTimeout},
		{"ManyConnections", TestManyConnections},
		{"CloseWithOpenConnections", TestCloseWithOpenConnections},
		{"TenThousandConnections", TestTenThousandConnections},
		{"SlowReader", TestSlowReader},
		{"Quit", TestQuit},
		{"Auth", TestAuth},
		{"ProtectedMode", TestProtectedMode},
		{"MultiExecWatch", TestMultiExecWatch},
		{"Pipeline", TestPipeline},
		{"TLS", TestTLS},
	}
	defer func() { testLoop, testOffload = "", false }()
	for _, mode := range []struct {
		name, loop string
		offload    bool
	}{{LoopGoroutine, LoopGoroutine, false}, {LoopEpoll, LoopEpoll, false}, {"epoll-offload", LoopEpoll, true}} {
		testLoop, testOffload = mode.loop, mode.offload
		for _, tc := range tests {
			t.Run(mode.name+"/"+tc.name, tc.fn)
		}
	}
}

// A client that pipelines more replies than the socket holds, and reads
// none until it has sent everything, gets them all, in order: the server
// stops taking its commands while its replies wait (bounded buffers) and
// goes on once they are taken.
func TestSlowReader(t *testing.T) {
	s, _ := startServer(t, Config{})
	c := dialRaw(t, s.Addr())
	val := strings.Repeat("v", 1000)
	c.send(cmd("SET", "k", val))
	c.expect("+OK\r\n")
	const n = 8000 // 8 MB of replies
	var b strings.Builder
	for i := range n {
		if i%2 == 0 {
			b.WriteString(cmd("GET", "k"))
		} else {
			b.WriteString(cmd("ECHO", "x"))
		}
	}
	sent := make(chan error, 1)
	go func() {
		c.nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
		_, err := c.nc.Write([]byte(b.String()))
		sent <- err
	}()
	time.Sleep(200 * time.Millisecond) // the server's side fills up
	want := "$1000\r\n" + val + "\r\n"
	for i := range n {
		r, err := c.read()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if i%2 == 0 && string(r.Raw) != want {
			t.Fatalf("reply %d: %.40q", i, r.Raw)
		}
		if i%2 == 1 && string(r.Raw) != "$1\r\nx\r\n" {
			t.Fatalf("reply %d: %q", i, r.Raw)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	c.send(cmd("PING"))
	c.expect("+PONG\r\n")
}
