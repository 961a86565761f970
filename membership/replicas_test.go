package membership

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
)

func set(ids ...protocol.NodeID) protocol.NodeSet {
	var s protocol.NodeSet
	for _, id := range ids {
		s.Add(id)
	}
	return s
}

// TestNextCurrent walks the simulator's sequence of views (docs/replication.md)
// through NextCurrent: a death keeps the survivors that were primary or
// backup, a return keeps the record until the returning node catches up,
// and a directory without a live current holder keeps its record.
func TestNextCurrent(t *testing.T) {
	all := set(0, 1, 2)
	// The first view: each directory counts its own node only.
	cur := NextCurrent(nil, all)
	for d := range protocol.NodeID(3) {
		if cur[d] != set(d) {
			t.Fatalf("first view: directory %d current %v, want {%d}", d, cur[d], d)
		}
	}
	// Re-replication done everywhere: primary d, backup d+1.
	for d := range protocol.NodeID(3) {
		cur[d] = set(d, (d+1)%3)
	}
	// Node 0 dies: directory 0 fails over to 1 (its backup), whose new
	// backup 2 is not current yet; directory 2's backup 0 is gone.
	cur = NextCurrent(cur, set(1, 2))
	for d, want := range map[protocol.NodeID]protocol.NodeSet{0: set(1), 1: set(1, 2), 2: set(2)} {
		if cur[d] != want {
			t.Fatalf("node 0 down: directory %d current %v, want %v", d, cur[d], want)
		}
	}
	// Node 0 returns before anything was copied: directory 0's primary is 0
	// again, which does not hold the copies: the record stays until it
	// catches up (UpdateCurrent).
	cur = NextCurrent(cur, all)
	for d, want := range map[protocol.NodeID]protocol.NodeSet{0: set(1), 1: set(1, 2), 2: set(2)} {
		if cur[d] != want {
			t.Fatalf("node 0 back: directory %d current %v, want %v", d, cur[d], want)
		}
	}
	// Nodes 1 and 2 die with directory 1's copies: it is lost, its record
	// kept for whichever holder returns first.
	cur = map[protocol.NodeID]protocol.NodeSet{0: set(0, 1), 1: set(1, 2), 2: set(2, 0)}
	cur = NextCurrent(cur, set(0))
	if cur[1] != set(1, 2) || cur[0] != set(0) || cur[2] != set(0) {
		t.Fatalf("only node 0 left: %v", cur)
	}
}

func TestViewWithReplicasEncodes(t *testing.T) {
	v := View{Number: 3, Members: []protocol.NodeID{0, 2}, Replicas: 2,
		Current: map[protocol.NodeID]protocol.NodeSet{0: set(0, 2), 1: set(2), 2: set(2)}}
	enc, err := encodeView(v)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeView([]byte(enc))
	if err != nil || back.String() != v.String() {
		t.Fatalf("%s decoded as %v, %v", enc, back, err)
	}
	t.Logf("%s: %v", enc, back)
	for _, bad := range []string{`{"number":1,"members":[0],"replicas":3}`, `{"number":1,"members":[0],"current":{"0":[0]}}`,
		`{"number":1,"members":[0],"replicas":2,"current":{"x":[0]}}`, `{"number":1,"members":[0],"replicas":2,"current":{"0":[300]}}`,
		`{"number":1,"members":[0],"replicas":2,"current":{"00":[0]}}`} {
		if _, err := decodeView([]byte(bad)); err == nil {
			t.Errorf("decodeView(%q) accepted", bad)
		}
	}
}

// TestUpdateCurrent: members with replicas agree on the record; a copy
// recorded in the agreed view reaches every member without a new view, and
// one recorded in an older view is refused.
func TestUpdateCurrent(t *testing.T) {
	e := startEtcd(t)
	ms := make([]*Member, 3)
	for i := range ms {
		cfg := testConfig(e, protocol.NodeID(i))
		cfg.Replicas = 2
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		m, err := Join(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		ms[i] = m
	}
	waitAll(t, 2*time.Second, "{0 1 2}", members(0, 1, 2), ms...)
	v := sameView(t, ms...)
	if v.Replicas != 2 || v.Current[0] != set(0) || v.Current[2] != set(2) {
		t.Fatalf("agreed %v", v)
	}
	if err := ms[0].UpdateCurrent(t.Context(), v.Number, func(v View) {
		s := v.Current[0]
		s.Add(1)
		v.Current[0] = s
	}); err != nil {
		t.Fatal(err)
	}
	waitAll(t, 2*time.Second, "directory 0 on {0 1}", func(w View) bool { return w.Number == v.Number && w.Current[0] == set(0, 1) }, ms...)
	err := ms[1].UpdateCurrent(t.Context(), v.Number-1, func(View) {})
	if !errors.Is(err, ErrViewChanged) {
		t.Fatalf("update of view %d: %v, want ErrViewChanged", v.Number-1, err)
	}
	// Node 2 dies: the next view keeps node 1 as directory 0's backup
	// only if it was current, which it now is.
	if err := ms[2].Close(); err != nil {
		t.Fatal(err)
	}
	waitAll(t, 4*time.Second, "{0 1}", members(0, 1), ms[0], ms[1])
	w := sameView(t, ms[0], ms[1])
	if w.Current[0] != set(0, 1) || w.Current[1] != set(1) || w.Current[2] != set(2) {
		t.Fatalf("after node 2's death: %v", w)
	}
	t.Logf("views: %v then %v", v, w)
}

// TestForgetCopies: a node whose stores were made afresh is taken out of
// every directory's current copies before it joins; a directory it was the
// last holder of is left with none (lost), and without a record there is
// nothing to do.
func TestForgetCopies(t *testing.T) {
	e := startEtcd(t)
	cfg := testConfig(e, 2)
	cfg.Replicas = 2
	if n, err := ForgetCopies(t.Context(), cfg); err != nil || n != 0 {
		t.Fatalf("no record yet: forgot %d, %v", n, err)
	}
	// Members with replicas, then a record naming node 2 as a holder (a
	// node that died holding them).
	var m1 *Member
	for _, id := range []protocol.NodeID{0, 1} {
		c := testConfig(e, id)
		c.Replicas = 2
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		m, err := Join(ctx, c)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		m1 = m
	}
	waitAll(t, 2*time.Second, "{0 1}", members(0, 1), m1)
	v := m1.View()
	if err := m1.UpdateCurrent(t.Context(), v.Number, func(w View) {
		w.Current[1] = set(1, 2)
		w.Current[2] = set(2)
	}); err != nil {
		t.Fatal(err)
	}
	n, err := ForgetCopies(t.Context(), cfg)
	if err != nil || n != 2 {
		t.Fatalf("forgot %d, %v; want 2 directories", n, err)
	}
	waitAll(t, 2*time.Second, "node 2 forgotten", func(w View) bool { return w.Current[1] == set(1) && w.Current[2] == set() }, m1)
	t.Logf("after: %v", m1.View())
}
