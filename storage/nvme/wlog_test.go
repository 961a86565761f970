//go:build linux

package nvme

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

func openLogged(t *testing.T, e engine, path string, create bool, slots uint64, logBytes int) *Store {
	t.Helper()
	return openLoggedCached(t, e, path, create, slots, logBytes, false)
}

func openLoggedCached(t *testing.T, e engine, path string, create bool, slots uint64, logBytes int, cached bool) *Store {
	t.Helper()
	s, err := Open(path, Options{Slots: slots, Create: create, NoIOUring: e.noIOUring, WriteLog: true, WriteLogBytes: logBytes, WriteLogCached: cached})
	if err != nil {
		t.Fatalf("Open(write log): %v", err)
	}
	checkEngine(t, s, e)
	return s
}

// waitAll polls until every request the test queued is reported.
func waitAll(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Submit(); err != nil {
		t.Fatal(err)
	}
	for s.InFlight() > 0 {
		if _, err := s.Poll(1); err != nil {
			t.Fatal(err)
		}
	}
}

// Writes queued together go to the log in one write, are acknowledged
// from it, read back from memory, and are in place after Close.
func TestWriteLogGroupsWrites(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			path := filepath.Join(testDir(t), "store")
			s := openLogged(t, e, path, true, 256, 0)
			acked := 0
			for slot := range uint64(50) {
				if err := s.WriteAsync(slot, pattern(slot, 1), func(err error) {
					if err != nil {
						t.Errorf("write: %v", err)
					}
					acked++
				}); err != nil {
					t.Fatal(err)
				}
			}
			waitAll(t, s)
			if batches, _, _ := s.WriteLogStats(); acked != 50 || batches != 1 {
				t.Fatalf("%d writes acknowledged in %d log writes; want 50 in 1", acked, batches)
			}
			if s.Writes != 0 {
				t.Fatalf("%d writes in place before a checkpoint", s.Writes)
			}
			buf := make([]byte, PageSize)
			for slot := range uint64(50) {
				if err := s.ReadPage(slot, buf); err != nil {
					t.Fatal(err)
				}
				checkPage(t, slot, buf, pattern(slot, 1))
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Without the log, the store alone holds every write.
			s, err := Open(path, Options{NoIOUring: e.noIOUring})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !s.WasClean() {
				t.Fatal("closed store reads as unclean")
			}
			for slot := range uint64(50) {
				if err := s.ReadPage(slot, buf); err != nil {
					t.Fatal(err)
				}
				checkPage(t, slot, buf, pattern(slot, 1))
			}
		})
	}
}

// A store killed after its writes were acknowledged (its log never
// checkpointed to the end, the ring wrapped many times) holds each slot's
// last acknowledged write after the next Open.
func TestWriteLogReplaysAfterKill(t *testing.T) {
	for _, c := range []struct {
		e      engine
		cached bool
	}{{engines[0], false}, {engines[1], false}, {engines[0], true}, {engines[1], true}} {
		e, cached := c.e, c.cached
		t.Run(fmt.Sprintf("%s/cached=%v", e.name, cached), func(t *testing.T) {
			path := filepath.Join(testDir(t), "store")
			const slots = 300
			s := openLoggedCached(t, e, path, true, slots, wlogMinBytes, cached)
			r := rand.New(rand.NewPCG(7, 7))
			last := map[uint64]uint64{}
			for i := range 4000 {
				slot := uint64(r.IntN(slots))
				seed := uint64(i + 1)
				if err := s.WriteAsync(slot, pattern(slot, seed), func(err error) {
					if err != nil {
						t.Errorf("write: %v", err)
					}
				}); err != nil {
					t.Fatal(err)
				}
				last[slot] = seed
				if r.IntN(20) == 0 {
					waitAll(t, s)
				} else if r.IntN(3) == 0 {
					if err := s.Submit(); err != nil {
						t.Fatal(err)
					}
					if _, err := s.Poll(0); err != nil {
						t.Fatal(err)
					}
				}
			}
			waitAll(t, s)
			batches, checkpoints, _ := s.WriteLogStats()
			if checkpoints == 0 {
				t.Fatalf("%d log writes and no checkpoint: the ring did not fill", batches)
			}
			// Killed: nothing is written back, the superblock says in use.
			s.release(true)
			s = openLoggedCached(t, e, path, false, 0, wlogMinBytes, cached)
			defer s.Close()
			if s.WasClean() {
				t.Fatal("killed store reads as clean")
			}
			if _, _, replayed := s.WriteLogStats(); replayed == 0 {
				t.Fatal("nothing replayed")
			}
			buf := make([]byte, PageSize)
			for slot, seed := range last {
				if err := s.ReadPage(slot, buf); err != nil {
					t.Fatal(err)
				}
				checkPage(t, slot, buf, pattern(slot, seed))
			}
		})
	}
}

