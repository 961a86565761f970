package simrunner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// blocker is the toy's registers with a blocking access entry
// (protocolapi.Blocking): a worker sends its ask to the home, node 0, and
// parks on its Waiter until its node's role gets the answer and wakes it.
// Roles never see EventAccess. Its mutant "stale" answers a read with the
// value before the last write; "no-wake" forgets to wake the worker.
type blocker struct {
	cfg   protocolapi.Config
	roles []*blockRole
}

type blockRole struct {
	c       *blocker
	env     protocolapi.Env
	regs    []uint64
	next    uint64
	waiting map[uint64]*blockWorker
}

type blockWorker struct {
	role *blockRole
	id   protocolapi.Worker
	on   protocolapi.Waiter
	done bool
	res  protocolapi.Result
}

func (c *blocker) Layout() protocolapi.Layout { return protocolapi.Layout{Nodes: c.cfg.Nodes} }
func (c *blocker) Role(id protocol.NodeID, env protocolapi.Env) (protocolapi.Role, error) {
	r := &blockRole{c: c, env: env, regs: make([]uint64, c.cfg.Keys), waiting: map[uint64]*blockWorker{}}
	c.roles = append(c.roles, r)
	return r, nil
}
func (c *blocker) Check(bool) []error { return nil }

func (c *blocker) Worker(id protocolapi.Worker, on protocolapi.Waiter) protocolapi.Accessor {
	return &blockWorker{role: c.roles[id.Node], id: id, on: on}
}

func (b *blockWorker) Access(op protocolapi.Op) protocolapi.Result {
	r := b.role
	r.next++
	ask := r.next
	b.done = false
	r.waiting[ask] = b
	b.on.MaybeYield()
	r.env.Send(0, toyMsg{t: 1, worker: uint8(b.id.Slot), kind: op.Kind, key: op.Key, val: op.Value, id: ask})
	for !b.done {
		b.on.Park()
	}
	return b.res
}

func (r *blockRole) Describe() string { return fmt.Sprintf("%d workers parked", len(r.waiting)) }
func (r *blockRole) Step(ev protocolapi.Event) error {
	if ev.Kind != protocolapi.EventMessage {
		return fmt.Errorf("a blocking protocol got a %v event", ev.Kind)
	}
	m := ev.Msg.(toyMsg)
	if m.t == 1 {
		old := r.regs[m.key]
		if m.kind != protocolapi.OpRead {
			r.regs[m.key] = m.val
		}
		if r.c.cfg.Mutant == "stale" && m.kind == protocolapi.OpRead && old > 0 {
			old--
		}
		r.env.Send(ev.From, toyMsg{t: 2, key: m.key, val: old, id: m.id})
		return nil
	}
	b, ok := r.waiting[m.id]
	if !ok {
		return fmt.Errorf("answer to %d", m.id)
	}
	delete(r.waiting, m.id)
	b.res, b.done = protocolapi.Result{Value: m.val}, true
	if m.key == 0 && r.c.cfg.Mutant == "no-wake" {
		return nil
	}
	b.on.Wake()
	return nil
}

func blocking() protocolapi.Protocol {
	return protocolapi.Protocol{Name: "blocker", Codec: toyCodec{},
		Supports: protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW}},
		Mutants:  []protocolapi.Mutant{{Name: "stale"}, {Name: "no-wake"}},
		Deploy:   func(cfg protocolapi.Config) (protocolapi.Cluster, error) { return &blocker{cfg: cfg}, nil }}
}

// A cluster with a blocking access entry runs on the same worker loop:
// the history is checked, its mutants are caught, and a worker it never
// wakes is a deadlock with the roles' state in the report.
func TestBlockingAccess(t *testing.T) {
	for _, w := range []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW} {
		cfg := small()
		cfg.Workload = w
		runs, failed, err := Swarm(blocking(), cfg, 1, 5, nil)
		if err != nil || failed != nil || runs != 5 {
			t.Fatalf("%s: %d runs, failed %+v, err %v", w, runs, failed, err)
		}
		res, err := Run(blocking(), cfg)
		if err != nil || res.WorkloadOps != cfg.Ops || res.Ops != cfg.Ops+cfg.Keys {
			t.Fatalf("%s: %d workload ops of %d, %v", w, res.WorkloadOps, res.Ops, err)
		}
		if w == protocolapi.WorkloadRMW {
			rmw := 0
			for _, op := range res.History.Ops() {
				if op.Kind == "rmw" {
					rmw++
				}
			}
			if rmw == 0 {
				t.Fatalf("rmw: no read-modify-write in the history")
			}
		}
	}
	cfg := small()
	cfg.Mutant = "stale"
	res, err := Run(blocking(), cfg)
	if err != nil || res.Linearizable || len(res.BadKeys) == 0 {
		t.Fatalf("stale reads through the blocking entry: linearizable %v, %v", res.Linearizable, err)
	}
	cfg = small()
	cfg.Mutant, cfg.Faults = "no-wake", "none"
	res, err = Run(blocking(), cfg)
	all := strings.Join(res.Violations, "\n")
	if err != nil || !res.Failed() || !strings.Contains(all, "deadlock") {
		t.Fatalf("a worker never woken: %v\n%s", err, all)
	}
}

