package scalestore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
)

// The bank, after Jepsen: bankAccounts accounts on different leaves, a
// 3-node cluster, clients that move amounts between two accounts either
// with WATCH and MULTI/EXEC through a random node's RESP port or with
// Update from Go on a random node, and readers that read every account at
// once with MGET (RESP) or View (Go). Every read must sum to the total,
// the total must hold at the end, and the whole history must be
// linearizable (porcupine, with a model of the accounts).

const (
	bankAccounts = 8
	bankStart    = 100
)

type balances [bankAccounts]int64

func bankKey(i int) string { return fmt.Sprintf("bank:%d", i) }

// bankOp is one operation of the history: a transfer (read false) or a
// read of every account.
type bankOp struct {
	read     bool
	from, to int
	amount   int64
}

var bankModel = porcupine.Model{
	Init: func() any {
		var b balances
		for i := range b {
			b[i] = bankStart
		}
		return b
	},
	Step: func(state, input, output any) (bool, any) {
		b, op := state.(balances), input.(bankOp)
		if op.read {
			return output.(balances) == b, b
		}
		b[op.from] -= op.amount
		b[op.to] += op.amount
		return true, b
	},
	DescribeOperation: func(input, output any) string {
		op := input.(bankOp)
		if op.read {
			return fmt.Sprintf("read %v", output)
		}
		return fmt.Sprintf("move %d from %d to %d", op.amount, op.from, op.to)
	},
}

