package scalestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/protocol"
)

// A cluster without membership keeps a transaction whole when its
// committer is killed between two write-throughs and the whole cluster is
// restarted (docs/transactions.md, "Durability"): two accounts on leaves
// of nodes 0 and 2, a transfer committed on node 1, which is killed right
// after the first leaf is on node 0's store; then nodes 0 and 2 are
// killed too, and the cluster restarts on its stores. The record on node
// 1's disk rolls the second leaf forward before any node serves: both
// accounts read as after the transfer. The mutants (the record marked
// done before the last write-through; the leaves written through before
// the record exists) leave half the transfer, and the test catches them.
func TestUpdateWholeWhenTheCommitterIsKilledWithoutMembership(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutant    commitMutant
		transport string
	}{
		{"record", 0, "tcp"},
		{"record/shm", 0, "shm"},
		{"record/sync", 0, "tcp/sync"},
		{"done-before-last-write", mutantDoneBeforeLastWrite, "tcp"},
		{"write-before-record", mutantWriteBeforeRecord, "tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, log := killCommitterMidCommit(t, tc.mutant, tc.transport, nil)
			t.Logf("after the restart: %d and %d", a, b)
			whole := a == bankStart-5 && b == bankStart+5
			switch {
			case tc.mutant == 0 && !whole:
				t.Fatalf("the transfer is not whole after the restart: the accounts read %d and %d (want %d and %d)",
					a, b, bankStart-5, bankStart+5)
			case tc.mutant == 0 && !strings.Contains(log, "rolled forward the transactions its death cut"):
				t.Fatalf("node 1 did not say it rolled its record forward; log:\n%s", log)
			case tc.mutant != 0 && a+b == 2*bankStart:
				t.Fatalf("mutant %s not caught: the accounts read %d and %d", tc.name, a, b)
			}
		})
	}
}

// killCommitterMidCommit runs the crash above; damage, if set, changes
// node 1's file of transaction records before the restart. It returns the
// accounts as read after the restart and node 1's log.
// transport is the nodes' transport, "tcp/sync" for tcp with durability
// sync.
func killCommitterMidCommit(t *testing.T, mutant commitMutant, transport string, damage func(path string)) (a, b int64, log string) {
	t.Helper()
	opts := clusterOpts(freePorts(t, 3), []string{t.TempDir(), t.TempDir(), t.TempDir()})
	sockets := t.TempDir()
	for i := range opts {
		opts[i].Transport, opts[i].SocketDir = transport, sockets
		if kind, durability, ok := strings.Cut(transport, "/"); ok {
			opts[i].Transport, opts[i].Durability = kind, durability
		}
	}
	var buf syncBuffer
	opts[1].Logger = slog.New(slog.NewTextHandler(&buf, nil))
	cs := joinAll(t, opts)
	fundAcrossLeaves(t, cs[2])
	from, to := []byte(bankKey(0)), []byte(bankKey(bankAccounts-1))
	c := cs[1]
	c.def.commitMutant = mutant
	var dirs []protocol.NodeID
	crashed := false
	c.def.afterWriteThrough = func(pid protocol.PID) {
		dirs = append(dirs, pid.Dir())
		if len(dirs) == 1 && pid.Dir() == 0 {
			crashed = true
			c.kill()
		}
	}
	err := moveFive(c, from, to)
	t.Logf("the transfer on node 1 wrote leaves of nodes %v through; it returned %v", dirs, err)
	if !crashed {
		for _, c := range cs {
			c.kill()
		}
		t.Fatal("the transfer's commit wrote no two leaves of nodes 0 and 2 through: nothing was crashed")
	}
	cs[0].kill()
	cs[2].kill()
	if damage != nil {
		damage(filepath.Join(opts[1].Data, NodeTxFile(1)))
	}
	cs = restartCommitterLast(t, opts, nil, 0, 1, time.Second)
	defer closeAll(t, cs)
	a, b = readAfterRestart(t, opts, cs, from, to)
	return a, b, buf.String()
}

