package simrunner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// toy is a protocol of one register a key per node 0, the home: other
// nodes ask it with a message, node 0's own workers too (a send to
// itself). Its mutants break the runner's checks one by one.
type toyMsg struct {
	t        uint8 // 1 ask, 2 answer
	worker   uint8
	kind     protocolapi.OpKind
	key, val uint64
	id       uint64
}

func (m toyMsg) Type() uint8 { return m.t }
func (m toyMsg) String() string {
	return fmt.Sprintf("t=%d w=%d %v key=%d val=%d id=%d", m.t, m.worker, m.kind, m.key, m.val, m.id)
}
func (m toyMsg) AboutKey() uint64 { return m.key }

type toyCodec struct{ corrupt bool }

func (toyCodec) MessageTypes() []string { return []string{"Ask", "Answer"} }
func (c toyCodec) Encode(m protocolapi.Message, b []byte) ([]byte, error) {
	t := m.(toyMsg)
	b[0], b[1] = t.worker, byte(t.kind)
	for i, v := range []uint64{t.key, t.val, t.id} {
		for j := range 8 {
			b[2+8*i+j] = byte(v >> (8 * j))
		}
	}
	if c.corrupt {
		b[59] = 1
	}
	return nil, nil
}
func (toyCodec) Decode(t uint8, b, payload []byte) (protocolapi.Message, error) {
	if b[59] != 0 || len(payload) != 0 {
		return nil, errors.New("trailing bytes")
	}
	var v [3]uint64
	for i := range v {
		for j := range 8 {
			v[i] |= uint64(b[2+8*i+j]) << (8 * j)
		}
	}
	return toyMsg{t: t, worker: b[0], kind: protocolapi.OpKind(b[1]), key: v[0], val: v[1], id: v[2]}, nil
}

type toyCluster struct {
	cfg   protocolapi.Config
	roles []*toyRole
}

type toyRole struct {
	c    *toyCluster
	env  protocolapi.Env
	regs []uint64
	ops  map[uint64]protocolapi.Op
	// had: every access it was given (the timer option's check)
	had map[uint64]bool
	// restarted: a role built after its node crashed, which may get the
	// answers its predecessor waited for
	restarted bool
}

func (c *toyCluster) Layout() protocolapi.Layout { return protocolapi.Layout{Nodes: c.cfg.Nodes} }
func (c *toyCluster) Role(id protocol.NodeID, env protocolapi.Env) (protocolapi.Role, error) {
	r := &toyRole{c: c, env: env, regs: make([]uint64, c.cfg.Keys), ops: map[uint64]protocolapi.Op{}, had: map[uint64]bool{}}
	if int(id) < len(c.roles) {
		r.restarted = true
		c.roles[id] = r
	} else {
		c.roles = append(c.roles, r)
	}
	return r, nil
}
func (c *toyCluster) Check(atRest bool) []error {
	if c.cfg.Mutant == "check-panics" && atRest {
		var none []int
		_ = none[3]
	}
	if c.cfg.Mutant == "invariant" && c.roles[0].regs[0] > 3 {
		return []error{errors.New("key 0 above 3")}
	}
	return nil
}

