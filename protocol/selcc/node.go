package selcc

import (
	"fmt"
	"math/bits"
)

// Memo is what a compute node's cache frame records of the global
// ownership it holds on its line (paper §4.2, the "ownership memo").
type Memo uint8

// The memos: an MSI state per cached line.
const (
	Invalid Memo = iota
	SharedCopy
	Modified
)

func (m Memo) String() string {
	switch m {
	case Invalid:
		return "I"
	case SharedCopy:
		return "S"
	case Modified:
		return "M"
	}
	return fmt.Sprintf("memo(%d)", uint8(m))
}

// Access is what a local thread wants to do with a line.
type Access uint8

// The accesses.
const (
	Read Access = iota + 1
	Write
)

func (a Access) String() string {
	if a == Write {
		return "write"
	}
	return "read"
}

// Step is what an access needs before it may go on (the table of §4.2).
type Step uint8

// The steps.
const (
	// Hit: the memo allows the access; no verb.
	Hit Step = iota
	// AcquireShared: FAA the reader bit and READ the line in one round trip.
	AcquireSharedStep
	// UpgradeStep: CAS Shared(me) to Exclusive(me); the data is already
	// here.
	UpgradeStep
	// AcquireExclusiveStep: CAS 0 to Exclusive(me) and READ the line in one
	// round trip.
	AcquireExclusiveStep
)

func (s Step) String() string {
	return [...]string{"hit", "acquire-shared", "upgrade", "acquire-exclusive"}[s]
}

// Need is the step an access needs with the memo its frame holds.
func Need(m Memo, a Access) Step {
	switch {
	case m == Modified || m == SharedCopy && a == Read:
		return Hit
	case m == SharedCopy:
		return UpgradeStep
	case a == Read:
		return AcquireSharedStep
	}
	return AcquireExclusiveStep
}

// Outcome is what a node learns from the word an acquiring verb returned.
type Outcome struct {
	Granted bool
	// Undo is the FAA delta that takes back a failed shared acquire's bit
	// (0: nothing to undo). It must complete before the invalidations are
	// sent (see the word's rules in latch.go).
	Undo uint64
	// Holder names the exclusive holder to invalidate, when HasHolder.
	Holder    Node
	HasHolder bool
	// Readers are the nodes with shared copies to invalidate (a bitmap;
	// never the acquiring node itself).
	Readers uint64
}

// AfterShared judges a reader's FAA: it failed if prev names a holder.
func AfterShared(me Node, prev Word) Outcome {
	h, ok := prev.Holder()
	if !ok {
		return Outcome{Granted: true}
	}
	return Outcome{Undo: ReleaseShared(me), Holder: h, HasHolder: true}
}

// AfterCAS judges a writer's CAS (an acquire or an upgrade) that expected
// expect and found prev.
func AfterCAS(me Node, expect, prev Word) Outcome {
	if prev == expect {
		return Outcome{Granted: true}
	}
	if h, ok := prev.Holder(); ok {
		return Outcome{Holder: h, HasHolder: true}
	}
	return Outcome{Readers: prev.Readers() &^ readerBit(me)}
}

// Targets lists the nodes an outcome sends invalidations to.
func (o Outcome) Targets() []Node {
	if o.HasHolder {
		return []Node{o.Holder}
	}
	var ns []Node
	for r := o.Readers; r != 0; r &= r - 1 {
		ns = append(ns, Node(bits.TrailingZeros64(r)))
	}
	return ns
}

// Reply is how the receiver of an invalidation answered it.
type Reply uint8

// The replies.
const (
	// NoReply: not answered yet (a status word of an older round).
	NoReply Reply = iota
	// Dropped: nothing was done; the sender retries its verb (§5.1.2: the
	// line was invalid or evicted, or a local thread is using it).
	Dropped
	// Released: the receiver gave up its shared copy (FAA of its bit).
	Released
	// HandedOverExclusive: the receiver moved its Modified ownership to
	// the sender by FAA and forwarded the line (Fig. 7b, writer).
	HandedOverExclusive
	// HandedOverShared: the receiver flushed the line, turned its
	// ownership into shared copies of both by FAA and forwarded the line
	// (Fig. 7b, reader).
	HandedOverShared
)

func (r Reply) String() string {
	return [...]string{"none", "dropped", "released", "handed-over-X", "handed-over-S"}[r]
}

// Forwards reports whether the reply comes with the line's data.
func (r Reply) Forwards() bool { return r == HandedOverExclusive || r == HandedOverShared }

