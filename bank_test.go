package scalestore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/scalestore-go/scalestore/membership"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/resp"
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
// read of every account. A transfer whose call failed (its node died)
// may or may not have happened: maybe.
type bankOp struct {
	read     bool
	maybe    bool
	from, to int
	amount   int64
}

var bankModel = (&porcupine.NondeterministicModel{
	Init: func() []any {
		var b balances
		for i := range b {
			b[i] = bankStart
		}
		return []any{b}
	},
	Step: func(state, input, output any) []any {
		b, op := state.(balances), input.(bankOp)
		if op.read {
			if output.(balances) == b {
				return []any{b}
			}
			return nil
		}
		moved := b
		moved[op.from] -= op.amount
		moved[op.to] += op.amount
		if op.maybe {
			return []any{b, moved}
		}
		return []any{moved}
	},
	DescribeOperation: func(input, output any) string {
		op := input.(bankOp)
		if op.read {
			return fmt.Sprintf("read %v", output)
		}
		return fmt.Sprintf("move %d from %d to %d (maybe %v)", op.amount, op.from, op.to, op.maybe)
	},
}).ToModel()

// bankNodes are the cluster's nodes and a RESP client of each, as the
// bank's workers find them; a node may be down (crashed) for a while.
type bankNodes struct {
	mu  sync.Mutex
	cs  []*Cluster
	rcs []*redis.Client
	up  []bool
}

func newBankNodes(cs []*Cluster) *bankNodes {
	n := &bankNodes{cs: cs, up: make([]bool, len(cs))}
	for i, c := range cs {
		n.rcs = append(n.rcs, newBankClient(c))
		n.up[i] = true
	}
	return n
}

func newBankClient(c *Cluster) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: c.RESPAddr(), Protocol: 2, PoolSize: 4, MaxRetries: -1,
		DialTimeout: 2 * time.Second, ReadTimeout: 20 * time.Second})
}

// pick is a random live node.
func (n *bankNodes) pick(rng *rand.Rand) (int, *Cluster, *redis.Client) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for {
		i := rng.IntN(len(n.cs))
		if n.up[i] {
			return i, n.cs[i], n.rcs[i]
		}
	}
}

func (n *bankNodes) close() {
	for _, rc := range n.rcs {
		rc.Close()
	}
}

