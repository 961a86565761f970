package inparallel

import (
	"errors"
	"sync/atomic"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errors int
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Error(args ...any)     { r.errors++ }
func (r *recorder) FailNow()              { r.failed = true }
func (r *recorder) Fatal(args ...any)     { r.errors++; r.failed = true }
func (r *recorder) Errorf(string, ...any) { r.errors++ }

func TestRunCallsEveryGoroutineAndReportsEveryError(t *testing.T) {
	var calls atomic.Int64
	var seen [8]atomic.Bool
	r := &recorder{TB: t}
	Run(r, 8, func(g int) error {
		calls.Add(1)
		seen[g].Store(true)
		if g%3 == 0 {
			return errors.New("boom")
		}
		return nil
	})
	if calls.Load() != 8 {
		t.Fatalf("%d calls, want 8", calls.Load())
	}
	for g := range seen {
		if !seen[g].Load() {
			t.Fatalf("goroutine %d never ran", g)
		}
	}
	if r.errors != 3 || !r.failed {
		t.Fatalf("%d errors reported, failed %v: want 3 (g = 0, 3, 6) and a failure", r.errors, r.failed)
	}
	ok := &recorder{TB: t}
	Run(ok, 4, func(int) error { return nil })
	if ok.errors != 0 || ok.failed {
		t.Fatal("a run without errors failed")
	}
}
