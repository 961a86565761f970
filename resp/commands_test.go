package resp

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var ctx = context.Background()

// wantErr checks that err is a Redis error reply starting with prefix.
func wantErr(t *testing.T, err error, prefix string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", prefix)
	}
	if !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("error %q, want %q...", err, prefix)
	}
}

// result lets a (value, error) call be checked in one expression:
// res(f()).must(t).
type result[T any] struct {
	v   T
	err error
}

func res[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) must(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func TestCommandsGoRedis(t *testing.T) {
	// Protocol 3 (go-redis's default) tries HELLO 3, gets NOPROTO and falls
	// back to RESP2; protocol 2 says HELLO 2, which the server speaks.
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("proto", proto), func(t *testing.T) {
			s, e := startServer(t, Config{})
			rc := newRedis(t, s, &redis.Options{Protocol: proto})

			if got := res(rc.Ping(ctx).Result()).must(t); got != "PONG" {
				t.Fatalf("PING = %q", got)
			}
			if got := res(rc.Do(ctx, "ping", "hi").Text()).must(t); got != "hi" {
				t.Fatalf("PING hi = %q", got)
			}
			if got := res(rc.Echo(ctx, "hello world").Result()).must(t); got != "hello world" {
				t.Fatalf("ECHO = %q", got)
			}

			// GET, SET.
			if _, err := rc.Get(ctx, "missing").Result(); err != redis.Nil {
				t.Fatalf("GET missing: %v, want redis.Nil", err)
			}
			if got := res(rc.Set(ctx, "k1", "v1", 0).Result()).must(t); got != "OK" {
				t.Fatalf("SET = %q", got)
			}
			if got := res(rc.Get(ctx, "k1").Result()).must(t); got != "v1" {
				t.Fatalf("GET = %q", got)
			}
			if v, _ := e.get("k1"); v != "v1" {
				t.Fatalf("engine has %q", v)
			}
			if got := res(rc.Do(ctx, "gEt", "k1").Text()).must(t); got != "v1" {
				t.Fatalf("mixed-case GET = %q", got)
			}
			binary := "a\x00b\r\nc\xff"
			res(rc.Set(ctx, "bin\x00key", binary, 0).Result()).must(t)
			if got := res(rc.Get(ctx, "bin\x00key").Result()).must(t); got != binary {
				t.Fatalf("binary GET = %q", got)
			}
			res(rc.Set(ctx, "empty", "", 0).Result()).must(t)
			if got, err := rc.Get(ctx, "empty").Result(); err != nil || got != "" {
				t.Fatalf("GET empty = %q, %v", got, err)
			}

			// SET NX / XX.
			if ok := res(rc.SetNX(ctx, "k1", "other", 0).Result()).must(t); ok {
				t.Fatal("SET NX on an existing key applied")
			}
			if ok := res(rc.SetNX(ctx, "k2", "v2", 0).Result()).must(t); !ok {
				t.Fatal("SET NX on a new key did not apply")
			}
			if ok := res(rc.SetXX(ctx, "k3", "v3", 0).Result()).must(t); ok {
				t.Fatal("SET XX on a missing key applied")
			}
			if ok := res(rc.SetXX(ctx, "k1", "v1b", 0).Result()).must(t); !ok {
				t.Fatal("SET XX on an existing key did not apply")
			}
			if got := res(rc.Get(ctx, "k1").Result()).must(t); got != "v1b" {
				t.Fatalf("after SET XX: %q", got)
			}
			if _, ok := e.get("k3"); ok {
				t.Fatal("SET XX stored a missing key")
			}
			if _, err := rc.Do(ctx, "set", "k1", "x", "nx", "xx").Result(); err == nil {
				t.Fatal("SET NX XX accepted")
			} else {
				wantErr(t, err, "ERR syntax error")
			}
			_, err := rc.Do(ctx, "set", "k1", "x", "bogus").Result()
			wantErr(t, err, "ERR syntax error")

			// SET ... GET.
			if got := res(rc.SetArgs(ctx, "k1", "v1c", redis.SetArgs{Get: true}).Result()).must(t); got != "v1b" {
				t.Fatalf("SET GET old = %q", got)
			}
			if _, err := rc.SetArgs(ctx, "k4", "v4", redis.SetArgs{Get: true}).Result(); err != redis.Nil {
				t.Fatalf("SET GET on a new key: %v, want redis.Nil", err)
			}
			if v, _ := e.get("k4"); v != "v4" {
				t.Fatalf("SET GET did not store: %q", v)
			}
			if got := res(rc.SetArgs(ctx, "k4", "no", redis.SetArgs{Mode: "NX", Get: true}).Result()).must(t); got != "v4" {
				t.Fatalf("SET NX GET on an existing key = %q", got)
			}
			if v, _ := e.get("k4"); v != "v4" {
				t.Fatalf("SET NX GET overwrote: %q", v)
			}
			if _, err := rc.SetArgs(ctx, "k5", "no", redis.SetArgs{Mode: "XX", Get: true}).Result(); err != redis.Nil {
				t.Fatalf("SET XX GET on a missing key: %v", err)
			}
			if _, ok := e.get("k5"); ok {
				t.Fatal("SET XX GET stored a missing key")
			}
			if got := res(rc.SetArgs(ctx, "k4", "v4b", redis.SetArgs{Mode: "XX", Get: true}).Result()).must(t); got != "v4" {
				t.Fatalf("SET XX GET = %q", got)
			}

			// Bad expiry options are refused with Redis's words, and write
			// nothing.
			for _, c := range []struct {
				args []any
				want string
			}{
				{[]any{"set", "k1", "v", "ex", "0"}, "ERR invalid expire time in 'set' command"},
				{[]any{"set", "k1", "v", "px", "-5"}, "ERR invalid expire time in 'set' command"},
				{[]any{"set", "k1", "v", "ex", "x"}, "ERR value is not an integer or out of range"},
				{[]any{"set", "k1", "v", "ex", "10", "px", "10"}, "ERR syntax error"},
				{[]any{"set", "k1", "v", "ex", "10", "keepttl"}, "ERR syntax error"},
				{[]any{"set", "k1", "v", "ex"}, "ERR syntax error"},
				{[]any{"set", "k1", "v", "ex", "9223372036854775807"}, "ERR invalid expire time in 'set' command"},
			} {
				_, err := rc.Do(ctx, c.args...).Result()
				wantErr(t, err, c.want)
			}
			if v, _ := e.get("k1"); v != "v1c" {
				t.Fatalf("refused SET wrote: %q", v)
			}

			// SETNX.
			if ok := res(rc.Do(ctx, "setnx", "k6", "v6").Int()).must(t); ok != 1 {
				t.Fatalf("SETNX new = %d", ok)
			}
			if ok := res(rc.Do(ctx, "setnx", "k6", "zz").Int()).must(t); ok != 0 {
				t.Fatalf("SETNX existing = %d", ok)
			}
			if v, _ := e.get("k6"); v != "v6" {
				t.Fatalf("SETNX overwrote: %q", v)
			}

			// MSET, MGET.
			if got := res(rc.MSet(ctx, "m1", "a", "m2", "b", "m3", "c").Result()).must(t); got != "OK" {
				t.Fatalf("MSET = %q", got)
			}
			vals := res(rc.MGet(ctx, "m1", "nope", "m3", "m2", "m1").Result()).must(t)
			want := []any{"a", nil, "c", "b", "a"}
			if fmt.Sprint(vals) != fmt.Sprint(want) {
				t.Fatalf("MGET = %v, want %v", vals, want)
			}
			_, err = rc.Do(ctx, "mset", "a", "b", "c").Result()
			wantErr(t, err, "ERR wrong number of arguments for 'mset' command")

			// EXISTS counts a key named twice twice; DEL counts deletions.
			if n := res(rc.Exists(ctx, "m1", "m1", "nope", "m2").Result()).must(t); n != 3 {
				t.Fatalf("EXISTS = %d", n)
			}
			if n := res(rc.Del(ctx, "m1", "nope", "m2", "m1").Result()).must(t); n != 2 {
				t.Fatalf("DEL = %d", n)
			}
			if n := res(rc.Exists(ctx, "m1", "m2", "m3").Result()).must(t); n != 1 {
				t.Fatalf("EXISTS after DEL = %d", n)
			}

			// DBSIZE.
			if n := res(rc.DBSize(ctx).Result()).must(t); n != int64(e.len()) || n == 0 {
				t.Fatalf("DBSIZE = %d, engine has %d", n, e.len())
			}

			// SELECT.
			if got := res(rc.Do(ctx, "select", "0").Text()).must(t); got != "OK" {
				t.Fatalf("SELECT 0 = %q", got)
			}
			_, err = rc.Do(ctx, "select", "1").Result()
			wantErr(t, err, "ERR DB index is out of range")
			_, err = rc.Do(ctx, "select", "x").Result()
			wantErr(t, err, "ERR value is not an integer or out of range")

			// INFO.
			info := res(rc.Info(ctx).Result()).must(t)
			for _, w := range []string{"# Server\r\n", "# Clients\r\nconnected_clients:", "# Stats\r\n", "total_commands_processed:"} {
				if !strings.Contains(info, w) {
					t.Fatalf("INFO lacks %q:\n%s", w, info)
				}
			}
			stats := res(rc.Info(ctx, "stats").Result()).must(t)
			if strings.Contains(stats, "# Server") || !strings.Contains(stats, "# Stats") {
				t.Fatalf("INFO stats:\n%s", stats)
			}

			// COMMAND and friends.
			if n := res(rc.Do(ctx, "command", "count").Int()).must(t); n != len(commandInfos) {
				t.Fatalf("COMMAND COUNT = %d", n)
			}
			infos := res(rc.Command(ctx).Result()).must(t)
			if infos["get"] == nil || infos["get"].Arity != 2 || !infos["get"].ReadOnly {
				t.Fatalf("COMMAND get = %+v", infos["get"])
			}
			if docs := res(rc.Do(ctx, "command", "docs").Slice()).must(t); len(docs) != 0 {
				t.Fatalf("COMMAND DOCS = %v", docs)
			}
			ci := res(rc.Do(ctx, "command", "info", "get", "nosuch").Slice()).must(t)
			if len(ci) != 2 || ci[1] != nil {
				t.Fatalf("COMMAND INFO = %v", ci)
			}

			// CONFIG GET.
			cfg := res(rc.ConfigGet(ctx, "save").Result()).must(t)
			if v, ok := cfg["save"]; !ok || v != "" || len(cfg) != 1 {
				t.Fatalf("CONFIG GET save = %v", cfg)
			}
			cfg = res(rc.ConfigGet(ctx, "appendonly").Result()).must(t)
			if cfg["appendonly"] != "no" {
				t.Fatalf("CONFIG GET appendonly = %v", cfg)
			}
			if cfg := res(rc.ConfigGet(ctx, "nosuchparam").Result()).must(t); len(cfg) != 0 {
				t.Fatalf("CONFIG GET nosuchparam = %v", cfg)
			}
			_, err = rc.ConfigSet(ctx, "save", "").Result()
			wantErr(t, err, "ERR CONFIG SET is not supported")

			// CLIENT.
			res(rc.Do(ctx, "client", "setname", "tester").Result()).must(t)
			if got := res(rc.Do(ctx, "client", "getname").Text()).must(t); got != "tester" {
				t.Fatalf("CLIENT GETNAME = %q", got)
			}
			if got := res(rc.Do(ctx, "client", "setinfo", "lib-name", "x").Text()).must(t); got != "OK" {
				t.Fatalf("CLIENT SETINFO = %q", got)
			}
			if id := res(rc.ClientID(ctx).Result()).must(t); id <= 0 {
				t.Fatalf("CLIENT ID = %d", id)
			}
			_, err = rc.Do(ctx, "client", "setname", "a b").Result()
			wantErr(t, err, "ERR Client names cannot contain spaces")
			_, err = rc.Do(ctx, "client", "tracking", "on").Result()
			wantErr(t, err, "ERR unknown subcommand 'tracking'")

			// HELLO.
			_, err = rc.Do(ctx, "hello", "3").Result()
			wantErr(t, err, "NOPROTO unsupported protocol version")
			hello := res(rc.Do(ctx, "hello", "2").Slice()).must(t)
			if len(hello) != 14 || hello[4] != "proto" || hello[5] != int64(2) {
				t.Fatalf("HELLO 2 = %v", hello)
			}

			// AUTH without a password configured.
			_, err = rc.Do(ctx, "auth", "pw").Result()
			wantErr(t, err, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")

			// Unknown command and arity.
			_, err = rc.Do(ctx, "frobnicate", "a", "b").Result()
			wantErr(t, err, "ERR unknown command 'frobnicate', with args beginning with: 'a' 'b' ")
			_, err = rc.Do(ctx, "get").Result()
			wantErr(t, err, "ERR wrong number of arguments for 'get' command")
			_, err = rc.Do(ctx, "GET", "a", "b").Result()
			wantErr(t, err, "ERR wrong number of arguments for 'get' command")
			_, err = rc.Do(ctx, "echo").Result()
			wantErr(t, err, "ERR wrong number of arguments for 'echo' command")

			// The connection is still fine after all these errors.
			if got := res(rc.Get(ctx, "k2").Result()).must(t); got != "v2" {
				t.Fatalf("GET after errors = %q", got)
			}
			st := s.Stats()
			if st.Commands == 0 || st.Errors == 0 || st.ConnsTotal == 0 || st.Conns == 0 {
				t.Fatalf("Stats = %+v", st)
			}
		})
	}
}