func (r *toyRole) Describe() string { return fmt.Sprintf("%d accesses out", len(r.ops)) }
func (r *toyRole) Step(ev protocolapi.Event) error {
	mut := r.c.cfg.Mutant
	switch ev.Kind {
	case protocolapi.EventAccess:
		op := ev.Op
		switch {
		case mut == "stall":
			return nil // never answered: a deadlock
		case mut == "spin":
			r.env.After(1_000_000, 0) // timers forever: the watchdog
			return nil
		case mut == "error" && op.Kind != protocolapi.OpRead:
			return errors.New("refuses writes")
		}
		r.ops[op.ID] = op
		r.had[op.ID] = true
		if d, _ := strconv.ParseInt(r.c.cfg.Option("timer"), 10, 64); d > 0 {
			r.env.After(d, op.ID) // a timer of this access, to check its env drops it after a crash
		}
		r.env.Send(0, toyMsg{t: 1, worker: uint8(op.Worker), kind: op.Kind, key: op.Key, val: op.Value, id: op.ID})
	case protocolapi.EventTimer:
		if ev.Token != 0 {
			if !r.had[ev.Token] {
				return fmt.Errorf("a timer of access %d, which this role never had", ev.Token)
			}
			return nil
		}
		r.env.After(1_000_000, 0)
	case protocolapi.EventMessage:
		m := ev.Msg.(toyMsg)
		if mut == "busy" {
			r.env.Busy(50_000) // every message costs the node 50 us of CPU
		}
		if m.t == 1 {
			old := r.regs[m.key]
			if m.kind != protocolapi.OpRead {
				r.regs[m.key] = m.val
			}
			if mut == "stale" && m.kind == protocolapi.OpRead && old > 0 {
				old--
			}
			if d, _ := strconv.ParseInt(r.c.cfg.Option("answer-delay"), 10, 64); d > 0 {
				r.env.Busy(d)
			}
			r.env.Send(ev.From, toyMsg{t: 2, key: m.key, val: old, id: m.id})
			return nil
		}
		op, ok := r.ops[m.id]
		if !ok && r.restarted {
			return nil // to an access of the node before it crashed
		}
		if !ok {
			return fmt.Errorf("answer to %d", m.id)
		}
		delete(r.ops, m.id)
		r.env.Complete(op, protocolapi.Result{Value: m.val})
		if mut == "twice" {
			r.env.Complete(op, protocolapi.Result{Value: m.val})
		}
	}
	return nil
}

// The toy's crash hooks (protocolapi.Crashable): any node but the home
// may crash; a write in flight was sent to the home when it began, so it
// may have taken effect (the mutant forget-unknown says it did not).
func (c *toyCluster) MayCrash(x protocol.NodeID) bool { return x != 0 }
func (c *toyCluster) Crash(protocol.NodeID)           {}
func (c *toyCluster) Abandoned(_ int, written uint64) bool {
	return written != 0 && c.cfg.Mutant != "forget-unknown"
}
func (c *toyCluster) Recover(protocol.NodeID) int64 { return 0 }
func (c *toyCluster) Restart(protocol.NodeID) error { return nil }

// Leave (protocolapi.Leaver): a node holds nothing but its accesses in
// flight, and its workers stopped.
func (c *toyCluster) Leave(x protocol.NodeID, on protocolapi.Waiter) (int, error) {
	on.Sleep(1_000)
	if n := len(c.roles[x].ops); n > 0 {
		return n, fmt.Errorf("%d accesses in flight", n)
	}
	return 0, nil
}

func toy(workloads ...string) protocolapi.Protocol {
	if len(workloads) == 0 {
		workloads = []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW}
	}
	p := protocolapi.Protocol{Name: "toy", Codec: toyCodec{}, Supports: protocolapi.Supports{Workloads: workloads},
		Options: []protocolapi.Option{{Name: "answer-delay", Default: "0", About: "ns the home waits before it answers"},
			{Name: "timer", Default: "0", About: "ns after which every access's timer fires (0: none)"}},
		Deploy: func(cfg protocolapi.Config) (protocolapi.Cluster, error) {
			if _, err := strconv.ParseInt(cfg.Option("answer-delay"), 10, 64); err != nil {
				return nil, fmt.Errorf("answer-delay: %w", err)
			}
			if cfg.Mutant == "deploy-panics" {
				panic("cannot deploy")
			}
			return &toyCluster{cfg: cfg}, nil
		}}
	for _, m := range []string{"stall", "spin", "error", "stale", "twice", "invariant", "corrupt", "busy", "check-panics", "deploy-panics", "forget-unknown"} {
		p.Mutants = append(p.Mutants, protocolapi.Mutant{Name: m})
	}
	return p
}

func small() Config {
	cfg := DefaultConfig()
	cfg.Ops, cfg.Keys, cfg.Faults = 300, 4, "heavy"
	return cfg
}

func TestToyClean(t *testing.T) {
	for _, w := range []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW} {
		cfg := small()
		cfg.Workload = w
		runs, failed, err := Swarm(toy(), cfg, 1, 5, nil)
		if err != nil || failed != nil || runs != 5 {
			t.Fatalf("%s: %d runs, failed %+v, err %v", w, runs, failed, err)
		}
	}
}

