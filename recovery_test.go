package scalestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// crash stops db as a killed process would: nothing more reaches the store
// (no write-back, no clean mark); what the log and the store hold stays.
func crash(t *testing.T, db *DB) {
	t.Helper()
	db.rt.Abandon()
	abandon(db.store)
	db.log.Close()
}

type model map[string]string

func (m model) check(t *testing.T, db *DB) {
	t.Helper()
	n := 0
	if err := db.Scan(nil, nil, func(k, v []byte) bool {
		n++
		if want, ok := m[string(k)]; !ok || want != string(v) {
			t.Errorf("key %q = %q after recovery, want %q (present %v)", k, v, want, ok)
			return false
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(m) {
		t.Fatalf("%d keys after recovery, want %d", n, len(m))
	}
}

// TestCrashRecoversEveryWrite: a store crashed after writes, deletes,
// evictions and checkpoints (a small cache and a small CheckpointBytes),
// opens without OpenUnclean and holds exactly the acknowledged writes; a
// second crash right after the recovery (and another after more writes)
// recovers again, nothing applied twice.
func TestCrashRecoversEveryWrite(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{CachePages: 32, Slots: 1 << 14, NoSync: !sync, CheckpointBytes: 256 << 10}
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			m := model{}
			keys := 6000
			if sync {
				keys = 600
			}
			for round := range 3 {
				for i := range keys {
					// Every round inserts new keys (splits, new pages) and
					// overwrites old ones with longer values.
					k := fmt.Sprintf("key%06d", (i*7919)%(keys*(round+1)))
					v := fmt.Sprintf("r%d-%d-%s-%s", round, i, k, strings.Repeat("v", (i+round*31)%90))
					if i%5 == 4 {
						if _, err := db.Delete([]byte(k)); err != nil {
							t.Fatal(err)
						}
						delete(m, k)
						continue
					}
					if err := db.Put([]byte(k), []byte(v)); err != nil {
						t.Fatal(err)
					}
					m[k] = v
				}
				if db.Stats().Checkpoints == 0 && !sync {
					t.Fatalf("round %d: no checkpoint ran; the test wants some", round)
				}
				crash(t, db)
				if db, err = Open(dir, opts); err != nil {
					t.Fatalf("round %d: Open after a crash: %v", round, err)
				}
				rec := db.Recovery()
				if !rec.Recovered {
					t.Fatalf("round %d: Recovery %+v, want Recovered", round, rec)
				}
				m.check(t, db)
				if round == 1 {
					// A crash right after a recovery.
					crash(t, db)
					if db, err = Open(dir, opts); err != nil {
						t.Fatal(err)
					}
					m.check(t, db)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			if db.Recovery().Recovered {
				t.Fatal("a store closed cleanly was recovered")
			}
			m.check(t, db)
			db.Close()
		})
	}
}

// TestCrashWithConcurrentWriters: writers on several goroutines, checkpoints
// among them; after a crash every write that returned is there.
func TestCrashWithConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CachePages: 64, Slots: 1 << 14, CheckpointBytes: 128 << 10}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 1500
	acked := make([]int, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				k := fmt.Sprintf("w%d-%05d", w, i)
				if err := db.Put([]byte(k), []byte(k+"-value")); err != nil {
					t.Error(err)
					return
				}
				acked[w] = i + 1
			}
		})
	}
	wg.Wait()
	crash(t, db)
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for w := range writers {
		for i := range acked[w] {
			k := fmt.Sprintf("w%d-%05d", w, i)
			v, ok, err := db.Get([]byte(k), nil)
			if err != nil || !ok || string(v) != k+"-value" {
				t.Fatalf("%s after the crash: %q %v %v", k, v, ok, err)
			}
		}
	}
	if db.Stats().Checkpoints == 0 && db.Recovery().Replayed == 0 {
		t.Fatal("nothing was replayed")
	}
}

// TestTornLogTail: a log whose last record is torn recovers up to the record
// before it, and says where the log ended.
func TestTornLogTail(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CachePages: 64, Slots: 1 << 14, NoSync: true}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := db.Put(fmt.Appendf(nil, "k%03d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	size := db.log.Size()
	crash(t, db)
	path := filepath.Join(dir, LogFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[size-2] ^= 0x5a // inside the last record
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := db.Recovery()
	if rec.Replayed != 99 || rec.LogEnd == "" {
		t.Fatalf("Recovery %+v, want 99 records replayed and the torn record named", rec)
	}
	if _, ok, _ := db.Get([]byte("k099"), nil); ok {
		t.Fatal("the torn record's key is present")
	}
	if _, ok, _ := db.Get([]byte("k098"), nil); !ok {
		t.Fatal("the record before the torn one is missing")
	}
}

// TestMissingJournalIsRefused: a crashed store whose undo journal is gone
// cannot be put back to its checkpoint, so the log cannot be replayed over
// it: Open refuses it (ErrUnclean) rather than apply the log to pages that
// may be newer.
func TestMissingJournalIsRefused(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CachePages: 16, Slots: 1 << 14, NoSync: true}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		if err := db.Put(fmt.Appendf(nil, "k%05d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	crash(t, db)
	if err := os.Remove(filepath.Join(dir, StoreFile+".undo")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, opts); !errors.Is(err, ErrUnclean) {
		t.Fatalf("Open: %v, want ErrUnclean", err)
	}
}
