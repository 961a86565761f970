package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

type rec struct {
	op       Op
	key, val string
}

func replayAll(t *testing.T, l *Log, epoch uint64) ([]rec, Replayed) {
	t.Helper()
	var got []rec
	r, err := l.Replay(epoch, func(op Op, key, val []byte) error {
		got = append(got, rec{op, string(key), string(val)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, r
}

func appendCommit(t *testing.T, l *Log, r rec) {
	t.Helper()
	lsn, err := l.Append(r.op, []byte(r.key), []byte(r.val))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Commit(lsn); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, path string) *Log {
	t.Helper()
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestReplayEpochs: records come back in order; a new epoch rewrites the
// file from its start and the older, longer epoch's records past its end
// are not replayed; a torn record ends the epoch.
func TestReplayEpochs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l := open(t, path)
	l.Start(1)
	var want []rec
	for i := range 100 {
		r := rec{Put, fmt.Sprintf("k%03d", i), fmt.Sprintf("value %d", i)}
		if i%7 == 3 {
			r = rec{Delete, fmt.Sprintf("k%03d", i-1), ""}
		}
		appendCommit(t, l, r)
		want = append(want, r)
	}
	l.Close()
	l = open(t, path)
	got, r := replayAll(t, l, 1)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed %v\nwant %v", got, want)
	}
	if r.Records != 100 {
		t.Fatalf("Replayed %+v", r)
	}
	if got, _ := replayAll(t, l, 2); len(got) != 0 {
		t.Fatalf("epoch 2 replayed %d records of epoch 1", len(got))
	}

	l.Start(2)
	appendCommit(t, l, rec{Put, "a", "1"})
	appendCommit(t, l, rec{Put, "b", "2"})
	got, r = replayAll(t, l, 2)
	if len(got) != 2 || got[1].key != "b" {
		t.Fatalf("epoch 2: %v (%s)", got, r.Stop)
	}
	if r.Records != 2 || r.Bytes != 40 {
		t.Fatalf("epoch 2 replayed %+v", r)
	}

	// Tear the second record: only the first replays.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[int(r.Bytes)-1] ^= 0xff
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	l2 := open(t, path)
	got, r = replayAll(t, l2, 2)
	if len(got) != 1 || r.Stop != "a torn or damaged record at offset 20" {
		t.Fatalf("after a damaged record: %v, %q", got, r.Stop)
	}
}

// TestGroupCommit: concurrent writers all get their records durable, and
// every record is replayed exactly once.
func TestGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l := open(t, path)
	l.Start(7)
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				appendCommit(t, l, rec{Put, fmt.Sprintf("w%d-%d", w, i), "v"})
			}
		})
	}
	wg.Wait()
	got, _ := replayAll(t, l, 7)
	seen := map[string]bool{}
	for _, r := range got {
		if seen[r.key] {
			t.Fatalf("%s replayed twice", r.key)
		}
		seen[r.key] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("replayed %d records, want %d", len(seen), writers*each)
	}
}

func TestRecordTooLarge(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "log"))
	if _, err := l.Append(Put, []byte("k"), make([]byte, MaxRecord)); err == nil {
		t.Fatal("a record over MaxRecord was accepted")
	}
}

// TestNoSyncRecordsReachTheFile: NoSync commits go through the shared
// mapping; another reader of the file (as the next Open after a kill would
// be) replays them without the log being closed, and switching to synced
// commits keeps every record.
func TestNoSyncRecordsReachTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Start(3)
	for i := range 1000 {
		appendCommit(t, l, rec{Put, fmt.Sprintf("k%04d", i), "v"})
	}
	if l.mapped == nil {
		t.Log("the log could not be mapped: commits used pwrite")
	}
	if err := l.SetNoSync(false); err != nil {
		t.Fatal(err)
	}
	appendCommit(t, l, rec{Delete, "k0000", ""})
	other := open(t, path) // not closed: what a killed process leaves
	got, r := replayAll(t, other, 3)
	if len(got) != 1001 || got[1000].op != Delete {
		t.Fatalf("replayed %d records (%s), want 1001 ending with the delete", len(got), r.Stop)
	}
}
