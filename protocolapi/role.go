package protocolapi

import (
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Env is what a role acts through: the effects it may have on the world.
// Nothing in it blocks or calls the role back: a send, a timer, a verb, a
// page I/O and a completed access each come back, if at all, as a later
// Event to Step. The simulator implements it with its event queue (one
// node's env only ever runs on the scheduler's single thread); a process
// runner would implement it over a transport.Transport and the node's
// clock, feeding Step from one goroutine per node.
type Env interface {
	// Self is this node; Nodes the number of nodes in the deployment.
	Self() protocol.NodeID
	Nodes() int
	// Now is the time in nanoseconds (simulated in the simulator).
	Now() int64
	// Rand draws a random number (the simulator's seeded PRNG: never
	// math/rand in a role).
	Rand() uint64
	// Send sends m to node to. A node may send to itself (the message
	// comes back as an Event, never within Send). A message that does not
	// encode, or a transport that fails, is the env's to report (in the
	// simulator, a violation of the seed).
	Send(to protocol.NodeID, m Message)
	// After delivers EventTimer with token after delay ns. Timers are not
	// cancelled: a role ignores a token it no longer waits for. A role sets
	// no timer while it has nothing to do: the runner's checks at rest wait
	// until nothing is pending.
	After(delay int64, token uint64)
	// Memory is this node's registered memory (Layout.Memory), nil if it
	// has none; Region names node's registered memory for the verbs (false
	// if it has none).
	Memory() []byte
	Region(node protocol.NodeID) (transport.Region, bool)
	// The one-sided verbs on registered memory; each completes with an
	// EventVerb carrying token (and Prev for the atomics, Err on failure).
	// Read's dst and Write's src belong to the verb until it completes.
	Read(dst []byte, r transport.Region, off uint64, token uint64)
	Write(r transport.Region, off uint64, src []byte, token uint64)
	CompareAndSwap(r transport.Region, off, old, new uint64, token uint64)
	FetchAndAdd(r transport.Region, off, delta uint64, token uint64)
	// ReadPage and WritePage do I/O on this node's SSD (Layout.SSDPages
	// pages of protocol.PageSize bytes); each completes with an EventPage
	// carrying token (Err: a transient error the role retries or surfaces).
	ReadPage(slot uint64, buf []byte, token uint64)
	WritePage(slot uint64, buf []byte, token uint64)
	// Busy spends ns of this node's CPU on work the role just did (a
	// message's handling, a serial queue): its later events wait meanwhile.
	// It models the cost in the simulator, where work takes no time
	// otherwise; on real processes the work costs what it costs, and a
	// process env ignores it.
	Busy(ns int64)
	// Complete finishes the worker's access op (EventAccess) with res.
	// Every access is completed exactly once.
	Complete(op Op, res Result)
}

// EventKind says what happened to a role.
type EventKind uint8

// The events.
const (
	// EventMessage: Msg arrived from From.
	EventMessage EventKind = iota + 1
	// EventTimer: the timer Token fired (Env.After).
	EventTimer
	// EventVerb: the verb Token completed (Prev: an atomic's old word).
	EventVerb
	// EventPage: the SSD I/O Token completed.
	EventPage
	// EventAccess: a worker asks for Op (answered by Env.Complete).
	EventAccess
)

func (k EventKind) String() string {
	switch k {
	case EventMessage:
		return "message"
	case EventTimer:
		return "timer"
	case EventVerb:
		return "verb"
	case EventPage:
		return "page"
	case EventAccess:
		return "access"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is one input of a role. Only the fields of its Kind are set.
type Event struct {
	Kind  EventKind
	From  protocol.NodeID // EventMessage
	Msg   Message         // EventMessage
	Token uint64          // EventTimer, EventVerb, EventPage
	Prev  uint64          // EventVerb: CAS's or FAA's word before
	Err   error           // EventVerb, EventPage
	Op    Op              // EventAccess
}

// Role is a node's part of the protocol: a state machine that takes one
// Event at a time and acts through its Env, in the shape of etcd-io/raft's
// Step. It starts no goroutine, reads no clock and draws no random number
// of its own, and keeps no reference to an Event's message payload.
type Role interface {
	// Step handles ev. An error is a protocol violation the role detected
	// (a message it cannot be sent in its state): the runner reports it
	// with the seed.
	Step(ev Event) error
	// Describe is the role's state for a deadlock or watchdog report: its
	// accesses in flight and what each waits for.
	Describe() string
}

// OpKind is what a worker's access does.
type OpKind uint8

// The accesses a worker makes.
const (
	// OpRead returns the key's value (Result.Value).
	OpRead OpKind = iota + 1
	// OpWrite writes Op.Value.
	OpWrite
	// OpRMW writes Op.Value and returns the value it overwrote
	// (Result.Value), in one atomic step: two that read the same value
	// cannot both happen (a lost update).
	OpRMW
)

func (k OpKind) String() string {
	switch k {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpRMW:
		return "rmw"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Op is one access of a worker of this node to a key (a register, a
// page or a line: the protocol decides what a key is). Keys are 0 up to
// Config.Keys-1 and start out 0; every write carries a value unique in the
// run.
type Op struct {
	ID     uint64 // unique on this node; Complete names it back
	Worker int    // the worker on this node, 0..Config.Workers-1
	Kind   OpKind
	Key    uint64
	Value  uint64 // OpWrite, OpRMW: the value to write
}

// Result is an access's outcome.
type Result struct {
	// Value is what OpRead read, or what OpRMW overwrote.
	Value uint64
	// Err fails the access: the runner reports it as a violation (a
	// protocol that can fail an access for a reason of the world, an
	// unreadable page, says so by wrapping ErrUnavailable).
	Err error
}

// ErrUnavailable is wrapped by an access's error when the access did not
// happen for a reason the fault plan caused (the data is unreadable): the
// runner leaves it out of the history instead of reporting it.
var ErrUnavailable = fmt.Errorf("protocolapi: unavailable")

// Waiter is how a worker that blocks waits: in the simulator its
// coroutine (sim.Coroutine), on processes its goroutine. Park returns
// after a Wake (a Wake before the Park is not lost); Sleep spends ns of
// the worker's time; MaybeYield is a point where another worker may run
// (the simulator decides at random, a process ignores it).
type Waiter interface {
	Park()
	Wake()
	Sleep(ns int64)
	MaybeYield()
}

// Worker names one worker of a run.
type Worker struct {
	// Node is the node it runs on; Slot its place there,
	// 0..Config.Workers-1 (Op.Worker).
	Node protocol.NodeID
	Slot int
	// Client is unique in the run, also across a node's restarts: the
	// history's client.
	Client int
}

// Blocking is implemented by a Cluster whose workers access keys by
// blocking calls on their own thread (a buffer manager's guards, a line
// cache's latches, which park the worker until a message or a verb
// arrives) instead of by EventAccess to Step. The runner's worker loop
// then calls the worker's Accessor on the worker's coroutine; the roles
// still get every message, timer, verb and I/O through Step and wake the
// workers they complete (Waiter.Wake).
type Blocking interface {
	// Worker binds worker w, which waits through on, to its node's cache.
	// The runner calls it once per worker, before the worker's first
	// access, and calls the Accessor only on that worker's thread.
	Worker(w Worker, on Waiter) Accessor
}

// Accessor is one worker's blocking access entry (Blocking).
type Accessor interface {
	// Access does op and returns when it completed: Result as for
	// Env.Complete (Err wrapping ErrUnavailable for an access the fault
	// plan made impossible, any other Err a violation). The runner draws
	// op and writes it into the history; Access may park, sleep and yield
	// through its Waiter.
	Access(op Op) Result
}

// Crashable is implemented by a Cluster whose nodes may crash and restart
// during a run (Supports.Crashes). The runner decides when and which node
// crashes, kills it in the world (what it had in flight is lost), stops
// its workers and abandons their accesses, keeps it down for a while and
// restarts it with new workers; the cluster does what a crash and a
// restart do to the protocol's state.
type Crashable interface {
	// MayCrash reports whether node may crash now (false skips the crash:
	// one the protocol is not built to survive, such as losing every copy).
	MayCrash(node protocol.NodeID) bool
	// Crash is called once node is dead in the world, before its workers
	// are stopped: the node loses its memory and keeps its SSD.
	Crash(node protocol.NodeID)
	// Abandoned is called for each access a crash cut (client is
	// Worker.Client; written what it was writing, 0 for a read): those of
	// the crashed node's workers, and those the protocol's recovery gave
	// up. It reports whether the access may have taken effect (it began
	// to write): the runner then keeps it in the history as a write that
	// may take effect at any time after its call.
	Abandoned(client int, written uint64) bool
	// Recover is the survivors' recovery once node's workers are stopped
	// (a view change). It returns how many ns node stays down beyond the
	// runner's down time.
	Recover(node protocol.NodeID) (extraDown int64)
	// Restart brings node back over its SSD with empty memory; the runner
	// has revived it in the world and then starts new workers on it.
	Restart(node protocol.NodeID) error
}

// Leaver is implemented by a Cluster whose nodes may leave a running
// deployment (Supports.Elastic). The runner keeps a leaving node's
// workers to its schedule and, once they stopped, asks the node to leave.
type Leaver interface {
	// Leave hands back everything node holds, waiting through on, and
	// checks that nothing names it any more. held is how much it held
	// (pages, lines) when its workers stopped; an error is a violation.
	Leave(node protocol.NodeID, on Waiter) (held int, err error)
}

// Tree is implemented by the Accessor of a protocol that offers an
// ordered index over its pages (WorkloadBTree): keys and values of 64
// bits, a key absent until put and after a delete. The runner's B-tree
// workload gets and puts (every put a unique value) and, when the
// Accessor has them, deletes (TreeDeleter), gets in batches (TreeBatcher)
// and scans (TreeScanner); the history is per key, a get of an absent key
// a read of 0.
type Tree interface {
	Get(key uint64) (value uint64, found bool, err error)
	Put(key, value uint64) error
}

// TreeDeleter deletes a key of a Tree.
type TreeDeleter interface {
	Delete(key uint64) error
}

// TreeBatcher gets many keys of a Tree at once.
type TreeBatcher interface {
	// GetBatch gets keys[i] into vals[i] and found[i]. An error fails the
	// whole batch, unless failed lists the indices of the keys it failed
	// (the others were answered).
	GetBatch(keys, vals []uint64, found []bool) (failed []int, err error)
}

// TreeScanner scans a range of a Tree's keys.
type TreeScanner interface {
	// Scan visits the keys in [from, to) with their values, in order,
	// until visit returns false.
	Scan(from, to uint64, visit func(key, value uint64) bool) error
}
