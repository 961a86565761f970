package protocol

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// epochModel drives a directory with requests and evictions in any order
// and checks what the comparisons of conflict epochs, the nodes' and the
// directory's, need (docs/protocol.md, "Epoch bumps"):
//
//  1. a node accepted for exclusive while it may still hold a copy gets a
//     later epoch than that copy's, so a transfer's Pred tells the copy
//     it holds from the acquisition it awaits (actors' beforeOwnTurn);
//  2. a Pred names the target's latest acquisition;
//  3. an acceptance that takes a copy away (an invalidation, or a source
//     that gives its copy up) is later than the copy (the back-off order
//     that canGiveUp asserts);
//  4. the owner of record evicts a copy of the page's epoch (Evict).
//
// A node may hold a copy (may) from its acceptance until its eviction is
// accepted or it hands an exclusive page on; invalidations may be in
// flight, so an invalidated node may still hold its copy. held is the
// epoch of its latest acquisition.
type epochModel struct {
	d    *Directory
	pid  PID
	may  [5]bool
	held [5]uint32
}

func newEpochModel() *epochModel {
	d := NewDirectory(0, Chaining, 4)
	pid, _ := d.Allocate(1)
	m := &epochModel{d: d, pid: pid}
	m.may[1] = true // the creator owns the page at epoch 0
	return m
}

// request has n ask for mode; ok is false when the protocol would not let
// n ask (it holds the page in that mode per the directory).
func (m *epochModel) request(n NodeID, mode Mode, localCopy bool) (ok bool, err error) {
	meta := m.d.Meta(m.pid)
	if mode == ModeShared && meta.Holds(n) || mode == ModeExclusive && meta.Mode == ModeExclusive && meta.Owner == n {
		return false, nil
	}
	before := *meta
	dec, err := m.d.Request(n, m.pid, mode, localCopy && m.may[0])
	if err != nil {
		return true, err
	}
	if mode == ModeExclusive && m.may[n] && dec.Epoch <= m.held[n] {
		return true, fmt.Errorf("node %d accepted for X at epoch %d while it may hold a copy of epoch %d: %+v", n, dec.Epoch, m.held[n], dec)
	}
	if (dec.Action == ActForward || dec.Action == ActServeLocal) && !dec.AnyCopy && !dec.LocalCopy {
		if !m.may[dec.Target] || dec.Pred != m.held[dec.Target] {
			return true, fmt.Errorf("forward to %d names epoch %d, its latest acquisition is %d (may hold: %v): %+v",
				dec.Target, dec.Pred, m.held[dec.Target], m.may[dec.Target], dec)
		}
	}
	taken := dec.Set
	if mode == ModeExclusive && before.Mode == ModeShared && dec.Target != n && (dec.Action == ActForward || dec.Action == ActServeLocal) {
		taken.Add(dec.Target) // the source serves, then gives its copy up
	}
	taken.Each(func(s NodeID) {
		if err == nil && m.may[s] && dec.Epoch <= m.held[s] {
			err = fmt.Errorf("acceptance of %d at epoch %d takes away the copy of %d of epoch %d: %+v", n, dec.Epoch, s, m.held[s], dec)
		}
	})
	if err != nil {
		return true, err
	}
	if mode == ModeExclusive && before.Mode == ModeExclusive {
		m.may[before.Owner] = false // it hands the whole page on
	}
	m.may[n], m.held[n] = true, dec.Epoch
	return true, nil
}

// evict has n evict the copy of its latest acquisition; served is what it
// tells of the copies it served.
func (m *epochModel) evict(n NodeID, served uint32) error {
	if meta := m.d.Meta(m.pid); meta.Mode == ModeExclusive && meta.Owner == n && meta.Epoch != m.held[n] {
		return fmt.Errorf("owner %d evicts its copy of epoch %d, the page is at %d", n, m.held[n], meta.Epoch)
	}
	got, err := m.d.Evict(n, EvictEntry{PID: m.pid, Epoch: m.held[n], Served: served})
	if err != nil {
		return err
	}
	switch got {
	case EvictPull:
		if err := m.d.PulledPage(n, m.pid); err != nil {
			return err
		}
		if err := m.d.Persisted(m.pid); err != nil {
			return err
		}
		m.may[n] = false
	case EvictAccepted:
		m.may[n] = false
	}
	return nil
}

// The epochs the nodes compare stay apart whatever the order of requests
// and evictions.
func TestEpochComparisonsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newEpochModel()
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			n := NodeID(rapid.IntRange(0, 4).Draw(t, "node"))
			var err error
			if rapid.IntRange(0, 3).Draw(t, "evict") == 0 {
				if m.may[n] {
					err = m.evict(n, uint32(rapid.IntRange(0, 3).Draw(t, "served")))
				}
			} else {
				mode := ModeShared
				if rapid.Bool().Draw(t, "exclusive") {
					mode = ModeExclusive
				}
				_, err = m.request(n, mode, rapid.Bool().Draw(t, "localCopy"))
			}
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
	})
}

// Without the bump of a shared conflict (the conflict-keeps-epoch
// mutation) an upgrade gets the epoch of the copy it upgrades: the node
// could not tell a transfer for its copy from one for its upgrade.
func TestEpochComparisonsNeedSharedConflictBump(t *testing.T) {
	m := newEpochModel()
	m.d.ConflictKeepsEpoch = func() bool { return true }
	if _, err := m.request(2, ModeShared, false); err != nil { // X to S: 1 and 2 share epoch 0
		t.Fatal(err)
	}
	if _, err := m.request(2, ModeExclusive, false); err == nil {
		t.Fatal("an upgrade at the epoch of the copy it upgrades passed the model")
	}
}
