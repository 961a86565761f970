package membership

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
)

func restart(t *testing.T, e *Embedded, id protocol.NodeID) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	roll, err := Restart(ctx, testConfig(e, id))
	if err != nil {
		t.Fatalf("Restart(%d): %v", id, err)
	}
	return roll
}

// The restart decision: a node of a new cluster rolls nothing; when every
// process of a view died, the first node to restart lists the view's
// members as rolling, each of them rolls (and a node that was not a
// member does not), the proposers copy the list forward, and each member
// takes itself out once rolled; then WaitRolled returns.
func TestRestartAfterEveryMemberDied(t *testing.T) {
	e := startEtcd(t)
	if restart(t, e, 0) {
		t.Fatal("node 0 of a new cluster was told to roll")
	}
	m0, m1 := join(t, e, 0), join(t, e, 1)
	waitAll(t, 2*time.Second, "{0 1}", members(0, 1), m0, m1)
	if v := m0.View(); !v.Rolling.Empty() {
		t.Fatalf("a cluster whose members all run lists %v as rolling", v.Rolling)
	}
	m0.Close()
	m1.Close()
	// Node 2 restarts while the dead members' keys live on: it waits for
	// them to expire rather than take them for running nodes.
	if restart(t, e, 2) {
		t.Fatal("node 2, no member of the view whose processes died, was told to roll")
	}
	o, err := Observe(e.Endpoints(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if v, err := o.View(t.Context()); err != nil || !v.Rolling.Has(0) || !v.Rolling.Has(1) {
		t.Fatalf("after node 2's restart decision the view is %v, %v: want nodes 0 and 1 rolling", v, err)
	}
	if !restart(t, e, 1) || !restart(t, e, 0) {
		t.Fatal("a member of the view whose processes all died was not told to roll")
	}
	a := join(t, e, 1)
	v := a.View()
	var want protocol.NodeSet
	want.Add(0)
	want.Add(1)
	if v.Rolling != want {
		t.Fatalf("the view after the restart lists %v as rolling, want %v (%v)", v.Rolling, want, v)
	}
	if err := a.Rolled(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := join(t, e, 0) // a new view: its proposer copies the list forward
	waitAll(t, 2*time.Second, "{0 1} rolling {0}", func(v View) bool {
		return len(v.Members) == 2 && v.Rolling.Has(0) && !v.Rolling.Has(1)
	}, a, b)
	if err := a.WaitRolled(100 * time.Millisecond); !errors.Is(err, ErrRollingTimeout) || !strings.Contains(err.Error(), "{0}") {
		t.Fatalf("WaitRolled while node 0 rolls: %v (want ErrRollingTimeout naming node 0)", err)
	}
	if err := b.Rolled(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Member{a, b} {
		if err := m.WaitRolled(2 * time.Second); err != nil {
			t.Fatalf("node %d: %v", m.node, err)
		}
	}
}

// A node killed alone (its lease expires) while another runs is not told
// to roll: the view without it, which the other node agreed, rolled its
// buddy's copy. Restart waits for that view.
func TestRestartAfterOneMemberDied(t *testing.T) {
	e := startEtcd(t)
	m0, m1 := join(t, e, 0), join(t, e, 1)
	waitAll(t, 2*time.Second, "{0 1}", members(0, 1), m0, m1)
	if restart(t, e, 2) {
		t.Fatal("node 2, outside a view whose members run, was told to roll")
	}
	m1.Close()
	start := time.Now()
	if restart(t, e, 1) {
		t.Fatal("node 1 was told to roll though node 0 ran on")
	}
	v := m0.View()
	t.Logf("Restart returned after %v; node 0 sees %v", time.Since(start).Round(time.Millisecond), v)
	if v.Has(1) || !v.Rolling.Empty() {
		t.Fatalf("node 0 sees %v: want a view without node 1, nobody rolling", v)
	}
}

// An operator takes a node that will not come back out of the rolling
// nodes (ForgetRolling).
func TestForgetRolling(t *testing.T) {
	e := startEtcd(t)
	m0, m1 := join(t, e, 0), join(t, e, 1)
	waitAll(t, 2*time.Second, "{0 1}", members(0, 1), m0, m1)
	m0.Close()
	m1.Close()
	if !restart(t, e, 0) {
		t.Fatal("node 0 was not told to roll")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	forgot, err := ForgetRolling(ctx, testConfig(e, 0), 1)
	if err != nil || !forgot {
		t.Fatalf("ForgetRolling(1): %v, %v", forgot, err)
	}
	a := join(t, e, 0)
	if err := a.Rolled(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitRolled(time.Second); err != nil {
		t.Fatal(err)
	}
	if forgot, err := ForgetRolling(ctx, testConfig(e, 0), 1); err != nil || forgot {
		t.Fatalf("ForgetRolling(1) again: %v, %v (want false: not listed)", forgot, err)
	}
}

func TestViewRollingRoundTrip(t *testing.T) {
	v := View{Number: 3, Members: []protocol.NodeID{0, 2}}
	v.Rolling.Add(1)
	v.Rolling.Add(200)
	s, err := encodeView(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeView([]byte(s))
	if err != nil || got.Rolling != v.Rolling {
		t.Fatalf("%s decoded to %v, %v", s, got, err)
	}
	if _, err := decodeView([]byte(`{"number":3,"members":[0],"rolling":[256]}`)); err == nil {
		t.Fatal("a rolling node id out of range was accepted")
	}
}

// A cluster stopped cleanly (Retire, member after member) lists nobody as
// rolling at its restart: any of its nodes starts without the others.
func TestRestartAfterACleanStop(t *testing.T) {
	e := startEtcd(t)
	m0, m1 := join(t, e, 0), join(t, e, 1)
	waitAll(t, 2*time.Second, "{0 1}", members(0, 1), m0, m1)
	if err := m0.Retire(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitAll(t, 2*time.Second, "{1}", members(1), m1)
	if err := m1.Retire(t.Context()); err != nil {
		t.Fatal(err)
	}
	o, err := Observe(e.Endpoints(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if v, err := o.View(t.Context()); err != nil || len(v.Members) != 0 {
		t.Fatalf("after a clean stop the view is %v, %v: want one of no member", v, err)
	}
	start := time.Now()
	if restart(t, e, 0) {
		t.Fatal("node 0 was told to roll after a clean stop")
	}
	if v, err := o.View(t.Context()); err != nil || !v.Rolling.Empty() {
		t.Fatalf("after node 0's restart decision the view is %v, %v: want nobody rolling", v, err)
	}
	t.Logf("restart decision after a clean stop: %v", time.Since(start).Round(time.Millisecond))
	a := join(t, e, 0)
	if v := a.View(); !slices.Equal(v.Members, []protocol.NodeID{0}) {
		t.Fatalf("node 0 joined %v", v)
	}
}
