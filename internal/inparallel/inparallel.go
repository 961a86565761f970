// Package inparallel runs a test's goroutines and fails the test with the
// errors they return. It serves the tests of several packages (the embedded
// API's, the B-tree's); it imports nothing of the engine, and nothing but
// tests may import it.
package inparallel

import (
	"sync"
	"testing"
)

// Run calls fn(0) to fn(n-1) on n goroutines, waits for all of them, and
// fails t with every error they returned.
func Run(t testing.TB, n int, fn func(g int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range n {
		wg.Go(func() {
			if err := fn(g); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := false
	for err := range errs {
		t.Error(err)
		failed = true
	}
	if failed {
		t.FailNow()
	}
}