// Every way a protocol can go wrong is a violation with a reason, never a
// panic or a hang.
func TestChecksCatch(t *testing.T) {
	for _, tc := range []struct{ mutant, want string }{
		{"stall", "deadlock: nothing left to run while workers wait"},
		{"spin", "no operation completed for"},
		{"error", "refuses writes"},
		{"twice", "which is not in flight"},
		{"invariant", "invariant: key 0 above 3"},
		{"check-panics", "the protocol's Check panicked: runtime error: index out of range"},
		{"stale", ""},
	} {
		cfg := small()
		cfg.Mutant = tc.mutant
		if tc.mutant == "stall" {
			cfg.Faults = "none" // heavy's stall ticks never let the world run dry
		}
		res, err := Run(toy(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Failed() {
			t.Errorf("%s: not caught", tc.mutant)
			continue
		}
		all := strings.Join(res.Violations, "\n")
		if tc.want == "" {
			if res.Linearizable || len(res.BadKeys) == 0 {
				t.Errorf("%s: porcupine did not catch it: %v", tc.mutant, all)
			}
		} else if !strings.Contains(all, tc.want) {
			t.Errorf("%s: violations do not say %q:\n%s", tc.mutant, tc.want, all)
		}
		if (tc.mutant == "stall" || tc.mutant == "spin") && !strings.Contains(all, "accesses out") && !strings.Contains(all, "waits for") {
			t.Errorf("%s: the report does not show what waits:\n%s", tc.mutant, all)
		}
	}
	p := toy()
	p.Codec = toyCodec{corrupt: true}
	res, err := Run(p, small())
	if err != nil || !strings.Contains(strings.Join(res.Violations, "\n"), "does not decode") {
		t.Errorf("a corrupt frame: %v, %v", res.Violations, err)
	}
}

func TestRefusals(t *testing.T) {
	cfg := small()
	for _, tc := range []struct {
		p    protocolapi.Protocol
		mod  func(*Config)
		want string
	}{
		{toy(protocolapi.WorkloadRegister), func(c *Config) { c.Workload = "rmw" }, "does not support the rmw workload"},
		{toy(protocolapi.WorkloadRegister, protocolapi.WorkloadBTree), func(c *Config) { c.Workload = "btree" }, "has no blocking access entry"},
		{toy(), func(c *Config) { c.Crashes = 2 }, "does not support node crashes"},
		{toy(), func(c *Config) { c.Elastic = true }, "does not support elastic membership"},
		{toy(), func(c *Config) { c.Mutant = "nope" }, `no mutant "nope"`},
		{toy(), func(c *Config) { c.Faults = "weird" }, "unknown fault plan"},
		{toy(), func(c *Config) { c.Nodes = 0 }, "--nodes 0"},
		{toy(), func(c *Config) { c.Mutant = "deploy-panics" }, "the protocol's Deploy panicked: cannot deploy"},
		{toy(), func(c *Config) { c.Options = map[string]string{"speed": "1"} }, `has no option "speed"`},
		{toy(), func(c *Config) { c.Options = map[string]string{"answer-delay": "soon"} }, `answer-delay: strconv.ParseInt`},
		{protocolapi.Protocol{Name: "builtin", BuiltIn: "RunSim"}, func(*Config) {}, "runs through its own run loop"},
	} {
		c := cfg
		tc.mod(&c)
		if _, err := Run(tc.p, c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
}

// Busy makes a node's later events wait: the same accesses take longer in
// simulated time, and stay correct.
func TestBusy(t *testing.T) {
	cfg := small()
	free, err := Run(toy(), cfg)
	if err != nil || free.Failed() {
		t.Fatalf("%v %v", err, free.Violations)
	}
	cfg.Mutant = "busy"
	busy, err := Run(toy(), cfg)
	if err != nil || busy.Failed() {
		t.Fatalf("%v %v", err, busy.Violations)
	}
	if busy.SimNanos < 5*free.SimNanos {
		t.Fatalf("busy run %d ns, free %d ns: Busy did not slow the node", busy.SimNanos, free.SimNanos)
	}
	// An option reaches Deploy (the home charges it as CPU per answer).
	cfg.Mutant, cfg.Options = "", map[string]string{"answer-delay": "50000"}
	slow, err := Run(toy(), cfg)
	if err != nil || slow.Failed() || slow.SimNanos < 5*free.SimNanos {
		t.Fatalf("with answer-delay: %v %v, %d ns against %d", err, slow.Violations, slow.SimNanos, free.SimNanos)
	}
}
