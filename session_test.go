package scalestore

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestSessionsShareTheData: what a session writes, the DB and other
// sessions read, and the other way round, from several goroutines at once
// (each with its own session); a closed session refuses calls.
func TestSessionsShareTheData(t *testing.T) {
	db, err := Open("", Options{InMemory: true, CachePages: 32}) // far smaller than the data: evictions
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const goroutines, keys = 4, 400
	key := func(g, i int) []byte { return fmt.Appendf(nil, "g%d/%04d", g, i) }
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := db.NewSession()
			defer s.Close()
			for i := range keys {
				if err := s.Put(key(g, i), key(g, i)); err != nil {
					errs <- err
					return
				}
			}
			for i := 0; i < keys; i += 2 {
				if found, err := s.Delete(key(g, i)); err != nil || !found {
					errs <- fmt.Errorf("delete %s: found %v, %v", key(g, i), found, err)
					return
				}
			}
			// Another goroutine's keys, through this session.
			other := (g + 1) % goroutines
			for i := range keys {
				v, ok, err := s.Get(key(other, i), nil)
				if err != nil || (ok && string(v) != string(key(other, i))) {
					errs <- fmt.Errorf("get %s: %q %v %v", key(other, i), v, ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := db.NewSession()
	for g := range goroutines {
		n := 0
		if err := s.Scan(key(g, 0), key(g, keys), func(k, v []byte) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		if n != keys/2 {
			t.Errorf("goroutine %d's range holds %d keys through a session, want %d", g, n, keys/2)
		}
		if v, ok, err := db.Get(key(g, 1), nil); err != nil || !ok || string(v) != string(key(g, 1)) {
			t.Errorf("DB.Get of a session's key: %q %v %v", v, ok, err)
		}
	}
	s.Close()
	s.Close() // twice: nothing
	if _, _, err := s.Get(key(0, 1), nil); !errors.Is(err, ErrSessionClosed) {
		t.Errorf("Get after Close: %v, want ErrSessionClosed", err)
	}
	if err := s.Put(key(0, 1), nil); !errors.Is(err, ErrSessionClosed) {
		t.Errorf("Put after Close: %v, want ErrSessionClosed", err)
	}
}

// A session used after its DB closed fails; it does not panic.
func TestSessionAfterClose(t *testing.T) {
	db, err := Open("", Options{InMemory: true, CachePages: 64})
	if err != nil {
		t.Fatal(err)
	}
	s := db.NewSession()
	if err := s.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get([]byte("k"), nil); err == nil {
		t.Error("Get through a session of a closed DB: no error")
	}
	s.Close()
}
