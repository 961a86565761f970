package selcc

import (
	"testing"

	"pgregory.net/rapid"
)

func TestWordFields(t *testing.T) {
	for _, n := range []Node{0, 1, 30, MaxNodes - 1} {
		w := Exclusive(n)
		if h, ok := w.Holder(); !ok || h != n || w.Readers() != 0 || w.Check() != nil {
			t.Fatalf("Exclusive(%d) = %v", n, w)
		}
	}
	w := Shared(0, 5, 57)
	if _, ok := w.Holder(); ok || !w.HasReader(0) || !w.HasReader(57) || w.HasReader(1) || w.String() != "(-,{0 5 57})" {
		t.Fatalf("Shared = %v", w)
	}
	if Word(0).String() != "(-,{})" || Exclusive(3).String() != "(3,{})" {
		t.Fatalf("strings %v %v", Word(0), Exclusive(3))
	}
	if err := Word(63 << holderShift).Check(); err == nil {
		t.Fatal("a holder past MaxNodes passed Check")
	}
}

// state is what the model knows of one node's ownership of the line.
type state uint8

const (
	none       state = iota
	shared           // holds a shared copy: its bit is set
	exclusive        // holds the line Modified: the holder field names it
	failedRead       // its shared acquire met a holder; its bit is set until it undoes it
)

// TestLatchProtocol: nodes take, upgrade, release and hand over the latch
// word in any interleaving the protocol allows; after every verb the word
// names exactly the model's holder and the model's reader bits (shared
// copies and failed reads not yet undone), so no FAA ever carried or
// borrowed across a field.
func TestLatchProtocol(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := rapid.IntRange(1, 6).Draw(t, "nodes")
		ids := make([]Node, nodes)
		for i := range ids {
			// Spread them over the whole bitmap, the top bit included.
			ids[i] = Node(rapid.IntRange(0, MaxNodes-1).Filter(func(v int) bool {
				for _, x := range ids[:i] {
					if Node(v) == x {
						return false
					}
				}
				return true
			}).Draw(t, "id"))
		}
		st := make([]state, nodes)
		var w Word
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			i := rapid.IntRange(0, nodes-1).Draw(t, "node")
			n := ids[i]
			switch st[i] {
			case none:
				switch rapid.IntRange(0, 2).Draw(t, "want") {
				case 0: // a writer's CAS
					if expect, install := AcquireExclusive(n); w == expect {
						w, st[i] = install, exclusive
					}
				case 1: // a reader's FAA
					prev := w
					w = w.Add(AcquireShared(n))
					st[i] = shared
					if _, held := prev.Holder(); held {
						st[i] = failedRead
					}
				case 2: // ask the holder to hand over (after any undo completed)
					for j := range st {
						if st[j] != exclusive || j == i {
							continue
						}
						if rapid.Bool().Draw(t, "to-writer") {
							w = w.Add(HandOverExclusive(ids[j], n))
							st[j], st[i] = none, exclusive
						} else {
							w = w.Add(HandOverShared(ids[j], n))
							st[j], st[i] = shared, shared
						}
						break // one holder at most
					}
				}
			case failedRead:
				w, st[i] = w.Add(ReleaseShared(n)), none
			case shared:
				if rapid.Bool().Draw(t, "upgrade") {
					if expect, install := Upgrade(n); w == expect {
						w, st[i] = install, exclusive
					}
				} else {
					w, st[i] = w.Add(ReleaseShared(n)), none
				}
			case exclusive:
				w, st[i] = w.Add(ReleaseExclusive(n)), none
			}
			var readers uint64
			holders := 0
			for j, s := range st {
				switch s {
				case shared, failedRead:
					readers |= 1 << ids[j]
				case exclusive:
					holders++
					if h, ok := w.Holder(); !ok || h != ids[j] {
						t.Fatalf("node %d holds the line exclusively, the word says %v", ids[j], w)
					}
				}
			}
			if _, ok := w.Holder(); ok != (holders == 1) || holders > 1 {
				t.Fatalf("%d exclusive holders, word %v", holders, w)
			}
			if w.Readers() != readers || w.Check() != nil {
				t.Fatalf("reader bits %#x, the word says %v (%#x)", readers, w, w.Readers())
			}
		}
	})
}

// The rule the property depends on: a reader whose acquire failed undoes
// its bit before it asks the holder for the line. Handing over to a reader
// whose bit is still set carries into its neighbour's bit.
func TestHandOverBeforeUndoCorruptsTheWord(t *testing.T) {
	w := Exclusive(2).Add(AcquireShared(4)) // the failed read, not undone
	w = w.Add(HandOverShared(2, 4))
	if w.HasReader(4) || !w.HasReader(5) {
		t.Fatalf("expected the carry into node 5's bit, got %v", w)
	}
}

