//go:build linux

package nvme

import (
	"os"
	"path/filepath"
	"testing"
)

func openJournaled(t *testing.T, e engine, path string, create bool) *Store {
	t.Helper()
	opts := Options{NoIOUring: e.noIOUring, Journal: true, QueueDepth: 4}
	if create {
		opts.Create, opts.Slots = true, 64
	}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(journal, create=%v): %v", create, err)
	}
	checkEngine(t, s, e)
	return s
}

// writeAsync writes every slot of slots with seed through the asynchronous
// path (so that writes wait for the journal's sync in batches) and waits.
func writeAsync(t *testing.T, s *Store, seed uint64, slots ...uint64) {
	t.Helper()
	for _, slot := range slots {
		if err := s.WriteAsync(slot, pattern(slot, seed), func(err error) {
			if err != nil {
				t.Errorf("write slot %d: %v", slot, err)
			}
		}); err != nil {
			t.Fatalf("WriteAsync(%d): %v", slot, err)
		}
	}
	if err := s.drain(); err != nil {
		t.Fatal(err)
	}
}

func expectPages(t *testing.T, s *Store, want map[uint64]uint64) {
	t.Helper()
	got := make([]byte, PageSize)
	for slot, seed := range want {
		if err := s.ReadPage(slot, got); err != nil {
			t.Fatalf("ReadPage(%d): %v", slot, err)
		}
		if seed == 0 {
			if !allZero(got) {
				t.Fatalf("slot %d: want the zero page it was at the rollback point", slot)
			}
			continue
		}
		checkPage(t, slot, got, pattern(slot, seed))
	}
}

// TestJournalRollsBackToTheLastSync: a store abandoned (as a killed process
// leaves it) after writes since its last Sync opens with every page as that
// Sync left it, slots written since then included; one closed cleanly
// opens as it is.
func TestJournalRollsBackToTheLastSync(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			path := filepath.Join(testDir(t), "store")
			s := openJournaled(t, e, path, true)
			writeAsync(t, s, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			writeAsync(t, s, 2, 0, 1, 2, 3, 4, 10, 11, 12)
			writeAsync(t, s, 3, 0, 1, 12) // second overwrites: no new record
			if got := s.journal.records; got != 8 {
				t.Fatalf("journal holds %d records, want 8 (one per slot first overwritten)", got)
			}
			if err := s.Abandon(); err != nil {
				t.Fatal(err)
			}

			s = openJournaled(t, e, path, false)
			if s.WasClean() || !s.Recovered() || s.RolledBack() != 8 {
				t.Fatalf("WasClean %v, Recovered %v, RolledBack %d; want false, true, 8", s.WasClean(), s.Recovered(), s.RolledBack())
			}
			want := map[uint64]uint64{10: 0, 11: 0, 12: 0}
			for slot := range uint64(10) {
				want[slot] = 1
			}
			expectPages(t, s, want)

			// A new epoch began at this Open: writes roll back to here.
			writeAsync(t, s, 4, 5, 20)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openJournaled(t, e, path, false)
			if !s.WasClean() || s.Recovered() {
				t.Fatalf("after Close: WasClean %v, Recovered %v; want true, false", s.WasClean(), s.Recovered())
			}
			want[5], want[20] = 4, 4
			expectPages(t, s, want)
			s.Close()
		})
	}
}

