package resp

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Each malformed request gets "-ERR Protocol error: ..." and its
// connection is closed; other connections go on.
func TestMalformedRESP(t *testing.T) {
	s, e := startServer(t, Config{})
	other := dialRaw(t, s.Addr())
	other.send(cmd("SET", "before", "1"))
	other.expect("+OK\r\n")
	cases := []struct {
		name, in, reply string
	}{
		{"bulk shorter than its length", "*1\r\n$3\r\nGETX\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"multibulk count not a number", "*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"multibulk count over 2^20", "*3000000000\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"bulk length over 512 MiB", "*2\r\n$3\r\nGET\r\n$2147483648\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"not a bulk after bulks", "*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", "-ERR Protocol error: expected '$', got 'f'\r\n"},
		{"LF without CR", "*1\n$4\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"not a bulk", "*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
		{"bulk length not a number", "*1\r\n$x\r\nPING\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk length -2", "*2\r\n$3\r\nGET\r\n$-2\r\nab\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk length near 2^63", "*2\r\n$3\r\nGET\r\n$9223372036854775807\r\nab\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk length 2^63-2", "*2\r\n$3\r\nGET\r\n$9223372036854775806\r\nab\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"Tile38 native", "$4 PING\r\n", "-ERR Protocol error: expected '*', got '$'\r\n"},
		{"inline unbalanced quotes", "SET \"abc k\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, s.Addr())
			c.send(cmd("PING") + tc.in)
			c.expect("+PONG\r\n")
			c.expect(tc.reply)
			c.expectClosed()
		})
	}
	// The server is fine, and so is what it stored.
	other.send(cmd("GET", "before"))
	other.expect("$1\r\n1\r\n")
	if e.len() != 1 {
		t.Fatalf("engine has %d keys", e.len())
	}
}

func TestEmptyCommands(t *testing.T) {
	s, _ := startServer(t, Config{})
	c := dialRaw(t, s.Addr())
	// A negative count is an empty command too, as in Redis.
	c.send("*0\r\n\r\n  \r\n*-10\r\n" + cmd("PING") + "ping   \"a b\"\r\n")
	c.expect("+PONG\r\n")
	c.expect("$3\r\na b\r\n")
}

func TestUnknownCommand(t *testing.T) {
	s, _ := startServer(t, Config{})
	c := dialRaw(t, s.Addr())
	c.send(cmd("NOSUCH", "a", "b"))
	c.expect("-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n")
	c.send(cmd("nosuch"))
	c.expect("-ERR unknown command 'nosuch', with args beginning with: \r\n")
	// A very long name and arguments are clipped.
	long := strings.Repeat("x", 1000)
	c.send(cmd(long, long, long))
	got := c.expectPrefix("-ERR unknown command 'xxx")
	if len(got) > 400 {
		t.Fatalf("unknown-command reply is %d bytes", len(got))
	}
	c.send(cmd("PING"))
	c.expect("+PONG\r\n")
}

func TestLimits(t *testing.T) {
	s, e := startServer(t, Config{})
	c := dialRaw(t, s.Addr())
	key := func(n int) string { return strings.Repeat("k", n) }
	val := func(n int) string { return strings.Repeat("v", n) }
	bad := []struct {
		args  []string
		limit string
	}{
		{[]string{"SET", key(257), "v"}, "(MaxKey)"},
		{[]string{"SET", "k", val(4<<20 + 1)}, "(MaxValue)"},
		{[]string{"SET", key(257), "v", "NX"}, "(MaxKey)"},
		{[]string{"SET", "k", val(4<<20 + 1), "GET"}, "(MaxValue)"},
		{[]string{"SETNX", key(257), "v"}, "(MaxKey)"},
		{[]string{"SETNX", "k", val(4<<20 + 1)}, "(MaxValue)"},
		{[]string{"MSET", "a", "1", key(257), "v"}, "(MaxKey)"},
		{[]string{"MSET", "a", "1", "b", val(4<<20 + 1)}, "(MaxValue)"},
		{[]string{"GET", key(257)}, "(MaxKey)"},
		{[]string{"MGET", "a", key(257)}, "(MaxKey)"},
		{[]string{"DEL", key(257)}, "(MaxKey)"},
		{[]string{"EXISTS", key(257)}, "(MaxKey)"},
	}
	for _, b := range bad {
		c.send(cmd(b.args...))
		got := c.expectPrefix("-ERR ")
		if !strings.Contains(got, b.limit) || !strings.Contains(got, "over the limit") {
			t.Fatalf("%s %d args: reply %q does not name %s", b.args[0], len(b.args), got, b.limit)
		}
	}
	if n := e.len(); n != 0 {
		t.Fatalf("over-limit writes stored %d keys", n)
	}
	// Right at the limits is fine.
	c.send(cmd("SET", key(256), val(768)) + cmd("SET", "k", val(4<<20)) + cmd("MSET", key(24), val(1000)))
	c.expect("+OK\r\n")
	c.expect("+OK\r\n")
	c.expect("+OK\r\n")
	c.send(cmd("STRLEN", "k"))
	c.expect(":4194304\r\n")

	// Configured limits: a key and value over MaxEntry are stored in
	// chunks of MaxEntry, not refused.
	s2, e2 := startServer(t, Config{MaxKey: 4, MaxValue: 80, MaxEntry: 32})
	c2 := dialRaw(t, s2.Addr())
	c2.send(cmd("SET", "12345", "v"))
	c2.expect("-ERR key is 5 bytes, over the limit of 4 bytes (MaxKey)\r\n")
	c2.send(cmd("SET", "k", val(81)))
	c2.expect("-ERR value is 81 bytes, over the limit of 80 bytes (MaxValue)\r\n")
	c2.send(cmd("SET", "1234", val(80)) + cmd("GET", "1234"))
	c2.expect("+OK\r\n")
	c2.expect("$80\r\n" + val(80) + "\r\n")
	if n := e2.len(); n != 1+80/(32-chunkKeyLen) {
		t.Fatalf("a value of 80 bytes in chunks of %d: %d entries, want %d", 32-chunkKeyLen, n, 1+80/(32-chunkKeyLen))
	}
	if _, err := Listen(Config{Addr: "127.0.0.1:0", MaxEntry: chunkKeyLen + 1}, newFakeEngine()); err == nil {
		t.Fatal("Listen took a MaxEntry with no room for a chunk")
	}
}

// A bulk length of 2 GiB must not make the server allocate 2 GiB: redcon
// waits for the bytes, and the server refuses once 8 MiB are pending.
func TestHugeBulkLength(t *testing.T) {
	s, e := startServer(t, Config{})
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	c := dialRaw(t, s.Addr())
	c.send("*2\r\n$3\r\nGET\r\n$268435456\r\n")

	// Others are served meanwhile.
	other := dialRaw(t, s.Addr())
	other.send(cmd("SET", "k", "v") + cmd("GET", "k"))
	other.expect("+OK\r\n")
	other.expect("$1\r\nv\r\n")

	// Stream 12 MiB of the promised 256 MiB. The server answers an error and
	// closes; the writes may then fail, which is expected.
	done := make(chan struct{})
	go func() {
		defer close(done)
		chunk := make([]byte, 64<<10)
		c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		for range 192 {
			if _, err := c.nc.Write(chunk); err != nil {
				return
			}
		}
	}()
	r, err := c.read()
	t.Logf("reply %q, err %v", r.Raw, err)
	if err == nil {
		if want := "-ERR Protocol error: too big request"; !strings.HasPrefix(string(r.Raw), want) {
			t.Fatalf("reply %q, want %q...", r.Raw, want)
		}
		c.expectClosed()
	} else if strings.Contains(err.Error(), "timeout") {
		t.Fatalf("no reply and not closed: %v", err)
	}
	<-done

	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Fatalf("allocated %d MiB", grew>>20)
	}
	other.send(cmd("GET", "k"))
	other.expect("$1\r\nv\r\n")
	if e.len() != 1 {
		t.Fatalf("engine has %d keys", e.len())
	}
}

