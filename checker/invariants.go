package checker

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"

	"github.com/scalestore-go/scalestore/protocol"
)

// TornValue is what a reader records when the two ends of a page disagree
// (a write was only half visible): no writer ever writes it, so a history
// containing it is never linearizable.
const TornValue = ^uint64(0)

// PageValue reads the register value of a page (its first 8 bytes) and
// reports whether the copy of it in the page's last 8 bytes agrees.
func PageValue(data []byte) (v uint64, whole bool) {
	head := binary.LittleEndian.Uint64(data)
	tail := binary.LittleEndian.Uint64(data[len(data)-8:])
	return head, head == tail
}

// PutPageValue writes the register value into both ends of a page.
func PutPageValue(data []byte, v uint64, end bool) {
	if end {
		binary.LittleEndian.PutUint64(data[len(data)-8:], v)
	} else {
		binary.LittleEndian.PutUint64(data, v)
	}
}

// MaxViolations bounds how many violations are kept (the count goes on).
const MaxViolations = 32

// Invariants checks DESIGN.md §5 as the simulation runs. It sees every
// change of a node's copy (an actors.Observer), keeps ghost state per page
// (valid copies per mode, last completed write, accepted exclusive requests)
// and checks after each change:
//
//  1. single writer or many readers;
//  2. a copy that becomes valid holds the last completed write, whole;
//  5. with chaining, exclusive grants follow the directory's acceptance order.
//
// Invariants 3 and 4 and the progress bound need the whole cluster at rest
// and are checked by the simulation driver with the helpers below.
type Invariants struct {
	// pages holds the ghost state by directory and slot (slots are
	// allocated densely); sparse takes slots beyond denseSlots.
	pages      [protocol.MaxNodes][]*ghost
	sparse     map[protocol.PID]*ghost
	CheckOrder bool // chaining: grants follow acceptance order
	// Content switches the data-value check from the register value in the
	// page's ends to a digest of the whole page, recorded by WroteContent
	// (workloads such as the B-tree that write whole pages).
	Content bool
	ViolationLog
	unreadable int
	costs      Costs
}

type ghost struct {
	x, s int
	last uint64
	// maybe are values of writes whose outcome is unknown (their writer or
	// the page's directory crashed during the write-through): a copy may
	// hold one of them instead of last, and from then on it is the last.
	maybe    []uint64
	digest   uint64
	known    bool
	accepted []protocol.NodeID // exclusive requests accepted and not yet granted
}

// NewInvariants makes an empty checker.
func NewInvariants(checkOrder bool, now func() int64) *Invariants {
	return &Invariants{sparse: make(map[protocol.PID]*ghost), CheckOrder: checkOrder, ViolationLog: NewViolationLog(now)}
}

// denseSlots bounds the slots kept in Invariants.pages: a page's ghost is
// found by indexing, not hashing, once per checked event.
const denseSlots = 1 << 20

// lookup is pid's ghost state, or nil.
func (v *Invariants) lookup(pid protocol.PID) *ghost {
	if slot := pid.Slot(); slot < denseSlots {
		if d := v.pages[pid.Dir()]; slot < uint64(len(d)) {
			return d[slot]
		}
		return nil
	}
	return v.sparse[pid]
}

func (v *Invariants) page(pid protocol.PID) *ghost {
	if g := v.lookup(pid); g != nil {
		return g
	}
	g := &ghost{}
	if slot := pid.Slot(); slot < denseSlots {
		d := &v.pages[pid.Dir()]
		if slot >= uint64(len(*d)) {
			*d = append(*d, make([]*ghost, slot+1-uint64(len(*d)))...)
		}
		(*d)[slot] = g
	} else {
		v.sparse[pid] = g
	}
	return g
}

// Violations returns the recorded violations (at most MaxViolations) and
// how many there were.
func (v *Invariants) Violations() ([]string, int) { return v.List(), v.Count() }

// Violation implements actors.Observer.
func (v *Invariants) Violation(node protocol.NodeID, err error) { v.Fail("%v", err) }

