package btree_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/scalestore-go/scalestore"
)

// PutIf writes only when its condition, which sees the current value,
// says so; a value of another size replaces the old one, and a leaf too
// full for the new value loses neither (the next descent splits). Many
// goroutines racing SET NX on one key: exactly one wins.
func TestPutIf(t *testing.T) {
	db, err := scalestore.Open("", scalestore.Options{InMemory: true, CachePages: 256, Slots: 1 << 14})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	nx := func(_ []byte, found bool) bool { return !found }
	xx := func(_ []byte, found bool) bool { return found }
	if ok, err := db.PutIf([]byte("k"), []byte("v1"), xx); ok || err != nil {
		t.Fatalf("XX on an absent key: %v %v", ok, err)
	}
	if ok, err := db.PutIf([]byte("k"), []byte("v1"), nx); !ok || err != nil {
		t.Fatalf("NX on an absent key: %v %v", ok, err)
	}
	if ok, _ := db.PutIf([]byte("k"), []byte("v2"), nx); ok {
		t.Fatal("NX on a present key wrote")
	}
	var seen []byte
	if ok, _ := db.PutIf([]byte("k"), []byte("a longer value"), func(old []byte, found bool) bool {
		seen = append(seen, old...)
		return found
	}); !ok || string(seen) != "v1" {
		t.Fatalf("XX: applied %v, saw %q", ok, seen)
	}
	// Fill leaves with big values, then grow every one through PutIf:
	// leaves overflow and split, and every key keeps a value.
	for i := range 400 {
		if err := db.Put(fmt.Appendf(nil, "key%04d", i), bytes.Repeat([]byte{'a'}, 100)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 400 {
		if ok, err := db.PutIf(fmt.Appendf(nil, "key%04d", i), bytes.Repeat([]byte{'b'}, 300), xx); !ok || err != nil {
			t.Fatalf("growing key %d: %v %v", i, ok, err)
		}
	}
	for i := range 400 {
		v, ok, err := db.Get(fmt.Appendf(nil, "key%04d", i), nil)
		if err != nil || !ok || !bytes.Equal(v, bytes.Repeat([]byte{'b'}, 300)) {
			t.Fatalf("key %d after growing: %d bytes, %v %v", i, len(v), ok, err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := db.PutIf([]byte("lock"), fmt.Appendf(nil, "g%d", g), nx)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d goroutines won SET NX", wins)
	}
}
