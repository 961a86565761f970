package ycsb

import (
	"bytes"
	"sync"

	"github.com/tidwall/btree"
)

// Baseline is the in-memory baseline engine: tidwall/btree under a
// reader-writer lock (`scalestore ycsb --engine btree` and bench/).
type Baseline struct {
	mu sync.RWMutex
	t  *btree.BTreeG[pair]
}

type pair struct{ k, v []byte }

// NewBaseline returns an empty baseline engine.
func NewBaseline() *Baseline {
	less := func(a, b pair) bool { return bytes.Compare(a.k, b.k) < 0 }
	// NoLocks: the tree's own lock would be a second one under ours.
	return &Baseline{t: btree.NewBTreeGOptions(less, btree.Options{NoLocks: true})}
}

// Get appends key's value to dst.
func (e *Baseline) Get(key, dst []byte) ([]byte, bool, error) {
	e.mu.RLock()
	p, ok := e.t.Get(pair{k: key})
	if ok {
		dst = append(dst, p.v...)
	}
	e.mu.RUnlock()
	return dst, ok, nil
}

// Put sets key to a copy of val (the driver reuses its buffers).
func (e *Baseline) Put(key, val []byte) error {
	p := pair{append([]byte(nil), key...), append([]byte(nil), val...)}
	e.mu.Lock()
	e.t.Set(p)
	e.mu.Unlock()
	return nil
}
