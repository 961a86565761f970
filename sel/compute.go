package sel

import (
	"fmt"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
)

// phase is where an attempt at a line's latch stands.
type phase uint8

const (
	readAcquiring  phase = iota + 1 // FAA(+1) and READ posted
	readHolding                     // the FAA found no holder: the latch is held; the READ may be due
	readUndoing                     // the FAA found a holder: FAA(-1) posted to undo it
	readReleasing                   // the value is read: FAA(-1) posted
	readFailedKept                  // (mutant) found a holder and kept its +1
	readUnlatched                   // (mutant) a READ without the latch
	writeAcquiring                  // CAS (the mutant: FAA) and READ posted
	writeHolding                    // the acquire succeeded: the latch is held; the READ may be due
	writeFailed                     // the CAS found the word taken: nothing to undo
	writeUndoing                    // (mutant) its FAA found a writer: FAA(-tag) posted
	writeReleasing                  // the WRITEs and the release posted
)

var phaseNames = [...]string{"?", "read-acquiring", "read-holding", "read-undoing", "read-releasing",
	"read-failed-kept", "read-unlatched", "write-acquiring", "write-holding", "write-failed",
	"write-undoing", "write-releasing"}

func (p phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// The verbs of an attempt; a verb's token is the attempt's id << 3 | verb.
const (
	vAcquire = iota
	vRead
	vWriteHead
	vWriteTail
	vRelease // the release, or the undo of a failed acquire
)

var verbNames = [...]string{"acquire", "READ", "WRITE of the head", "WRITE of the tail", "release"}

const writesDue = 1<<vWriteHead | 1<<vWriteTail

// attempt is one try of an access at a line's latch, from its acquire to
// the completion of its last verb (it outlives its access while a release
// or an undo is in flight).
type attempt struct {
	id    uint64
	acc   *access // the access it serves, nil once the access no longer waits on it
	key   uint64
	tag   Tag
	phase phase
	due   uint8  // the verbs posted and not completed, a bit each
	prev  uint64 // the acquire's old word
	// readDone: the READ's copy is in buf. buf is the READ's destination,
	// then the WRITEs' sources (head and tail).
	readDone bool
	buf      []byte
	version  uint64 // the version its WRITEs carry
	old      uint64 // the value it read
	zero     [8]byte
}

// token names verb v of a in its completion.
func (a *attempt) token(v int) uint64 { return a.id<<3 | uint64(v) }

// A back-off timer's token is its worker above the node's count of timers.
const timerWorkerShift = 40

// access is a worker's access in flight.
type access struct {
	op    protocolapi.Op
	tries int    // failed acquires so far
	timer uint64 // the back-off timer it waits for, 0 if none
	at    *attempt
}

// compute is a compute node's role: it runs its workers' accesses as
// verbs and keeps no copy of any line between them.
type compute struct {
	c        *cluster
	env      protocolapi.Env
	id       protocol.NodeID
	regions  []transport.Region // by memory node, 0-based
	accesses []*access          // by worker, nil when idle
	slots    []access           // by worker: what accesses point to
	live     []*attempt         // in the order they started
	byID     map[uint64]*attempt
	nextID   uint64
	timers   uint64     // back-off timers set so far: a timer's token is unique
	free     []*attempt // ended attempts to reuse, with their buffers
	count    counts
}

// counts are what a compute node's accesses did (Cluster.Counters).
type counts struct {
	reads, writes        uint64 // accesses completed
	readsMetWriter       uint64 // reader FAAs that found a holder (undone)
	casFailed            uint64 // writer acquires that found the word taken
	backoffs, backoffNs  uint64 // retries and the time waited for them
	releases, writeVerbs uint64
}

var _ protocolapi.Role = (*compute)(nil)

// Step implements protocolapi.Role.
func (n *compute) Step(ev protocolapi.Event) error {
	switch ev.Kind {
	case protocolapi.EventAccess:
		return n.access(ev.Op)
	case protocolapi.EventVerb:
		return n.verbDone(ev.Token, ev.Prev, ev.Err)
	case protocolapi.EventTimer:
		wk := int(ev.Token >> timerWorkerShift)
		if wk >= len(n.accesses) {
			return fmt.Errorf("sel: node %d: a timer for worker %d of %d", n.id, wk, len(n.accesses))
		}
		if acc := n.accesses[wk]; acc != nil && acc.timer == ev.Token {
			acc.timer = 0
			n.start(acc)
		}
		return nil
	}
	return fmt.Errorf("sel: node %d has no use for a %v event: SEL sends no messages", n.id, ev.Kind)
}

func (n *compute) access(op protocolapi.Op) error {
	switch {
	case op.Worker < 0 || op.Worker >= len(n.accesses):
		return fmt.Errorf("sel: node %d: an access of worker %d of %d", n.id, op.Worker, len(n.accesses))
	case n.accesses[op.Worker] != nil:
		return fmt.Errorf("sel: node %d: worker %d issues access %d while access %d is in flight", n.id, op.Worker, op.ID, n.accesses[op.Worker].op.ID)
	case op.Key >= uint64(n.c.cfg.Keys):
		n.env.Complete(op, protocolapi.Result{Err: fmt.Errorf("sel: key %d of %d", op.Key, n.c.cfg.Keys)})
		return nil
	case op.Kind != protocolapi.OpRead && op.Kind != protocolapi.OpWrite && op.Kind != protocolapi.OpRMW:
		n.env.Complete(op, protocolapi.Result{Err: fmt.Errorf("sel: access kind %v", op.Kind)})
		return nil
	}
	acc := &n.slots[op.Worker]
	*acc = access{op: op}
	n.accesses[op.Worker] = acc
	n.start(acc)
	return nil
}

// start posts an attempt's acquire and READ in one round trip (the READ
// lands after the acquire on the same queue pair; its copy counts only if
// the acquire succeeded).
func (n *compute) start(acc *access) {
	n.nextID++
	a := n.newAttempt()
	a.id, a.acc, a.key, a.tag = n.nextID, acc, acc.op.Key, TagOf(n.id, acc.op.Worker)
	acc.at = a
	n.live = append(n.live, a)
	n.byID[a.id] = a
	mut := n.c.cfg.Mutant
	if acc.op.Kind == protocolapi.OpRead {
		if mut == MutantReaderSkipsLatch {
			a.phase = readUnlatched
			n.read(a)
			return
		}
		a.phase = readAcquiring
		n.faa(a, vAcquire, readerAcquire)
		n.read(a)
		return
	}
	a.phase = writeAcquiring
	if mut == MutantWriterFAA {
		n.faa(a, vAcquire, exclusive(a.tag))
	} else {
		rg, word, _ := n.where(a.key)
		a.due |= 1 << vAcquire
		n.env.CompareAndSwap(rg, word, 0, exclusive(a.tag), a.token(vAcquire))
	}
	n.read(a)
}

func (n *compute) where(key uint64) (rg transport.Region, word, data uint64) {
	home, _ := n.c.lay.home(key)
	return n.regions[int(home)-n.c.lay.computes], n.c.lay.wordOff(key), n.c.lay.dataOff(key)
}

func (n *compute) faa(a *attempt, v int, delta uint64) {
	rg, word, _ := n.where(a.key)
	a.due |= 1 << v
	n.env.FetchAndAdd(rg, word, delta, a.token(v))
}

func (n *compute) read(a *attempt) {
	rg, _, data := n.where(a.key)
	a.due |= 1 << vRead
	n.env.Read(a.buf, rg, data, a.token(vRead))
}

func (n *compute) write(a *attempt, v int, src []byte, off uint64) {
	rg, _, data := n.where(a.key)
	a.due |= 1 << v
	n.env.Write(rg, data+off, src, a.token(v))
}

// release clears a's latch: FAA(-1) for a reader, FAA(-tag) for a writer
// (the mutant: a WRITE of 0 over the word).
func (n *compute) release(a *attempt) {
	if a.phase >= writeAcquiring {
		if n.c.cfg.Mutant == MutantUnlockByWrite {
			rg, word, _ := n.where(a.key)
			a.due |= 1 << vRelease
			n.env.Write(rg, word, a.zero[:], a.token(vRelease))
			return
		}
		n.faa(a, vRelease, releaseExclusive(a.tag))
		return
	}
	n.faa(a, vRelease, readerRelease)
}

func (n *compute) verbDone(token, prev uint64, err error) error {
	a, v := n.byID[token>>3], int(token&7)
	if a == nil || v > vRelease {
		return fmt.Errorf("sel: node %d: a completion of verb %d of attempt %d, which is not in flight", n.id, v, token>>3)
	}
	if err != nil {
		return fmt.Errorf("sel: node %d: the %s of key %d: %w", n.id, verbNames[v], a.key, err)
	}
	if a.due&(1<<v) == 0 {
		return fmt.Errorf("sel: node %d: the %s of key %d completed twice", n.id, verbNames[v], a.key)
	}
	a.due &^= 1 << v
	var stepErr error
	switch v {
	case vAcquire:
		stepErr = n.acquired(a, prev)
	case vRelease:
		n.count.releases++
	case vRead:
		a.readDone = true
		switch a.phase {
		case readHolding, readUnlatched:
			stepErr = n.finishRead(a)
		case writeHolding:
			stepErr = n.finishWrite(a)
		}
	case vWriteHead, vWriteTail:
		n.count.writeVerbs++
		if a.due&writesDue == 0 && a.acc != nil {
			n.done(a, a.old)
		}
	}
	if a.due == 0 {
		n.remove(a)
	}
	return stepErr
}

// acquired handles the acquire's old word.
func (n *compute) acquired(a *attempt, prev uint64) error {
	a.prev = prev
	w := Word(prev)
	switch a.phase {
	case readAcquiring:
		if w.Holder() != 0 {
			n.count.readsMetWriter++
			if n.c.cfg.Mutant == MutantReaderKeepsLatch {
				a.phase = readFailedKept
			} else {
				a.phase = readUndoing
				n.release(a)
			}
			n.backoff(a)
			return nil
		}
		a.phase = readHolding
		if a.readDone {
			return n.finishRead(a)
		}
	case writeAcquiring:
		if n.c.cfg.Mutant == MutantWriterFAA {
			if w.Holder() != 0 {
				a.phase = writeUndoing
				n.release(a)
				n.backoff(a)
				return nil
			}
		} else if prev != 0 {
			n.count.casFailed++
			a.phase = writeFailed
			n.backoff(a)
			return nil
		}
		a.phase = writeHolding
		if a.readDone {
			return n.finishWrite(a)
		}
	default:
		return fmt.Errorf("sel: node %d: an acquire of key %d completed in phase %v", n.id, a.key, a.phase)
	}
	return nil
}

// finishRead returns the copy the READ brought under the shared latch (or,
// for the mutant, under none) and releases the latch.
func (n *compute) finishRead(a *attempt) error {
	head, tail, value := lineVersions(a.buf)
	if head != tail {
		return fmt.Errorf("sel: node %d worker %d read a torn line of key %d (head version %d, tail %d) in phase %v",
			n.id, a.tag.Worker(), a.key, head, tail, a.phase)
	}
	if a.phase == readHolding {
		a.phase = readReleasing
		n.release(a)
	}
	n.done(a, value)
	return nil
}

// finishWrite writes the line one version up, head then tail, and posts the
// release behind them (the mutant: ahead of them).
func (n *compute) finishWrite(a *attempt) error {
	head, tail, old := lineVersions(a.buf)
	if head != tail {
		return fmt.Errorf("sel: node %d worker %d holds key %d exclusively and read a torn line (head version %d, tail %d)",
			n.id, a.tag.Worker(), a.key, head, tail)
	}
	a.version, a.old = head+1, old
	h := headOf(len(a.buf))
	fillLine(a.buf[:h], a.buf[h:], a.version, a.acc.op.Value)
	a.phase = writeReleasing
	if n.c.cfg.Mutant == MutantReleaseBeforeWrite {
		n.release(a)
	}
	n.write(a, vWriteHead, a.buf[:h], 0)
	n.write(a, vWriteTail, a.buf[h:], uint64(h))
	if n.c.cfg.Mutant != MutantReleaseBeforeWrite {
		n.release(a)
	}
	return nil
}

// done completes a's access with value.
func (n *compute) done(a *attempt, value uint64) {
	acc := a.acc
	a.acc, acc.at = nil, nil
	n.accesses[acc.op.Worker] = nil
	if acc.op.Kind == protocolapi.OpRead {
		n.count.reads++
	} else {
		n.count.writes++
	}
	n.env.Complete(acc.op, protocolapi.Result{Value: value})
}

// backoff detaches a failed attempt from its access and retries the
// access after an exponential, randomized back-off.
func (n *compute) backoff(a *attempt) {
	acc := a.acc
	a.acc, acc.at = nil, nil
	acc.tries++
	o := n.c.opts
	d := o.BackoffMax
	if shift := acc.tries - 1; shift < 30 && o.BackoffBase<<shift < d {
		d = o.BackoffBase << shift
	}
	delay := d/2 + int64(n.env.Rand()%uint64(d/2+1))
	n.count.backoffs++
	n.count.backoffNs += uint64(delay)
	n.timers++
	acc.timer = uint64(acc.op.Worker)<<timerWorkerShift | n.timers&(1<<timerWorkerShift-1)
	n.env.After(delay, acc.timer)
}

func (n *compute) remove(a *attempt) {
	delete(n.byID, a.id)
	for i, b := range n.live {
		if b == a {
			n.live = append(n.live[:i], n.live[i+1:]...)
			break
		}
	}
	n.c.markDirty(a.key)
	// No verb holds it or its buffer any more, and its access has let go.
	if len(n.free) < 2*len(n.accesses)+4 {
		n.free = append(n.free, a)
	}
}

// newAttempt is a zeroed attempt with a line buffer, reused if it can be
// (an access costs no allocation once the node has warmed up).
func (n *compute) newAttempt() *attempt {
	if k := len(n.free); k > 0 {
		a := n.free[k-1]
		n.free = n.free[:k-1]
		*a = attempt{buf: a.buf}
		return a
	}
	return &attempt{buf: make([]byte, n.c.lay.lineSize)}
}

// Describe implements protocolapi.Role.
func (n *compute) Describe() string {
	var b strings.Builder
	for _, acc := range n.accesses {
		if acc == nil {
			continue
		}
		fmt.Fprintf(&b, " worker %d: %v of key %d after %d failed acquires", acc.op.Worker, acc.op.Kind, acc.op.Key, acc.tries)
		if acc.timer != 0 {
			b.WriteString(", backing off")
		}
		b.WriteString(";")
	}
	for _, a := range n.live {
		fmt.Fprintf(&b, " %s;", a.describe())
	}
	return strings.TrimSpace(b.String())
}

func (a *attempt) describe() string {
	var due []string
	for v := range vRelease + 1 {
		if a.due&(1<<v) != 0 {
			due = append(due, verbNames[v])
		}
	}
	return fmt.Sprintf("%v key %d %v (due: %s)", a.tag, a.key, a.phase, strings.Join(due, ", "))
}

// memory is a memory node's role: its registered memory serves the verbs
// without it; it takes no event.
type memory struct{ id protocol.NodeID }

func (m memory) Step(ev protocolapi.Event) error {
	return fmt.Errorf("sel: memory node %d got a %v event: memory nodes have no CPU in SEL", m.id, ev.Kind)
}

func (memory) Describe() string { return "" }
