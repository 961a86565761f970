package scalestore

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/membership"
	"github.com/scalestore-go/scalestore/protocol"
)

// With membership, a transaction stays whole when every node is killed
// between two of its write-throughs (docs/transactions.md, "Durability"):
// a transfer between leaves of nodes 0 and 2, committed on node 1, whose
// first leaf is on node 0's store when all three are killed (kill -9: no
// lease revoked, so no view change rolls the buddy's copy). The cluster
// restarts on its stores, node 1 (the committer) last, node 0 last or
// node 2 last:
// nobody serves before the last one is up, and node 1's disk record rolls
// the second leaf forward. With the roll disabled (txRestartNoRoll) the
// accounts read half the transfer, and the test says so.
func TestUpdateWholeWhenEveryNodeIsKilledMidCommit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		order  restartOrder
		noRoll bool
	}{
		{"committer-last", restartOrder{last: 1, wait: time.Second}, false},
		{"directory-last", restartOrder{last: 0, wait: time.Second}, false},
		// Node 1, then node 0, then node 2 once its lease expired: node
		// 0's first view is {0 1}, in which it serves directory 2 from
		// its copy, and node 1's roll of the second leaf reaches node 0
		// before the holdings that let that directory rebuild.
		{"backup-serves", restartOrder{first: []int{1, 0}, gap: time.Second, last: 2, wait: 3 * time.Second}, false},
		{"roll-disabled", restartOrder{last: 1, wait: time.Second}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, log := killEveryNodeMidCommit(t, tc.order, tc.noRoll)
			t.Logf("after the restart: %d and %d", a, b)
			whole := a == bankStart-5 && b == bankStart+5
			switch {
			case !tc.noRoll && !whole:
				t.Fatalf("the transfer is not whole after the restart: the accounts read %d and %d (want %d and %d)",
					a, b, bankStart-5, bankStart+5)
			case !tc.noRoll && !strings.Contains(log, "rolled forward the transactions its death cut"):
				t.Fatalf("node 1 did not say it rolled its record forward; log:\n%s", log)
			case tc.noRoll && (a != bankStart-5 || b != bankStart):
				t.Fatalf("with the roll disabled the accounts read %d and %d, not half the transfer (%d and %d): the test cannot tell",
					a, b, bankStart-5, bankStart)
			}
		})
	}
}

// startCommitCluster starts three nodes with membership, node 1 (the
// committer of the tests here) logging to buf, and funds two accounts on
// leaves of nodes 0 and 2 (fundAcrossLeaves).
func startCommitCluster(t *testing.T) ([]ClusterOptions, []*Cluster, *syncBuffer) {
	t.Helper()
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 3)
	buf := new(syncBuffer)
	opts[1].Logger = slog.New(slog.NewTextHandler(buf, nil))
	cs := joinAll(t, opts)
	fundAcrossLeaves(t, cs[2])
	return opts, cs, buf
}

// killEveryNodeMidCommit runs the crash above and restarts the nodes,
// node last after the others (restartCommitterLast). It returns the
// accounts as read through every node and node 1's log.
// restartOrder: restartCommitterLast's arguments.
type restartOrder struct {
	first []int
	gap   time.Duration
	last  int
	wait  time.Duration
}

func killEveryNodeMidCommit(t *testing.T, order restartOrder, noRoll bool) (a, b int64, log string) {
	t.Helper()
	opts, cs, buf := startCommitCluster(t)
	from, to := []byte(bankKey(0)), []byte(bankKey(bankAccounts-1))
	c := cs[1]
	var dirs []protocol.NodeID
	crashed := false
	c.def.afterWriteThrough = func(pid protocol.PID) {
		dirs = append(dirs, pid.Dir())
		if len(dirs) == 1 && pid.Dir() == 0 {
			// All at once: no survivor's view change rolls the buddy's copy.
			crashed = true
			c.kill()
			cs[0].kill()
			cs[2].kill()
		}
	}
	err := moveFive(c, from, to)
	t.Logf("the transfer on node 1 wrote leaves of nodes %v through; it returned %v", dirs, err)
	if !crashed {
		for _, c := range cs {
			c.kill()
		}
		t.Fatal("the transfer's commit wrote no two leaves of nodes 0 and 2 through: nothing was crashed")
	}
	if noRoll {
		txRestartNoRoll = true
		defer func() { txRestartNoRoll = false }()
	}
	cs = restartCommitterLast(t, opts, order.first, order.gap, order.last, order.wait)
	defer closeAll(t, cs)
	a, b = readAfterRestart(t, opts, cs, from, to)
	return a, b, buf.String()
}

