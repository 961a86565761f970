package simrunner

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/internal/traceview"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
)

// latch is a protocol of one-sided verbs only, in the shape of SEL: every
// key is a 16-byte slot on one memory node (a latch word, then the value);
// an access takes the latch by CAS (backing off by a timer), READs and
// WRITEs the value, and releases the latch by a WRITE of 0. No messages,
// no codec. Its mutant skips the latch.
type latchCluster struct {
	cfg protocolapi.Config
	mem []byte // the memory node's, once built
}

const slot = 16

func (c *latchCluster) Layout() protocolapi.Layout {
	mem := make([]int, c.cfg.Nodes+1)
	mem[c.cfg.Nodes] = c.cfg.Keys * slot
	return protocolapi.Layout{Nodes: c.cfg.Nodes + 1, Memory: mem}
}

func (c *latchCluster) Role(id protocol.NodeID, env protocolapi.Env) (protocolapi.Role, error) {
	if int(id) == c.cfg.Nodes {
		c.mem = env.Memory()
		return memoryRole{}, nil
	}
	region, ok := env.Region(protocol.NodeID(c.cfg.Nodes))
	if !ok {
		return nil, fmt.Errorf("no region on the memory node")
	}
	r := &latchRole{c: c, env: env, region: region, id: id}
	r.ws = make([]latchAccess, c.cfg.Workers)
	return r, nil
}

// Check: a latch word is free (0) or names a worker node (1..Nodes).
func (c *latchCluster) Check(atRest bool) []error {
	var errs []error
	for k := range c.cfg.Keys {
		w := binary.LittleEndian.Uint64(c.mem[k*slot:])
		if w > uint64(c.cfg.Nodes) || atRest && w != 0 {
			errs = append(errs, fmt.Errorf("key %d: latch word %d (at rest %v)", k, w, atRest))
		}
	}
	return errs
}

func (c *latchCluster) KeyAt(node protocol.NodeID, off uint64) (uint64, bool) {
	return off / slot, int(node) == c.cfg.Nodes
}

func (c *latchCluster) KeyState(key uint64) string {
	return fmt.Sprintf("word=%d value=%d", binary.LittleEndian.Uint64(c.mem[key*slot:]), binary.LittleEndian.Uint64(c.mem[key*slot+8:]))
}

type memoryRole struct{}

func (memoryRole) Step(ev protocolapi.Event) error {
	return fmt.Errorf("a memory node has no CPU, got a %v event", ev.Kind)
}
func (memoryRole) Describe() string { return "" }

type latchAccess struct {
	op    protocolapi.Op
	phase int // 1 lock, 2 read, 3 write, 4 release
	buf   [8]byte
	old   uint64
}

type latchRole struct {
	c      *latchCluster
	env    protocolapi.Env
	region transport.Region
	id     protocol.NodeID
	ws     []latchAccess
}

func (r *latchRole) Describe() string {
	var b strings.Builder
	for i, a := range r.ws {
		if a.phase != 0 {
			fmt.Fprintf(&b, " worker %d phase %d key %d;", i, a.phase, a.op.Key)
		}
	}
	return b.String()
}

func (r *latchRole) lock(a *latchAccess) {
	a.phase = 1
	r.env.CompareAndSwap(r.region, a.op.Key*slot, 0, uint64(r.id)+1, uint64(a.op.Worker))
}

func (r *latchRole) afterLock(a *latchAccess) {
	if a.op.Kind == protocolapi.OpWrite {
		r.write(a)
		return
	}
	a.phase = 2
	r.env.Read(a.buf[:], r.region, a.op.Key*slot+8, uint64(a.op.Worker))
}

func (r *latchRole) write(a *latchAccess) {
	a.phase = 3
	binary.LittleEndian.PutUint64(a.buf[:], a.op.Value)
	r.env.Write(r.region, a.op.Key*slot+8, a.buf[:], uint64(a.op.Worker))
}

func (r *latchRole) release(a *latchAccess) {
	if r.c.cfg.Mutant == "no-latch" {
		r.done(a)
		return
	}
	a.phase = 4
	r.env.Write(r.region, a.op.Key*slot, make([]byte, 8), uint64(a.op.Worker))
}

func (r *latchRole) done(a *latchAccess) {
	a.phase = 0
	r.env.Complete(a.op, protocolapi.Result{Value: a.old})
}

func (r *latchRole) Step(ev protocolapi.Event) error {
	switch ev.Kind {
	case protocolapi.EventAccess:
		a := &r.ws[ev.Op.Worker]
		*a = latchAccess{op: ev.Op}
		if r.c.cfg.Mutant == "no-latch" {
			r.afterLock(a)
			return nil
		}
		r.lock(a)
		return nil
	case protocolapi.EventTimer:
		r.lock(&r.ws[ev.Token])
		return nil
	case protocolapi.EventVerb:
		if ev.Err != nil {
			return ev.Err
		}
		a := &r.ws[ev.Token]
		switch a.phase {
		case 1:
			if ev.Prev != 0 {
				r.env.After(int64(r.env.Rand()%3_000), ev.Token) // held: back off
				return nil
			}
			r.afterLock(a)
		case 2:
			a.old = binary.LittleEndian.Uint64(a.buf[:])
			if a.op.Kind == protocolapi.OpRMW {
				r.write(a)
				return nil
			}
			r.release(a)
		case 3:
			r.release(a)
		case 4:
			r.done(a)
		default:
			return fmt.Errorf("a verb completion for worker %d, which waits for none", ev.Token)
		}
		return nil
	}
	return fmt.Errorf("latch: no use for a %v event", ev.Kind)
}

func latch() protocolapi.Protocol {
	return protocolapi.Protocol{Name: "latch",
		Supports: protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW}},
		Deploy:   func(cfg protocolapi.Config) (protocolapi.Cluster, error) { return &latchCluster{cfg: cfg}, nil },
		Mutants:  []protocolapi.Mutant{{Name: "no-latch", Workload: protocolapi.WorkloadRMW}}}
}

// A protocol of verbs only runs on the same runner: memory laid out and
// registered, CAS, READ, WRITE and timers as events, verbs in the chart.
func TestVerbsProtocol(t *testing.T) {
	cfg := small()
	cfg.Workload = protocolapi.WorkloadRMW
	runs, failed, err := Swarm(latch(), cfg, 1, 5, nil)
	if err != nil || failed != nil || runs != 5 {
		t.Fatalf("%d runs, failed %+v, err %v", runs, failed, err)
	}
	res, err := Run(latch(), cfg)
	if err != nil || res.Verbs == 0 || res.Messages != 0 {
		t.Fatalf("verbs %d messages %d err %v", res.Verbs, res.Messages, err)
	}
	cfg.Mutant = "no-latch"
	_, failed, err = Swarm(latch(), cfg, 1, 10, nil)
	if err != nil || failed == nil || failed.Linearizable {
		t.Fatalf("no-latch: not caught by porcupine (%+v, %v)", failed, err)
	}
	var steps []traceview.Step
	cfg = small()
	cfg.Mutant, cfg.Steps, cfg.Watch = "", &steps, 2
	if _, err := Run(latch(), cfg); err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 {
		t.Fatal("no verb charted")
	}
	for _, s := range steps {
		onKey2 := strings.Contains(s.Label, " off=32 ") || strings.Contains(s.Label, " off=40 ")
		if !onKey2 || !strings.HasPrefix(s.State, "word=") || s.To != cfg.Nodes {
			t.Fatalf("step %+v: not a verb on key 2's slot with its state", s)
		}
	}
}
