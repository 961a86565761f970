package resp

import (
	"strings"
	"sync"
	"testing"
)

// deferringEngine gives each connection an engine of its own whose writes
// are not durable until its Settle, as a one-node cluster that defers its
// write-throughs (the root package's connEngine).
type deferringEngine struct {
	*fakeEngine
	mu      sync.Mutex
	writes  int // through a connection's engine
	settles int // Settles that had writes to settle
	early   int // replies of writes sent before their Settle
}

func (d *deferringEngine) ForConn() ConnEngine { return &deferConn{fakeEngine: d.fakeEngine, d: d} }

type deferConn struct {
	*fakeEngine
	d       *deferringEngine
	pending int
}

func (c *deferConn) Put(key, val []byte) error {
	c.pending++
	return c.fakeEngine.Put(key, val)
}

func (c *deferConn) Modify(key []byte, fn func(old []byte, found bool) ([]byte, bool, bool)) error {
	c.pending++
	return c.fakeEngine.Modify(key, fn)
}

func (c *deferConn) Settle() error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if c.pending > 0 {
		c.d.writes += c.pending
		c.d.settles++
		c.pending = 0
	}
	return nil
}

// A connection of an engine that gives connections their own runs its
// commands through it, and settles once for a pipeline of writes before
// it answers them, on the event loop and on a goroutine alike.
func TestPerConnEngineSettlesBeforeReplies(t *testing.T) {
	for _, loop := range []string{"", "goroutine"} {
		t.Run("loop="+loop, func(t *testing.T) {
			d := &deferringEngine{fakeEngine: newFakeEngine()}
			s, err := Listen(Config{Addr: "127.0.0.1:0", Loop: loop}, d)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c := dialRaw(t, s.Addr())
			const n = 16
			var b strings.Builder
			for i := range n {
				b.WriteString(cmd("SET", "k", strings.Repeat("v", i+1)))
			}
			c.send(b.String())
			for i := range n {
				r, err := c.read()
				if err != nil || r.String() != "OK" {
					t.Fatalf("reply %d: %q, %v", i, r.String(), err)
				}
				if i == 0 {
					d.mu.Lock()
					if d.writes == 0 {
						d.early++
					}
					d.mu.Unlock()
				}
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.early > 0 {
				t.Fatal("a write was answered before any Settle")
			}
			if d.writes != n {
				t.Fatalf("%d of %d writes went through the connection's engine and were settled", d.writes, n)
			}
			if d.settles < 1 || d.settles > 4 {
				t.Fatalf("%d Settles for a pipeline of %d writes sent at once: want one (or a few, if the reads split it)", d.settles, n)
			}
		})
	}
}
