package btree

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/storage/memfile"
)

// guessRig is a tree on a node of one, in memory, used by one goroutine.
type guessRig struct {
	t  *testing.T
	rt *actors.Local
	tr *Tree
	// last is the worker of the latest do: a lookups call runs in one.
	last int
}

func newGuessRig(t *testing.T) *guessRig {
	rt, err := actors.NewLocal(actors.Config{CacheFrames: 8192}, memfile.New(1<<14, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	r := &guessRig{t: t, rt: rt}
	r.do(func(s Session) error {
		var err error
		r.tr, err = Create(s)
		return err
	})
	return r
}

func (r *guessRig) do(fn func(s Session) error) {
	r.t.Helper()
	if err := r.rt.Do(func(w *bufmgr.Worker) error {
		r.last = w.ID
		return fn(Session{Cache: r.rt.Node().Cache(), Worker: w, Allocate: r.rt.Allocate})
	}); err != nil {
		r.t.Fatal(err)
	}
}

func u64key(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// ascending is n keys from 0 on, step apart.
func ascending(n, step int) []uint64 {
	k := make([]uint64, n)
	for i := range k {
		k[i] = uint64(step * i)
	}
	return k
}

// lookups looks every key up once and counts the guesses made and how many
// named the value's offset: each lookup's path as the descent left it,
// checked against the leaf.
func (r *guessRig) lookups(keys []uint64, vl int) (made, right int) {
	r.do(func(s Session) error {
		for _, k := range keys {
			key := u64key(k)
			v, ok, err := r.tr.Get(s, key, nil)
			if err != nil || !ok || len(v) != vl {
				r.t.Fatalf("key %d: ok %v, %d bytes, err %v", k, ok, len(v), err)
			}
			p, err := r.tr.descend(s, key, false, 0, 0)
			if err != nil {
				return err
			}
			n := node(p.current.Data())
			i, found := n.lowerBound(key)
			off, _, _ := n.slot(i)
			if p.current.HasChanged() || !found {
				r.t.Fatalf("key %d: leaf changed or key gone under a single goroutine", k)
			}
			if p.guess >= 0 {
				made++
				if int(p.guess) == off {
					right++
				}
			}
		}
		return nil
	})
	return made, right
}

func (r *guessRig) load(keys []uint64, size func(k uint64) int) {
	r.do(func(s Session) error {
		for _, k := range keys {
			if err := r.tr.Put(s, u64key(k), make([]byte, size(k))); err != nil {
				return err
			}
		}
		return nil
	})
}

// score is the score of the latest do's worker (Do may hand out another
// worker each time, and a worker keeps score in its own stripe).
func (r *guessRig) score() int32 { return r.tr.guesses.stripe(r.last).score.Load() }

// Consecutive integer keys loaded in order, values of one size (YCSB's
// records, auto-increment ids): the parent's guess of where the leaf
// keeps a key's value must be right for every key but those of a parent's
// leftmost child (no fence in the parent), and the score must reach the
// point where the guesses are hinted.
func TestGuessFindsValuesOfAnAscendingLoad(t *testing.T) {
	const records = 50000
	r := newGuessRig(t)
	keys := ascending(records, 1)
	r.load(keys, func(uint64) int { return 128 })
	made, right := r.lookups(keys, 128)
	t.Logf("%d lookups: %d guesses, %d right, score %d", records, made, right, r.score())
	if right != made {
		t.Errorf("%d of %d guesses wrong", made-right, made)
	}
	if made < records*95/100 {
		t.Errorf("only %d of %d lookups had a guess", made, records)
	}
	if r.score() != guessMaxScore {
		t.Errorf("score %d after right guesses, want %d", r.score(), guessMaxScore)
	}

	// Updates in place and a second round of lookups keep the layout.
	r.load(keys[:records/2], func(uint64) int { return 128 })
	if made2, right2 := r.lookups(keys, 128); made2 != made || right2 != right {
		t.Errorf("after updates in place: %d guesses, %d right; before %d, %d", made2, right2, made, right)
	}
}

// Keys that are not consecutive (every third integer), or entries loaded
// in random order (a leaf's heap then follows the order of the inserts,
// not of the keys): the guesses go wrong, and the score must fall below
// the hinting point, so that lookups stop hinting lines they will not read.
func TestGuessStopsHintingWhenWrong(t *testing.T) {
	cases := map[string]func() []uint64{
		"sparse": func() []uint64 { return ascending(20000, 3) },
		"random order": func() []uint64 {
			k := ascending(20000, 1)
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(k), func(i, j int) { k[i], k[j] = k[j], k[i] })
			return k
		},
	}
	for _, name := range []string{"sparse", "random order"} {
		t.Run(name, func(t *testing.T) {
			r := newGuessRig(t)
			keys := cases[name]()
			r.load(keys, func(uint64) int { return 128 })
			// Start from full trust: the score must fall on its own.
			for i := range r.tr.guesses.stripes {
				r.tr.guesses.stripes[i].score.Store(guessMaxScore)
			}
			made, right := r.lookups(keys, 128)
			t.Logf("%d lookups: %d guesses, %d right, score %d", len(keys), made, right, r.score())
			if r.score() >= guessHintScore {
				t.Errorf("score %d after %d right guesses of %d: still hinting", r.score(), right, made)
			}
		})
	}
}

// Values of two sizes: the guess uses the size of the entries found last,
// so alternating sizes keep it wrong and the hints off, and one size again
// brings them back.
func TestGuessFollowsTheEntrySize(t *testing.T) {
	const records = 20000
	r := newGuessRig(t)
	keys := ascending(records, 1)
	r.load(keys, func(k uint64) int { return 100 + 28*int(k%2) })
	r.do(func(s Session) error {
		for _, k := range keys {
			if _, _, err := r.tr.Get(s, u64key(k), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if r.score() >= guessHintScore {
		t.Errorf("score %d with entries of alternating sizes", r.score())
	}
	// The same keys loaded again in order into a new tree, one size: the
	// guesses come right and the hints back.
	r2 := newGuessRig(t)
	r2.load(keys, func(uint64) int { return 100 })
	if made, right := r2.lookups(keys, 100); right != made || r2.score() != guessMaxScore {
		t.Errorf("one size of 100 bytes: %d of %d guesses right, score %d", right, made, r2.score())
	}
}

// guessOffset must not name an offset outside the heap for any fence and
// key, whatever the entry size, and must decline when it cannot guess.
func TestGuessOffsetBounds(t *testing.T) {
	buf := make([]byte, 4096)
	initNode(buf, kindInner)
	n := node(buf)
	n.insertAt(0, u64key(1000), u64key(7))
	n.insertAt(1, u64key(5000), u64key(8))
	for _, tc := range []struct {
		i     int
		key   uint64
		entry int
		want  int
	}{
		{0, 10, 128, -1},                // leftmost child: no fence
		{1, 1000, 128, -1},              // not after the fence
		{1, 1001, 128, usable - 128},    // slot 0
		{1, 1028, 128, usable - 28*128}, // slot 27
		{1, 1029, 128, -1},              // 29 entries of 128 bytes do not fit
		{1, 1001, 0, -1},                // no size learnt yet
		{2, 5001, 16, usable - 16},      // the upper child has its fence too
		{3, 5001, 16, -1},               // no such slot
		{1, 1000 + maxSlots + 1, 1, -1}, // beyond any slot count
		{1, 1000 + (usable-headerSize)/17, 1, usable - (usable-headerSize)/17}, // just fits
	} {
		if got := n.guessOffset(tc.i, u64key(tc.key), tc.entry); got != tc.want {
			t.Errorf("guessOffset(%d, %d, %d) = %d, want %d", tc.i, tc.key, tc.entry, got, tc.want)
		}
	}
	if got := n.guessOffset(1, []byte("a longer key"), 128); got != -1 {
		t.Errorf("a key longer than 8 bytes: %d, want -1", got)
	}
}