// bankRun runs the bank on the nodes for about dur, with event (if not
// nil) running meanwhile, and reports what went wrong ("" if nothing).
// With an event, a failed transfer is one that may or may not have
// happened, and a failed read is left out.
func bankRun(t *testing.T, nodes *bankNodes, dur time.Duration, event func()) string {
	t.Helper()
	ctx := context.Background()
	cs := nodes.cs
	// Created through the last node: their leaves' pages are its own
	// (its directory's).
	fundAcrossLeaves(t, cs[len(cs)-1])
	keys := make([]string, bankAccounts)
	for i := range keys {
		keys[i] = bankKey(i)
	}
	var mu sync.Mutex
	var history []porcupine.Operation
	var problems []string
	var failed int
	problem := func(format string, a ...any) {
		mu.Lock()
		if len(problems) < 5 {
			problems = append(problems, fmt.Sprintf(format, a...))
		}
		mu.Unlock()
	}
	record := func(client int, call int64, in bankOp, out any) {
		mu.Lock()
		ret := time.Now().UnixNano()
		if in.maybe {
			ret = 1 << 62 // any time after its call
			failed++
		}
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
		mu.Unlock()
	}
	// fails handles an operation's error: with an event running, a
	// transfer's becomes a maybe, a read's is dropped.
	fails := func(client int, call int64, op bankOp, what string, node int, err error) {
		if event == nil {
			problem("node %d: %s: %v", node, what, err)
			return
		}
		if !op.read {
			op.maybe = true
			record(client, call, op, nil)
		}
		time.Sleep(10 * time.Millisecond)
	}
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	if event != nil {
		wg.Add(1)
		go func() { defer wg.Done(); event() }()
	}
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 49))
			for time.Now().Before(deadline) {
				node, c, rc := nodes.pick(rng)
				from, to := rng.IntN(bankAccounts), rng.IntN(bankAccounts-1)
				if to >= from {
					to++
				}
				amount := int64(1 + rng.IntN(5))
				op := bankOp{from: from, to: to, amount: amount}
				call := time.Now().UnixNano()
				switch w % 3 {
				case 0: // WATCH, MULTI/EXEC through RESP
					execSent := false
					err := rc.Watch(ctx, func(tx *redis.Tx) error {
						a, err := tx.Get(ctx, keys[from]).Int64()
						if err != nil {
							return err
						}
						b, err := tx.Get(ctx, keys[to]).Int64()
						if err != nil {
							return err
						}
						execSent = true
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Set(ctx, keys[from], a-amount, 0)
							p.Set(ctx, keys[to], b+amount, 0)
							return nil
						})
						return err
					}, keys[from], keys[to])
					switch {
					case err == redis.TxFailedErr: // aborted: no effect
					case err != nil && !execSent: // failed before EXEC: no effect
						fails(w, call, bankOp{read: true}, "transfer over RESP", node, err)
					case err != nil:
						fails(w, call, op, "transfer over RESP", node, err)
					default:
						record(w, call, op, nil)
					}
				case 1: // Update from Go
					ranWhole := false // the last run of the function returned nil
					err := c.Update(func(tx *Tx) error {
						ranWhole = false
						a, _, err := tx.Get([]byte(keys[from]), nil)
						if err != nil {
							return err
						}
						b, _, err := tx.Get([]byte(keys[to]), nil)
						if err != nil {
							return err
						}
						av := bankBalance(a)
						bv := bankBalance(b)
						if err := tx.Put([]byte(keys[from]), strconv.AppendInt(nil, av-amount, 10)); err != nil {
							return err
						}
						if err := tx.Put([]byte(keys[to]), strconv.AppendInt(nil, bv+amount, 10)); err != nil {
							return err
						}
						ranWhole = true
						return nil
					})
					if err != nil && !ranWhole {
						// The function failed (a read of an account whose
						// node is down): nothing was committed.
						fails(w, call, bankOp{read: true}, "Update", node, err)
						continue
					}
					if err != nil {
						fails(w, call, op, "Update", node, err)
						continue
					}
					record(w, call, op, nil)
				default: // readers: MGET one time, View the next
					var got balances
					if rng.IntN(2) == 0 {
						vs, err := rc.MGet(ctx, keys...).Result()
						if err != nil {
							fails(w, call, bankOp{read: true}, "MGET", node, err)
							continue
						}
						for i, v := range vs {
							s, _ := v.(string)
							got[i], _ = strconv.ParseInt(s, 10, 64)
						}
					} else {
						err := c.View(func(tx *Tx) error {
							for i, k := range keys {
								v, _, err := tx.Get([]byte(k), nil)
								if err != nil {
									return err
								}
								got[i] = bankBalance(v)
							}
							return nil
						})
						if err != nil {
							fails(w, call, bankOp{read: true}, "View", node, err)
							continue
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
		v, _, err := nodes.cs[2].Get([]byte(k), nil)
		if err != nil {
			t.Fatal(err)
		}
		final[i] = bankBalance(v)
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
	t.Logf("%d operations (%d transfers of unknown outcome); final balances %v", len(history), failed, final)
	if len(problems) == 0 {
		return ""
	}
	return fmt.Sprint(problems)
}

func TestBank(t *testing.T) {
	nodes := newBankNodes(bankCluster(t))
	defer nodes.close()
	if p := bankRun(t, nodes, 2*time.Second, nil); p != "" {
		t.Fatal(p)
	}
}

// The bank with membership on and a node that crashes (Abandon: it stops
// without writing anything back, as kill -9 would) a second in and comes
// back on its store two seconds later. It is the directory of half the
// accounts' leaves (the others are node 0's), so a transfer's commit
// writes through to two nodes, and the crash cuts some of them between
// the two writes: the commit's record rolls the second forward when the
// node is back (docs/transactions.md, Durability). While it is down,
// transfers and reads of its accounts fail; when it is back every
// acknowledged transfer is there, and no transfer is there by half.
func TestBankWithNodeCrash(t *testing.T) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 3)
	for i := range opts {
		opts[i].RESP = "127.0.0.1:0"
	}
	nodes := newBankNodes(joinAll(t, opts))
	defer func() {
		closeAll(t, nodes.cs)
		nodes.close()
	}()
	const victim = 2
	p := bankRun(t, nodes, 6*time.Second, func() {
		time.Sleep(time.Second)
		nodes.mu.Lock()
		nodes.up[victim] = false
		nodes.mu.Unlock()
		nodes.cs[victim].Abandon()
		time.Sleep(2 * time.Second)
		c, err := Join(opts[victim])
		if err != nil {
			t.Errorf("node %d back on its store: %v", victim, err)
			return
		}
		nodes.mu.Lock()
		nodes.rcs[victim].Close()
		nodes.cs[victim], nodes.rcs[victim], nodes.up[victim] = c, newBankClient(c), true
		nodes.mu.Unlock()
	})
	if p != "" {
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
			nodes := newBankNodes(bankCluster(t))
			defer nodes.close()
			for _, c := range nodes.cs {
				c.def.commitMutant = m.mutant
			}
			p := bankRun(t, nodes, 3*time.Second, nil)
			if p == "" {
				t.Fatalf("mutant %s not caught", m.name)
			}
			t.Logf("caught: %s", p)
		})
	}
}