// Response is what the receiver of an invalidation does.
type Response struct {
	Reply Reply
	// Delta is the FAA on the latch word (0: none).
	Delta uint64
	// Flush: write the line back to memory before the FAA, in the same
	// round trip (the reader's case: later readers fetch from memory).
	Flush bool
	// Memo is the receiver's memo afterwards.
	Memo Memo
}

// OnInvalidate is the receiver's decision on an invalidation from node
// from that wants access want, while its frame holds memo and, if busy, is
// in use by a local thread (a latch holder, an acquire or an eviction in
// flight: §5.1.1 gives local accesses priority, §5.1.2 drops the message).
func OnInvalidate(me Node, memo Memo, busy bool, from Node, want Access) Response {
	if busy || from == me {
		return Response{Reply: Dropped, Memo: memo}
	}
	switch {
	case memo == Modified && want == Write:
		return Response{Reply: HandedOverExclusive, Delta: HandOverExclusive(me, from), Memo: Invalid}
	case memo == Modified:
		return Response{Reply: HandedOverShared, Delta: HandOverShared(me, from), Flush: true, Memo: SharedCopy}
	case memo == SharedCopy && want == Write:
		return Response{Reply: Released, Delta: ReleaseShared(me), Memo: Invalid}
	}
	// Invalid (evicted, or invalidated by someone else first), or a shared
	// copy asked for by a reader (a reader only invalidates a holder).
	return Response{Reply: Dropped, Memo: memo}
}

// Status is a reply's status word: the sender's round in the high 32
// bits, the reply in the low byte. The receiver writes it into the
// sender's reply slot after the data (if any), on the same link, so a
// sender that sees the status sees the data.
func Status(round uint32, r Reply) uint64 { return uint64(round)<<32 | uint64(r) }

// ParseStatus reads a status word: the reply of round round, or NoReply
// for a word of another round.
func ParseStatus(word uint64, round uint32) Reply {
	if uint32(word>>32) != round {
		return NoReply
	}
	return Reply(word & 0xff)
}

// Lease decides the local-handover threshold of §5.3.1: once an
// invalidation was dropped because local threads used the line, the
// accesses that waited for its local latch are counted (reads and writes),
// and when reads/threads + writes exceeds gamma, the node gives the line
// up after the current access. gamma 0 turns the lease off.
func Lease(reads, writes, threads int, gamma float64) bool {
	if gamma <= 0 {
		return false
	}
	if threads < 1 {
		threads = 1
	}
	return float64(reads)/float64(threads)+float64(writes) > gamma
}

// Backoff is the pause before retry n (n >= 1) of an acquire whose
// invalidations were dropped: T = C * RTT / n (§5.1.2), so a node that
// waited longer retries more often; its priority (§5.3.2) is n.
func Backoff(rtt int64, n int) int64 {
	const c = 4
	if n < 1 {
		n = 1
	}
	return c * rtt / int64(n)
}

// CheckLine checks a latch word against the memos of every compute node
// (memos[n] is node n's): the word grants at least what each node
// believes it holds, and the memos themselves are single-writer. During a
// transition the word may grant more than the nodes believe (an acquire
// whose completion is on its way, a handover whose reply is, a failed
// reader's bit before its undo), never less.
func CheckLine(w Word, memos []Memo) error {
	if err := w.Check(); err != nil {
		return err
	}
	h, held := w.Holder()
	writer := -1
	for n, m := range memos {
		switch m {
		case Modified:
			if !held || h != Node(n) {
				return fmt.Errorf("node %d holds the line Modified but the latch word is %v", n, w)
			}
			writer = n
		case SharedCopy:
			if !w.HasReader(Node(n)) && !(held && h == Node(n)) {
				return fmt.Errorf("node %d holds a shared copy but the latch word is %v", n, w)
			}
		}
	}
	if writer >= 0 {
		for n, m := range memos {
			if m == SharedCopy && n != writer {
				return fmt.Errorf("node %d holds a shared copy while node %d holds the line Modified (word %v)", n, writer, w)
			}
		}
	}
	return nil
}

// CheckLineAtRest checks a quiet line: the word is exactly what the memos
// say, the holder alone with an empty bitmap, or the readers' bitmap.
func CheckLineAtRest(w Word, memos []Memo) error {
	var want Word
	for n, m := range memos {
		switch m {
		case Modified:
			want = Exclusive(Node(n))
		case SharedCopy:
			want |= Word(readerBit(Node(n)))
		}
	}
	if w != want {
		return fmt.Errorf("at rest the latch word is %v but the nodes hold %v", w, want)
	}
	return nil
}
