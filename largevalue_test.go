package scalestore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// largeValue is n bytes that differ from one chunk to the next.
func largeValue(n int, seed int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte((i/7+seed)%26)
	}
	return string(b)
}

// Values of 1 KiB to 64 KiB over RESP on a 3-node cluster with membership
// (resp/big.go stores those over an entry in chunks): set through one
// node, read through the others; overwritten, deleted, grown by APPEND
// past an entry; then the node whose directory holds the pages split last
// dies (Abandon, as kill -9) and comes back on its store, and every value
// reads back whole through it.
func TestLargeValuesOnCluster(t *testing.T) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 3)
	for i := range opts {
		opts[i].RESP = "127.0.0.1:0"
		// A commit that replaces a 64 KiB value latches about 35 leaves
		// for its 133 keys: the cache lets a commit latch half of it.
		opts[i].CachePages = 1024
	}
	cs := joinAll(t, opts)
	defer func() { closeAll(t, cs) }()
	ctx := context.Background()
	client := func(c *Cluster) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: c.RESPAddr(), Protocol: 2})
	}
	rcs := []*redis.Client{client(cs[0]), client(cs[1]), client(cs[2])}
	defer func() {
		for _, rc := range rcs {
			rc.Close()
		}
	}()
	want := map[string]string{}
	check := func(when string) {
		t.Helper()
		for i, rc := range rcs {
			for k, v := range want {
				got, err := rc.Get(ctx, k).Result()
				if v == "" {
					if err != redis.Nil {
						t.Fatalf("%s: node %d: GET %s of a deleted key: %d bytes, %v", when, i, k, len(got), err)
					}
					continue
				}
				if err != nil || got != v {
					t.Fatalf("%s: node %d: GET %s: %d bytes (%v), want %d", when, i, k, len(got), err, len(v))
				}
			}
		}
	}
	for i, n := range []int{1 << 10, 2 << 10, 8 << 10, 32 << 10, 64 << 10} {
		k, v := fmt.Sprintf("blob%d", i), largeValue(n, i)
		if err := rcs[i%3].Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatalf("node %d: SET of %d bytes: %v", i%3, n, err)
		}
		want[k] = v
	}
	check("after SET")
	// Overwrite: large by large through another node, large by small.
	want["blob4"] = largeValue(64<<10, 7)
	if err := rcs[1].Set(ctx, "blob4", want["blob4"], 0).Err(); err != nil {
		t.Fatalf("overwriting 64 KiB with 64 KiB: %v", err)
	}
	want["blob3"] = "small now"
	if err := rcs[2].Set(ctx, "blob3", want["blob3"], 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rcs[0].Del(ctx, "blob2").Result(); err != nil || n != 1 {
		t.Fatalf("DEL of a large value: %d %v", n, err)
	}
	want["blob2"] = ""
	want["grown"] = strings.Repeat("g", 900)
	if err := rcs[0].Set(ctx, "grown", want["grown"], 0).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		part := largeValue(600, i)
		if _, err := rcs[i%3].Append(ctx, "grown", part).Result(); err != nil {
			t.Fatalf("APPEND past an entry: %v", err)
		}
		want["grown"] += part
	}
	check("after overwrites, DEL and APPEND")
	if n, err := rcs[2].DBSize(ctx).Result(); err != nil || n != 5 {
		t.Fatalf("DBSIZE %d %v, want 5 (no chunk counted)", n, err)
	}

	// Node 2 dies and comes back on its store.
	rcs[2].Close()
	cs[2].Abandon()
	back, err := Join(opts[2])
	if err != nil {
		t.Fatalf("node 2 back on its store: %v", err)
	}
	cs[2], rcs[2] = back, client(back)
	check("after node 2 died and came back")
}

// A value of 4 MB (resp's default MaxValue is 4 MiB) on three nodes with
// membership and the default cache (a commit may latch 8192 leaves):
// set through node 2 (its splits put the chunks' leaves on its own
// store), replaced by another through node 1, and read whole through
// every node after node 2 dies (Abandon, as kill -9) and comes back on
// its store.
func TestLargestValueSurvivesACrash(t *testing.T) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 3)
	for i := range opts {
		opts[i].RESP = "127.0.0.1:0"
		opts[i].CachePages = 0
	}
	cs := joinAll(t, opts)
	defer func() { closeAll(t, cs) }()
	ctx := context.Background()
	client := func(c *Cluster) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: c.RESPAddr(), Protocol: 2, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	}
	const n = 4_000_000
	for i, node := range []int{2, 1} {
		rc := client(cs[node])
		v := largeValue(n, i)
		start := time.Now()
		if err := rc.Set(ctx, "huge", v, 0).Err(); err != nil {
			t.Fatalf("node %d: SET of 4 MB: %v", node, err)
		}
		t.Logf("node %d: SET of 4 MB in %v", node, time.Since(start))
		if got, err := rc.Get(ctx, "huge").Result(); err != nil || got != v {
			t.Fatalf("node %d: GET of 4 MB: %d bytes, %v", node, len(got), err)
		}
		rc.Close()
	}
	cs[2].Abandon()
	back, err := Join(opts[2])
	if err != nil {
		t.Fatalf("node 2 back on its store: %v", err)
	}
	cs[2] = back
	for i, c := range cs {
		rc := client(c)
		got, err := rc.Get(ctx, "huge").Result()
		rc.Close()
		if err != nil || got != largeValue(n, 1) {
			t.Fatalf("node %d after node 2 came back: %d bytes, %v", i, len(got), err)
		}
	}
}
