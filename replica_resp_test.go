package scalestore

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalestore-go/scalestore/checker"
)

// TestReplicaRESPNode0Dies: three nodes with replicas 2 (the default with
// membership) under Redis clients on every node; node 0, the bootstrap
// node that created the catalog and the tree's first pages, dies as a
// killed process does (its lease left to expire). Every key is served
// again through the survivors within two leases; node 0 restarts on its
// store, catches up, and the history of every key (the SETs that failed
// counted as of unknown outcome) is linearizable, with a final read of
// every key through every node.
func TestReplicaRESPNode0Dies(t *testing.T) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 3)
	for i := range opts {
		opts[i].RESP = "127.0.0.1:0"
	}
	lease := opts[0].LeaseTTL
	cs := joinAll(t, opts)
	defer func() { closeAll(t, cs) }()
	// Filler written through every node, so that the tree's pages spread
	// over the three directories (node 0 created its root and catalog).
	filler := strings.Repeat("f", 200)
	for i := range 900 {
		if err := cs[i%3].Put([]byte(fmt.Sprintf("fill-%04d", i)), []byte(filler)); err != nil {
			t.Fatal(err)
		}
	}
	const keys, perNode = 30, 3
	var addrMu sync.Mutex
	addrs := make([]string, 3)
	for i, c := range cs {
		addrs[i] = c.RESPAddr()
	}
	addr := func(node int) string {
		addrMu.Lock()
		defer addrMu.Unlock()
		return addrs[node]
	}
	var (
		mu            sync.Mutex
		ops, unknown  []checker.Op
		stop          atomic.Bool
		killedAt      atomic.Int64 // unix ns; 0: not yet
		servedAt      atomic.Int64
		outageFailed  [3]atomic.Int64 // operations that failed between the kill and every key served
		outageDone    [3]atomic.Int64 // operations that completed meanwhile
		firstErr      [3]atomic.Pointer[error]
		wg            sync.WaitGroup
		ctx           = context.Background()
		clientsOfNode = func(cl int) int { return cl % 3 }
		inOutage      = func(at int64) bool {
			k := killedAt.Load()
			s := servedAt.Load()
			return k != 0 && at >= k && (s == 0 || at <= s)
		}
		newClient = func(node int) (*redis.Client, string) {
			a := addr(node)
			return redis.NewClient(&redis.Options{Addr: a, Protocol: 2, MaxRetries: -1, ReadTimeout: 30 * time.Second,
				DialTimeout: time.Second, PoolSize: 1}), a
		}
	)
	for cl := range 3 * perNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := clientsOfNode(cl)
			rng := rand.New(rand.NewSource(int64(cl)))
			r, at := newClient(node)
			defer func() { r.Close() }()
			var seq uint64
			for !stop.Load() {
				if a := addr(node); a != at {
					r.Close()
					r, at = newClient(node) // node 0 restarted on another port
				}
				k := rng.Intn(keys)
				key := fmt.Sprintf("reg:%d", k)
				op := checker.Op{Client: cl, Page: uint64(k), Call: time.Now().UnixNano()}
				var err error
				if rng.Intn(2) == 0 {
					seq++
					op.Kind, op.Value = checker.KindWrite, uint64(cl+1)<<40|seq
					err = r.Set(ctx, key, strconv.FormatUint(op.Value, 10), 0).Err()
				} else {
					op.Kind = checker.KindRead
					var v string
					v, err = r.Get(ctx, key).Result()
					switch {
					case errors.Is(err, redis.Nil):
						err = nil
					case err == nil:
						if op.Value, err = strconv.ParseUint(v, 10, 64); err != nil {
							t.Errorf("client %d: GET %s returned %q, which no client wrote", cl, key, v)
							return
						}
					}
				}
				op.Return = time.Now().UnixNano()
				outage := inOutage(op.Call) || inOutage(op.Return)
				mu.Lock()
				switch {
				case err == nil:
					ops = append(ops, op)
				case op.Kind == checker.KindWrite:
					unknown = append(unknown, op) // it may have taken effect
				}
				mu.Unlock()
				if outage {
					if err != nil {
						outageFailed[node].Add(1)
						firstErr[node].CompareAndSwap(nil, &err)
					} else {
						outageDone[node].Add(1)
					}
				}
				if err != nil {
					time.Sleep(20 * time.Millisecond) // a dead node: do not spin
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	cs[0].kill()
	killed := time.Now()
	killedAt.Store(killed.UnixNano())
	// Every key through each survivor, until a pass without an error.
	probe := [2]*redis.Client{}
	for i := range probe {
		probe[i] = redis.NewClient(&redis.Options{Addr: addr(i + 1), Protocol: 2, MaxRetries: -1, ReadTimeout: 30 * time.Second, PoolSize: 2 * keys})
		defer probe[i].Close()
	}
	// A probe per survivor writes and reads every register (its writes
	// join the history) and reads filler spread over the tree, until a
	// pass without an error: every key read and written again.
	var served time.Duration
	var probeSeq uint64 // (atomic)
	for {
		var failed atomic.Int64
		var firstMu sync.Mutex
		var first error
		note := func(err error) {
			failed.Add(1)
			firstMu.Lock()
			if first == nil {
				first = err
			}
			firstMu.Unlock()
		}
		// Every key at once through each survivor: the pass takes about
		// one write-through, so its end is when every key was served.
		var pass sync.WaitGroup
		for i, p := range probe {
			for k := range keys {
				pass.Add(1)
				go func() {
					defer pass.Done()
					v := uint64(200+i)<<40 | uint64(k)<<20 | atomic.AddUint64(&probeSeq, 1)
					op := checker.Op{Client: 200 + i*keys + k, Page: uint64(k), Kind: checker.KindWrite, Value: v, Call: time.Now().UnixNano()}
					err := p.Set(ctx, fmt.Sprintf("reg:%d", k), strconv.FormatUint(op.Value, 10), 0).Err()
					op.Return = time.Now().UnixNano()
					mu.Lock()
					if err == nil {
						ops = append(ops, op)
					} else {
						unknown = append(unknown, op)
					}
					mu.Unlock()
					if err != nil {
						note(err)
					}
				}()
			}
			for j := 0; j < 900; j += 37 {
				pass.Add(1)
				go func() {
					defer pass.Done()
					if err := p.Get(ctx, fmt.Sprintf("fill-%04d", j)).Err(); err != nil {
						note(err)
					}
				}()
			}
		}
		pass.Wait()
		if failed := int(failed.Load()); failed > 0 && time.Since(killed) > 4*lease+10*time.Second {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("%v after node 0's death, %d operations through the survivors still fail: %v", time.Since(killed).Round(time.Millisecond), failed, first)
		}
		if failed.Load() == 0 {
			served = time.Since(killed)
			servedAt.Store(time.Now().UnixNano())
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("node 0 killed: every key served through nodes 1 and 2 after %v (lease %v)", served.Round(time.Millisecond), lease)
	time.Sleep(time.Second) // load on the survivors alone
	back, err := Join(opts[0])
	if err != nil {
		stop.Store(true)
		wg.Wait()
		t.Fatalf("node 0 back on its store: %v", err)
	}
	cs[0] = back
	addrMu.Lock()
	addrs[0] = back.RESPAddr()
	addrMu.Unlock()
	t.Logf("node 0 rejoined %v after its death", time.Since(killed).Round(time.Millisecond))
	time.Sleep(1500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	// A final read of every key through every node.
	for node := range 3 {
		r := redis.NewClient(&redis.Options{Addr: addr(node), Protocol: 2, MaxRetries: -1})
		for k := range keys {
			op := checker.Op{Client: 100 + node, Page: uint64(k), Kind: checker.KindRead, Call: time.Now().UnixNano()}
			v, err := r.Get(ctx, fmt.Sprintf("reg:%d", k)).Result()
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				t.Fatalf("final read of reg:%d through node %d: %v", k, node, err)
			default:
				op.Value, _ = strconv.ParseUint(v, 10, 64)
			}
			op.Return = time.Now().UnixNano()
			ops = append(ops, op)
		}
		r.Close()
	}
	end := int64(0)
	for _, op := range ops {
		end = max(end, op.Return)
	}
	for _, op := range unknown {
		op.Return = end + 1
		ops = append(ops, op)
	}
	res, _ := checker.Check(ops, time.Minute)
	for node := range 3 {
		var why string
		if e := firstErr[node].Load(); e != nil {
			why = (*e).Error()
		}
		t.Logf("clients of node %d during the outage: %d operations completed, %d failed (%s)", node, outageDone[node].Load(), outageFailed[node].Load(), why)
	}
	t.Logf("%d operations (%d SETs of unknown outcome): linearizable=%v unknown=%v", len(ops), len(unknown), res.Ok, res.Unknown)
	if !res.Ok && !res.Unknown {
		t.Fatalf("history not linearizable: keys %v", res.BadPages)
	}
	if served > 2*lease {
		t.Fatalf("every key served again only %v after node 0's death: want within two leases (%v)", served, 2*lease)
	}
	if outageDone[1].Load()+outageDone[2].Load() == 0 {
		t.Fatal("the survivors' clients completed no operation during the outage")
	}
}
