package scalestore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// respCluster starts 3 nodes that serve RESP and a go-redis client for
// each.
func respCluster(t *testing.T) ([]*Cluster, []*redis.Client) {
	t.Helper()
	opts := clusterOpts(freePorts(t, 3), nil)
	for i := range opts {
		opts[i].RESP = "127.0.0.1:0"
	}
	cs := joinAll(t, opts)
	t.Cleanup(func() { closeAll(t, cs) })
	var rcs []*redis.Client
	for _, c := range cs {
		rc := redis.NewClient(&redis.Options{Addr: c.RESPAddr(), Protocol: 2, PoolSize: 8, ReadTimeout: 20 * time.Second})
		t.Cleanup(func() { rc.Close() })
		rcs = append(rcs, rc)
	}
	return cs, rcs
}

// Redis commands through the nodes of a cluster: INCR from every node
// loses nothing; an MSET is seen whole by MGET from other nodes; WATCH
// and MULTI/EXEC transfers through random nodes keep the total; expiry
// set on one node is seen and enforced on another; FLUSHALL on one node
// empties the keyspace for all.
func TestRESPOnCluster(t *testing.T) {
	_, rcs := respCluster(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, rc := range rcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if err := rc.Incr(ctx, "counter").Err(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n, err := rcs[1].Get(ctx, "counter").Int(); err != nil || n != 300 {
		t.Fatalf("counter = %d %v, want 300", n, err)
	}

	// MSET of 8 keys to one value at a time; MGET from the other nodes
	// never sees two values.
	keys := make([]string, 8)
	for i := range keys {
		keys[i] = fmt.Sprintf("m%d-%s", i, string(make([]byte, 200))) // long keys: several leaves
	}
	var stop atomic.Bool
	var readers sync.WaitGroup
	for _, rc := range rcs[1:] {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !stop.Load() {
				vs, err := rc.MGet(ctx, keys...).Result()
				if err != nil {
					t.Error(err)
					return
				}
				for _, v := range vs[1:] {
					if v != vs[0] {
						t.Errorf("MGET saw a torn MSET: %v", vs)
						return
					}
				}
			}
		}()
	}
	for round := range 100 {
		args := make([]any, 0, 2*len(keys))
		for _, k := range keys {
			args = append(args, k, round)
		}
		if err := rcs[0].MSet(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	readers.Wait()

	// WATCH on node 0; the key written on node 1 and put back on node 2:
	// EXEC on node 0 aborts. Unwritten, it runs.
	for _, writes := range []int{2, 0} {
		if err := rcs[0].Set(ctx, "w", "same", 0).Err(); err != nil {
			t.Fatal(err)
		}
		err := rcs[0].Watch(ctx, func(tx *redis.Tx) error {
			for i := range writes {
				if err := rcs[1+i].Set(ctx, "w", []string{"other", "same"}[i], 0).Err(); err != nil {
					return err
				}
			}
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, "w", "by-exec", 0)
				return nil
			})
			return err
		}, "w")
		if want := map[int]error{2: redis.TxFailedErr, 0: nil}[writes]; err != want {
			t.Fatalf("EXEC after %d writes of the watched key on other nodes: %v, want %v", writes, err, want)
		}
	}

	// Transfers with WATCH and MULTI/EXEC through every node.
	const accounts = 5
	for i := range accounts {
		rcs[0].Set(ctx, "acct"+strconv.Itoa(i), 100, 0)
	}
	for w, rc := range rcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; {
				from, to := "acct"+strconv.Itoa((w+i)%accounts), "acct"+strconv.Itoa((w+2*i+1)%accounts)
				if from == to {
					i++
					continue
				}
				err := rc.Watch(ctx, func(tx *redis.Tx) error {
					a, err := tx.Get(ctx, from).Int()
					if err != nil {
						return err
					}
					b, err := tx.Get(ctx, to).Int()
					if err != nil {
						return err
					}
					_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.Set(ctx, from, a-3, 0)
						p.Set(ctx, to, b+3, 0)
						return nil
					})
					return err
				}, from, to)
				if err == redis.TxFailedErr {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				i++
			}
		}()
	}
	wg.Wait()
	total := 0
	for i := range accounts {
		n, _ := rcs[2].Get(ctx, "acct"+strconv.Itoa(i)).Int()
		total += n
	}
	if total != accounts*100 {
		t.Fatalf("total %d after the transfers, want %d", total, accounts*100)
	}

	// Expiry set through node 0, seen through node 2.
	if err := rcs[0].Set(ctx, "temp", "v", 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if ttl, err := rcs[2].PTTL(ctx, "temp").Result(); err != nil || ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("PTTL through node 2 = %v %v", ttl, err)
	}
	time.Sleep(400 * time.Millisecond)
	if err := rcs[1].Get(ctx, "temp").Err(); err != redis.Nil {
		t.Fatalf("an expired key read through node 1: %v", err)
	}

	// FLUSHALL through node 1 empties what node 0 and 2 see.
	if err := rcs[1].FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for i, rc := range rcs {
		if n, err := rc.DBSize(ctx).Result(); err != nil || n != 0 {
			t.Fatalf("DBSIZE through node %d after FLUSHALL = %d %v", i, n, err)
		}
	}
}