// TestJournalStaleAndTornRecords: records of an older epoch past the end of
// the current one are not applied, and a torn last record ends the journal.
func TestJournalStaleAndTornRecords(t *testing.T) {
	e := engines[1]
	path := filepath.Join(testDir(t), "store")
	s := openJournaled(t, e, path, true)
	writeAsync(t, s, 1, 0, 1, 2, 3, 4, 5)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	writeAsync(t, s, 2, 0, 1, 2, 3, 4, 5) // six records of images 1
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	writeAsync(t, s, 3, 0, 1) // two records of images 2; four stale ones follow
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	s = openJournaled(t, e, path, false)
	if s.RolledBack() != 2 {
		t.Fatalf("RolledBack %d, want 2 (the stale epoch's records must not count)", s.RolledBack())
	}
	expectPages(t, s, map[uint64]uint64{0: 2, 1: 2, 2: 2, 5: 2})

	// Tear the second record of a new epoch: only the first is applied.
	writeAsync(t, s, 4, 2, 3)
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	jp := path + JournalSuffix
	if err := os.Truncate(jp, int64(2*(jHeader+PageSize)-100)); err != nil {
		t.Fatal(err)
	}
	s = openJournaled(t, e, path, false)
	defer s.Close()
	if s.RolledBack() != 1 {
		t.Fatalf("RolledBack %d after a torn record, want 1", s.RolledBack())
	}
	expectPages(t, s, map[uint64]uint64{2: 2, 3: 4})
}

// TestJournalMissing: a journaled store that was not closed cleanly and has
// lost its journal is not recovered (its caller must refuse it).
func TestJournalMissing(t *testing.T) {
	e := engines[1]
	path := filepath.Join(testDir(t), "store")
	s := openJournaled(t, e, path, true)
	writeAsync(t, s, 1, 0)
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + JournalSuffix); err != nil {
		t.Fatal(err)
	}
	s = openJournaled(t, e, path, false)
	defer s.Close()
	if s.WasClean() || s.Recovered() {
		t.Fatalf("WasClean %v, Recovered %v; want false, false", s.WasClean(), s.Recovered())
	}
}

// TestJournalNewStoreDiscardsOldJournal: formatting a store over a path
// whose journal file is left from an earlier store starts an empty journal
// (both stores' first epochs are numbered 1).
func TestJournalNewStoreDiscardsOldJournal(t *testing.T) {
	e := engines[1]
	path := filepath.Join(testDir(t), "store")
	s := openJournaled(t, e, path, true)
	writeAsync(t, s, 1, 0, 1, 2, 3)
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s = openJournaled(t, e, path, true)
	writeAsync(t, s, 2, 7)
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	s = openJournaled(t, e, path, false)
	defer s.Close()
	if s.RolledBack() != 1 {
		t.Fatalf("RolledBack %d, want 1 (the old store's records must be gone)", s.RolledBack())
	}
	expectPages(t, s, map[uint64]uint64{0: 0, 7: 0})
}

// TestProtectJournalsAhead: Protect journals the on-disk images of the
// slots it is given (never-written ones as zero pages, slots already
// journaled this epoch not again), the writes that follow add no record,
// and a store abandoned after them rolls back to those images.
func TestProtectJournalsAhead(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			path := filepath.Join(testDir(t), "store")
			s := openJournaled(t, e, path, true)
			writeAsync(t, s, 1, 0, 1, 2, 3)
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			writeAsync(t, s, 2, 3) // journaled by its write
			slots := []uint64{0, 1, 2, 3, 7, 9}
			if err := s.Protect(append(slots, 1<<40)); err != nil { // past the store: ignored
				t.Fatal(err)
			}
			if got := s.journal.records; got != 6 {
				t.Fatalf("journal holds %d records, want 6 (slot 3's from its write, five from Protect)", got)
			}
			writeAsync(t, s, 3, slots...)
			if got := s.journal.records; got != 6 {
				t.Fatalf("the writes after Protect added %d records", got-6)
			}
			if err := s.Abandon(); err != nil {
				t.Fatal(err)
			}
			s = openJournaled(t, e, path, false)
			if !s.Recovered() || s.RolledBack() != 6 {
				t.Fatalf("Recovered %v, RolledBack %d; want true, 6", s.Recovered(), s.RolledBack())
			}
			expectPages(t, s, map[uint64]uint64{0: 1, 1: 1, 2: 1, 3: 1, 7: 0, 9: 0})
			s.Close()
		})
	}
}