// readAfterRestart reads the accounts from and to through every node of
// the restarted cluster cs (the last reader's figures) and checks that
// node 1, the committer, reset its file of transaction records.
func readAfterRestart(t *testing.T, opts []ClusterOptions, cs []*Cluster, from, to []byte) (a, b int64) {
	t.Helper()
	for _, reader := range cs {
		var err error
		a, b, err = readBalances(reader, from, to)
		if err != nil {
			t.Fatalf("reading the accounts through node %d after the restart: %v", reader.ID(), err)
		}
	}
	if st, err := os.Stat(filepath.Join(opts[1].Data, NodeTxFile(1))); err != nil || st.Size() != txFileHeader {
		t.Fatalf("node 1's file of transaction records after the restart: %v, %v (want it reset, %d bytes)", st, err, txFileHeader)
	}
	return a, b
}

// A torn record (cut while it was written, or damaged: its checksum
// fails) is dropped, and the node says so: its commit wrote nothing
// through. Here the record is damaged after its commit wrote its first
// leaf through, so dropping it leaves half the transfer, which shows that
// nothing of it was rolled.
func TestTxRecordTornIsDropped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"cut", func(t *testing.T, path string) {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, st.Size()-100); err != nil {
				t.Fatal(err)
			}
		}},
		{"checksum", func(t *testing.T, path string) {
			flipByte(t, path, txFileHeader+txRecHeader+8+100)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, log := killCommitterMidCommit(t, 0, "tcp", func(path string) { tc.damage(t, path) })
			t.Logf("after the restart: %d and %d", a, b)
			if !strings.Contains(log, "dropped a torn transaction record") {
				t.Fatalf("node 1 did not say it dropped a torn record; log:\n%s", log)
			}
			if a != bankStart-5 || b != bankStart {
				t.Fatalf("the torn record was rolled (or more): the accounts read %d and %d, want %d and %d", a, b, bankStart-5, bankStart)
			}
		})
	}
}

// restartCommitterLast starts every node but last, in the order of first
// (each gap after the one before; the others at once), checks that none
// of them serves (returns from Join) for wait, in which node last has not
// rolled its records forward, then starts node last.
func restartCommitterLast(t *testing.T, opts []ClusterOptions, first []int, gap time.Duration, last int, wait time.Duration) []*Cluster {
	t.Helper()
	cs := make([]*Cluster, len(opts))
	errs := make([]error, len(opts))
	done := make(chan int, len(opts))
	start := func(i int) { go func() { cs[i], errs[i] = Join(opts[i]); done <- i }() }
	started := map[int]bool{last: true}
	for _, i := range first {
		start(i)
		started[i] = true
		time.Sleep(gap)
	}
	for i := range opts {
		if !started[i] {
			start(i)
		}
	}
	select {
	case i := <-done:
		t.Fatalf("node %d started before node %d, whose records roll forward (%v)", i, last, errs[i])
	case <-time.After(wait):
	}
	cs[last], errs[last] = Join(opts[last])
	for range len(opts) - 1 {
		<-done
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	return cs
}

// Without membership, a node that restarts waits in Join for every peer
// to say it rolled its records forward; a peer that never starts fails it
// after JoinTimeout, with an error that names the peer.
func TestTxStartGateTimesOutWithoutAPeer(t *testing.T) {
	opts := clusterOpts(freePorts(t, 2), []string{t.TempDir(), t.TempDir()})
	closeAll(t, joinAll(t, opts))
	for i := range opts {
		o := opts[i]
		o.JoinTimeout = time.Second
		start := time.Now()
		c, err := Join(o)
		if err == nil {
			c.Close()
			t.Fatalf("node %d started without node %d", i, 1-i)
		}
		t.Logf("node %d alone, after %v: %v", i, time.Since(start).Round(time.Millisecond), err)
		if i == 0 && (!errors.Is(err, actors.ErrStartGate) || !strings.Contains(err.Error(), "[1]")) {
			t.Fatalf("node 0 alone: %v (want the start gate's error naming node 1)", err)
		}
	}
	closeAll(t, joinAll(t, opts))
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// A record that names a page no store of the cluster has is refused: the
// node does not start, and the error names the file.
func TestTxRecordOfAnInvalidPageIsRefused(t *testing.T) {
	opts := clusterOpts(freePorts(t, 2), []string{t.TempDir(), t.TempDir()})
	closeAll(t, joinAll(t, opts))
	path := filepath.Join(opts[1].Data, NodeTxFile(1))
	head, err := os.ReadFile(path)
	if err != nil || len(head) != txFileHeader {
		t.Fatalf("node 1's file of records after a clean stop: %d bytes, %v", len(head), err)
	}
	nonce := binary.LittleEndian.Uint64(head[8:])
	for _, pid := range []protocol.PID{protocol.MakePID(7, 3), protocol.MakePID(1, 1<<19)} {
		rec := make([]byte, txRecordBytes(2))
		binary.LittleEndian.PutUint64(rec[txRecHeader:], uint64(protocol.MakePID(0, 0)))
		binary.LittleEndian.PutUint64(rec[txRecHeader+txRecPage:], uint64(pid))
		sealTxRecord(rec, 4, nonce)
		if err := os.WriteFile(path, append(head[:txFileHeader:txFileHeader], rec...), 0o644); err != nil {
			t.Fatal(err)
		}
		o := opts[1]
		o.JoinTimeout = 0
		c, err := Join(o)
		if err == nil {
			c.Close()
			t.Fatalf("a record naming page %v: node 1 started", pid)
		}
		t.Logf("a record naming page %v: %v", pid, err)
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), pid.String()) {
			t.Fatalf("a record naming page %v: the error names neither the file nor the page: %v", pid, err)
		}
	}
	// The same record of valid pages parses (and would roll): not refused
	// at open.
	f, pending, err := openTxFile(path, false, slog.New(slog.DiscardHandler), func(protocol.PID) error { return nil })
	if err != nil || len(pending) != 1 {
		t.Fatalf("the record with its pages taken as valid: %d pending, %v", len(pending), err)
	}
	f.close()
}

