package sim

import (
	"fmt"
	"iter"
	"runtime/debug"

	"github.com/scalestore-go/scalestore/protocol"
)

// Coroutine is a worker of simulated application code. Exactly one
// coroutine or event handler runs at a time; a coroutine runs until it parks
// (blocks on a page, a latch, an I/O or a think time) and resumes only when
// the scheduler picks its resume event.
type Coroutine struct {
	w         *World
	node      protocol.NodeID
	next      func() (struct{}, bool)
	stop      func()
	yield     func(struct{}) bool
	scheduled bool
	done      bool
	yieldProb float64
}

// Spawn starts body as a coroutine of node; it first runs at the current
// time plus delay.
func (w *World) Spawn(node protocol.NodeID, delay int64, body func(co *Coroutine)) *Coroutine {
	co := &Coroutine{w: w, node: node, yieldProb: w.faults.YieldProb}
	co.next, co.stop = iter.Pull(func(yield func(struct{}) bool) {
		co.yield = yield
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stopped); !ok {
					// iter.Pull re-panics with r in the goroutine that
					// resumed us, whose stack does not show where the body
					// panicked: take the stack here, still on top of it.
					panic(&bodyPanic{value: r, stack: debug.Stack()})
				}
			}
		}()
		body(co)
	})
	co.scheduled = true
	co.schedule(w.now + delay)
	return co
}

func (co *Coroutine) schedule(at int64) {
	e := co.w.alloc()
	// A negative delay runs now: simulated time does not go back.
	e.at, e.kind, e.node, e.co = max(at, co.w.now), evResume, co.node, co
	co.w.push(e)
}

func (co *Coroutine) resume() {
	co.scheduled = false
	if co.done {
		return
	}
	co.w.running = co
	defer func() { co.w.running = nil }()
	if _, ok := co.next(); !ok {
		co.done = true
	}
}

// Done reports whether the body returned.
func (co *Coroutine) Done() bool { return co.done }

// Stop ends a coroutine that will not run to its end (its body sees Park
// return into a dead yield and must not be resumed again). A panic of the
// body while it unwinds is a fault of its node, as in resume.
func (co *Coroutine) Stop() {
	if co.done {
		return
	}
	co.done = true
	defer func() {
		if r := recover(); r != nil {
			co.w.fault(co.node, panicError(co.node, r))
		}
	}()
	co.stop()
}

// Park yields to the scheduler until Wake.
func (co *Coroutine) Park() {
	if !co.yield(struct{}{}) {
		panic(stopped{})
	}
}

type stopped struct{}

// bodyPanic is a coroutine body's panic on its way out of iter.Pull, with
// the stack of the body's goroutine at the panic.
type bodyPanic struct {
	value any
	stack []byte
}

// panicError is the fault of a panic of node's code: its value and the
// stack where it happened.
func panicError(node protocol.NodeID, r any) error {
	stack := debug.Stack()
	if bp, ok := r.(*bodyPanic); ok {
		r, stack = bp.value, bp.stack
	}
	return fmt.Errorf("panic in node %d: %v\n%s", node, r, stack)
}

// Wake schedules the coroutine to run now (idempotent while scheduled).
func (co *Coroutine) Wake() {
	if co.scheduled || co.done {
		return
	}
	co.scheduled = true
	co.schedule(co.w.now)
}

// Sleep parks for d nanoseconds of simulated time.
func (co *Coroutine) Sleep(d int64) {
	co.scheduled = true
	co.schedule(co.w.now + d)
	co.Park()
}

// MaybeYield lets others run at a guard operation, with the fault plan's
// probability, so optimistic readers meet concurrent writers.
func (co *Coroutine) MaybeYield() {
	if co.w.Chance(co.yieldProb) {
		co.Sleep(co.w.Intn(500))
	}
}
