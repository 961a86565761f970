package bufmgr

import (
	"reflect"
	"runtime"
	"sync"
	"testing"
)

func TestLatchZeroValueFree(t *testing.T) {
	var l HybridLatch
	if !l.Free() || l.HeldExclusive() || l.Version() != 0 {
		t.Fatalf("zero latch: Free=%v HeldExclusive=%v Version=%d", l.Free(), l.HeldExclusive(), l.Version())
	}
	v, ok := l.Optimistic()
	if !ok || v != 0 {
		t.Fatalf("Optimistic on free latch = %d, %v", v, ok)
	}
}

func TestLatchSharedReentrantAcrossHolders(t *testing.T) {
	var l HybridLatch
	first := l.TryLockShared()
	second := l.TryLockShared()
	if !first || !second {
		t.Fatal("two shared holders could not both get the latch")
	}
	if l.Free() || l.HeldExclusive() {
		t.Fatal("latch with two shared holders reports free or exclusive")
	}
	if l.TryLockExclusive() {
		t.Fatal("exclusive lock granted while shared held")
	}
	if l.UnlockShared() {
		t.Fatal("UnlockShared reported free with another holder still in")
	}
	if l.TryLockExclusive() {
		t.Fatal("exclusive lock granted while one shared holder remains")
	}
	if !l.UnlockShared() {
		t.Fatal("last UnlockShared did not report free")
	}
	if !l.Free() {
		t.Fatal("latch not free after all shared holders left")
	}
	if l.Version() != 0 {
		t.Fatalf("shared lock/unlock moved the version to %d", l.Version())
	}
	if !l.TryLockExclusive() {
		t.Fatal("exclusive lock refused on a free latch")
	}
}

func TestLatchExclusiveExcludesAll(t *testing.T) {
	var l HybridLatch
	if !l.TryLockExclusive() {
		t.Fatal("exclusive lock refused on a free latch")
	}
	if !l.HeldExclusive() || l.Free() {
		t.Fatal("exclusive latch not reported exclusive")
	}
	if l.TryLockShared() {
		t.Fatal("shared lock granted while exclusive held")
	}
	if l.TryLockExclusive() {
		t.Fatal("second exclusive lock granted")
	}
	if l.TryUpgrade() {
		t.Fatal("upgrade granted while exclusive held")
	}
	l.UnlockExclusive()
	if !l.Free() || l.HeldExclusive() {
		t.Fatal("latch not free after UnlockExclusive")
	}
	if !l.TryLockShared() {
		t.Fatal("shared lock refused after UnlockExclusive")
	}
}

func TestLatchUpgrade(t *testing.T) {
	var l HybridLatch
	if l.TryUpgrade() {
		t.Fatal("upgrade granted with no shared holder")
	}
	first := l.TryLockShared()
	second := l.TryLockShared()
	if !first || !second {
		t.Fatal("shared lock refused")
	}
	if l.TryUpgrade() {
		t.Fatal("upgrade granted with two shared holders")
	}
	l.UnlockShared()
	if !l.TryUpgrade() {
		t.Fatal("upgrade refused for the single shared holder")
	}
	if !l.HeldExclusive() {
		t.Fatal("latch not exclusive after upgrade")
	}
	if l.TryLockShared() {
		t.Fatal("shared lock granted after upgrade")
	}
	v := l.Version()
	l.UnlockExclusive()
	if l.Version() != v+1 || !l.Free() {
		t.Fatalf("after upgrade+unlock: version %d (want %d), free=%v", l.Version(), v+1, l.Free())
	}
}

func TestLatchUnlockExclusiveBumpsVersion(t *testing.T) {
	var l HybridLatch
	for i := uint64(1); i <= 5; i++ {
		if !l.TryLockExclusive() {
			t.Fatal("exclusive lock refused")
		}
		if l.Version() != i-1 {
			t.Fatalf("version changed on lock: %d, want %d", l.Version(), i-1)
		}
		l.UnlockExclusive()
		if l.Version() != i {
			t.Fatalf("version after %d unlocks = %d", i, l.Version())
		}
	}
}