// testImage is a page of a record in txFile's own tests.
type testImage struct {
	pid  protocol.PID
	data []byte
}

func (p testImage) PID() protocol.PID { return p.pid }
func (p testImage) Data() []byte      { return p.data }

// testRecord is a record of two pages of node 0, slots k and k+1, every
// byte of each image k.
func testRecord(k int) []testImage {
	return []testImage{
		{protocol.MakePID(0, uint64(k)), bytes.Repeat([]byte{byte(k)}, protocol.PageSize)},
		{protocol.MakePID(0, uint64(k+1)), bytes.Repeat([]byte{byte(k)}, protocol.PageSize)},
	}
}

// pendingOf reads the file at path as a start would and names its open
// records by their first byte.
func pendingOf(t *testing.T, path string) []int {
	t.Helper()
	f, pending, err := openTxFile(path, false, slog.New(slog.DiscardHandler), func(protocol.PID) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	f.close()
	var out []int
	for _, p := range pending {
		out = append(out, int(p.pages[0].Data[0]))
	}
	return out
}

// Several records open at once on one node, ended in any order: a start
// finds exactly those not done; the file starts over once none is open,
// and an append that does not fit beside the open ones waits for them; a
// record larger than the file is refused with ErrTxTooLarge; a record
// whose write-through failed keeps the file from starting over.
func TestTxFileKeepsConcurrentRecords(t *testing.T) {
	defer func(m int64) { txFileMax = m }(txFileMax)
	txFileMax = txFileHeader + 3*txRecordBytes(2)
	path := filepath.Join(t.TempDir(), NodeTxFile(3))
	tf, pending, err := openTxFile(path, false, slog.New(slog.DiscardHandler), nil)
	if err != nil || len(pending) != 0 {
		t.Fatalf("a new file: %d pending, %v", len(pending), err)
	}
	defer tf.close()
	a, err := txBegin(tf, testRecord(1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := txBegin(tf, testRecord(2))
	if err != nil {
		t.Fatal(err)
	}
	if got := pendingOf(t, path); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("two open records: a start finds %v", got)
	}
	if err := tf.done(b); err != nil {
		t.Fatal(err)
	}
	if got := pendingOf(t, path); !slices.Equal(got, []int{1}) {
		t.Fatalf("the second record done: a start finds %v, want [1]", got)
	}
	if err := tf.done(a); err != nil {
		t.Fatal(err)
	}
	// None open: the next record goes at the start again, over the first,
	// and the done second one behind it is of the older generation.
	c, err := txBegin(tf, testRecord(3))
	if err != nil {
		t.Fatal(err)
	}
	if c != txFileHeader {
		t.Fatalf("the record after every one ended went at %d, want %d", c, txFileHeader)
	}
	if got := pendingOf(t, path); !slices.Equal(got, []int{3}) {
		t.Fatalf("after the file started over: a start finds %v, want [3]", got)
	}
	d, _ := txBegin(tf, testRecord(4))
	e, _ := txBegin(tf, testRecord(5))
	// Full: the next append waits until no record is open.
	appended := make(chan error, 1)
	go func() { _, err := txBegin(tf, testRecord(6)); appended <- err }()
	select {
	case err := <-appended:
		t.Fatalf("an append to a full file did not wait: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	for _, off := range []int64{c, d} {
		if err := tf.done(off); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-appended:
		t.Fatalf("an append went in while a record was still open: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := tf.done(e); err != nil {
		t.Fatal(err)
	}
	if err := <-appended; err != nil {
		t.Fatalf("the append once the file emptied: %v", err)
	}
	big := slices.Concat(testRecord(10), testRecord(12), testRecord(14), testRecord(16))
	if _, err := txBegin(tf, big); !errors.Is(err, ErrTxTooLarge) {
		t.Fatalf("a record of 8 pages in a file of 3 records of 2: %v", err)
	}
	// Record 6's write-through failed: it stays to roll at the next start,
	// and the file never starts over before it.
	tf.end(false)
	for _, k := range []int{7, 8} {
		off, err := txBegin(tf, testRecord(k))
		if err != nil {
			t.Fatal(err)
		}
		if err := tf.done(off); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := txBegin(tf, testRecord(9)); err == nil || !strings.Contains(err.Error(), "is full") {
		t.Fatalf("an append to a file full behind a failed record: %v", err)
	}
	if got := pendingOf(t, path); !slices.Equal(got, []int{6}) {
		t.Fatalf("a start finds %v, want the failed record [6]", got)
	}
}

// A commit whose record would not fit the file fails with ErrTxTooLarge
// before it changes anything; one whose record fits goes on.
func TestTxRecordTooLargeIsRefusedBeforeApply(t *testing.T) {
	defer func(m int64) { txFileMax = m }(txFileMax)
	opts := clusterOpts(freePorts(t, 2), []string{t.TempDir(), t.TempDir()})
	cs := joinAll(t, opts)
	defer func() { closeAll(t, cs) }()
	c := cs[0]
	if c.def.txFile == nil {
		t.Fatal("a cluster of two without membership keeps no file of transaction records")
	}
	val := strings.Repeat("x", 500)
	key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
	for i := range 200 { // 8 to a leaf
		if err := c.Put(key(i), []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	update := func(keys ...int) error {
		return c.Update(func(tx *Tx) error {
			for _, k := range keys {
				if err := tx.Put(key(k), []byte("new")); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := update(0, 100, 199); err != nil {
		t.Fatalf("a commit of three leaves: %v", err)
	}
	txFileMax = txFileHeader + txRecordBytes(2)
	err := update(1, 101, 198)
	t.Logf("a commit of three leaves, with room for a record of two: %v", err)
	if !errors.Is(err, ErrTxTooLarge) {
		t.Fatalf("a commit whose record does not fit: %v, want ErrTxTooLarge", err)
	}
	for _, k := range []int{1, 101, 198} {
		if v, _, err := c.Get(key(k), nil); err != nil || string(v) != val {
			t.Fatalf("key %d after the refused commit: %q, %v", k, v, err)
		}
	}
	if err := update(2, 102); err != nil {
		t.Fatalf("a commit of two leaves, whose record fits: %v", err)
	}
}
