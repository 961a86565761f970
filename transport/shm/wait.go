//go:build linux

package shm

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Waiting for a ring (data for the consumer, space for a producer) is
// adaptive, after L5 §III-A.3: poll the shared word for a while, then park on
// a futex word in the segment.
//
// How long to poll. Parking is cheap for an idle link but a wake-up costs
// the waker a futex syscall and the sleeper a trip through the scheduler:
// several microseconds on a VM. A short fixed poll window has a trap: once
// one side of a ping-pong parks, the other waits a whole wake-up for its
// answer, outlasts its own window and parks too, and from then on every
// round trip pays two wake-ups; the pair never gets back to polling. So
// each waiter adapts its window (spinner): it starts at minSpin, doubles
// whenever a park ended with data soon after (a little more polling would
// have caught it), up to Config.Spin, and falls back to minSpin when the
// link goes idle (a park that timed out, or a long one). A busy pair ends up
// polling; an idle link parks after a couple of microseconds.
//
// How to poll: a plain loop of atomic loads, with no system call and no
// runtime.Gosched. sched_yield would hand the CPU to any runnable thread for
// the rest of its time slice (milliseconds, when that is a CPU-bound
// process); Gosched puts the goroutine on the global run queue and wakes an
// idle P's thread (wakep), which spins looking for work on the peer's CPU
// and costs a futex wake-up of its own.
//
// When not to poll. Polling only helps while the thread we wait for runs on
// another CPU. Two cases where it does not, both seen on 2-core VMs:
//
//   - Both readers on one CPU (a wake-up put one next to the other). Each
//     then polls away the time the other needs, and since a thread that
//     never sleeps is never moved (the load balancer leaves cache-hot
//     threads alone) they stay together, at a tenth of the speed or worse.
//     So a waiter still empty-handed after checkAfter asks the kernel for
//     its CPU (getcpu, once per such wait), publishes it in its ring's
//     control block and compares it with the CPU the peer's reader last
//     published: on the same CPU, it parks at once, and the wake-up that
//     follows places it on an idle CPU.
//   - More runnable threads than CPUs (other processes). The poll loop
//     watches the clock: a gap of more than preempted between two looks
//     means another thread ran instead of us, and the waiter parks at once,
//     so it sleeps and is woken, as a blocking transport's threads are,
//     instead of spending its time slices fighting the thread it waits for.
//
// Parking and waking (the ordering argument). The waiter W and the waker K
// share a data word D (tail for a consumer, head for a producer) and a flag F
// (consWaiting, prodWaiting), both in shared memory:
//
//	W: F.Store(1); if D unchanged { futex_wait(&F, 1, timeout) }; F.Store(0)
//	K: D.Store(new); if F.Load() != 0 && F.Swap(0) != 0 { futex_wake(&F) }
//
// Go's atomics are sequentially consistent (XCHG stores and plain loads on
// amd64, STLR/LDAR on arm64; both are cross-process properties of the
// hardware, not of the Go runtime), so of W's store to F and K's store to D,
// one comes first in the total order: either W's load of D sees K's store and
// W does not sleep, or K's load of F sees 1, K clears F and wakes. If K's
// wake lands before W reaches futex_wait, the kernel compares F (now 0) with
// the expected 1 and returns at once: the wake-up cannot be lost. The
// futex_wait timeout (parkTimeout) bounds the damage of any bug in this
// argument, and lets the waiter re-check that its link is alive. The futex is
// a shared (not FUTEX_PRIVATE) one because the two sides are different
// processes: the kernel keys it by the memfd page, not the address.
const parkTimeout = 5 * time.Millisecond

// maxIdleShift bounds how far an idle reader stretches its park timeout:
// each park that ends with nothing to read doubles it, up to parkTimeout
// << maxIdleShift (80 ms), and data resets it. A reader that wakes every
// 5 ms for nothing costs little itself, but every wake-up makes Go's sysmon
// retake its P and poll at its shortest interval; an idle 3-node cluster
// burned a quarter of a CPU that way. The long timeout costs nothing: a
// peer's data wakes the reader at once (see the ordering argument above),
// and a failed link wakes it (link.fail).
const maxIdleShift = 4

const (
	futexWait = 0 // FUTEX_WAIT, without FUTEX_PRIVATE_FLAG
	futexWake = 1 // FUTEX_WAKE
)

// futexSleep blocks while *addr == val, at most d. It may return early
// (wake-up, signal, EAGAIN); callers re-check their condition.
func futexSleep(addr *atomic.Uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWakeAll wakes every waiter parked on addr.
func futexWakeAll(addr *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, 1<<30, 0, 0, 0)
}

// wake clears a waiting flag and wakes its waiter if the flag was set. The
// Load first keeps the common case (nobody parked) to a read of a line the
// waiter rarely writes.
func wake(flag *atomic.Uint32) {
	if flag.Load() != 0 && flag.Swap(0) != 0 {
		futexWakeAll(flag)
	}
}

const (
	minSpin = 2 * time.Microsecond // the adaptive window's floor
	// checkAfter: a wait longer than this checks whether the peer's reader
	// shares our CPU.
	checkAfter = 2 * time.Microsecond
	// preempted: a gap this long between two looks at the clock (64
	// polls, normally well under a microsecond) means this thread was
	// descheduled for another. Interrupts and VM exits cause gaps of a few
	// microseconds many times a second; a thread that ran instead of us
	// takes longer.
	preempted = 20 * time.Microsecond
)

// spinner is one waiter's adaptive poll window (see above); its owner is the
// one goroutine allowed to wait on the ring.
type spinner struct {
	cur, max time.Duration
}

func newSpinner(max time.Duration) spinner {
	return spinner{cur: min(minSpin, max), max: max}
}

// parked adapts the window after a wait that parked: got says whether data
// had come when it woke, waited is the whole wait.
func (s *spinner) parked(got bool, waited time.Duration) {
	if got && waited <= 2*s.max {
		s.cur = min(max(2*s.cur, minSpin), s.max)
	} else {
		s.cur = min(minSpin, s.max) // idle
	}
}

// spinUntil polls ready for up to d. After checkAfter it calls check once
// (if not nil) and stops if check says so; it also stops early when the
// thread was descheduled. It reports whether ready became true and when the
// wait started (zero if ready at once). Time is read every 64 polls only (a
// poll is a load of a cached line, about a nanosecond; time.Now is tens).
func spinUntil(ready func() bool, d time.Duration, check func() bool) (ok bool, start time.Time) {
	if ready() {
		return true, time.Time{}
	}
	start = time.Now()
	last := start
	for i := 1; d > 0; i++ {
		if ready() {
			return true, start
		}
		if i%64 == 0 {
			now := time.Now()
			el := now.Sub(start)
			if el >= d || now.Sub(last) > preempted {
				break
			}
			if check != nil && el >= checkAfter {
				if !check() {
					break
				}
				check = nil
			}
			last = now
		}
	}
	return false, start
}

// cpuWord is where a reader publishes the CPU it waits on (the CPU number
// plus one; 0: not known).
type cpuWord = atomic.Uint32

// currentCPU is the CPU this thread runs on (plus one), 0 if unknown.
func currentCPU() uint32 {
	var cpu uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
		return 0
	}
	return cpu + 1
}

// park sets flag, re-checks ready (and stop), and sleeps on the flag for at
// most timeout. It returns when woken, timed out, or the condition held
// already; the caller loops.
func park(flag *atomic.Uint32, ready func() bool, stop func() bool, timeout time.Duration) {
	flag.Store(1)
	if !ready() && !stop() {
		futexSleep(flag, 1, timeout)
	}
	flag.Store(0)
}
