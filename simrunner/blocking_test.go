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