func TestQuit(t *testing.T) {
	s, _ := startServer(t, Config{})
	c := dialRaw(t, s.Addr())
	c.send(cmd("PING") + cmd("QUIT") + cmd("PING"))
	c.expect("+PONG\r\n")
	c.expect("+OK\r\n")
	c.expectClosed()
}

func TestAuth(t *testing.T) {
	s, e := startServer(t, Config{Password: "s3cret"})

	// Nothing but AUTH, HELLO and QUIT before authenticating.
	c := dialRaw(t, s.Addr())
	c.send(cmd("PING") + cmd("SET", "k", "v") + cmd("GET", "k"))
	c.expect("-NOAUTH Authentication required.\r\n")
	c.expect("-NOAUTH Authentication required.\r\n")
	c.expect("-NOAUTH Authentication required.\r\n")
	if _, ok := e.get("k"); ok {
		t.Fatal("unauthenticated SET stored")
	}
	c.send(cmd("AUTH", "wrong"))
	c.expect("-WRONGPASS invalid username-password pair or user is disabled.\r\n")
	c.send(cmd("AUTH", "someone", "s3cret"))
	c.expect("-WRONGPASS invalid username-password pair or user is disabled.\r\n")
	c.send(cmd("AUTH", "s3cret") + cmd("PING"))
	c.expect("+OK\r\n")
	c.expect("+PONG\r\n")
	c.send(cmd("AUTH", "default", "s3cret") + cmd("SET", "k", "v"))
	c.expect("+OK\r\n")
	c.expect("+OK\r\n")

	// HELLO without AUTH is refused; HELLO 2 AUTH authenticates.
	c2 := dialRaw(t, s.Addr())
	c2.send(cmd("HELLO", "2"))
	c2.expectPrefix("-NOAUTH HELLO must be called with the client already authenticated")
	c2.send(cmd("HELLO", "2", "AUTH", "default", "nope"))
	c2.expectPrefix("-WRONGPASS")
	c2.send(cmd("HELLO", "2", "AUTH", "default", "s3cret") + cmd("GET", "k"))
	c2.expectPrefix("*14\r\n")
	c2.expect("$1\r\nv\r\n")
	c2.send(cmd("QUIT"))
	c2.expect("+OK\r\n")

	// go-redis: wrong password fails, right one works with either protocol.
	bad := newRedis(t, s, &redis.Options{Password: "nope", MaxRetries: -1})
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("PING with a wrong password: %v", err)
	}
	for _, proto := range []int{2, 3} {
		rc := newRedis(t, s, &redis.Options{Password: "s3cret", Protocol: proto})
		if got := res(rc.Get(ctx, "k").Result()).must(t); got != "v" {
			t.Fatalf("proto %d: GET = %q", proto, got)
		}
	}
}