// The blocker's tree (protocolapi.Tree, TreeDeleter, TreeBatcher,
// TreeScanner) over its registers: a key is absent while 0, a delete
// writes 0, and a batch and a scan are gets one by one (a scan backwards
// with the mutant scan-backwards).
func (b *blockWorker) Get(key uint64) (uint64, bool, error) {
	res := b.Access(protocolapi.Op{Kind: protocolapi.OpRead, Key: key})
	return res.Value, res.Value != 0, res.Err
}

func (b *blockWorker) Put(key, value uint64) error {
	return b.Access(protocolapi.Op{Kind: protocolapi.OpWrite, Key: key, Value: value}).Err
}

func (b *blockWorker) Delete(key uint64) error {
	return b.Access(protocolapi.Op{Kind: protocolapi.OpWrite, Key: key}).Err
}

func (b *blockWorker) GetBatch(keys, vals []uint64, found []bool) ([]int, error) {
	for i, k := range keys {
		v, ok, err := b.Get(k)
		if err != nil {
			return nil, err
		}
		vals[i], found[i] = v, ok
	}
	return nil, nil
}

func (b *blockWorker) Scan(from, to uint64, visit func(key, value uint64) bool) error {
	keys := uint64(b.role.c.cfg.Keys)
	for i := from; i < min(to, keys); i++ {
		k := i
		if b.role.c.cfg.Mutant == "scan-backwards" {
			k = min(to, keys) - 1 - (i - from)
		}
		v, ok, err := b.Get(k)
		if err != nil {
			return err
		}
		if ok && !visit(k, v) {
			break
		}
	}
	return nil
}

// The B-tree workload on a blocking protocol that offers a tree: gets,
// puts, deletes, batches and scans, the history per key; a stale get and
// a scan out of order are caught.
func TestBlockingTree(t *testing.T) {
	p := blocking()
	p.Supports.Workloads = append(p.Supports.Workloads, protocolapi.WorkloadBTree)
	p.Mutants = append(p.Mutants, protocolapi.Mutant{Name: "scan-backwards"})
	cfg := small()
	cfg.Workload, cfg.Ops, cfg.Keys = protocolapi.WorkloadBTree, 600, 16
	runs, failed, err := Swarm(p, cfg, 1, 5, nil)
	if err != nil || failed != nil || runs != 5 {
		t.Fatalf("%d runs, failed %+v, err %v", runs, failed, err)
	}
	res, err := Run(p, cfg)
	if err != nil || res.Failed() {
		t.Fatalf("%v %v", err, res.Violations)
	}
	batched, absent := 0, 0
	ops := res.History.Ops()
	for i, op := range ops[:res.WorkloadOps] {
		if i > 0 && op.Kind == "read" && ops[i-1].Client == op.Client && ops[i-1].Call == op.Call {
			batched++ // a batch's keys share their call
		}
		if op.Kind == "read" && op.Value == 0 {
			absent++
		}
	}
	if batched == 0 || absent == 0 || res.Ops != res.WorkloadOps+cfg.Keys {
		t.Fatalf("%d batched reads, %d reads of absent keys, %d ops of which %d the workload's: want batches, absent keys and a final get of every key", batched, absent, res.Ops, res.WorkloadOps)
	}
	cfg.Mutant = "stale"
	if res, err := Run(p, cfg); err != nil || res.Linearizable {
		t.Fatalf("stale gets: linearizable %v, %v", res.Linearizable, err)
	}
	cfg.Mutant = "scan-backwards"
	caught := false
	for seed := uint64(1); seed <= 5 && !caught; seed++ {
		cfg.Seed = seed
		res, err := Run(p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		caught = strings.Contains(strings.Join(res.Violations, "\n"), "out of order or bounds")
	}
	if !caught {
		t.Fatal("scans out of order were not caught")
	}
}