func TestLatchOptimistic(t *testing.T) {
	var l HybridLatch
	if !l.TryLockExclusive() {
		t.Fatal("exclusive lock refused")
	}
	if _, ok := l.Optimistic(); ok {
		t.Fatal("Optimistic succeeded while exclusive held")
	}
	l.UnlockExclusive()

	v, ok := l.Optimistic()
	if !ok {
		t.Fatal("Optimistic failed on a free latch")
	}
	if !l.Validate(v) {
		t.Fatal("Validate failed though nothing happened")
	}
	// Shared holders do not invalidate optimistic readers.
	if !l.TryLockShared() {
		t.Fatal("shared lock refused")
	}
	v2, ok := l.Optimistic()
	if !ok || v2 != v {
		t.Fatalf("Optimistic under shared = %d, %v; want %d, true", v2, ok, v)
	}
	if !l.Validate(v) {
		t.Fatal("Validate failed under a shared holder")
	}
	l.UnlockShared()
	if !l.Validate(v) {
		t.Fatal("Validate failed after a shared lock/unlock")
	}

	// Exclusive held: Validate fails even though the version is the same.
	if !l.TryLockExclusive() {
		t.Fatal("exclusive lock refused")
	}
	if l.Validate(v) {
		t.Fatal("Validate succeeded while an exclusive holder is in")
	}
	l.UnlockExclusive()
	if l.Validate(v) {
		t.Fatal("Validate succeeded after an exclusive lock/unlock cycle")
	}
	v3, ok := l.Optimistic()
	if !ok || v3 == v || !l.Validate(v3) {
		t.Fatalf("fresh Optimistic = %d, %v; Validate=%v", v3, ok, l.Validate(v3))
	}
}

func TestLatchDowngrade(t *testing.T) {
	var l HybridLatch
	v0, _ := l.Optimistic()
	if !l.TryLockExclusive() {
		t.Fatal("exclusive lock refused")
	}
	l.Downgrade()
	if l.Version() != v0+1 {
		t.Fatalf("Downgrade: version %d, want %d", l.Version(), v0+1)
	}
	if l.HeldExclusive() || l.Free() {
		t.Fatal("downgraded latch not shared")
	}
	if l.Validate(v0) {
		t.Fatal("Validate of a pre-downgrade version succeeded")
	}
	if v, ok := l.Optimistic(); !ok || v != v0+1 {
		t.Fatalf("Optimistic after Downgrade = %d, %v", v, ok)
	}
	if l.TryLockExclusive() {
		t.Fatal("exclusive lock granted over a downgraded (shared) latch")
	}
	if !l.TryLockShared() {
		t.Fatal("shared lock refused on a downgraded latch")
	}
	if l.TryUpgrade() {
		t.Fatal("upgrade granted with two shared holders after Downgrade")
	}
	if l.UnlockShared() {
		t.Fatal("UnlockShared reported free with the downgrader still in")
	}
	if !l.UnlockShared() {
		t.Fatal("downgrader's UnlockShared did not free the latch")
	}
	if l.Version() != v0+1 {
		t.Fatalf("shared unlocks moved the version to %d", l.Version())
	}
}

func TestLatchMisusePanics(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	var a HybridLatch
	mustPanic("UnlockShared on free latch", func() { a.UnlockShared() })
	var b HybridLatch
	mustPanic("UnlockExclusive on free latch", b.UnlockExclusive)
	var c HybridLatch
	c.TryLockShared()
	mustPanic("UnlockExclusive on shared latch", c.UnlockExclusive)
	var d HybridLatch
	mustPanic("Downgrade on free latch", d.Downgrade)
}

func TestLatchConcurrentExclusive(t *testing.T) {
	const (
		workers = 4
		iters   = 10_000
	)
	var (
		l       HybridLatch
		counter int // protected only by l
		wg      sync.WaitGroup
	)
	start := l.Version()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range iters {
				for !l.TryLockExclusive() {
					runtime.Gosched()
				}
				counter++
				l.UnlockExclusive()
			}
		}()
	}
	wg.Wait()
	if counter != workers*iters {
		t.Fatalf("counter = %d, want %d", counter, workers*iters)
	}
	if got := l.Version() - start; got != workers*iters {
		t.Fatalf("version advanced by %d, want %d", got, workers*iters)
	}
	if !l.Free() {
		t.Fatal("latch not free at the end")
	}
}

// TestFrameHoldsNoPointers: frame metadata must hold no Go pointers (the
// issue's requirement and paper §3.2's layout), so the collector never scans
// the frame array however large the cache, and the array could live off the
// heap like the pages.
func TestFrameHoldsNoPointers(t *testing.T) {
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.String, reflect.UnsafePointer:
			t.Errorf("%s is a %v: frames must hold no Go pointers", path, typ.Kind())
		case reflect.Struct:
			for i := range typ.NumField() {
				walk(typ.Field(i).Type, path+"."+typ.Field(i).Name)
			}
		case reflect.Array:
			walk(typ.Elem(), path+"[]")
		}
	}
	walk(reflect.TypeFor[Frame](), "Frame")
}