func TestEngineErrors(t *testing.T) {
	s, e := startServer(t, Config{})
	rc := newRedis(t, s, &redis.Options{Protocol: 2, PoolSize: 1})
	res(rc.Set(ctx, "ok", "1", 0).Result()).must(t)
	checks := []struct {
		args []any
	}{
		{[]any{"get", "!fail1"}},
		{[]any{"set", "!fail1", "v"}},
		{[]any{"set", "!fail1", "v", "nx"}},
		{[]any{"setnx", "!fail1", "v"}},
		{[]any{"del", "ok", "!fail1"}},
		{[]any{"exists", "!fail1"}},
		{[]any{"mget", "ok", "!fail1"}},
		{[]any{"mset", "!fail1", "v"}},
	}
	for _, c := range checks {
		_, err := rc.Do(ctx, c.args...).Result()
		wantErr(t, err, "ERR injected failure")
		// The connection goes on serving.
		if got := res(rc.Ping(ctx).Result()).must(t); got != "PONG" {
			t.Fatalf("PING after %v = %q", c.args, got)
		}
	}
	// DEL is atomic across its keys: the failing key failed all of it,
	// and "ok" is still there.
	if _, ok := e.get("ok"); !ok {
		t.Fatal("a DEL that failed deleted a key")
	}
}

