package scenarios

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport/sim"
	tidwall "github.com/tidwall/btree"
	"pgregory.net/rapid"
)

type kv struct{ k, v []byte }

// TestRapidBTreeAgainstOracle runs random puts, gets, deletes and scans with
// variable-length keys and values on a B-tree spread over a small simulated
// cluster with tiny caches, and compares every answer with tidwall/btree.
func TestRapidBTreeAgainstOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes := rapid.IntRange(1, 3).Draw(t, "nodes")
		frames := rapid.IntRange(4, 12).Draw(t, "frames")
		c, err := newCluster(clusterConfig{seed: 1, nodes: nodes, cachePages: frames, ssdPages: 512,
			variant: protocol.Chaining, plan: sim.FaultPlan{Name: "none"}, latency: sim.DefaultLatency})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.nodes {
			n.Start()
		}
		c.checkContent()
		r := &simRun{c: c}
		rc := &rapidCluster{c: c}
		oracle := tidwall.NewBTreeG(func(a, b kv) bool { return bytes.Compare(a.k, b.k) < 0 })
		rc.run(t, 0, func(co *sim.Coroutine, bw *bufmgr.Worker, _ *bufmgr.Cache) {
			tr, err := btree.Create(r.session(c.nodes[0], bw))
			if err != nil {
				t.Fatal(err)
			}
			r.tree = tr
		})
		// Zero bytes and lengths around 8 exercise the key heads' ties.
		keyGen := rapid.SliceOfN(rapid.SampledFrom([]byte{0, 1, 'a', 'b', 'c', 0xff}), 1, 20)
		valGen := rapid.SliceOfN(rapid.Byte(), 0, 300)
		on := func(t *rapid.T, fn func(s btree.Session)) {
			node := rapid.IntRange(0, nodes-1).Draw(t, "node")
			rc.run(t, node, func(co *sim.Coroutine, bw *bufmgr.Worker, _ *bufmgr.Cache) {
				fn(r.session(c.nodes[node], bw))
			})
		}
		t.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				k, v := keyGen.Draw(t, "key"), valGen.Draw(t, "val")
				on(t, func(s btree.Session) {
					if err := r.tree.Put(s, k, v); err != nil {
						t.Fatal(err)
					}
				})
				oracle.Set(kv{k, v})
			},
			"get": func(t *rapid.T) {
				k := keyGen.Draw(t, "key")
				on(t, func(s btree.Session) {
					got, ok, err := r.tree.Get(s, k, nil)
					want, wok := oracle.Get(kv{k: k})
					if err != nil || ok != wok || (ok && !bytes.Equal(got, want.v)) {
						t.Fatalf("get %q: %q %v %v, oracle %q %v", k, got, ok, err, want.v, wok)
					}
				})
			},
			"getBatch": func(t *rapid.T) {
				keys := rapid.SliceOfN(keyGen, 0, 2*btree.MaxBatch+3).Draw(t, "keys")
				on(t, func(s btree.Session) {
					vals := make([][]byte, len(keys))
					found := make([]bool, len(keys))
					if err := r.tree.GetBatch(s, keys, vals, found); err != nil {
						t.Fatalf("batch of %d: %v", len(keys), err)
					}
					for i, k := range keys {
						want, wok := oracle.Get(kv{k: k})
						if found[i] != wok || !bytes.Equal(vals[i], want.v) {
							t.Fatalf("batch get %q: %q %v, oracle %q %v", k, vals[i], found[i], want.v, wok)
						}
					}
				})
			},
			"delete": func(t *rapid.T) {
				k := keyGen.Draw(t, "key")
				on(t, func(s btree.Session) {
					found, err := r.tree.Delete(s, k)
					_, wok := oracle.Delete(kv{k: k})
					if err != nil || found != wok {
						t.Fatalf("delete %q: %v %v, oracle %v", k, found, err, wok)
					}
				})
			},
			"scan": func(t *rapid.T) {
				from, to := keyGen.Draw(t, "from"), keyGen.Draw(t, "to")
				limit := rapid.IntRange(1, 500).Draw(t, "limit")
				var want []string
				oracle.Ascend(kv{k: from}, func(e kv) bool {
					if bytes.Compare(e.k, to) >= 0 || len(want) == limit {
						return false
					}
					want = append(want, fmt.Sprintf("%s=%x", e.k, e.v))
					return true
				})
				on(t, func(s btree.Session) {
					var got []string
					err := r.tree.Scan(s, from, to, func(k, v []byte) bool {
						got = append(got, fmt.Sprintf("%s=%x", k, v))
						return len(got) < limit
					})
					if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("scan [%q,%q) limit %d: %v %v\noracle %v", from, to, limit, got, err, want)
					}
				})
			},
		})
		if v, n := c.inv.Violations(); n > 0 {
			t.Fatalf("violations: %v", v)
		}
	})
}

func TestBTreeSizeLimits(t *testing.T) {
	c, _ := newCluster(clusterConfig{seed: 1, nodes: 1, cachePages: 8, ssdPages: 64, plan: sim.FaultPlan{Name: "none"}, latency: sim.DefaultLatency})
	c.checkContent()
	r := &simRun{c: c}
	rc := &rapidCluster{c: c}
	rapid.Check(t, func(rt *rapid.T) {
		rc.run(rt, 0, func(co *sim.Coroutine, bw *bufmgr.Worker, _ *bufmgr.Cache) {
			s := r.session(c.nodes[0], bw)
			if r.tree == nil {
				tr, err := btree.Create(s)
				if err != nil {
					rt.Fatal(err)
				}
				r.tree = tr
			}
			if err := r.tree.Put(s, nil, []byte("v")); err == nil {
				rt.Fatal("empty key accepted")
			}
			if err := r.tree.Put(s, make([]byte, btree.MaxKey+1), nil); err == nil {
				rt.Fatal("oversized key accepted")
			}
			if err := r.tree.Put(s, []byte("k"), make([]byte, btree.MaxEntry)); err == nil {
				rt.Fatal("oversized entry accepted")
			}
			big := make([]byte, btree.MaxEntry-8)
			for i := range 40 {
				if err := r.tree.Put(s, []byte(fmt.Sprintf("key%05d", i)), big); err != nil {
					rt.Fatalf("1 KiB entry %d: %v", i, err)
				}
			}
			got, ok, err := r.tree.Get(s, []byte("key00007"), nil)
			if err != nil || !ok || len(got) != len(big) {
				rt.Fatalf("reading a 1 KiB entry back: %d %v %v", len(got), ok, err)
			}
		})
	})
}

// The B-tree in the simulator across nodes, histories checked per key
// (issue 3's acceptance configuration, and a harsher one).
func TestBTreeSwarm(t *testing.T) {
	configs := []SimConfig{
		{Nodes: 3, Workers: 3, Keys: 5000, CachePages: 24, Ops: 3000, ReadRatio: 0.5, Faults: "default"},
		{Nodes: 4, Workers: 3, Keys: 3000, CachePages: 8, Ops: 3000, ReadRatio: 0.3, Zipf: 0.9, Faults: "heavy"},
	}
	for i, cfg := range configs {
		cfg.Workload, cfg.WatchPage, cfg.Pages = "btree", -1, 1
		for seed := uint64(1); seed <= uint64(seedsFor(t, 40, 5)); seed++ {
			cfg.Seed = seed
			res, err := RunSim(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed() || res.Ops != cfg.Ops {
				t.Fatalf("config %d seed %d: ops %d, %v linearizable=%v", i, seed, res.Ops, res.Violations, res.Linearizable)
			}
		}
	}
}