// slotModel is a reader's reply slot as the property below models it: the
// status word each replier left, and the round counter that names the
// reader's next invalidation.
type slotModel struct {
	status map[Node]uint64
	round  uint32
}

// TestReaderRetriesOnlyOnItsOwnRoundsReply: a reader whose FAA met a holder
// undoes its bit, invalidates the holder and waits for the reply of that
// round in its slot; the holder's handover (FAA, then data and status) may
// land at any later step, and the slot may be taken over by a new thread at
// any time. The reader adds its bit again only after a reply of its own
// round said the handover did not happen. Since the slot's round counter
// survives the thread (linecache keeps it per slot), a status word of an
// older round never passes for the current one, so the reader never adds
// its bit while the handover set it. TestStaleRoundCarries shows the
// carry that follows when a new thread counts rounds from 0 again.
func TestReaderRetriesOnlyOnItsOwnRoundsReply(t *testing.T) {
	run := func(t *rapid.T) (carried bool) {
		reader := Node(rapid.IntRange(0, MaxNodes-2).Draw(t, "reader"))
		holder := Node(rapid.IntRange(0, MaxNodes-1).Filter(func(v int) bool { return Node(v) != reader }).Draw(t, "holder"))
		slot := slotModel{status: map[Node]uint64{}}
		// Earlier rounds left statuses: some dropped, from this holder too.
		for range rapid.IntRange(0, 4).Draw(t, "old-rounds") {
			slot.round++
			slot.status[holder] = Status(slot.round, Dropped)
		}
		w := Exclusive(holder)
		readerHas := false // the model: the reader's bit is set in the word
		pendingHandover := false
		waiting := false
		var waitRound uint32
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch {
			case !waiting && !readerHas:
				prev := w
				w = w.Add(AcquireShared(reader))
				out := AfterShared(reader, prev)
				if out.Granted {
					if prev.HasReader(reader) {
						return true // added a bit that was set: carried
					}
					readerHas = true
					continue
				}
				w = w.Add(out.Undo)
				slot.round++
				waitRound, waiting, pendingHandover = slot.round, true, true
			case waiting && pendingHandover && rapid.Bool().Draw(t, "holder-answers"):
				w = w.Add(HandOverShared(holder, reader))
				slot.status[holder] = Status(waitRound, HandedOverShared)
				pendingHandover = false
			case waiting:
				switch ParseStatus(slot.status[holder], waitRound) {
				case NoReply:
					continue
				case HandedOverShared:
					readerHas, waiting = true, false
				default:
					waiting = false // dropped: retry from the FAA
				}
			default:
				return false
			}
			if _, held := w.Holder(); !held && !w.HasReader(reader) && !pendingHandover {
				t.Fatalf("the handover landed but the word %v lost the reader's bit", w)
			}
		}
		return false
	}
	rapid.Check(t, func(t *rapid.T) {
		if run(t) {
			t.Fatal("a reader added its bit while it was set")
		}
	})
}

// The interleaving of issue 36 (seed 1497), step by step: round 1 of the
// reader's slot once got a dropped reply from the holder; a new thread on
// the slot counts from 0 again, so its first invalidation is round 1 too,
// takes the old status for its reply and retries its FAA after the
// holder's handover set its bit: the sum carries into the next node's bit.
func TestStaleRoundCarries(t *testing.T) {
	const reader, holder = Node(0), Node(5)
	status := Status(1, Dropped) // left by an earlier thread's round 1
	w := Exclusive(holder)
	prev := w
	w = w.Add(AcquireShared(reader))
	out := AfterShared(reader, prev)
	w = w.Add(out.Undo)
	w = w.Add(HandOverShared(holder, reader)) // the handover lands
	if r := ParseStatus(status, 1); r != Dropped {
		t.Fatalf("round 1 reads %v", r)
	}
	prev = w
	w = w.Add(AcquireShared(reader)) // the retry of a reply it misread
	if !AfterShared(reader, prev).Granted || w.HasReader(reader) || !w.HasReader(reader+1) {
		t.Fatalf("expected the carry into node 1's bit, got %v", w)
	}
	if r := ParseStatus(status, 2); r != NoReply {
		t.Fatalf("round 2 (the slot's counter kept) reads the old status as %v", r)
	}
}
