package actors

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/memfile"
)

// A commit of two pages of two directories, cut by a node's death right
// after its first write-through, is whole in the next view (txrecord.go):
//
//   - committer: node 1 commits pages of nodes 0 and 2 and dies; node 0,
//     its buddy, rolls the record forward in the view without it;
//   - directory: node 0 commits pages of nodes 1 and 2, and node 2 dies;
//     it comes back on its store, and node 0 rolls its page forward then.
//
// The nodes install each view at once or one after the other (stagger).
// Without the record (norecord) the second page keeps its old value: the
// check can fail.
func TestTxRecordRollsForward(t *testing.T) {
	for _, victim := range []string{"committer", "directory"} {
		for _, stagger := range []time.Duration{0, 30 * time.Millisecond} {
			for _, record := range []bool{true, false} {
				name := fmt.Sprintf("%s/stagger=%v/record=%v", victim, stagger, record)
				t.Run(name, func(t *testing.T) {
					a, b := txCut(t, victim == "committer", stagger, record)
					switch {
					case record && (a != 7 || b != 7):
						t.Fatalf("after the cut commit: %d and %d, want 7 and 7", a, b)
					case !record && a == b:
						t.Fatalf("without a record: %d and %d, want half the commit (the check would catch nothing)", a, b)
					}
				})
			}
		}
	}
}

// txCut runs the commit and the crash, and reads both pages afterwards.
func txCut(t *testing.T, committerDies bool, stagger time.Duration, record bool) (a, b uint64) {
	net := &memNet{nodes: map[protocol.NodeID]*Local{}}
	stores := []*memfile.Store{memfile.New(64, nil), memfile.New(64, nil), memfile.New(64, nil)}
	var nodes [3]*Local
	for i := range nodes {
		nodes[i] = net.start(t, protocol.NodeID(i), stores[i], 0)
	}
	defer func() {
		for _, l := range nodes {
			l.Stop()
		}
	}()
	all := nodeSet(0, 1, 2)
	for _, l := range nodes {
		if err := l.ChangeView(1, all, protocol.NodeSet{}); err != nil {
			t.Fatal(err)
		}
	}
	waitActive(t, 1, nodes[:]...)
	alloc := func(l *Local) protocol.PID {
		var pid protocol.PID
		if err := l.Do(func(w *bufmgr.Worker) error {
			g, err := l.Allocate(w)
			if err != nil {
				return err
			}
			pid = g.PID()
			g.MarkDirty()
			err = l.Persist(w, &g)
			g.Release()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	committer, victim := nodes[0], protocol.NodeID(2)
	first, second := alloc(nodes[1]), alloc(nodes[2])
	if committerDies {
		committer, victim = nodes[1], 1
		first = alloc(nodes[0])
	}
	cut := make(chan struct{})
	goOn := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- committer.Do(func(w *bufmgr.Worker) error {
			c := committer.Node().Cache()
			ga, gb := c.Exclusive(w, first), c.Exclusive(w, second)
			defer ga.Release()
			defer gb.Release()
			for _, g := range []*bufmgr.ExclusiveGuard{&ga, &gb} {
				binary.LittleEndian.PutUint64(g.Data(), 7)
				g.MarkDirty()
			}
			var id uint32
			var buddy protocol.NodeID
			var ok bool
			if record {
				id, buddy, ok = committer.TxRecord(w, []*bufmgr.ExclusiveGuard{&ga, &gb})
			}
			err := committer.Persist(w, &ga)
			close(cut)
			<-goOn
			if perr := committer.Persist(w, &gb); err == nil {
				err = perr
			}
			committer.TxFinish(w, id, buddy, ok)
			return err
		})
	}()
	<-cut
	net.kill(victim)
	close(goOn)
	var survivors []*Local
	for i, l := range nodes {
		if protocol.NodeID(i) != victim {
			survivors = append(survivors, l)
		}
	}
	rest := all
	rest.Remove(victim)
	for _, l := range survivors {
		if err := l.ChangeView(2, rest, nodeSet(victim)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(stagger)
	}
	waitActive(t, 2, survivors...)
	err := <-done
	t.Logf("the commit returned %v", err)
	if !committerDies {
		// The directory comes back on its store.
		var allocated uint64
		nodes[victim].Locked(func() { allocated = nodes[victim].Node().Directory().Allocated() })
		nodes[victim] = net.start(t, victim, stores[victim], allocated)
		for _, l := range nodes {
			if err := l.ChangeView(3, all, protocol.NodeSet{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(stagger)
		}
		waitActive(t, 3, nodes[:]...)
	}
	reader := survivors[len(survivors)-1]
	if a, err = read(reader, first); err != nil {
		t.Fatal(err)
	}
	if b, err = read(reader, second); err != nil {
		t.Fatal(err)
	}
	return a, b
}
