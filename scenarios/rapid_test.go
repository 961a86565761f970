package scenarios

import (
	"testing"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport/sim"
	"pgregory.net/rapid"
)

// rapidCluster runs one operation at a time on a simulated cluster, so a
// plain map is the model: every read must return the last value written.
type rapidCluster struct {
	c     *cluster
	pids  []protocol.PID
	model map[protocol.PID]uint64
	next  uint64
}

func (rc *rapidCluster) run(t *rapid.T, node int, body func(co *sim.Coroutine, bw *bufmgr.Worker, c *bufmgr.Cache)) {
	done := false
	rc.c.w.Spawn(protocol.NodeID(node), 0, func(co *sim.Coroutine) {
		body(co, &bufmgr.Worker{ID: node, P: co}, rc.c.nodes[node].Cache())
		done = true
	})
	for steps := 0; !done; steps++ {
		if steps > 5_000_000 || !rc.c.w.Step() {
			t.Fatalf("operation on node %d did not complete", node)
		}
	}
	if v, n := rc.c.inv.Violations(); n > 0 {
		t.Fatalf("violations: %v", v)
	}
}

// TestRapidClusterAgainstMap: the cluster behaves like one map of registers,
// whatever the interleaving of nodes, modes and evictions.
func TestRapidClusterAgainstMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := rapid.IntRange(1, 4).Draw(t, "nodes")
		pages := rapid.IntRange(1, 6).Draw(t, "pages")
		frames := rapid.IntRange(2, 5).Draw(t, "frames")
		variant := protocol.Variant(rapid.IntRange(0, 2).Draw(t, "variant"))
		c, err := newCluster(clusterConfig{seed: 1, nodes: nodes, cachePages: frames, ssdPages: uint64(pages + 1),
			variant: variant, plan: sim.FaultPlan{Name: "none"}, latency: sim.DefaultLatency})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.nodes {
			n.Start()
		}
		rc := &rapidCluster{c: c, model: map[protocol.PID]uint64{}}
		for i := range pages {
			rc.run(t, i%nodes, func(co *sim.Coroutine, bw *bufmgr.Worker, _ *bufmgr.Cache) {
				g, ok := c.nodes[i%nodes].Allocate(bw, protocol.NodeID((i+1)%nodes))
				if !ok {
					t.Fatalf("allocation failed")
				}
				rc.pids = append(rc.pids, g.PID())
				g.Release()
			})
		}
		t.Repeat(map[string]func(*rapid.T){
			"write": func(t *rapid.T) {
				node := rapid.IntRange(0, nodes-1).Draw(t, "node")
				pid := rc.pids[rapid.IntRange(0, pages-1).Draw(t, "page")]
				upgrade := rapid.Bool().Draw(t, "upgrade")
				rc.next++
				v := rc.next
				rc.run(t, node, func(co *sim.Coroutine, bw *bufmgr.Worker, cache *bufmgr.Cache) {
					var x bufmgr.ExclusiveGuard
					if upgrade {
						s := cache.Shared(bw, pid)
						var err error
						if x, err = s.Upgrade(bw); err != nil {
							x = cache.Exclusive(bw, pid)
						}
					} else {
						x = cache.Exclusive(bw, pid)
					}
					checker.PutPageValue(x.Data(), v, false)
					checker.PutPageValue(x.Data(), v, true)
					rc.c.inv.Wrote(pid, v)
					x.Release()
				})
				rc.model[pid] = v
			},
			"read": func(t *rapid.T) {
				node := rapid.IntRange(0, nodes-1).Draw(t, "node")
				pid := rc.pids[rapid.IntRange(0, pages-1).Draw(t, "page")]
				optimistic := rapid.Bool().Draw(t, "optimistic")
				var got uint64
				rc.run(t, node, func(co *sim.Coroutine, bw *bufmgr.Worker, cache *bufmgr.Cache) {
					if optimistic {
						for {
							g := cache.Optimistic(bw, pid)
							got = bufmgr.Value(g.Data())
							if !g.HasChanged() {
								return
							}
						}
					}
					g := cache.Shared(bw, pid)
					got = bufmgr.Value(g.Data())
					g.Release()
				})
				if got != rc.model[pid] {
					t.Fatalf("node %d read %d from %v, model says %d", node, got, pid, rc.model[pid])
				}
			},
			"evict": func(t *rapid.T) {
				node := rapid.IntRange(0, nodes-1).Draw(t, "node")
				c.nodes[node].EvictAll()
			},
			"settle": func(t *rapid.T) {
				// Let in-flight messages and evictions land.
				for range 2000 {
					c.w.Step()
				}
			},
		})
		c.stop()
		if !c.drain(5_000_000) {
			t.Fatal("cluster did not come to rest")
		}
		c.checkQuiet(rc.pids)
		c.flush(rc.pids)
		if v, n := c.inv.Violations(); n > 0 {
			t.Fatalf("violations at rest: %v", v)
		}
		for pid, v := range rc.model {
			if c.inv.Last(pid) != v {
				t.Fatalf("page %v: checker saw %d, model %d", pid, c.inv.Last(pid), v)
			}
		}
	})
}
