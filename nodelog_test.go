package scalestore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// bulkVal is the value of key i in the node log's tests.
func bulkVal(i int) string { return strings.Repeat("v", 100) + fmt.Sprint(i) }

func checkBulk(t *testing.T, c *Cluster, n int, when string) {
	t.Helper()
	for i := range n {
		k := fmt.Sprintf("bulk:%07d", i)
		v, ok, err := c.Get([]byte(k), nil)
		if err != nil || !ok || string(v) != bulkVal(i) {
			t.Fatalf("%s: %s (of %d acknowledged): found %v, %.20q, %v", when, k, n, ok, v, err)
		}
	}
}

// A node alone logs its writes (nodelog.go): killed after many of them,
// with pages evicted, split and checkpointed on the way, it recovers every
// acknowledged one from its store's last checkpoint and its log.
func TestNodeLogKillLosesNothing(t *testing.T) {
	for _, d := range []string{DurabilityProcess, DurabilitySync} {
		t.Run(d, func(t *testing.T) {
			opts := clusterOpts(freePorts(t, 1), []string{t.TempDir()})[0]
			opts.Durability = d
			c, err := Join(opts)
			if err != nil {
				t.Fatal(err)
			}
			if c.nlog == nil {
				t.Fatal("a node alone with a store keeps no log")
			}
			c.nlog.bound = 256 << 10 // checkpoints on the way
			const n = 20000
			for i := range n {
				if err := c.Put([]byte(fmt.Sprintf("bulk:%07d", i)), []byte(bulkVal(i))); err != nil {
					t.Fatal(err)
				}
			}
			if c.nlog.checkpoints.Load() < 2 {
				t.Fatalf("%d checkpoints, want several", c.nlog.checkpoints.Load())
			}
			c.kill()
			c, err = Join(opts)
			if err != nil {
				t.Fatalf("after the kill: %v", err)
			}
			defer c.Close()
			if r := c.nlog.recovery; !r.Recovered {
				t.Fatalf("not recovered: %+v", r)
			}
			checkBulk(t, c, n, "after the kill")
		})
	}
}

// A kill in the middle of a checkpoint, at each of its stages (most
// changed pages journaled and written in place while writers went on; the
// log synced; the rest written; the metadata naming the next epoch set but
// not persisted; after it), loses no acknowledged write, also those made
// after the checkpoint failed.
func TestNodeLogKillMidCheckpoint(t *testing.T) {
	for _, stage := range []string{"prepared", "synced", "written", "meta", "done"} {
		t.Run(stage, func(t *testing.T) {
			opts := clusterOpts(freePorts(t, 1), []string{t.TempDir()})[0]
			c, err := Join(opts)
			if err != nil {
				t.Fatal(err)
			}
			const n = 6000
			put := func(from, to int) {
				for i := from; i < to; i++ {
					if err := c.Put([]byte(fmt.Sprintf("bulk:%07d", i)), []byte(bulkVal(i))); err != nil {
						t.Fatal(err)
					}
				}
			}
			put(0, n/2)
			if err := c.nlog.Checkpoint(); err != nil { // a first one: the journal holds images to roll back to
				t.Fatal(err)
			}
			put(n/2, 3*n/4)
			killed := errors.New("killed")
			c.nlog.failAt = func(s string) error {
				if s == stage {
					return killed
				}
				return nil
			}
			if err := c.nlog.Checkpoint(); !errors.Is(err, killed) {
				t.Fatalf("checkpoint: %v, want it killed at %s", err, stage)
			}
			c.nlog.failAt = nil
			if stage != "done" {
				put(3*n/4, n)
			}
			c.kill()
			c, err = Join(opts)
			if err != nil {
				t.Fatalf("after the kill: %v", err)
			}
			defer c.Close()
			want := n
			if stage == "done" {
				want = 3 * n / 4
			}
			checkBulk(t, c, want, "after a kill at "+stage)
		})
	}
}