func TestPipeline(t *testing.T) {
	s, e := startServer(t, Config{})
	rc := newRedis(t, s, &redis.Options{Protocol: 2})
	pipe := rc.Pipeline()
	var gets []*redis.StringCmd
	for i := range 50 {
		pipe.Set(ctx, fmt.Sprintf("p%03d", i), fmt.Sprintf("v%d", i), 0)
		gets = append(gets, pipe.Get(ctx, fmt.Sprintf("p%03d", i)))
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 100 {
		t.Fatalf("%d replies", len(cmds))
	}
	for i, g := range gets {
		if g.Val() != fmt.Sprintf("v%d", i) {
			t.Fatalf("GET p%03d = %q", i, g.Val())
		}
	}
	if e.len() != 50 {
		t.Fatalf("engine has %d keys", e.len())
	}

	// Raw: many commands in one write, among them an error, get their
	// replies in order.
	c := dialRaw(t, s.Addr())
	var b strings.Builder
	for i := range 200 {
		switch i % 4 {
		case 0:
			b.WriteString(cmd("SET", fmt.Sprintf("r%d", i), "x"))
		case 1:
			b.WriteString(cmd("GET", fmt.Sprintf("r%d", i-1)))
		case 2:
			b.WriteString(cmd("NOSUCH"))
		case 3:
			b.WriteString("PING\r\n") // inline
		}
	}
	c.send(b.String())
	for i := range 200 {
		switch i % 4 {
		case 0:
			c.expect("+OK\r\n")
		case 1:
			c.expect("$1\r\nx\r\n")
		case 2:
			c.expectPrefix("-ERR unknown command 'NOSUCH'")
		case 3:
			c.expect("+PONG\r\n")
		}
	}
}

func TestTLS(t *testing.T) {
	serverTLS, clientTLS := testTLS(t)
	s, _ := startServer(t, Config{TLS: serverTLS})
	rc := newRedis(t, s, &redis.Options{TLSConfig: clientTLS})
	res(rc.Set(ctx, "k", "v", 0).Result()).must(t)
	if got := res(rc.Get(ctx, "k").Result()).must(t); got != "v" {
		t.Fatalf("GET over TLS = %q", got)
	}
	// A plain-text client gets nowhere, and the server goes on.
	c := dialRaw(t, s.Addr())
	c.send(cmd("PING"))
	if r, err := c.read(); err == nil && string(r.Raw) == "+PONG\r\n" {
		t.Fatal("plain text PING answered on a TLS server")
	}
	if got := res(rc.Ping(ctx).Result()).must(t); got != "PONG" {
		t.Fatalf("PING over TLS = %q", got)
	}
	if _, err := Listen(Config{Addr: "127.0.0.1:0", TLS: clientTLS}, newFakeEngine()); err == nil {
		t.Fatal("Listen with a TLS config without a certificate succeeded")
	}
}

func TestListenErrors(t *testing.T) {
	s, _ := startServer(t, Config{})
	if _, err := Listen(Config{Addr: s.Addr()}, newFakeEngine()); err == nil {
		t.Fatal("Listen on an address in use succeeded")
	}
	if _, err := Listen(Config{Addr: "127.0.0.1:0"}, nil); err == nil {
		t.Fatal("Listen with a nil engine succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if nc, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		nc.Close()
		t.Fatal("dial after Close succeeded")
	}
}

func TestInfoSections(t *testing.T) {
	s, _ := startServer(t, Config{Info: func() []InfoSection {
		return []InfoSection{
			{Name: "Server", Fields: [][2]string{{"engine", "scalestore"}}},
			{Name: "Keyspace", Fields: [][2]string{{"db0", "keys=3"}}},
		}
	}})
	c := dialRaw(t, s.Addr())
	c.send(cmd("INFO", "keyspace"))
	c.expect("$24\r\n# Keyspace\r\ndb0:keys=3\r\n\r\n")
	c.send(cmd("INFO", "SERVER", "clients"))
	r, err := c.read()
	if err != nil {
		t.Fatal(err)
	}
	// Config.Info's Server fields follow the server's own. The event
	// loops add their line, with the connections each serves.
	got := r.String()
	if i := strings.Index(got, "event_loop_clients:"); i >= 0 {
		if !strings.HasPrefix(got[i:], "event_loop_clients:1,") && got[i:] != "event_loop_clients:1\r\n" {
			t.Fatalf("INFO clients: %q", got[i:])
		}
		got = got[:i]
	}
	if !strings.HasPrefix(got, "# Server\r\nredis_version:7.0.0\r\nserver_name:scalestore\r\n") ||
		!strings.HasSuffix(got, "engine:scalestore\r\n\r\n# Clients\r\nconnected_clients:1\r\nmaxclients:10000\r\n") {
		t.Fatalf("INFO server clients = %q", got)
	}
	// Redis's rules: no section or "default" leaves Commandstats out,
	// "all" and "everything" put it in, a named section alone is alone.
	for _, tc := range []struct {
		args     []string
		has, not []string
	}{
		{[]string{"INFO"}, []string{"redis_version", "used_cpu_user", "used_memory", "master_repl_offset"}, []string{"rejected_calls"}},
		{[]string{"INFO", "default"}, []string{"redis_version", "used_memory"}, []string{"rejected_calls"}},
		{[]string{"INFO", "all"}, []string{"redis_version", "used_memory", "cmdstat_info:calls=", "rejected_calls"}, nil},
		{[]string{"INFO", "everything"}, []string{"rejected_calls"}, nil},
		{[]string{"INFO", "cpu"}, []string{"used_cpu_user"}, []string{"used_memory", "redis_version"}},
		{[]string{"INFO", "commandSTATS"}, []string{"cmdstat_info:calls="}, []string{"used_memory"}},
		{[]string{"INFO", "cpu", "default"}, []string{"used_cpu_user", "used_memory", "master_repl_offset"}, []string{"rejected_calls"}},
	} {
		c.send(cmd(tc.args...))
		r, err := c.read()
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.has {
			if !strings.Contains(r.String(), w) {
				t.Fatalf("%v lacks %q:\n%s", tc.args, w, r.String())
			}
		}
		for _, w := range tc.not {
			if strings.Contains(r.String(), w) {
				t.Fatalf("%v has %q:\n%s", tc.args, w, r.String())
			}
		}
	}
	c.send(cmd("GET"))
	c.expect("-ERR wrong number of arguments for 'get' command\r\n")
	c.send(cmd("INCR", "engine-text-key") + cmd("SET", "engine-text-key", "x") + cmd("INCR", "engine-text-key"))
	c.expect(":1\r\n")
	c.expect("+OK\r\n")
	c.expect("-" + msgNotInt + "\r\n")
	c.send(cmd("INFO", "commandstats"))
	r, err = c.read()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"cmdstat_get:calls=0,rejected_calls=1,failed_calls=0", "cmdstat_incr:calls=2,rejected_calls=0,failed_calls=1"} {
		if !strings.Contains(r.String(), w) {
			t.Fatalf("INFO commandstats lacks %q:\n%s", w, r.String())
		}
	}
	c.send(cmd("INFO"))
	r, err = c.read()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"# Server\r\n", "# Keyspace\r\n", "# Clients\r\n", "# Stats\r\ntotal_connections_received:1\r\ntotal_commands_processed:"} {
		if !strings.Contains(r.String(), w) {
			t.Fatalf("INFO lacks %q:\n%s", w, r.String())
		}
	}
}
