package resp

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"
)

// testClock is a settable clock for Config.Now.
type testClock struct{ ms atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ms.Store(1_700_000_000_000)
	return c
}

func (c *testClock) now() time.Time      { return time.UnixMilli(c.ms.Load()) }
func (c *testClock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// step is a command and the exact RESP reply it must get.
type step struct {
	args []string
	want string
}

func runSteps(t *testing.T, rc *rawConn, steps []step) {
	t.Helper()
	for _, s := range steps {
		rc.send(cmd(s.args...))
		r, err := rc.read()
		if err != nil {
			t.Fatalf("%q: %v", s.args, err)
		}
		if string(r.Raw) != s.want {
			t.Fatalf("%q: reply %q, want %q", s.args, r.Raw, s.want)
		}
	}
}

func bulkReply(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }
func errReply(s string) string  { return "-" + s + "\r\n" }
func intReply(n int64) string   { return fmt.Sprintf(":%d\r\n", n) }

const (
	okReply  = "+OK\r\n"
	nilReply = "$-1\r\n"
)

func TestCountersAndStrings(t *testing.T) {
	s, _ := startServer(t, Config{})
	rc := dialRaw(t, s.Addr())
	runSteps(t, rc, []step{
		{[]string{"INCR", "n"}, intReply(1)},
		{[]string{"incrby", "n", "41"}, intReply(42)},
		{[]string{"DECR", "n"}, intReply(41)},
		{[]string{"DECRBY", "n", "-9"}, intReply(50)},
		{[]string{"INCRBY", "n", "x"}, errReply(msgNotInt)},
		{[]string{"INCRBY", "n", "1 "}, errReply(msgNotInt)},
		{[]string{"SET", "s", "abc"}, okReply},
		{[]string{"INCR", "s"}, errReply(msgNotInt)},
		{[]string{"SET", "z", "01"}, okReply},
		{[]string{"INCR", "z"}, errReply(msgNotInt)},
		{[]string{"SET", "big", "9223372036854775807"}, okReply},
		{[]string{"INCR", "big"}, errReply(msgOverflow)},
		{[]string{"DECRBY", "n", "-9223372036854775808"}, errReply("ERR decrement would overflow")},
		{[]string{"INCRBYFLOAT", "f", "10.5"}, bulkReply("10.5")},
		{[]string{"INCRBYFLOAT", "f", "0.1"}, bulkReply("10.6")},
		{[]string{"INCRBYFLOAT", "f", "5.0e3"}, bulkReply("5010.6")},
		{[]string{"INCRBYFLOAT", "f", "abc"}, errReply(msgNotFloat)},
		{[]string{"INCRBYFLOAT", "f", "+inf"}, errReply(msgNaN)},
		{[]string{"INCRBYFLOAT", "s", "1"}, errReply(msgNotFloat)},
		{[]string{"APPEND", "a", "hello"}, intReply(5)},
		{[]string{"APPEND", "a", " world"}, intReply(11)},
		{[]string{"STRLEN", "a"}, intReply(11)},
		{[]string{"STRLEN", "missing"}, intReply(0)},
		{[]string{"GETRANGE", "a", "0", "4"}, bulkReply("hello")},
		{[]string{"GETRANGE", "a", "-5", "-1"}, bulkReply("world")},
		{[]string{"GETRANGE", "a", "5", "3"}, bulkReply("")},
		{[]string{"GETRANGE", "a", "0", "100"}, bulkReply("hello world")},
		{[]string{"SUBSTR", "a", "-100", "1"}, bulkReply("he")},
		{[]string{"GETRANGE", "missing", "0", "-1"}, bulkReply("")},
		{[]string{"SETRANGE", "a", "6", "WORLD"}, intReply(11)},
		{[]string{"GET", "a"}, bulkReply("hello WORLD")},
		{[]string{"SETRANGE", "r", "3", "x"}, intReply(4)},
		{[]string{"GET", "r"}, bulkReply("\x00\x00\x00x")},
		{[]string{"SETRANGE", "r", "-1", "x"}, errReply(msgOffset)},
		{[]string{"SETRANGE", "new", "0", ""}, intReply(0)},
		{[]string{"EXISTS", "new"}, intReply(0)},
		{[]string{"GETSET", "a", "v2"}, bulkReply("hello WORLD")},
		{[]string{"GETSET", "gs", "v"}, nilReply},
		{[]string{"GETDEL", "a"}, bulkReply("v2")},
		{[]string{"GETDEL", "a"}, nilReply},
		{[]string{"SETNX", "nx", "1"}, intReply(1)},
		{[]string{"SETNX", "nx", "2"}, intReply(0)},
		{[]string{"GET", "nx"}, bulkReply("1")},
		{[]string{"SET", "k", "v", "NX", "GET"}, nilReply},
		{[]string{"SET", "k", "w", "NX", "GET"}, bulkReply("v")},
		{[]string{"SET", "k", "w", "XX", "GET"}, bulkReply("v")},
		{[]string{"GET", "k"}, bulkReply("w")},
		// A string that starts like the expiry header is stored behind
		// one and reads back as written.
		{[]string{"SET", "m", "\xffSx\x01abcdefghij"}, okReply},
		{[]string{"GET", "m"}, bulkReply("\xffSx\x01abcdefghij")},
		{[]string{"STRLEN", "m"}, intReply(14)},
		{[]string{"MSET", "m2", "\xffSx"}, okReply},
		{[]string{"GET", "m2"}, bulkReply("\xffSx")},
		// SETRANGE at offsets no value can reach: an error, not a crash.
		{[]string{"SETRANGE", "r", "9223372036854775807", "A"}, errReply("ERR string exceeds maximum allowed size (2147483647 bytes, over MaxValue 4194304)")},
		{[]string{"SETRANGE", "r", "5000000", "A"}, errReply("ERR string exceeds maximum allowed size (5000001 bytes, over MaxValue 4194304)")},
		{[]string{"SETBIT", "bits", "1", "1"}, intReply(0)},
		{[]string{"SETBIT", "bits", "1", "1"}, intReply(1)},
		{[]string{"SETBIT", "bits", "15", "1"}, intReply(0)},
		{[]string{"GET", "bits"}, bulkReply("\x40\x01")},
		{[]string{"GETBIT", "bits", "1"}, intReply(1)},
		{[]string{"GETBIT", "bits", "2"}, intReply(0)},
		{[]string{"GETBIT", "bits", "100000"}, intReply(0)},
		{[]string{"SETBIT", "bits", "-1", "1"}, errReply(msgBitOffset)},
		{[]string{"SETBIT", "bits", "4294967296", "1"}, errReply(msgBitOffset)},
		{[]string{"SETBIT", "bits", "0", "2"}, errReply(msgBitValue)},
		{[]string{"SET", "l1", "ohmytext"}, okReply},
		{[]string{"SET", "l2", "mynewtext"}, okReply},
		{[]string{"LCS", "l1", "l2"}, bulkReply("mytext")},
		{[]string{"LCS", "l1", "l2", "LEN"}, intReply(6)},
		{[]string{"LCS", "l1", "l2", "IDX"}, "*4\r\n" + bulkReply("matches") + "*2\r\n" +
			"*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n" + "*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n" +
			bulkReply("len") + intReply(6)},
		{[]string{"LCS", "l1", "l2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"}, "*4\r\n" + bulkReply("matches") + "*1\r\n" +
			"*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n" + bulkReply("len") + intReply(6)},
		{[]string{"LCS", "l1", "l2", "IDX", "LEN"}, errReply("ERR If you want both the length and indexes, please just use IDX.")},
		// Arity, word for word.
		{[]string{"INCR"}, errReply("ERR wrong number of arguments for 'incr' command")},
		{[]string{"get", "a", "b"}, errReply("ERR wrong number of arguments for 'get' command")},
		{[]string{"MSET", "a", "1", "b"}, errReply("ERR wrong number of arguments for 'mset' command")},
		{[]string{"GETRANGE", "a", "x", "1"}, errReply(msgNotInt)},
		{[]string{"SET", "k", "v", "NX", "XX"}, errReply("ERR syntax error")},
	})
}

func TestKeyspaceCommands(t *testing.T) {
	s, e := startServer(t, Config{})
	rc := dialRaw(t, s.Addr())
	runSteps(t, rc, []step{
		{[]string{"MSET", "user:1", "a", "user:2", "b", "other", "c"}, okReply},
		{[]string{"KEYS", "user:*"}, "*2\r\n" + bulkReply("user:1") + bulkReply("user:2")},
		{[]string{"KEYS", "*"}, "*3\r\n" + bulkReply("other") + bulkReply("user:1") + bulkReply("user:2")},
		{[]string{"KEYS", "nomatch*"}, "*0\r\n"},
		{[]string{"TYPE", "other"}, "+string\r\n"},
		{[]string{"TYPE", "missing"}, "+none\r\n"},
		{[]string{"RENAME", "other", "moved"}, okReply},
		{[]string{"GET", "moved"}, bulkReply("c")},
		{[]string{"EXISTS", "other", "moved", "moved"}, intReply(2)},
		{[]string{"RENAME", "nosuch", "x"}, errReply(msgNoSuchKey)},
		{[]string{"RENAMENX", "moved", "user:1"}, intReply(0)},
		{[]string{"RENAMENX", "moved", "fresh"}, intReply(1)},
		{[]string{"RENAMENX", "nosuch", "x"}, errReply(msgNoSuchKey)},
		{[]string{"COPY", "fresh", "copy"}, intReply(1)},
		{[]string{"COPY", "fresh", "copy"}, intReply(0)},
		{[]string{"COPY", "user:1", "copy", "REPLACE"}, intReply(1)},
		{[]string{"GET", "copy"}, bulkReply("a")},
		{[]string{"COPY", "copy", "copy"}, errReply(msgSameObject)},
		{[]string{"COPY", "copy", "c2", "DB", "1"}, errReply("ERR DB index is out of range")},
		{[]string{"COPY", "nosuch", "c2"}, intReply(0)},
		{[]string{"UNLINK", "copy", "fresh", "nosuch"}, intReply(2)},
		{[]string{"DEL", "user:1", "user:1"}, intReply(1)},
		{[]string{"DBSIZE"}, intReply(1)},
		{[]string{"RANDOMKEY"}, bulkReply("user:2")},
		{[]string{"FLUSHALL", "bogus"}, errReply("ERR syntax error")},
		{[]string{"FLUSHALL"}, okReply},
		{[]string{"DBSIZE"}, intReply(0)},
		{[]string{"RANDOMKEY"}, nilReply},
	})
	// RANDOMKEY answers each of a few keys, not only the first after a
	// gap.
	runSteps(t, rc, []step{{[]string{"MSET", "bar", "1", "foo", "2"}, okReply}})
	seen := map[string]bool{}
	for range 200 {
		rc.send(cmd("RANDOMKEY"))
		r, err := rc.read()
		if err != nil {
			t.Fatal(err)
		}
		seen[r.String()] = true
	}
	if !seen["bar"] || !seen["foo"] || len(seen) != 2 {
		t.Fatalf("RANDOMKEY over bar and foo answered %v", seen)
	}
	runSteps(t, rc, []step{{[]string{"DEL", "bar", "foo"}, intReply(2)}})
	// FLUSHDB over more keys than one batch.
	for i := range 3*flushBatch + 7 {
		e.Put(fmt.Appendf(nil, "bulk%05d", i), []byte("x"))
	}
	runSteps(t, rc, []step{
		{[]string{"DBSIZE"}, intReply(3*flushBatch + 7)},
		{[]string{"FLUSHDB", "ASYNC"}, okReply},
		{[]string{"DBSIZE"}, intReply(0)},
	})
	if e.len() != 0 {
		t.Fatalf("%d keys left after FLUSHDB", e.len())
	}
}

func TestExpiry(t *testing.T) {
	clock := newTestClock()
	s, e := startServer(t, Config{Now: clock.now})
	rc := dialRaw(t, s.Addr())
	now := clock.ms.Load()
	runSteps(t, rc, []step{
		{[]string{"SET", "k", "v", "EX", "100"}, okReply},
		{[]string{"TTL", "k"}, intReply(100)},
		{[]string{"PTTL", "k"}, intReply(100000)},
		{[]string{"EXPIRETIME", "k"}, intReply(now/1000 + 100)},
		{[]string{"PEXPIRETIME", "k"}, intReply(now + 100000)},
		{[]string{"TTL", "missing"}, intReply(-2)},
		{[]string{"TIME"}, "*2\r\n" + bulkReply(fmt.Sprint(now/1000)) + bulkReply(fmt.Sprint(now%1000*1000))},
		{[]string{"SET", "p", "v"}, okReply},
		{[]string{"TTL", "p"}, intReply(-1)},
		{[]string{"EXPIRE", "p", "50"}, intReply(1)},
		{[]string{"EXPIRE", "p", "60", "NX"}, intReply(0)},
		{[]string{"EXPIRE", "p", "60", "GT"}, intReply(1)},
		{[]string{"EXPIRE", "p", "30", "GT"}, intReply(0)},
		{[]string{"EXPIRE", "p", "30", "LT"}, intReply(1)},
		{[]string{"TTL", "p"}, intReply(30)},
		{[]string{"EXPIRE", "p", "30", "NX", "XX"}, errReply("ERR NX and XX, GT or LT options at the same time are not compatible")},
		{[]string{"EXPIRE", "p", "30", "GT", "LT"}, errReply("ERR GT and LT options at the same time are not compatible")},
		{[]string{"EXPIRE", "p", "30", "FOO"}, errReply("ERR Unsupported option FOO")},
		{[]string{"EXPIRE", "p", "x"}, errReply(msgNotInt)},
		{[]string{"EXPIRE", "p", "9223372036854775807"}, errReply("ERR invalid expire time in 'expire' command")},
		{[]string{"EXPIRE", "missing", "10"}, intReply(0)},
		{[]string{"PERSIST", "p"}, intReply(1)},
		{[]string{"PERSIST", "p"}, intReply(0)},
		{[]string{"TTL", "p"}, intReply(-1)},
		{[]string{"PEXPIRE", "p", "1500"}, intReply(1)},
		{[]string{"PTTL", "p"}, intReply(1500)},
		{[]string{"PEXPIREAT", "p", fmt.Sprint(now + 2000)}, intReply(1)},
		{[]string{"EXPIREAT", "p", fmt.Sprint(now/1000 + 3)}, intReply(1)},
		{[]string{"SETEX", "se", "10", "v"}, okReply},
		{[]string{"PSETEX", "pse", "2500", "v"}, okReply},
		{[]string{"PTTL", "pse"}, intReply(2500)},
		{[]string{"SETEX", "se", "0", "v"}, errReply("ERR invalid expire time in 'setex' command")},
		{[]string{"SET", "keep", "v1", "PX", "5000"}, okReply},
		{[]string{"SET", "keep", "v2", "KEEPTTL"}, okReply},
		{[]string{"PTTL", "keep"}, intReply(5000)},
		{[]string{"SET", "keep", "v3"}, okReply},
		{[]string{"PTTL", "keep"}, intReply(-1)},
		{[]string{"SET", "at", "v", "PXAT", fmt.Sprint(now + 700)}, okReply},
		{[]string{"PTTL", "at"}, intReply(700)},
		{[]string{"GETEX", "at", "PX", "900"}, bulkReply("v")},
		{[]string{"PTTL", "at"}, intReply(900)},
		{[]string{"GETEX", "at", "PERSIST"}, bulkReply("v")},
		{[]string{"TTL", "at"}, intReply(-1)},
		{[]string{"GETEX", "at", "EX", "0"}, errReply("ERR invalid expire time in 'getex' command")},
		{[]string{"SET", "c", "5", "EX", "100"}, okReply},
		{[]string{"INCR", "c"}, intReply(6)},
		{[]string{"TTL", "c"}, intReply(100)},
		{[]string{"APPEND", "c", "0"}, intReply(2)},
		{[]string{"TTL", "c"}, intReply(100)},
		{[]string{"RENAME", "c", "c2"}, okReply},
		{[]string{"TTL", "c2"}, intReply(100)},
		// An expiry in the past deletes.
		{[]string{"SET", "gone", "v"}, okReply},
		{[]string{"EXPIRE", "gone", "-1"}, intReply(1)},
		{[]string{"EXISTS", "gone"}, intReply(0)},
	})
	clock.add(1001 * time.Second / 10) // 100.1 s: k, c2 and se are gone
	runSteps(t, rc, []step{
		{[]string{"GET", "k"}, nilReply},
		{[]string{"TTL", "k"}, intReply(-2)},
		{[]string{"EXISTS", "c2", "se"}, intReply(0)},
		{[]string{"INCR", "c2"}, intReply(1)},
		{[]string{"TTL", "c2"}, intReply(-1)},
	})
	// GET dropped k from the engine; the background expirer drops se
	// without anybody asking for it.
	if _, ok := e.get("k"); ok {
		t.Fatal("an expired key read by GET is still in the engine")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, ok1 := e.get("se")
		_, ok2 := e.get("pse")
		if !ok1 && !ok2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background expirer did not remove expired keys")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Expired keys are not listed.
	runSteps(t, rc, []step{
		{[]string{"SET", "short", "v", "PX", "10"}, okReply},
		{[]string{"KEYS", "short"}, "*1\r\n" + bulkReply("short")},
	})
	clock.add(20 * time.Millisecond)
	runSteps(t, rc, []step{
		{[]string{"KEYS", "short"}, "*0\r\n"},
		{[]string{"SCAN", "0", "MATCH", "short"}, "*2\r\n" + bulkReply("0") + "*0\r\n"},
	})
}

func TestMultiExecWatch(t *testing.T) {
	s, e := startServer(t, Config{})
	a, b := dialRaw(t, s.Addr()), dialRaw(t, s.Addr())
	runSteps(t, a, []step{
		{[]string{"EXEC"}, errReply("ERR EXEC without MULTI")},
		{[]string{"DISCARD"}, errReply("ERR DISCARD without MULTI")},
		{[]string{"MULTI"}, okReply},
		{[]string{"MULTI"}, errReply(msgNestedMulti)},
		{[]string{"SET", "x", "1"}, "+QUEUED\r\n"},
		{[]string{"INCR", "x"}, "+QUEUED\r\n"},
		{[]string{"INCR", "notanint"}, "+QUEUED\r\n"},
		{[]string{"GET", "x"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*4\r\n" + okReply + intReply(2) + intReply(1) + bulkReply("2")},
		// A command refused while queueing aborts EXEC.
		{[]string{"MULTI"}, okReply},
		{[]string{"SET", "x"}, errReply("ERR wrong number of arguments for 'set' command")},
		{[]string{"NOSUCHCMD"}, errReply("ERR unknown command 'NOSUCHCMD', with args beginning with: ")},
		{[]string{"INCR", "x"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, errReply(msgExecAbort)},
		{[]string{"GET", "x"}, bulkReply("2")},
		{[]string{"MULTI"}, okReply},
		{[]string{"INCR", "x"}, "+QUEUED\r\n"},
		{[]string{"DISCARD"}, okReply},
		{[]string{"GET", "x"}, bulkReply("2")},
		{[]string{"MULTI"}, okReply},
		{[]string{"WATCH", "x"}, errReply("ERR WATCH inside MULTI is not allowed")},
		{[]string{"EXEC"}, "*0\r\n"},
		// WATCH: a change by another client aborts EXEC.
		{[]string{"WATCH", "x", "y"}, okReply},
	})
	runSteps(t, b, []step{{[]string{"SET", "y", "new"}, okReply}})
	runSteps(t, a, []step{
		{[]string{"MULTI"}, okReply},
		{[]string{"INCR", "x"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*-1\r\n"},
		{[]string{"GET", "x"}, bulkReply("2")},
		// Unchanged: EXEC runs; UNWATCH forgets.
		{[]string{"WATCH", "x"}, okReply},
		{[]string{"MULTI"}, okReply},
		{[]string{"INCR", "x"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*1\r\n" + intReply(3)},
		{[]string{"WATCH", "x"}, okReply},
		{[]string{"UNWATCH"}, okReply},
	})
	runSteps(t, b, []step{{[]string{"SET", "x", "100"}, okReply}})
	runSteps(t, a, []step{
		{[]string{"MULTI"}, okReply},
		{[]string{"INCR", "x"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*1\r\n" + intReply(101)},
	})
	// A watched key changed and put back, even unread by the watcher,
	// aborts (Redis: any write of a watched key does).
	runSteps(t, a, []step{{[]string{"WATCH", "x"}, okReply}})
	runSteps(t, b, []step{{[]string{"SET", "x", "between"}, okReply}, {[]string{"SET", "x", "101"}, okReply}})
	runSteps(t, a, []step{
		{[]string{"MULTI"}, okReply},
		{[]string{"INCR", "x"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*-1\r\n"},
	})
	// A watched key changed and put back: a client that read the
	// intermediate value aborts.
	runSteps(t, a, []step{{[]string{"WATCH", "x"}, okReply}})
	runSteps(t, b, []step{{[]string{"SET", "x", "between"}, okReply}})
	runSteps(t, a, []step{{[]string{"GET", "x"}, bulkReply("between")}})
	runSteps(t, b, []step{{[]string{"SET", "x", "101"}, okReply}})
	runSteps(t, a, []step{
		{[]string{"MULTI"}, okReply},
		{[]string{"INCR", "x"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*-1\r\n"},
	})
	if e.txnCount() == 0 {
		t.Fatal("EXEC ran outside the engine's transactions")
	}
}

// Clients transfer between two keys with WATCH and MULTI/EXEC while
// others read both with MGET: the sum never changes, and every transfer
// lands.
func TestWatchTransfersKeepTheSum(t *testing.T) {
	s, _ := startServer(t, Config{})
	rc := newRedis(t, s, &redis.Options{Protocol: 2, PoolSize: 8})
	if err := rc.MSet(ctx, "a", 100, "b", 100).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var done atomic.Bool
	const workers, each = 4, 50
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; {
				err := rc.Watch(ctx, func(tx *redis.Tx) error {
					av, err := tx.Get(ctx, "a").Int()
					if err != nil {
						return err
					}
					bv, err := tx.Get(ctx, "b").Int()
					if err != nil {
						return err
					}
					d := 1
					if w%2 == 1 {
						d = -1
					}
					_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.Set(ctx, "a", av-d, 0)
						p.Set(ctx, "b", bv+d, 0)
						return nil
					})
					return err
				}, "a", "b")
				if err == redis.TxFailedErr {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				i++
			}
		}()
	}
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for !done.Load() {
			vs, err := rc.MGet(ctx, "a", "b").Result()
			if err != nil {
				t.Error(err)
				return
			}
			var sum int
			for _, v := range vs {
				var n int
				fmt.Sscan(v.(string), &n)
				sum += n
			}
			if sum != 200 {
				t.Errorf("MGET saw a sum of %d", sum)
				return
			}
		}
	}()
	wg.Wait()
	done.Store(true)
	readers.Wait()
	a, _ := rc.Get(ctx, "a").Int()
	if a != 100 {
		// Half the workers move +1, half -1, each the same count.
		t.Fatalf("a = %d after balanced transfers, want 100", a)
	}
}

// Any write of a watched key aborts EXEC, the watched value itself
// unchanged or not, and nothing else does: a second watcher, reads, or
// writes of other keys.
func TestWatchAbortsOnAnyWrite(t *testing.T) {
	s, e := startServer(t, Config{})
	a, b := dialRaw(t, s.Addr()), dialRaw(t, s.Addr())
	execIncr := func(c *rawConn, want string) {
		t.Helper()
		runSteps(t, c, []step{
			{[]string{"MULTI"}, okReply},
			{[]string{"INCR", "n"}, "+QUEUED\r\n"},
			{[]string{"EXEC"}, want},
		})
	}
	runSteps(t, b, []step{{[]string{"SET", "x", "1"}, okReply}, {[]string{"SET", "n", "0"}, okReply}})
	// Nothing written: reads, another watcher, other keys.
	runSteps(t, a, []step{{[]string{"WATCH", "x"}, okReply}})
	runSteps(t, b, []step{
		{[]string{"WATCH", "x"}, okReply},
		{[]string{"GET", "x"}, bulkReply("1")},
		{[]string{"STRLEN", "x"}, intReply(1)},
		{[]string{"TTL", "x"}, intReply(-1)},
		{[]string{"SET", "other", "1"}, okReply},
		{[]string{"UNWATCH"}, okReply},
	})
	execIncr(a, "*1\r\n"+intReply(1))
	if v, _ := e.get("x"); !hasTag([]byte(v)) {
		t.Fatalf("x after WATCH is stored as %q, want a tagged value", v)
	}
	// Each write, each putting x back to "1" (or its TTL back to none).
	for _, write := range [][][]string{
		{{"SET", "x", "1"}},
		{{"SET", "x", "2"}, {"SET", "x", "1"}},
		{{"APPEND", "x", ""}},
		{{"INCR", "x"}, {"DECR", "x"}},
		{{"EXPIRE", "x", "100"}, {"PERSIST", "x"}},
		{{"RENAME", "x", "y"}, {"RENAME", "y", "x"}},
		{{"MSET", "x", "1", "z", "1"}},
		{{"DEL", "x"}, {"SET", "x", "1"}},
	} {
		runSteps(t, a, []step{{[]string{"WATCH", "x"}, okReply}})
		for _, w := range write {
			b.send(cmd(w...))
			if r, err := b.read(); err != nil || r.Type == redcon.Error {
				t.Fatalf("%q: %q %v", w, r.Raw, err)
			}
		}
		execIncr(a, "*-1\r\n")
		runSteps(t, b, []step{{[]string{"GET", "x"}, bulkReply("1")}})
	}
	// The watching client's own write aborts too, and EXEC's write of a
	// key aborts another client watching it.
	runSteps(t, a, []step{{[]string{"WATCH", "x"}, okReply}, {[]string{"SET", "x", "1"}, okReply}})
	execIncr(a, "*-1\r\n")
	runSteps(t, a, []step{{[]string{"WATCH", "n"}, okReply}})
	runSteps(t, b, []step{{[]string{"WATCH", "n"}, okReply}})
	execIncr(a, "*1\r\n"+intReply(2))
	execIncr(b, "*-1\r\n")
}

func TestExpiryHeaderRoundTrip(t *testing.T) {
	for _, c := range []struct {
		payload string
		exp     int64
	}{{"", 0}, {"v", 0}, {"v", 123}, {"\xffSx", 0}, {"\xffSx\x01" + strings.Repeat("z", 20), 0}, {"\xffSx\x02", 5}} {
		raw := appendValue(nil, []byte(c.payload), c.exp)
		p, e := decodeValue(raw)
		if string(p) != c.payload || e != c.exp || storedLen([]byte(c.payload), c.exp) != len(raw) {
			t.Fatalf("%q %d: stored %q, read back %q %d", c.payload, c.exp, raw, p, e)
		}
	}
	// A watch tag reads as the value and its expiry, and is never
	// written back by appendValue.
	for _, c := range []struct {
		payload string
		exp     int64
	}{{"", 0}, {"v", 0}, {"v", 123}, {"\xffSx\x02", 5}} {
		raw := appendTagged(nil, []byte(c.payload), c.exp, 7)
		p, e := decodeValue(raw)
		if !hasTag(raw) || string(p) != c.payload || e != c.exp || hasTag(appendValue(nil, p, e)) {
			t.Fatalf("%q %d: tagged %q, read back %q %d", c.payload, c.exp, raw, p, e)
		}
	}
	if t1, t2 := newWatchTag(), newWatchTag(); t1 == t2 {
		t.Fatal("two watch tags are equal")
	}
	// A value written before expiry existed reads as itself.
	if p, e := decodeValue([]byte("plain")); string(p) != "plain" || e != 0 {
		t.Fatal("a plain value did not read as itself")
	}
}