// A checkpoint keeps writers out only at its end: a write made while it
// journals and writes most pages back goes through, and the writer whose
// write took the log past its bound does not wait for the checkpoint it
// starts (on a RESP event loop, every connection of the loop would wait
// with it). Close waits for it, and nothing is lost.
func TestNodeLogCheckpointLetsWritersGoOn(t *testing.T) {
	opts := clusterOpts(freePorts(t, 1), []string{t.TempDir()})[0]
	c, err := Join(opts)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	put := func() error {
		err := c.Put([]byte(fmt.Sprintf("bulk:%07d", n)), []byte(bulkVal(n)))
		if err == nil {
			n++
		}
		return err
	}
	// The checkpoint stops after its first part until the test lets it
	// go on; writes meanwhile must not wait for it.
	prepared, release := make(chan struct{}), make(chan struct{})
	c.nlog.failAt = func(s string) error {
		if s == "prepared" {
			close(prepared)
			<-release
		}
		return nil
	}
	before := c.nlog.checkpoints.Load()
	c.nlog.bound = 64 << 10
	for !c.nlog.checkpointing.Load() {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-prepared:
	case <-time.After(20 * time.Second):
		t.Fatal("the checkpoint the log's bound started did not get through its first part")
	}
	wrote := make(chan error, 1)
	go func() {
		for range 500 {
			if err := put(); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("writes waited for a checkpoint's first part")
	}
	if got := c.nlog.checkpoints.Load() - before; got != 0 {
		t.Fatalf("%d checkpoints done while the first was held, want 0", got)
	}
	close(release)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err = Join(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkBulk(t, c, n, "after the close")
}

// A read waits until what it read is durable: a RESP connection's SET,
// whose record waits for its loop turn's settle, is not durable yet, and a
// GET of it from elsewhere returns only once it is (as does a SCAN, and a
// View).
func TestNodeLogReadWaitsForWhatItRead(t *testing.T) {
	opts := clusterOpts(freePorts(t, 1), []string{t.TempDir()})[0]
	c, err := Join(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := c.nlog.log
	for i, read := range []func(key []byte) error{
		func(key []byte) error { _, _, err := c.Get(key, nil); return err },
		func(key []byte) error { return c.Scan(key, nil, func(_, _ []byte) bool { return false }) },
		func(key []byte) error {
			return c.View(func(tx *Tx) error { _, _, err := tx.Get(key, nil); return err })
		},
	} {
		e := respEngine{c}.ForConn().(*connEngine)
		key := []byte(fmt.Sprintf("k%d", i))
		if err := e.Put(key, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if e.ticket == 0 || l.Durable() >= e.ticket {
			t.Fatalf("read %d: the connection's SET is durable before its settle (ticket %d, durable %d)", i, e.ticket, l.Durable())
		}
		if err := read(key); err != nil {
			t.Fatal(err)
		}
		if d := l.Durable(); d < e.ticket {
			t.Fatalf("read %d returned before the SET it read was durable (ticket %d, durable %d)", i, e.ticket, d)
		}
		if err := e.Settle(); err != nil {
			t.Fatal(err)
		}
	}
}

// Every table logs into the node's one log, each record tagged with its
// table, and a transaction over two tables is one record: after a kill,
// each key is back in its own table, and the transfers' sum holds.
func TestNodeLogTablesAndTransactions(t *testing.T) {
	opts := clusterOpts(freePorts(t, 1), []string{t.TempDir()})[0]
	c, err := Join(opts)
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Table("other")
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		k := []byte(fmt.Sprintf("k%04d", i))
		if err := c.Put(k, []byte("default")); err != nil {
			t.Fatal(err)
		}
		if err := other.Put(k, []byte("other")); err != nil {
			t.Fatal(err)
		}
	}
	// Move 1 from the default table's "a" to the other's "a", n times.
	for i := range n {
		err := c.Update(func(tx *Tx) error {
			o, err := tx.Table(other)
			if err != nil {
				return err
			}
			if err := tx.Put([]byte("a"), []byte(fmt.Sprint(-i-1))); err != nil {
				return err
			}
			return o.Put([]byte("a"), []byte(fmt.Sprint(i+1)))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	c.kill()
	c, err = Join(opts)
	if err != nil {
		t.Fatalf("after the kill: %v", err)
	}
	defer c.Close()
	if r := c.nlog.recovery; !r.Recovered || r.Replayed == 0 {
		t.Fatalf("recovery %+v, want records replayed", r)
	}
	other, err = c.Table("other")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k := []byte(fmt.Sprintf("k%04d", i))
		for _, tb := range []struct {
			kv   KV
			want string
		}{{c, "default"}, {other, "other"}} {
			v, ok, err := tb.kv.Get(k, nil)
			if err != nil || !ok || string(v) != tb.want {
				t.Fatalf("%s in table %s after the kill: %v %q %v", k, tb.want, ok, v, err)
			}
		}
	}
	a, _, err := c.Get([]byte("a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := other.Get([]byte("a"), nil)
	if err != nil || string(a) != fmt.Sprint(-n) || string(b) != fmt.Sprint(n) {
		t.Fatalf("after the kill: a is %q and %q, want %d and %d (%v)", a, b, -n, n, err)
	}
}

// The embedded DB's reads wait for what they read as a node's do: a write
// whose record is appended but not yet durable (a session that holds its
// durability for later, as a RESP connection's does) is read by another
// caller only once the log is durable up to it. Without it a kill after
// the read took a value somebody had read (crashtest --shared).
func TestDBReadWaitsForWhatItRead(t *testing.T) {
	db, err := Open(t.TempDir(), Options{CachePages: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := db.log
	for i, read := range []func(key []byte) error{
		func(key []byte) error { _, _, err := db.Get(key, nil); return err },
		func(key []byte) error {
			vals, found := make([][]byte, 1), make([]bool, 1)
			return db.GetBatch([][]byte{key}, vals, found)
		},
		func(key []byte) error { return db.Scan(key, nil, func(_, _ []byte) bool { return false }) },
		func(key []byte) error {
			return db.View(func(tx *Tx) error { _, _, err := tx.Get(key, nil); return err })
		},
	} {
		var ticket uint64
		s := db.borrow()
		s.hold = &ticket
		key := []byte(fmt.Sprintf("k%d", i))
		err := s.Put(key, []byte("v"))
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ticket == 0 || l.Durable() >= ticket {
			t.Fatalf("read %d: the held write is durable before anyone read it (ticket %d, durable %d)", i, ticket, l.Durable())
		}
		if err := read(key); err != nil {
			t.Fatal(err)
		}
		if d := l.Durable(); d < ticket {
			t.Fatalf("read %d returned before the write it read was durable (ticket %d, durable %d)", i, ticket, d)
		}
	}
}