// With membership, a committer killed alone mid-commit leaves its record
// to its buddy, which rolls it forward in the view change without it; a
// newer transfer then moves the accounts on. When the committer restarts,
// its disk record (not marked done) must not roll: the view without it
// was agreed by live nodes (membership.Restart). The accounts read as
// after the newer transfer, through every node, after the whole cluster
// is killed and started again (a roll that landed on a store shows
// there, past the caches). txRestartAlwaysRoll, the
// mutant that rolls anyway, reads the older balances, and the test says
// so.
func TestCommitterRestartedAfterItsBuddyRolledDoesNotRoll(t *testing.T) {
	for _, mutant := range []bool{false, true} {
		name := "decided"
		if mutant {
			name = "always-roll"
		}
		t.Run(name, func(t *testing.T) {
			a, b, log := restartCommitterAfterANewerWrite(t, mutant)
			t.Logf("after the committer's restart and the cluster's: %d and %d", a, b)
			newer := a == bankStart-10 && b == bankStart+10
			switch {
			case !mutant && !newer:
				t.Fatalf("the accounts read %d and %d, not the newer transfer's %d and %d: a roll landed over it",
					a, b, bankStart-10, bankStart+10)
			case !mutant && !strings.Contains(log, "discarded the transaction records its death cut"):
				t.Fatalf("node 1 did not say it discarded its record; log:\n%s", log)
			case mutant && newer:
				t.Fatalf("mutant always-roll not caught: the accounts read %d and %d", a, b)
			}
		})
	}
}

func restartCommitterAfterANewerWrite(t *testing.T, alwaysRoll bool) (a, b int64, log string) {
	t.Helper()
	opts, cs, buf := startCommitCluster(t)
	from, to := []byte(bankKey(0)), []byte(bankKey(bankAccounts-1))
	c := cs[1]
	crashed := false
	c.def.afterWriteThrough = func(pid protocol.PID) {
		if !crashed && pid.Dir() == 0 {
			crashed = true
			c.kill()
		}
	}
	err := moveFive(c, from, to)
	t.Logf("the transfer on node 1 returned %v", err)
	if !crashed {
		closeAll(t, []*Cluster{cs[0], cs[2]})
		t.Fatal("the transfer's commit wrote no leaf of node 0 through: nothing was crashed")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, b, err = readBalances(cs[0], from, to)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reading the accounts after the committer's death: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if a != bankStart-5 || b != bankStart+5 {
		t.Fatalf("after the buddy's roll the accounts read %d and %d, want %d and %d", a, b, bankStart-5, bankStart+5)
	}
	if err := moveFive(cs[0], from, to); err != nil {
		t.Fatalf("the newer transfer: %v", err)
	}
	if alwaysRoll {
		txRestartAlwaysRoll = true
		defer func() { txRestartAlwaysRoll = false }()
	}
	back, err := Join(opts[1])
	if err != nil {
		t.Fatalf("node 1 back on its store: %v", err)
	}
	cs[1] = back
	// Killed, not closed: a clean stop hands the cached pages back, which
	// would write the newer images over a stale roll.
	for _, c := range cs {
		c.kill()
	}
	cs = joinAll(t, opts)
	defer closeAll(t, cs)
	for _, reader := range cs {
		a, b, err = readBalances(reader, from, to)
		if err != nil {
			t.Fatalf("reading the accounts through node %d: %v", reader.ID(), err)
		}
	}
	return a, b, buf.String()
}

// A node listed as rolling that never comes back stalls the others' start
// (they may not serve a page its records may name): after JoinTimeout
// their Join fails with actors.ErrStartGate, naming it. Taking it out of
// the list (membership.ForgetRolling, the operator's way) lets them start.
func TestRollingGateTimesOutWithoutANode(t *testing.T) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 2)
	for i := range opts {
		opts[i].Replicas = 1
	}
	cs := joinAll(t, opts)
	for _, c := range cs {
		c.kill()
	}
	o := opts[0]
	o.JoinTimeout = 8 * time.Second
	start := time.Now()
	c, err := Join(o)
	if err == nil {
		c.Close()
		t.Fatal("node 0 started while node 1, whose records may roll, is down")
	}
	t.Logf("node 0 alone, after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if !errors.Is(err, actors.ErrStartGate) || !errors.Is(err, membership.ErrRollingTimeout) || !strings.Contains(err.Error(), "nodes {1}") {
		t.Fatalf("node 0 alone: %v (want the start gate's error naming node 1)", err)
	}
	cfg := membership.Config{Endpoints: o.Etcd, Cluster: strconv.FormatUint(o.ClusterID, 10)}
	if o.ClusterID == 0 {
		cfg.Cluster = "1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	forgot, err := membership.ForgetRolling(ctx, cfg, 1)
	cancel()
	if err != nil || !forgot {
		t.Fatalf("ForgetRolling(1): %v, %v (want true)", forgot, err)
	}
	c, err = Join(o)
	if err != nil {
		t.Fatalf("node 0 after node 1 was taken out of the rolling nodes: %v", err)
	}
	c.Close()
}
