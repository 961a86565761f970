package resp

import (
	"errors"
	"testing"
)

// nopEngine answers every Get with a fixed value and stores nothing, so
// that allocations measured are the server's own.
type nopEngine struct{ val, counter []byte }

func (e nopEngine) Get(key, dst []byte) ([]byte, bool, error) {
	return append(dst, e.val...), true, nil
}

func (e nopEngine) GetBatch(keys, vals [][]byte, found []bool) error {
	for i := range keys {
		vals[i] = append(vals[i][:0], e.val...)
		found[i] = true
	}
	return nil
}
func (nopEngine) Put(key, val []byte) error { return nil }
func (e nopEngine) PutIf(key, val []byte, cond func(old []byte, found bool) bool) (bool, error) {
	return cond(e.val, true), nil
}
func (nopEngine) Delete(key []byte) (bool, error) { return true, nil }

// Modify shows INCR's key "n" the counter, every other key the value.
func (e nopEngine) Modify(key []byte, fn func(old []byte, found bool) ([]byte, bool, bool)) error {
	if string(key) == "n" {
		fn(e.counter, true)
		return nil
	}
	fn(e.val, true)
	return nil
}
func (nopEngine) Atomic(readOnly bool, fn func(tx Txn) error) error {
	return errors.New("nopEngine: no transactions")
}
func (nopEngine) Scan(from, to []byte, fn func(key, val []byte) bool) error {
	return nil
}

// The hot paths (parsing a pipeline, GET, SET, SET NX, INCR, MGET of one
// key) allocate nothing once a connection's buffers are warm. (MGET of
// several keys is a transaction of the engine, which allocates.)
func TestNoAllocations(t *testing.T) {
	s := &Server{eng: nopEngine{val: []byte("value-of-some-length"), counter: []byte("42")}, maxKey: 256, maxValue: 1023, maxEntry: 1024}
	c := newClient(s, nil)
	pipeline := []byte(cmd("GET", "key:000001") + cmd("SET", "key:000001", "xxx") +
		cmd("set", "key:2", "yyy", "NX") + cmd("MGET", "a") + cmd("INCR", "n") + cmd("PING"))
	run := func() {
		c.buf = append(c.buf[:0], pipeline...)
		c.r, c.w = 0, len(pipeline)
		c.out = c.out[:0]
		for c.r < c.w {
			complete, args, n, err := c.next()
			if err != nil || !complete {
				t.Fatalf("next: %v %v", complete, err)
			}
			c.r += n
			c.exec(args)
		}
	}
	run()
	want := "$20\r\nvalue-of-some-length\r\n+OK\r\n$-1\r\n*1\r\n" +
		"$20\r\nvalue-of-some-length\r\n:43\r\n+PONG\r\n"
	if string(c.out) != want {
		t.Fatalf("replies %q", c.out)
	}
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Fatalf("%.1f allocations per pipeline", n)
	}
}

// INCR and SET through the large-value wrapper (as every server runs
// them: Server.eng is a bigEngine) allocate nothing either: the client
// keeps the wrapper of Modify's fn (bigModify).
func TestIncrThroughBigEngineAllocatesNothing(t *testing.T) {
	raw := nopEngine{val: []byte("v"), counter: []byte("41")}
	s := &Server{raw: raw, eng: bigEngine{raw: raw, entry: 1024}, maxKey: 256, maxValue: 1023, maxEntry: 1024}
	c := newClient(s, nil)
	pipeline := []byte(cmd("INCR", "n") + cmd("INCRBY", "n", "5") + cmd("DECR", "n") + cmd("SET", "k", "v"))
	run := func() {
		c.buf = append(c.buf[:0], pipeline...)
		c.r, c.w = 0, len(pipeline)
		c.out = c.out[:0]
		for c.r < c.w {
			complete, args, n, err := c.next()
			if err != nil || !complete {
				t.Fatalf("next: %v %v", complete, err)
			}
			c.r += n
			c.exec(args)
		}
	}
	run()
	if want := ":42\r\n:46\r\n:40\r\n+OK\r\n"; string(c.out) != want {
		t.Fatalf("replies %q, want %q", c.out, want)
	}
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Fatalf("%.1f allocations per pipeline", n)
	}
}
