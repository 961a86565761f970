package sel

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
)

// fakeEnv records what a role does; its verbs never complete by
// themselves.
type fakeEnv struct {
	id        protocol.NodeID
	mem       []byte
	completed []protocolapi.Result
	verbs     []uint64 // tokens
}

func (e *fakeEnv) Self() protocol.NodeID                     { return e.id }
func (e *fakeEnv) Nodes() int                                { return 4 }
func (e *fakeEnv) Now() int64                                { return 0 }
func (e *fakeEnv) Rand() uint64                              { return 7 }
func (e *fakeEnv) Send(protocol.NodeID, protocolapi.Message) {}
func (e *fakeEnv) After(int64, uint64)                       {}
func (e *fakeEnv) Memory() []byte                            { return e.mem }
func (e *fakeEnv) Region(n protocol.NodeID) (transport.Region, bool) {
	return transport.Region{Node: n, Key: 1}, n >= 2
}
func (e *fakeEnv) Read(_ []byte, _ transport.Region, _ uint64, tok uint64) {
	e.verbs = append(e.verbs, tok)
}
func (e *fakeEnv) Write(_ transport.Region, _ uint64, _ []byte, tok uint64) {
	e.verbs = append(e.verbs, tok)
}
func (e *fakeEnv) CompareAndSwap(_ transport.Region, _, _, _ uint64, tok uint64) {
	e.verbs = append(e.verbs, tok)
}
func (e *fakeEnv) FetchAndAdd(_ transport.Region, _, _ uint64, tok uint64) {
	e.verbs = append(e.verbs, tok)
}
func (e *fakeEnv) ReadPage(uint64, []byte, uint64)  {}
func (e *fakeEnv) Busy(int64)                       {}
func (e *fakeEnv) WritePage(uint64, []byte, uint64) {}
func (e *fakeEnv) Complete(_ protocolapi.Op, res protocolapi.Result) {
	e.completed = append(e.completed, res)
}

// deployFake is 2 compute nodes of 2 workers and 2 memory nodes on 4 keys
// of 32-byte lines.
func deployFake(t *testing.T) (*cluster, []*fakeEnv) {
	t.Helper()
	o, err := Options{LineSize: 32}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := deploy(protocolapi.Config{Nodes: 2, Workers: 2, Keys: 4}, o)
	if err != nil {
		t.Fatal(err)
	}
	c := cl.(*cluster)
	lay := c.Layout()
	var envs []*fakeEnv
	for i := range lay.Nodes {
		e := &fakeEnv{id: protocol.NodeID(i)}
		if lay.Memory[i] > 0 {
			e.mem = make([]byte, lay.Memory[i])
		}
		if _, err := c.Role(e.id, e); err != nil {
			t.Fatal(err)
		}
		envs = append(envs, e)
	}
	return c, envs
}

func TestRoleRefusesWhatItCannotBeSent(t *testing.T) {
	c, envs := deployFake(t)
	n := c.computes[0]
	for _, ev := range []protocolapi.Event{
		{Kind: protocolapi.EventMessage, From: 1},
		{Kind: protocolapi.EventVerb, Token: 99 << 3},
		{Kind: protocolapi.EventPage},
		{Kind: protocolapi.EventAccess, Op: protocolapi.Op{ID: 1, Worker: 5, Kind: protocolapi.OpRead}},
		{Kind: protocolapi.EventTimer, Token: 9 << timerWorkerShift},
	} {
		if err := n.Step(ev); err == nil {
			t.Errorf("%v event %+v was taken", ev.Kind, ev)
		}
	}
	if err := (memory{id: 2}).Step(protocolapi.Event{Kind: protocolapi.EventTimer}); err == nil {
		t.Error("a memory node took an event")
	}
	// A key out of range and an unknown kind fail the access, not the role.
	for _, op := range []protocolapi.Op{{ID: 2, Kind: protocolapi.OpRead, Key: 4}, {ID: 3, Kind: 9}} {
		if err := n.Step(protocolapi.Event{Kind: protocolapi.EventAccess, Op: op}); err != nil {
			t.Fatal(err)
		}
	}
	if e := envs[0]; len(e.completed) != 2 || e.completed[0].Err == nil || e.completed[1].Err == nil {
		t.Fatalf("completions %+v", e.completed)
	}
	// A worker with an access in flight cannot issue another; a verb
	// cannot complete twice.
	op := protocolapi.Op{ID: 4, Kind: protocolapi.OpWrite, Key: 1, Value: 5}
	if err := n.Step(protocolapi.Event{Kind: protocolapi.EventAccess, Op: op}); err != nil {
		t.Fatal(err)
	}
	op.ID = 5
	if err := n.Step(protocolapi.Event{Kind: protocolapi.EventAccess, Op: op}); err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Fatalf("a second access of the worker: %v", err)
	}
	read := envs[0].verbs[1]
	if err := n.Step(protocolapi.Event{Kind: protocolapi.EventVerb, Token: read}); err != nil {
		t.Fatal(err)
	}
	if err := n.Step(protocolapi.Event{Kind: protocolapi.EventVerb, Token: read}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a READ completing twice: %v", err)
	}
}

// Check at rest refuses a latch word left held and a torn line; during a
// run, a word held by no writer in flight.
func TestCheckSeesMemory(t *testing.T) {
	c, envs := deployFake(t)
	if errs := c.Check(true); len(errs) != 0 {
		t.Fatalf("a fresh deployment: %v", errs)
	}
	home, _ := c.lay.home(1)
	mem := envs[home].mem
	binary.LittleEndian.PutUint64(mem[c.lay.wordOff(1):], 1)
	binary.LittleEndian.PutUint64(mem[c.lay.dataOff(1):], 3) // the head's version
	errs := c.Check(true)
	var all []string
	for _, e := range errs {
		all = append(all, e.Error())
	}
	for _, want := range []string{"key 1: at rest, its latch word is (free, 1 readers)", "memory's line is torn: head version 3, tail 0", "readers counted wrong"} {
		if !strings.Contains(strings.Join(all, "\n"), want) {
			t.Errorf("Check at rest says %q, want %q in it", all, want)
		}
	}
	binary.LittleEndian.PutUint64(mem[c.lay.wordOff(1):], exclusive(TagOf(1, 0)))
	binary.LittleEndian.PutUint64(mem[c.lay.dataOff(1):], 0)
	c.dirty = append(c.dirty, 1)
	if errs := c.Check(false); len(errs) != 1 || !strings.Contains(errs[0].Error(), "names holder n1/w0, which no writer in flight can be") {
		t.Fatalf("Check of a word held by no writer: %v", errs)
	}
}
