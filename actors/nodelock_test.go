package actors

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestNodeLockRunsEveryPost: completions posted while workers take and
// release the lock all run, once each, in order, and only under the lock.
func TestNodeLockRunsEveryPost(t *testing.T) {
	var m nodeLock
	var queueMu sync.Mutex
	var queue []int
	var ran []int           // written only by drain, under m
	var cycles atomic.Int64 // lock cycles of the workers
	m.drain = func() {
		if m.mu.TryLock() {
			m.mu.Unlock()
			t.Error("drain ran without the lock held")
		}
		m.pending.Store(false)
		queueMu.Lock()
		q := queue
		queue = nil
		queueMu.Unlock()
		ran = append(ran, q...)
	}
	const posts = 20000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				m.Lock()
				cycles.Add(1)
				m.Unlock()
			}
		}()
	}
	// At least posts posts, and on until the workers have cycled the lock
	// a while: on a loaded machine they may start after the first posts.
	posted := 0
	for ; posted < posts || (cycles.Load() < 1000 && posted < 100*posts); posted++ {
		queueMu.Lock()
		queue = append(queue, posted)
		queueMu.Unlock()
		m.post()
		if posted%1000 == 999 {
			runtime.Gosched()
		}
	}
	close(stop)
	wg.Wait()
	m.Lock()
	n := len(ran)
	worked := cycles.Load()
	m.Unlock()
	if worked == 0 {
		t.Fatal("the workers never took the lock: the test raced nothing")
	}
	if n != posted {
		t.Fatalf("%d of %d posted completions ran", n, posted)
	}
	for i, v := range ran {
		if v != i {
			t.Fatalf("completion %d ran as number %d: order lost", v, i)
		}
	}
}

// TestNodeLockHolderRunsPost: a completion posted while the lock is held is
// run by the holder's Unlock, with no further lock activity.
func TestNodeLockHolderRunsPost(t *testing.T) {
	var m nodeLock
	runs := 0
	m.drain = func() { m.pending.Store(false); runs++ }
	m.Lock()
	done := make(chan struct{})
	go func() { m.post(); close(done) }() // TryLock fails: the lock is held
	<-done
	if runs != 0 {
		t.Fatal("the post ran while another goroutine held the lock")
	}
	m.Unlock()
	if runs != 1 {
		t.Fatalf("the holder's Unlock ran the post %d times, want 1", runs)
	}
}
