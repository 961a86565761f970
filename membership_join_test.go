package scalestore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/membership"
)

// startEtcd starts an etcd for the test (closed at its end); -short skips
// the test.
func startEtcd(t *testing.T) *membership.Embedded {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	etcd, err := membership.StartEmbedded(t.TempDir(), membership.Ephemeral())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	return etcd
}

// membershipOpts are clusterOpts on disk with membership on etcd.
func membershipOpts(t *testing.T, etcd *membership.Embedded, n int) []ClusterOptions {
	addrs := freePorts(t, n)
	var dirs []string
	for range n {
		dirs = append(dirs, t.TempDir())
	}
	opts := clusterOpts(addrs, dirs)
	for i := range opts {
		opts[i].Etcd = etcd.Endpoints()
		opts[i].LeaseTTL = 2 * time.Second // a loaded 2-core CI machine must not starve a live node past it
	}
	return opts
}

// TestJoinGoesOnWithoutANode: with membership, a node that stops without
// handing anything back (Abandon, as a failed node does) is out of the
// view, and the others go on: every key reads as it was last written or
// fails with ErrDirectoryDown naming the node; writes go on. The node comes
// back on its store, and every node reads every acknowledged write.
func TestJoinGoesOnWithoutANode(t *testing.T) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 3)
	for i := range opts {
		opts[i].Replicas = 1 // each page on its own node: a dead node's pages fail
	}
	cs := joinAll(t, opts)
	want := map[string]string{}
	// Through node 2 first: its splits put pages of the tree on node 2.
	for i := range 1500 {
		k, v := fmt.Sprintf("key2-%04d", i), fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", 100))
		if err := cs[2].Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	for i := range 600 {
		k, v := fmt.Sprintf("key-%04d", i), fmt.Sprintf("value-%d", i)
		if err := cs[1+i%2].Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	cs[2].Abandon()
	start := time.Now()
	var ok, down int
	for time.Since(start) < 10*time.Second {
		ok, down = 0, 0
		for k, v := range want {
			got, found, err := cs[0].Get([]byte(k), nil)
			switch {
			case errors.Is(err, actors.ErrDirectoryDown):
				if !strings.Contains(err.Error(), "node 2") {
					t.Fatalf("%s: %v does not name node 2", k, err)
				}
				down++
			case err != nil:
				t.Fatalf("%s through node 0 with node 2 down: %v", k, err)
			case !found || string(got) != v:
				t.Fatalf("%s through node 0 with node 2 down: %q (found %v), want %q", k, got, found, v)
			default:
				ok++
			}
		}
		if ok > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("with node 2 down: %d keys read, %d on its pages failed", ok, down)
	if ok == 0 || down == 0 {
		t.Fatalf("with node 2 down: %d keys read, %d failed: want some of each", ok, down)
	}
	// Writes go on (those that need node 2's pages fail).
	wrote := 0
	for i := range 100 {
		k, v := fmt.Sprintf("key-%04d", i), fmt.Sprintf("new-%d", i)
		err := cs[1].Put([]byte(k), []byte(v))
		switch {
		case errors.Is(err, actors.ErrDirectoryDown):
		case err != nil:
			t.Fatalf("writing %s with node 2 down: %v", k, err)
		default:
			want[k] = v
			wrote++
		}
	}
	t.Logf("with node 2 down: %d of 100 writes went through", wrote)
	back, err := Join(opts[2])
	if err != nil {
		t.Fatalf("node 2 back on its store: %v", err)
	}
	cs[2] = back
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range cs {
		for k, v := range want {
			for {
				got, found, err := c.Get([]byte(k), nil)
				if errors.Is(err, actors.ErrDirectoryDown) && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond) // node 2 is joining the view
					continue
				}
				if err != nil || !found || string(got) != v {
					t.Fatalf("%s through node %d after node 2 came back: %q found=%v err=%v, want %q", k, c.Node().ID, got, found, err, v)
				}
				break
			}
		}
	}
	closeAll(t, cs)
}

// TestJoinMembershipRefusals: a second process with a live node's id, an
// etcd nobody answers at, and membership without write-through: each is a
// clear error at Join.
func TestJoinMembershipRefusals(t *testing.T) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 2)
	cs := joinAll(t, opts)
	defer closeAll(t, cs)

	twin := opts[1]
	twin.Data, twin.Listen = t.TempDir(), freePorts(t, 1)[0]
	start := time.Now()
	if _, err := Join(twin); !errors.Is(err, membership.ErrNodeIDTaken) || !strings.Contains(err.Error(), opts[1].Peers[1]) {
		t.Fatalf("a second node 1: %v, want ErrNodeIDTaken naming %s", err, opts[1].Peers[1])
	} else {
		t.Logf("a second node 1, after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}

	lonely := membershipOpts(t, etcd, 1)[0]
	lonely.Etcd, lonely.JoinTimeout = []string{"http://" + freePorts(t, 1)[0]}, time.Second
	if _, err := Join(lonely); !errors.Is(err, membership.ErrUnreachable) {
		t.Fatalf("an etcd nobody answers at: %v, want ErrUnreachable", err)
	} else {
		t.Logf("an etcd nobody answers at: %v", err)
	}
	// It served nothing: its store is not left unclean, and the next start
	// with etcd up succeeds.
	lonely.Etcd, lonely.JoinTimeout, lonely.ClusterID = etcd.Endpoints(), 20*time.Second, 99 // a cluster of its own
	if c, err := Join(lonely); err != nil {
		t.Fatalf("starting again once etcd answers: %v", err)
	} else if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	none := membershipOpts(t, etcd, 1)[0]
	none.Durability = DurabilityNone
	if _, err := Join(none); err == nil || !strings.Contains(err.Error(), "durability") {
		t.Fatalf("membership with durability none: %v, want an error about durability", err)
	}
}