// BenchmarkTransferAcrossNodes: transfers with Update, from node 0,
// between an account on a leaf of node 0 and one on a leaf node 1 split
// off (node 1 filled that end of the keyspace), so that every commit
// latches a page of each node. It prints transfers per second and the
// mean latency (ns/op at -cpu 1). SCALESTORE_BENCH_MEMBERSHIP=1 runs the
// nodes with membership (embedded etcd) and stores on disk (durability
// process), where a commit of two leaves writes them through behind its
// record; SCALESTORE_BENCH_NO_RECORD=1 then leaves the record out (the
// commit as it was without one: its cost, not a mode to run).
func BenchmarkTransferAcrossNodes(b *testing.B) {
	addrs := make([]string, 2)
	for i := range addrs {
		addrs[i] = freePortB(b)
	}
	opts := clusterOpts(addrs, nil)
	if os.Getenv("SCALESTORE_BENCH_DATA") != "" {
		// Stores on disk, durability process, no membership: a commit of
		// two leaves keeps its record on its committer's disk (txfile.go).
		for i := range opts {
			opts[i].Data = b.TempDir()
			if os.Getenv("SCALESTORE_BENCH_DATA") == "sync" {
				opts[i].Durability = DurabilitySync
			}
		}
	}
	if os.Getenv("SCALESTORE_BENCH_MEMBERSHIP") != "" {
		etcd, err := membership.StartEmbedded(b.TempDir(), membership.Ephemeral())
		if err != nil {
			b.Fatal(err)
		}
		defer etcd.Close()
		for i := range opts {
			opts[i].Data, opts[i].Etcd, opts[i].LeaseTTL = b.TempDir(), etcd.Endpoints(), 2*time.Second
		}
	}
	cs := make([]*Cluster, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := 1; i >= 0; i-- {
		wg.Add(1)
		go func() { defer wg.Done(); cs[i], errs[i] = Join(opts[i]) }()
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if os.Getenv("SCALESTORE_BENCH_NO_RECORD") != "" {
		for _, c := range cs {
			c.def.commitMutant = mutantNoRecord
		}
	}
	defer func() {
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
		wg.Wait()
	}()
	a, z := []byte("acct-a"), []byte("acct-z")
	cs[0].Put(a, []byte("1000000"))
	for i := range 400 { // node 1's splits: the upper leaves are its pages
		if err := cs[1].Put(fmt.Appendf(nil, "acct-y%04d", i), bytes.Repeat([]byte{'x'}, 400)); err != nil {
			b.Fatal(err)
		}
	}
	cs[1].Put(z, []byte("1000000"))
	transfer := func(c *Cluster) error {
		return c.Update(func(tx *Tx) error {
			av, _, err := tx.Get(a, nil)
			if err != nil {
				return err
			}
			zv, _, err := tx.Get(z, nil)
			if err != nil {
				return err
			}
			x, _ := strconv.ParseInt(string(av), 10, 64)
			y, _ := strconv.ParseInt(string(zv), 10, 64)
			tx.Put(a, strconv.AppendInt(nil, x-1, 10))
			return tx.Put(z, strconv.AppendInt(nil, y+1, 10))
		})
	}
	// from-node-0: the pages stay cached exclusively on node 0 after the
	// first transfer; alternating: every transfer runs on the other node,
	// so both pages move between the nodes each time.
	for _, mode := range []string{"from-node-0", "alternating"} {
		b.Run(mode, func(b *testing.B) {
			f0 := cs[0].Stats().RemoteFetches + cs[1].Stats().RemoteFetches
			b.ResetTimer()
			for i := range b.N {
				c := cs[0]
				if mode == "alternating" && i%2 == 1 {
					c = cs[1]
				}
				if err := transfer(c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transfers/s")
			f := cs[0].Stats().RemoteFetches + cs[1].Stats().RemoteFetches - f0
			b.ReportMetric(float64(f)/float64(b.N), "remote-fetches/op")
		})
	}
}

func freePortB(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// bankBalance is an account's balance from its stored value: RESP's WATCH
// may have put a header before the digits (resp.Payload takes it off).
func bankBalance(v []byte) int64 {
	p, _ := resp.Payload(v)
	n, _ := strconv.ParseInt(string(p), 10, 64)
	return n
}

// A cluster transaction stays whole when a node dies between two of its
// commit's write-throughs (docs/transactions.md, "Durability"): two
// accounts on leaves of nodes 0 and 2, a transfer between them, and a
// crash (Abandon, as kill -9) right after the first leaf is on its store:
//
//   - directory: the committer is node 0, and node 2, the directory of
//     the second leaf, dies; it comes back on its store. With one replica
//     the committer's record rolls the leaf forward in that view change;
//     with two, the write-through cut by the view change goes again to
//     the directory's new primary (its backup), which writes it to its
//     own backup too;
//   - committer: the committer, node 1, dies; its buddy rolls the
//     record forward in the view change without it, each page to its
//     directory's current primary (and, with two replicas, its backup).
//
// Either way both accounts must read as before the transfer or both as
// after it. The mutant that writes the leaves through before the record
// exists leaves half the transfer where the record is what keeps the
// commit whole, and the test catches it; where the re-sent write-through
// is (directory, two replicas), the mutant's transfer is whole too.
func TestUpdateWholeWhenANodeDiesMidCommit(t *testing.T) {
	for _, tc := range []struct {
		name              string
		committer, victim int
		replicas          int
		recordNeeded      bool
	}{
		{"directory", 0, 2, 2, false},
		{"directory/replicas-1", 0, 2, 1, true},
		{"committer", 1, 1, 2, true},
		{"committer/replicas-1", 1, 1, 1, true},
	} {
		for _, mutant := range []commitMutant{0, mutantWriteBeforeRecord} {
			name := tc.name
			if mutant != 0 {
				name += "/write-before-record"
			}
			t.Run(name, func(t *testing.T) {
				a, b, crashed := midCommitCrash(t, tc.committer, tc.victim, tc.replicas, mutant)
				if !crashed {
					t.Fatal("the transfer's commit wrote no two leaves of nodes 0 and 2 through: nothing was crashed")
				}
				whole := a+b == 2*bankStart && (a == bankStart || a == bankStart-5)
				t.Logf("after the crash: %d and %d", a, b)
				switch {
				case (mutant == 0 || !tc.recordNeeded) && !whole:
					t.Fatalf("half a transfer: the accounts read %d and %d (sum %d, want %d)", a, b, a+b, 2*bankStart)
				case mutant != 0 && tc.recordNeeded && whole:
					t.Fatalf("mutant %s not caught: the accounts read %d and %d", name, a, b)
				}
			})
		}
	}
}

// midCommitCrash runs one transfer of 5 from bank:0 to bank:7 on node
// committer, kills node victim right after the commit's first
// write-through (bringing it back unless it is the committer), and reads
// both accounts through another node. replicas is each directory's copies.
func midCommitCrash(t *testing.T, committer, victim, replicas int, mutant commitMutant) (a, b int64, crashed bool) {
	etcd := startEtcd(t)
	opts := membershipOpts(t, etcd, 3)
	for i := range opts {
		opts[i].Replicas = replicas
	}
	cs := joinAll(t, opts)
	defer func() {
		var live []*Cluster
		for i, c := range cs {
			if i != victim || committer != victim {
				live = append(live, c)
			}
		}
		closeAll(t, live)
	}()
	fundAcrossLeaves(t, cs[2])
	from, to := []byte(bankKey(0)), []byte(bankKey(bankAccounts-1))
	c := cs[committer]
	c.def.commitMutant = mutant
	var dirs []protocol.NodeID
	c.def.afterWriteThrough = func(pid protocol.PID) {
		dirs = append(dirs, pid.Dir())
		if len(dirs) == 1 && pid.Dir() == 0 {
			crashed = true
			cs[victim].Abandon()
		}
	}
	err := moveFive(c, from, to)
	t.Logf("the transfer on node %d wrote leaves of nodes %v through; it returned %v", committer, dirs, err)
	c.def.afterWriteThrough = nil
	if !crashed {
		return 0, 0, false
	}
	if victim != committer {
		back, err := Join(opts[victim])
		if err != nil {
			t.Fatalf("node %d back on its store: %v", victim, err)
		}
		cs[victim] = back
	}
	reader := cs[(victim+1)%len(cs)]
	if reader == c && committer == victim {
		reader = cs[(victim+2)%len(cs)]
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, b, err = readBalances(reader, from, to)
		if err == nil {
			return a, b, true
		}
		if time.Now().After(deadline) {
			t.Fatalf("reading the accounts after the crash: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fundAcrossLeaves opens the bank's accounts through c, each behind a
// filler that keeps it off the others' leaves, so that a transfer spans
// two leaves (through node 2 of three: the root leaf, node 0's page since
// a table's first pages are its home's, and the ones node 2 split off,
// its own).
func fundAcrossLeaves(t *testing.T, c *Cluster) {
	t.Helper()
	err := c.Update(func(tx *Tx) error {
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
}

// moveFive moves 5 from account from to account to through c, in one
// transaction.
func moveFive(c *Cluster, from, to []byte) error {
	return c.Update(func(tx *Tx) error {
		x, _, err := tx.Get(from, nil)
		if err != nil {
			return err
		}
		y, _, err := tx.Get(to, nil)
		if err != nil {
			return err
		}
		tx.Put(from, strconv.AppendInt(nil, bankBalance(x)-5, 10))
		return tx.Put(to, strconv.AppendInt(nil, bankBalance(y)+5, 10))
	})
}

// readBalances reads accounts from and to through c in one snapshot.
func readBalances(c *Cluster, from, to []byte) (a, b int64, err error) {
	err = c.View(func(tx *Tx) error {
		x, _, err := tx.Get(from, nil)
		if err != nil {
			return err
		}
		y, _, err := tx.Get(to, nil)
		a, b = bankBalance(x), bankBalance(y)
		return err
	})
	return a, b, err
}
