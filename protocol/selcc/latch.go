package selcc

import (
	"fmt"
	"math/bits"
)

// MaxNodes is the number of compute nodes a latch word can name: its reader
// bitmap has 58 bits (paper §4.3.1, footnote 1).
const MaxNodes = 58

// holderShift places the exclusive holder's field above the bitmap.
const holderShift = MaxNodes

const readersMask = 1<<holderShift - 1

// Node is a compute node, 0 to MaxNodes-1.
type Node uint8

// Word is a global latch word: 6 bits naming the exclusive ("Modified")
// holder, 58 bits with one per node holding a shared copy. The holder field
// stores the node plus one, so that 0 means "no holder" and the word of an
// uncached line is 0 (Fig. 5 writes (A, 0...0) for a holder A; with node 0
// allowed, A is stored as A+1: our decision).
type Word uint64

// Exclusive is the word of a line node n holds exclusively.
func Exclusive(n Node) Word { return Word(uint64(n)+1) << holderShift }

// Shared is the word of a line the nodes hold shared.
func Shared(nodes ...Node) Word {
	var w Word
	for _, n := range nodes {
		w |= Word(readerBit(n))
	}
	return w
}

func readerBit(n Node) uint64 { return 1 << n }

// Holder is the exclusive holder, if any.
func (w Word) Holder() (Node, bool) {
	h := uint64(w) >> holderShift
	if h == 0 {
		return 0, false
	}
	return Node(h - 1), true
}

// Readers is the reader bitmap: bit n set for a node n with a shared copy
// (or, transiently, one whose failed shared acquire has not been undone).
func (w Word) Readers() uint64 { return uint64(w) & readersMask }

// HasReader reports whether node n's bit is set.
func (w Word) HasReader(n Node) bool { return w.Readers()&readerBit(n) != 0 }

// Check reports why w cannot be a latch word of this protocol, or nil.
func (w Word) Check() error {
	if h, ok := w.Holder(); ok && h >= MaxNodes {
		return fmt.Errorf("selcc: latch word %#x names holder %d of at most %d nodes", uint64(w), h, MaxNodes)
	}
	return nil
}

func (w Word) String() string {
	h, ok := w.Holder()
	holder := "-"
	if ok {
		holder = fmt.Sprint(h)
	}
	s := fmt.Sprintf("(%s,", holder)
	r := w.Readers()
	if r == 0 {
		return s + "{})"
	}
	sep := "{"
	for r != 0 {
		n := bits.TrailingZeros64(r)
		s += fmt.Sprintf("%s%d", sep, n)
		sep = " "
		r &= r - 1
	}
	return s + "})"
}

// The verbs of the protocol on a latch word. An acquire by CAS names the
// word it expects and the word it installs; everything else is an FAA
// whose delta these functions give (a subtraction as its two's complement,
// which an RDMA FAA adds modulo 2^64). An FAA never borrows or carries
// across fields as long as the protocol's rules hold (AcquireShared's undo
// completes before its invalidation is sent; a node adds its own bit only
// while it is clear): the property test checks both.

// AcquireExclusive is the CAS of a writer that finds no copy (§4.3.2).
func AcquireExclusive(n Node) (expect, install Word) { return 0, Exclusive(n) }

// Upgrade is the CAS of a node that holds the only shared copy.
func Upgrade(n Node) (expect, install Word) { return Shared(n), Exclusive(n) }

// AcquireShared is the FAA of a reader: it sets its bit. The acquire
// failed if the word it returns names a holder; the reader then adds
// ReleaseShared(n) to undo it.
func AcquireShared(n Node) uint64 { return readerBit(n) }

// ReleaseShared clears node n's reader bit (lazy release, eviction, or an
// invalidation of a shared copy).
func ReleaseShared(n Node) uint64 { return -readerBit(n) }

// ReleaseExclusive clears the holder field of holder n (eviction; the
// dirty line is written back in the same round trip).
func ReleaseExclusive(n Node) uint64 { return -(uint64(n) + 1) << holderShift }

// HandOverExclusive moves exclusive ownership from holder from to node to
// in one FAA (global ownership handover, Fig. 7b): the holder field goes
// from from+1 to to+1.
func HandOverExclusive(from, to Node) uint64 {
	return (uint64(to) - uint64(from)) << holderShift
}

// HandOverShared turns holder from's exclusive ownership into shared
// copies of from and the reader to, in one FAA (Fig. 7, a read of a
// Modified line): -(from+1) in the holder field, from's and to's bits set.
func HandOverShared(from, to Node) uint64 {
	return ReleaseExclusive(from) + readerBit(from) + readerBit(to)
}

// Add is what an FAA of delta leaves in the word.
func (w Word) Add(delta uint64) Word { return Word(uint64(w) + delta) }
