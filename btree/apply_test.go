package btree

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Locked.Apply of batches that put several writes in one leaf (inserts,
// updates to other sizes and the same size, deletes, in any order) and
// one write in others, with splits when a leaf is full: the tree holds
// what a map given the same writes holds.
func TestApplyMatchesAMap(t *testing.T) {
	r := newGuessRig(t)
	model := map[string][]byte{}
	key := func(i int) []byte { return fmt.Appendf(nil, "key:%08d", i) }
	rng := rand.New(rand.NewPCG(1, 2))
	const space = 3000
	for round := range 400 {
		picked := map[int]bool{}
		// A run of neighbours (one leaf, mostly) and a few far keys.
		base := rng.IntN(space)
		for i := range 1 + rng.IntN(8) {
			picked[(base+i*(1+rng.IntN(3)))%space] = true
		}
		for range rng.IntN(4) {
			picked[rng.IntN(space)] = true
		}
		idx := make([]int, 0, len(picked))
		for i := range picked {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		rng.Shuffle(len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
		var keys []TreeKey
		var writes []Write
		for _, i := range idx {
			k := key(i)
			keys = append(keys, TreeKey{Tree: r.tr, Key: k})
			if rng.IntN(5) == 0 {
				writes = append(writes, Write{Tree: r.tr, Key: k, Delete: true})
				continue
			}
			size := 1 + rng.IntN(60)
			if old, ok := model[string(k)]; ok && rng.IntN(3) == 0 {
				size = len(old) // same size: overwritten in place
			}
			writes = append(writes, Write{Tree: r.tr, Key: k, Val: bytes.Repeat([]byte{byte('a' + round%26)}, size)})
		}
		r.do(func(s Session) error {
			for range 100 {
				l, err := LockKeys(s, r.tr, keys)
				if err != nil {
					return err
				}
				err = l.Apply(writes)
				l.Release()
				var full *LeafFullError
				if !errors.As(err, &full) {
					return err
				}
				if err := full.Tree.MakeRoom(s, full); err != nil {
					return err
				}
			}
			return errors.New("the leaves kept filling up")
		})
		for _, w := range writes {
			if w.Delete {
				delete(model, string(w.Key))
			} else {
				model[string(w.Key)] = w.Val
			}
		}
		if round%50 != 49 {
			continue
		}
		r.do(func(s Session) error {
			for i := range space {
				v, ok, err := r.tr.Get(s, key(i), nil)
				if err != nil {
					return err
				}
				want, wantOK := model[string(key(i))]
				if ok != wantOK || !bytes.Equal(v, want) {
					t.Fatalf("round %d: %s is %q %v, want %q %v", round, key(i), v, ok, want, wantOK)
				}
			}
			return nil
		})
	}
}