// A batch torn by a crash (a page of it does not verify) ends the replay:
// the slots keep their earlier acknowledged images, and the pages of the
// batch before the torn one, which were written too, are applied.
func TestWriteLogTornBatch(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			path := filepath.Join(testDir(t), "store")
			s := openLogged(t, e, path, true, 16, 0)
			for slot := range uint64(4) {
				if err := s.WriteAsync(slot, pattern(slot, 1), nil); err != nil {
					t.Fatal(err)
				}
			}
			waitAll(t, s) // batch 1 at ring offset 0: 5 blocks
			for slot := range uint64(4) {
				if err := s.WriteAsync(slot, pattern(slot, 2), nil); err != nil {
					t.Fatal(err)
				}
			}
			waitAll(t, s) // batch 2 at ring offset 5 blocks
			s.release(true)
			// Tear batch 2's third page (slot 2).
			corrupt(t, path+WriteLogSuffix, PageSize*(1+5+1+2)+100, []byte("torn"))
			s = openLogged(t, e, path, false, 0, 0)
			defer s.Close()
			buf := make([]byte, PageSize)
			for slot, seed := range []uint64{2, 2, 1, 1} {
				if err := s.ReadPage(uint64(slot), buf); err != nil {
					t.Fatal(err)
				}
				checkPage(t, uint64(slot), buf, pattern(uint64(slot), seed))
			}
			// The log starts over past the torn batch: a write now and a
			// second kill replay only it on top.
			if err := s.WriteAsync(3, pattern(3, 9), nil); err != nil {
				t.Fatal(err)
			}
			waitAll(t, s)
			s.release(true)
			s = openLogged(t, e, path, false, 0, 0)
			defer s.Close()
			for slot, seed := range []uint64{2, 2, 1, 9} {
				if err := s.ReadPage(uint64(slot), buf); err != nil {
					t.Fatal(err)
				}
				checkPage(t, uint64(slot), buf, pattern(uint64(slot), seed))
			}
		})
	}
}

func TestWriteLogOptions(t *testing.T) {
	dir := testDir(t)
	for i, o := range []Options{
		{Slots: 8, Create: true, WriteLog: true, Journal: true},
		{Slots: 8, Create: true, WriteLog: true, WriteLogBytes: wlogMinBytes - PageSize},
	} {
		if s, err := Open(filepath.Join(dir, fmt.Sprint(i)), o); err == nil {
			s.Close()
			t.Errorf("%+v: no error", o)
		}
	}
}

// A checkpoint writes in place only what the log holds: a newer image still
// queued (a later page of a B-tree split, say) must not reach its slot
// before the log has it, or a crash could leave it in place without the
// pages written ahead of it.
func TestWriteLogCheckpointWritesOnlyLogged(t *testing.T) {
	e := engines[1] // pread: the checkpoint's writes happen as it starts
	path := filepath.Join(testDir(t), "store")
	s := openLogged(t, e, path, true, 8, 0)
	defer s.Close()
	if err := s.WriteAsync(3, pattern(3, 1), nil); err != nil {
		t.Fatal(err)
	}
	waitAll(t, s)
	if err := s.WriteAsync(3, pattern(3, 2), nil); err != nil { // queued, not in the log
		t.Fatal(err)
	}
	if err := s.WriteAsync(5, pattern(5, 2), nil); err != nil {
		t.Fatal(err)
	}
	s.startCheckpoint()
	raw := readRaw(t, path, offsetOf(3))
	if err := verify(raw, 3); err != nil {
		t.Fatal(err)
	}
	checkPage(t, 3, append(raw[:DataSize:DataSize], make([]byte, TrailerSize)...), pattern(3, 1))
	if raw := readRaw(t, path, offsetOf(5)); !allZero(raw) {
		t.Fatal("slot 5 written in place before its log write")
	}
	buf := make([]byte, PageSize)
	if err := s.ReadPage(3, buf); err != nil {
		t.Fatal(err)
	}
	checkPage(t, 3, buf, pattern(3, 2)) // reads see the newest
}
