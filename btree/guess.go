package btree

import (
	"sync/atomic"

	"github.com/scalestore-go/scalestore/protocol"
)

// A lookup of a tree larger than the CPU's caches waits for memory twice
// at the leaf: for the leaf's slots, then, once the search over them has
// found the key's slot, for the value that slot points to. The second
// wait can overlap the first when the lookup knows where the value lies
// before it reads the leaf. It can, for a common kind of key: integers
// that follow one another (record numbers, auto-increment ids, YCSB's
// keys), stored as 8-byte big-endian keys and loaded in order.
//
// Such a leaf holds every key after its lower fence (the parent's
// separator before it), in order, so key k is in slot k - fence - 1; and a
// leaf built by appends (an ascending load) or rebuilt by a split or a
// compaction keeps slot i's entry at usable - (i+1)*entrySize when its
// entries are all of one size. From the parent, before the leaf is read,
// a descent therefore guesses the value's offset, and hints its lines
// along with the leaf's own (Cache.HintHome).
//
// The guess is checked: every lookup that finds its key compares the
// guess with the slot's real offset and keeps score, per worker stripe, a
// counter from 0 to guessMaxScore. Hints are issued only while the score
// is at least guessHintScore: keys that are not consecutive integers,
// entries of mixed sizes, a leaf whose heap was filled out of order soon
// bring it down, and the descent then only computes the guess (a few
// nanoseconds) to notice when guesses come right again. A wrong hint
// costs a few cache lines of memory traffic, never a wrong answer: a hint
// changes no data.

const (
	guessMaxScore  = 15
	guessHintScore = 8
	// guessStripes spreads the scores over cache lines by worker, so that
	// the workers of a node do not write one line.
	guessStripes = 16
	// guessMaxLines bounds the lines a value hint covers.
	guessMaxLines = 8
)

type guessStripe struct {
	score atomic.Int32
	// entry is the heap size of the entries the last lookup found (key
	// bytes kept in the heap and value).
	entry atomic.Int32
	_     [56]byte
}

// guessState is a Tree's record of how its guesses fare.
type guessState struct {
	// leafDepth is how many inner levels the last descent crossed (the
	// guess is made at the node above the leaves).
	leafDepth atomic.Int32
	stripes   [guessStripes]guessStripe
}

func (g *guessState) stripe(w int) *guessStripe { return &g.stripes[w&(guessStripes-1)] }

// guessOffset is where the leaf that inner node n's slot i points to keeps
// the value of key, if its keys are consecutive integers after the fence
// n.key(i-1) and its entries of entry bytes lie in slot order from the
// end of its heap; -1 when no guess can be made (the leftmost child has
// no fence in n, key does not follow the fence closely enough, n's heads
// are of its keys' bytes after a prefix: they are longer than 8 bytes).
func (n node) guessOffset(i int, key []byte, entry int) int {
	if i <= 0 || i > n.count() || entry <= 0 || len(key) > 8 || n.prefixLen() != 0 {
		return -1
	}
	fence, h := n.head(i-1), keyHead(key)
	if h <= fence || h-fence > maxSlots {
		return -1
	}
	off := usable - int(h-fence)*entry
	if off < headerSize+int(h-fence)*slotSize {
		return -1 // that many slots and entries do not fit in a page
	}
	return off
}

// guessFor makes the guess for a descent from inner node n through slot i
// to child, hints the guessed lines when the worker's guesses have been
// right, and returns the guessed offset (-1: none) for Get to check.
func (t *Tree) guessFor(s Session, n node, i int, child protocol.PID, key []byte) int32 {
	g := t.guesses.stripe(s.Worker.ID)
	e := int(g.entry.Load())
	off := n.guessOffset(i, key, e)
	if off >= 0 && g.score.Load() >= guessHintScore {
		s.Cache.HintHome(child, off, min(e, guessMaxLines*64))
	}
	return int32(off)
}

// learn scores a guess against the leaf n, where the lookup found its key
// in slot i.
func (t *Tree) learn(s Session, guess int32, n node, i int) {
	off, kl, vl := n.slot(i)
	g := t.guesses.stripe(s.Worker.ID)
	if e := int32(n.heapKey(kl) + vl); g.entry.Load() != e {
		g.entry.Store(e) // entries of another size: guess with this one next
	}
	if guess < 0 {
		return
	}
	sc := g.score.Load()
	switch {
	case int(guess) == off:
		if sc < guessMaxScore {
			g.score.Store(sc + 1)
		}
	case sc > 0:
		g.score.Store(max(0, sc-2)) // wrong: lose trust faster than it is won
	}
}

// noteLeafDepth records the depth at which a descent found its leaf.
func (t *Tree) noteLeafDepth(d int) {
	if int(t.guesses.leafDepth.Load()) != d {
		t.guesses.leafDepth.Store(int32(d))
	}
}