// bankRun runs the bank on cs for about dur and reports what went wrong
// ("" if nothing).
func bankRun(t *testing.T, cs []*Cluster, dur time.Duration) string {
	t.Helper()
	ctx := context.Background()
	// The accounts, each behind a filler that keeps it off the others'
	// leaves (so that a transfer spans two leaves).
	err := cs[0].Update(func(tx *Tx) error {
		for i := range bankAccounts {
			if err := tx.Put([]byte(bankKey(i)), []byte(strconv.Itoa(bankStart))); err != nil {
				return err
			}
			if err := tx.Put([]byte(bankKey(i)+"-filler"), bytes.Repeat([]byte{'f'}, 900)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var rcs []*redis.Client
	for _, c := range cs {
		rc := redis.NewClient(&redis.Options{Addr: c.RESPAddr(), Protocol: 2, PoolSize: 4, ReadTimeout: 20 * time.Second})
		defer rc.Close()
		rcs = append(rcs, rc)
	}
	keys := make([]string, bankAccounts)
	for i := range keys {
		keys[i] = bankKey(i)
	}
	var mu sync.Mutex
	var history []porcupine.Operation
	var problems []string
	problem := func(format string, a ...any) {
		mu.Lock()
		if len(problems) < 5 {
			problems = append(problems, fmt.Sprintf(format, a...))
		}
		mu.Unlock()
	}
	record := func(client int, call int64, in bankOp, out any) {
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: time.Now().UnixNano()})
		mu.Unlock()
	}
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 49))
			for time.Now().Before(deadline) {
				node := rng.IntN(len(cs))
				from, to := rng.IntN(bankAccounts), rng.IntN(bankAccounts-1)
				if to >= from {
					to++
				}
				amount := int64(1 + rng.IntN(5))
				op := bankOp{from: from, to: to, amount: amount}
				call := time.Now().UnixNano()
				switch w % 3 {
				case 0: // WATCH, MULTI/EXEC through RESP
					err := rcs[node].Watch(ctx, func(tx *redis.Tx) error {
						a, err := tx.Get(ctx, keys[from]).Int64()
						if err != nil {
							return err
						}
						b, err := tx.Get(ctx, keys[to]).Int64()
						if err != nil {
							return err
						}
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Set(ctx, keys[from], a-amount, 0)
							p.Set(ctx, keys[to], b+amount, 0)
							return nil
						})
						return err
					}, keys[from], keys[to])
					switch {
					case err == redis.TxFailedErr: // aborted: no effect
					case err != nil:
						problem("node %d: transfer over RESP: %v", node, err)
						return
					default:
						record(w, call, op, nil)
					}
				case 1: // Update from Go
					err := cs[node].Update(func(tx *Tx) error {
						a, _, err := tx.Get([]byte(keys[from]), nil)
						if err != nil {
							return err
						}
						b, _, err := tx.Get([]byte(keys[to]), nil)
						if err != nil {
							return err
						}
						av, _ := strconv.ParseInt(string(a), 10, 64)
						bv, _ := strconv.ParseInt(string(b), 10, 64)
						if err := tx.Put([]byte(keys[from]), strconv.AppendInt(nil, av-amount, 10)); err != nil {
							return err
						}
						return tx.Put([]byte(keys[to]), strconv.AppendInt(nil, bv+amount, 10))
					})
					if err != nil {
						problem("node %d: Update: %v", node, err)
						return
					}
					record(w, call, op, nil)
				default: // readers: MGET one time, View the next
					var got balances
					if rng.IntN(2) == 0 {
						vs, err := rcs[node].MGet(ctx, keys...).Result()
						if err != nil {
							problem("node %d: MGET: %v", node, err)
							return
						}
						for i, v := range vs {
							s, _ := v.(string)
							got[i], _ = strconv.ParseInt(s, 10, 64)
						}
					} else {
						err := cs[node].View(func(tx *Tx) error {
							for i, k := range keys {
								v, _, err := tx.Get([]byte(k), nil)
								if err != nil {
									return err
								}
								got[i], _ = strconv.ParseInt(string(v), 10, 64)
							}
							return nil
						})
						if err != nil {
							problem("node %d: View: %v", node, err)
							return
						}
					}
					var sum int64
					for _, v := range got {
						sum += v
					}
					if sum != bankAccounts*bankStart {
						problem("node %d: a read summed to %d, want %d: %v", node, sum, bankAccounts*bankStart, got)
					}
					record(w, call, bankOp{read: true}, got)
				}
			}
		}()
	}
	wg.Wait()
	var final balances
	var sum int64
	for i, k := range keys {
		v, _, err := cs[2].Get([]byte(k), nil)
		if err != nil {
			t.Fatal(err)
		}
		final[i], _ = strconv.ParseInt(string(v), 10, 64)
		sum += final[i]
	}
	if sum != bankAccounts*bankStart {
		problem("the accounts sum to %d at the end, want %d: %v", sum, bankAccounts*bankStart, final)
	}
	history = append(history, porcupine.Operation{ClientId: 99, Input: bankOp{read: true}, Call: time.Now().UnixNano(),
		Output: final, Return: time.Now().UnixNano() + 1})
	res, _ := porcupine.CheckOperationsVerbose(bankModel, history, 30*time.Second)
	switch res {
	case porcupine.Illegal:
		problem("porcupine: the history of %d operations is not linearizable", len(history))
	case porcupine.Unknown:
		problem("porcupine: no answer within 30 s for %d operations", len(history))
	}
	t.Logf("%d operations; final balances %v", len(history), final)
	if len(problems) == 0 {
		return ""
	}
	return fmt.Sprint(problems)
}

func TestBank(t *testing.T) {
	cs := bankCluster(t)
	if p := bankRun(t, cs, 2*time.Second); p != "" {
		t.Fatal(p)
	}
}

// bankCluster is a 3-node cluster serving RESP.
func bankCluster(t *testing.T) []*Cluster {
	t.Helper()
	opts := clusterOpts(freePorts(t, 3), nil)
	for i := range opts {
		opts[i].RESP = "127.0.0.1:0"
	}
	cs := joinAll(t, opts)
	t.Cleanup(func() { closeAll(t, cs) })
	return cs
}

// The bank catches broken commits: one that does not check its reads
// (lost updates), and one that releases a leaf before writing it.
func TestBankCatchesMutants(t *testing.T) {
	for _, m := range []struct {
		name   string
		mutant commitMutant
	}{{"skip-validation", mutantSkipValidation}, {"early-release", mutantEarlyRelease}} {
		t.Run(m.name, func(t *testing.T) {
			cs := bankCluster(t)
			for _, c := range cs {
				c.def.commitMutant = m.mutant
			}
			p := bankRun(t, cs, 3*time.Second)
			if p == "" {
				t.Fatalf("mutant %s not caught", m.name)
			}
			t.Logf("caught: %s", p)
		})
	}
}
