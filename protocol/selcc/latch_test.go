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