// A big but legal command (under 4 MiB, here an MSET of 3 MiB) goes
// through, and the connection's buffers shrink back afterwards.
func TestBigCommand(t *testing.T) {
	s, e := startServer(t, Config{})
	c := dialRaw(t, s.Addr())
	args := []string{"MSET"}
	for i := range 3000 {
		args = append(args, fmt.Sprintf("key:%06d", i), strings.Repeat("v", 1000))
	}
	big := cmd(args...)
	if len(big) < 2<<20 || len(big) >= maxCommandBytes {
		t.Fatalf("command is %d bytes", len(big))
	}
	c.send(big)
	c.expect("+OK\r\n")
	if e.len() != 3000 {
		t.Fatalf("engine has %d keys", e.len())
	}
	c.send(cmd("PING"))
	c.expect("+PONG\r\n")
}

func TestHugeInline(t *testing.T) {
	s, _ := startServer(t, Config{})
	c := dialRaw(t, s.Addr())
	c.send("PING " + strings.Repeat("x", 70<<10))
	c.expect("-ERR Protocol error: too big inline request\r\n")
	c.expectClosed()
}

// A client that sends nothing, or half a command, is closed after
// IdleTimeout and does not hold up others.
func TestIdleTimeout(t *testing.T) {
	s, _ := startServer(t, Config{IdleTimeout: 200 * time.Millisecond})
	silent := dialRaw(t, s.Addr())
	partial := dialRaw(t, s.Addr())
	partial.send("*2\r\n$3\r\nGET\r\n$268435456\r\n")
	active := dialRaw(t, s.Addr())
	active.send(cmd("PING"))
	active.expect("+PONG\r\n")
	silent.expectClosed()
	partial.expectClosed()
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Conns > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.Stats().Conns; n > 1 {
		t.Fatalf("%d connections still served", n)
	}
}