// CopyChanged implements actors.Observer.
func (v *Invariants) CopyChanged(node protocol.NodeID, pid protocol.PID, old, now protocol.Mode, data []byte) {
	g := v.page(pid)
	switch old {
	case protocol.ModeExclusive:
		g.x--
	case protocol.ModeShared:
		g.s--
	}
	switch now {
	case protocol.ModeExclusive:
		g.x++
	case protocol.ModeShared:
		g.s++
	}
	if g.x > 1 || (g.x == 1 && g.s > 0) {
		v.Fail("page %v: %d exclusive and %d shared valid copies after node %d went %v->%v (single writer or many readers)",
			pid, g.x, g.s, node, old, now)
	}
	if g.x < 0 || g.s < 0 {
		v.Fail("page %v: negative copy count after node %d went %v->%v", pid, node, old, now)
	}
	// data is nil for an unreadable copy (protocol.FlagUnreadable): it holds
	// no value, and no worker may read it.
	if now != protocol.ModeNone && old == protocol.ModeNone && data != nil {
		if ok, why := v.matches(g, data); !ok {
			v.Fail("page %v: node %d obtained a copy that is not the last completed write: %s", pid, node, why)
		}
	}
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// matches checks a copy against the last completed write.
func (v *Invariants) matches(g *ghost, data []byte) (bool, string) {
	if v.Content {
		d := crc64.Checksum(data, crcTable)
		if !g.known {
			g.known, g.digest = true, d // first sight of a new page
			return true, ""
		}
		if d != g.digest {
			return false, fmt.Sprintf("digest %x, last write %x", d, g.digest)
		}
		return true, ""
	}
	val, whole := PageValue(data)
	if whole && val != g.last {
		for _, m := range g.maybe {
			if m == val {
				g.last, g.maybe = val, g.maybe[:0] // that write happened, after every other
				return true, ""
			}
		}
	}
	if !whole || val != g.last {
		return false, fmt.Sprintf("holds %d (whole=%v), last write %d (or one of %d writes of unknown outcome)", val, whole, g.last, len(g.maybe))
	}
	return true, ""
}

// Maybe records a write of value whose outcome is unknown: its writer or
// its page's directory crashed before it was acknowledged. A copy seen
// later may hold it.
func (v *Invariants) Maybe(pid protocol.PID, value uint64) {
	g := v.page(pid)
	g.maybe = append(g.maybe, value)
}

// ResetOrder forgets the exclusive requests accepted and not yet granted:
// a view change aborted them (the chaining order check starts afresh).
func (v *Invariants) ResetOrder() {
	for _, d := range v.pages {
		for _, g := range d {
			if g != nil {
				g.accepted = g.accepted[:0]
			}
		}
	}
	for _, g := range v.sparse {
		g.accepted = g.accepted[:0]
	}
}

// Matches reports whether data is the last completed write of pid, and if
// not, why.
func (v *Invariants) Matches(pid protocol.PID, data []byte) (bool, string) {
	return v.matches(v.page(pid), data)
}

// Message counts one network message for the cost invariants (the
// simulator's trace calls it for every message it delivers).
func (v *Invariants) Message(m *protocol.Message) { v.costs.Sent(m) }

// Costs are the message counts behind the cost invariants.
func (v *Invariants) Costs() *Costs { return &v.costs }

// CheckCosts records a violation for every case of the protocol whose
// messages exceeded their bound (see Costs). The driver calls it at the end
// of a run.
func (v *Invariants) CheckCosts() {
	for _, line := range v.costs.Check() {
		v.Fail("%s", line)
	}
}

// ForgetContent records that pid's last write may or may not have taken
// effect (its write-through found the directory crashed): the next copy
// seen is taken as the page's content (Content mode).
func (v *Invariants) ForgetContent(pid protocol.PID) {
	v.page(pid).known = false
}

// WroteContent records a completed write of a whole page (Content mode).
func (v *Invariants) WroteContent(pid protocol.PID, data []byte) {
	g := v.page(pid)
	g.known, g.digest = true, crc64.Checksum(data, crcTable)
}

// Accepted implements actors.Observer.
func (v *Invariants) Accepted(dir protocol.NodeID, d protocol.Decision) {
	v.costs.Accepted(d)
	if v.CheckOrder && d.Mode == protocol.ModeExclusive {
		g := v.page(d.PID)
		g.accepted = append(g.accepted, d.Requester)
	}
}

// Obtained implements actors.Observer.
func (v *Invariants) Obtained(node protocol.NodeID, pid protocol.PID, mode protocol.Mode, waited int64) {
	if !v.CheckOrder || mode != protocol.ModeExclusive {
		return
	}
	g := v.page(pid)
	if len(g.accepted) == 0 || g.accepted[0] != node {
		v.Fail("page %v: node %d obtained it exclusively out of the directory's acceptance order %v", pid, node, g.accepted)
		return
	}
	g.accepted = g.accepted[1:]
}

// Unreadable implements actors.Observer: a directory could not read a page
// from its SSD (an injected fault). It is no violation; the operations
// that wanted the page fail.
func (v *Invariants) Unreadable(protocol.NodeID, protocol.PID, error) { v.unreadable++ }

// UnreadableReads is how many reads of pages failed for good.
func (v *Invariants) UnreadableReads() int { return v.unreadable }

// Wrote records a completed write (the writer still holds the exclusive latch).
func (v *Invariants) Wrote(pid protocol.PID, value uint64) {
	g := v.page(pid)
	g.last, g.maybe = value, g.maybe[:0]
}

// Last is the last completed write of pid.
func (v *Invariants) Last(pid protocol.PID) uint64 {
	if g := v.lookup(pid); g != nil {
		return g.last
	}
	return 0
}

// Copies returns the ghost counts of valid exclusive and shared copies.
func (v *Invariants) Copies(pid protocol.PID) (x, s int) {
	if g := v.lookup(pid); g != nil {
		return g.x, g.s
	}
	return 0, 0
}
