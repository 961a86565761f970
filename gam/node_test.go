package gam

import (
	"fmt"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
)

// fakeEnv records what a role does.
type fakeEnv struct {
	id   protocol.NodeID
	sent []string
	done []string
}

func (f *fakeEnv) Self() protocol.NodeID { return f.id }
func (f *fakeEnv) Nodes() int            { return 2 }
func (f *fakeEnv) Now() int64            { return 0 }
func (f *fakeEnv) Rand() uint64          { return 0 }
func (f *fakeEnv) Send(to protocol.NodeID, m protocolapi.Message) {
	f.sent = append(f.sent, fmt.Sprintf("%d:%v", to, m))
}
func (f *fakeEnv) After(int64, uint64)                                             {}
func (f *fakeEnv) Memory() []byte                                                  { return nil }
func (f *fakeEnv) Region(protocol.NodeID) (transport.Region, bool)                 { return transport.Region{}, false }
func (f *fakeEnv) Read([]byte, transport.Region, uint64, uint64)                   {}
func (f *fakeEnv) Write(transport.Region, uint64, []byte, uint64)                  {}
func (f *fakeEnv) CompareAndSwap(transport.Region, uint64, uint64, uint64, uint64) {}
func (f *fakeEnv) FetchAndAdd(transport.Region, uint64, uint64, uint64)            {}
func (f *fakeEnv) ReadPage(uint64, []byte, uint64)                                 {}
func (f *fakeEnv) WritePage(uint64, []byte, uint64)                                {}
func (f *fakeEnv) Busy(int64)                                                      {}
func (f *fakeEnv) Complete(op protocolapi.Op, res protocolapi.Result) {
	f.done = append(f.done, fmt.Sprintf("%v %d -> %d %v", op.Kind, op.Value, res.Value, res.Err))
}

// A fetch that overtook the grant before it waits for it: node 1 gets
// the line, writes, and only then writes it back.
func TestArriveRestoresLinkOrder(t *testing.T) {
	c, err := newCluster(Options{Mode: SEQ}, protocolapi.Config{Nodes: 2, Workers: 1, Keys: 2})
	if err != nil {
		t.Fatal(err)
	}
	envs := []*fakeEnv{{id: 0}, {id: 1}}
	for _, e := range envs {
		if _, err := c.Role(e.id, e); err != nil {
			t.Fatal(err)
		}
	}
	n1 := c.nodes[1]
	step := func(ev protocolapi.Event) {
		t.Helper()
		if err := n1.Step(ev); err != nil {
			t.Fatal(err)
		}
	}
	step(protocolapi.Event{Kind: protocolapi.EventAccess, Op: protocolapi.Op{ID: 1, Kind: protocolapi.OpWrite, Key: 0, Value: 7}})
	if got := strings.Join(envs[1].sent, " "); got != "0:ReadExclusive key=0" {
		t.Fatalf("sent %q", got)
	}
	step(protocolapi.Event{Kind: protocolapi.EventMessage, From: 0, Msg: Msg{T: FetchInvalidate, Key: 0, Seq: 2}})
	if len(envs[1].sent) != 1 || len(envs[1].done) != 0 {
		t.Fatalf("the early fetch was served: sent %v, done %v", envs[1].sent, envs[1].done)
	}
	step(protocolapi.Event{Kind: protocolapi.EventMessage, From: 0, Msg: Msg{T: Grant, Key: 0, Seq: 1}})
	if got := strings.Join(envs[1].done, " "); got != "write 7 -> 0 <nil>" {
		t.Fatalf("done %q", got)
	}
	if got := envs[1].sent[1]; got != "0:WriteBack key=0 value=7" {
		t.Fatalf("sent %q after the grant", got)
	}
	if err := n1.Step(protocolapi.Event{Kind: protocolapi.EventMessage, From: 0, Msg: Msg{T: Grant, Key: 0, Seq: 2}}); err == nil {
		t.Fatal("a message numbered twice was taken")
	}
}
