package scalestore

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestReplicaJoinServesEveryKey: with replicas 2 (the default with
// membership), a node killed as its process would be (its lease left to
// expire, nothing handed back)
// takes no key out of reach: once the view drops it, every key reads as it
// was last written through every survivor, and writes go on; the node comes
// back on its store, catches up, and every node reads every write.
func TestReplicaJoinServesEveryKey(t *testing.T) {
	for _, dead := range []int{2, 0} {
		t.Run(fmt.Sprintf("node%d", dead), func(t *testing.T) {
			etcd := startEtcd(t)
			opts := membershipOpts(t, etcd, 3)
			cs := joinAll(t, opts)
			want := map[string]string{}
			for i := range 1500 {
				k, v := fmt.Sprintf("key-%04d", i), fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", 100))
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
			back, err := Join(opts[dead])
			if err != nil {
				t.Fatalf("node %d back on its store: %v", dead, err)
			}
			cs[dead] = back
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
							t.Fatalf("%s through node %d after node %d came back: %q found=%v err=%v, want %q", k, c.Node().ID, dead, got, found, err, v)
						}
						break
					}
				}
			}
			closeAll(t, cs)
		})
	}
}
