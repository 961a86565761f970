package scalestore

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/actors"
)

// TestReplicaJoinServesEveryKey: with replicas 2 (the default with
// membership), a node killed as its process would be (its lease left to
// expire, nothing handed back)
// takes no key out of reach: once the view drops it, every key reads as it
// was last written through every survivor, and writes go on; the node comes
// back on its store, catches up, and every node reads every write. With
// durability sync the backups' stores are flushed with the node's own.
func TestReplicaJoinServesEveryKey(t *testing.T) {
	for _, c := range []struct {
		dead       int
		durability string
		reformat   bool
	}{{2, DurabilityProcess, false}, {0, DurabilityProcess, false}, {0, DurabilitySync, false}, {2, DurabilityProcess, true}, {0, DurabilityProcess, true}} {
		dead := c.dead
		name := fmt.Sprintf("node%d-%s", dead, c.durability)
		if c.reformat {
			name += "-reformat"
		}
		t.Run(name, func(t *testing.T) {
			etcd := startEtcd(t)
			opts := membershipOpts(t, etcd, 3)
			for i := range opts {
				opts[i].Durability = c.durability
			}
			cs := joinAll(t, opts)
			want := map[string]string{}
			for i := range 1500 {
				k, v := fmt.Sprintf("key-%04d", i), fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", 600))
				if err := cs[i%3].Put([]byte(k), []byte(v)); err != nil {
					t.Fatal(err)
				}
				want[k] = v
			}
			time.Sleep(time.Second) // re-replication of the first views
			cs[dead].kill()
			killed := time.Now()
			alive := cs[(dead+1)%3]
			var served time.Duration
			for {
				failed := 0
				var first error
				for k, v := range want {
					got, found, err := alive.Get([]byte(k), nil)
					if err != nil {
						failed++
						if first == nil {
							first = err
						}
						continue
					}
					if !found || string(got) != v {
						t.Fatalf("%s with node %d down: %q (found %v), want %q", k, dead, got, found, v)
					}
				}
				if failed == 0 {
					served = time.Since(killed)
					break
				}
				if time.Since(killed) > 4*opts[0].LeaseTTL+5*time.Second {
					t.Fatalf("%v after node %d's death, %d keys still fail: %v", time.Since(killed), dead, failed, first)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("node %d killed: every key served again after %v (lease %v)", dead, served.Round(time.Millisecond), opts[0].LeaseTTL)
			for i := range 300 {
				k, v := fmt.Sprintf("key-%04d", i), fmt.Sprintf("new-%d", i)
				if err := alive.Put([]byte(k), []byte(v)); err != nil {
					t.Fatalf("writing %s with node %d down: %v", k, dead, err)
				}
				want[k] = v
			}
			// With reformat the node comes back on an empty store: it
			// no longer counts as holding anything, and takes its own
			// directory's pages from the node that served them.
			opts[dead].Reformat = c.reformat
			back, err := Join(opts[dead])
			if err != nil {
				t.Fatalf("node %d back on its store: %v", dead, err)
			}
			cs[dead] = back
			readsEventually(t, cs, want, fmt.Sprintf("after node %d came back", dead))
			closeAll(t, cs)
		})
	}
}

// TestReplicaOptionsRefused: replicas 2 without membership, and a count
// other than 1 or 2, are refused by Join with an error that says why.
func TestReplicaOptionsRefused(t *testing.T) {
	o := clusterOpts(freePorts(t, 1), []string{t.TempDir()})[0]
	for _, c := range []struct {
		replicas int
		etcd     bool
		want     string
	}{{2, false, "replicas 2 needs membership"}, {3, true, "3 replicas: want 1 or 2"}, {-1, false, "-1 replicas"}} {
		o := o
		o.Replicas = c.replicas
		if c.etcd {
			o.Etcd = []string{"http://127.0.0.1:1"}
		}
		got, err := Join(o)
		if err == nil {
			got.Close()
			t.Fatalf("replicas %d (etcd %v): joined", c.replicas, c.etcd)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("replicas %d (etcd %v): %v, want an error saying %q", c.replicas, c.etcd, err, c.want)
		}
	}
	if r, _, err := o.resolve(); err != nil || r.Replicas != 1 {
		t.Fatalf("without etcd: %d replicas (%v), want 1", r.Replicas, err)
	}
	o.Etcd = []string{"http://127.0.0.1:1"}
	if r, _, err := o.resolve(); err != nil || r.Replicas != 2 {
		t.Fatalf("with etcd: %d replicas (%v), want 2", r.Replicas, err)
	}
}

// TestReplicaStoreRefused: a node's store of another directory that the
// view counts as current but is missing, one that is corrupt, and one
// that is another directory's are refused with an error naming the file
// and the directory.
func TestReplicaStoreRefused(t *testing.T) {
	o := clusterOpts(freePorts(t, 1), []string{t.TempDir()})[0]
	o.Replicas, o.Etcd, o.Durability = 2, []string{"http://127.0.0.1:1"}, DurabilityProcess
	rs := &replicaStores{o: o}
	path := func(d int) string { return o.Data + "/" + ReplicaStoreFile(o.ID, d) }
	if _, _, err := rs.open(1, true); err == nil || !strings.Contains(err.Error(), path(1)) || !strings.Contains(err.Error(), "directory 1") || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing store the view counts as current: %v", err)
	}
	st, n, err := rs.open(1, false)
	if err != nil || n != 0 {
		t.Fatalf("creating directory 1's store: %v (%d slots written)", err, n)
	}
	page := make([]byte, 4096)
	copy(page, "a copy of page 1:5")
	if err := st.WritePage(5, page); err != nil {
		t.Fatal(err)
	}
	if err := rs.close(true); err != nil {
		t.Fatal(err)
	}
	if _, n, err := rs.open(1, true); err != nil || n != 6 {
		t.Fatalf("reopening directory 1's store: %v (%d slots written, want 6)", err, n)
	}
	rs.close(true)
	// Directory 1's file where directory 2's should be: refused.
	if err := os.Rename(path(1), path(2)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rs.open(2, true); err == nil || !strings.Contains(err.Error(), path(2)) || !strings.Contains(err.Error(), "directory 2") {
		t.Fatalf("directory 1's store in directory 2's place: %v", err)
	}
	// Garbage: refused.
	if err := os.WriteFile(path(3), []byte(strings.Repeat("garbage!", 1024)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rs.open(3, true); err == nil || !strings.Contains(err.Error(), path(3)) || !strings.Contains(err.Error(), "directory 3") {
		t.Fatalf("a corrupt store: %v", err)
	}
}

// TestReplicaCountMismatchRefused: a node started with another replica
// count than the cluster's is refused with an error that says so, and the
// cluster goes on with its own.
func TestReplicaCountMismatchRefused(t *testing.T) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 3)
	cs := joinAll(t, opts[:2])
	defer func() { closeAll(t, cs) }()
	odd := opts[2]
	odd.Replicas, odd.JoinTimeout = 1, 10*time.Second
	c, err := Join(odd)
	if err == nil {
		c.Close()
		t.Fatal("a node with replicas 1 joined a cluster of replicas 2")
	}
	if !strings.Contains(err.Error(), "--replicas") {
		t.Fatalf("%v: want an error naming --replicas", err)
	}
	t.Logf("refused: %v", err)
	if err := cs[0].Put([]byte("after"), []byte("the refusal")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := cs[1].Get([]byte("after"), nil); err != nil || !ok || string(v) != "the refusal" {
		t.Fatalf("after the refusal: %q %v %v", v, ok, err)
	}
}

// TestReplicaTwoNodesDie: nodes 1 and 2 of three die at once with replicas
// 2. The directory whose two copies were on them is lost: its pages fail
// at once with an error naming both nodes; every other key is served by
// node 0 (its own directory, and node 2's, whose backup it was). Once both
// are back, every key is served with its last write.
func TestReplicaTwoNodesDie(t *testing.T) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 3)
	cs := joinAll(t, opts)
	defer func() { closeAll(t, cs) }()
	want := map[string]string{}
	for i := range 1500 {
		k, v := fmt.Sprintf("key-%04d", i), fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", 100))
		if err := cs[i%3].Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	time.Sleep(time.Second) // re-replication of the first views
	cs[1].kill()
	cs[2].kill()
	killed := time.Now()
	var ok, lost int
	// node2Current: node 2 holds directory 1's current pages (it was
	// promoted, or was its backup, when node 1 died), unless node 2 died
	// first and node 0 was still being copied when node 1 did.
	node2Current := true
	for {
		ok, lost = 0, 0
		var other error
		for k, v := range want {
			got, found, err := cs[0].Get([]byte(k), nil)
			switch {
			case errors.Is(err, actors.ErrDirectoryDown):
				// The leases expire one after the other: the view
				// without the first dead node promoted the other as
				// directory 1's primary (node 1 died first) or kept
				// node 1 as its primary with node 0 its new backup
				// (node 2 died first), then the next view lost it.
				if msg := err.Error(); !strings.Contains(msg, "directory 1 lost both copies") ||
					!(strings.Contains(msg, "nodes 1 and 2, its primary and backup, are down") || strings.Contains(msg, "nodes 2 and 1, its primary and backup, are down") ||
						strings.Contains(msg, "node 2, its primary, is down and node 0, its backup, was still being copied") ||
						strings.Contains(msg, "node 1, its primary, is down and node 0, its backup, was still being copied")) {
					t.Fatalf("%s: %v: want the error to name directory 1 and the nodes that held it", k, err)
				}
				if lost == 0 {
					t.Logf("%s: %v", k, err)
				}
				if strings.Contains(err.Error(), "its current pages are on nodes {1}") {
					node2Current = false
				}
				lost++
			case err != nil:
				other = err
			case !found || string(got) != v:
				t.Fatalf("%s with nodes 1 and 2 down: %q (found %v), want %q", k, got, found, v)
			default:
				ok++
			}
		}
		if other == nil && ok > 0 && lost > 0 {
			break
		}
		if time.Since(killed) > 4*opts[0].LeaseTTL+10*time.Second {
			t.Fatalf("%v after the deaths: %d keys read, %d lost, another error: %v", time.Since(killed), ok, lost, other)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("nodes 1 and 2 down: %d keys served by node 0, %d on directory 1 fail naming the nodes that held it (after %v)", ok, lost, time.Since(killed).Round(time.Millisecond))
	// Node 2 holds directory 1's current pages: without its store of
	// them it is refused, naming the file; with it back, it rejoins.
	dir1 := opts[2].Data + "/" + ReplicaStoreFile(2, 1)
	if node2Current {
		if err := os.Rename(dir1, dir1+".away"); err != nil {
			t.Fatal(err)
		}
		if c, err := Join(opts[2]); err == nil {
			c.Close()
			t.Fatalf("node 2 joined without %s", dir1)
		} else if !strings.Contains(err.Error(), dir1) || !strings.Contains(err.Error(), "directory 1") || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("node 2 without %s: %v, want an error naming the file and directory 1", dir1, err)
		} else {
			t.Logf("refused: %v", err)
		}
		if err := os.Rename(dir1+".away", dir1); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("node 2's lease expired first: only node 1 holds directory 1's current pages, so node 2 needs no %s", dir1)
	}
	for _, i := range []int{1, 2} {
		back, err := Join(opts[i])
		if err != nil {
			t.Fatalf("node %d back: %v", i, err)
		}
		cs[i] = back
	}
	readsEventually(t, cs, want, "once nodes 1 and 2 are back")
}

// TestReplicaWholeClusterRestarts: a cluster with replicas stopped
// cleanly (every node at once, each leaving the view in turn) and started
// again, in another order, reads every key it had.
func TestReplicaWholeClusterRestarts(t *testing.T) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 3)
	cs := joinAll(t, opts)
	want := map[string]string{}
	for i := range 1200 {
		k, v := fmt.Sprintf("key-%04d", i), fmt.Sprintf("value-%d-%s", i, strings.Repeat("y", 80))
		if err := cs[i%3].Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	closeAll(t, cs)
	cs = joinAll(t, []ClusterOptions{opts[0], opts[1], opts[2]})
	defer func() { closeAll(t, cs) }()
	readsEventually(t, cs, want, "after the restart")
}

// readsEventually reads every key of want through every node, each within
// 20 s of the call (errors are retried until then: a view change may be
// under way), and fails naming when (what) a key reads otherwise.
func readsEventually(t *testing.T, cs []*Cluster, want map[string]string, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, c := range cs {
		for k, v := range want {
			for {
				got, found, err := c.Get([]byte(k), nil)
				if err != nil && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if err != nil || !found || string(got) != v {
					t.Fatalf("%s through node %d %s: %q found=%v err=%v, want %q", k, c.Node().ID, what, got, found, err, v)
				}
				break
			}
		}
	}
}
