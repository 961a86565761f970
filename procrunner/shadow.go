package procrunner

import (
	"fmt"
	"math/rand/v2"

	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
)

// The API promises that Cluster.Role is called once for every node of the
// layout, in order (a protocol may keep its roles in a slice indexed by
// node, for Check). A process runs one node, so a Node builds every other
// node's role too, on a shadowEnv, and never steps it: the shadow roles
// only keep the promise. A shadow role that acts (at its construction:
// nothing else calls it) is a violation.

// shadowEnv is the Env of a role built only to keep Cluster.Role's order.
type shadowEnv struct {
	n   *Node
	id  protocol.NodeID
	mem []byte // the layout's size, mapped lazily: untouched, it costs no memory
	rng *rand.Rand
}

var _ protocolapi.Env = (*shadowEnv)(nil)

// buildRoles calls Cluster.Role for every node in order: this node's on
// its own Env, the others' on shadow envs.
func (n *Node) buildRoles() error {
	for i := range n.lay.Nodes {
		id := protocol.NodeID(i)
		var env protocolapi.Env = (*nodeEnv)(n)
		if id != n.cfg.ID {
			s := &shadowEnv{n: n, id: id, rng: rand.New(rand.NewPCG(n.cfg.Seed, uint64(id)))}
			if i < len(n.lay.Memory) && n.lay.Memory[i] > 0 {
				mem, err := unix.Mmap(-1, 0, n.lay.Memory[i], unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
				if err != nil {
					return fmt.Errorf("procrunner: node %d: mapping node %d's memory for its shadow role: %w", n.cfg.ID, i, err)
				}
				s.mem = mem
				n.shadowMem = append(n.shadowMem, mem)
			}
			env = s
		}
		var role protocolapi.Role
		err := guard("Role", func() error {
			var err error
			role, err = n.cl.Role(id, env)
			return err
		})
		if err == nil && role == nil {
			err = fmt.Errorf("no role")
		}
		if err != nil {
			return fmt.Errorf("protocol %s: node %d: %w", n.p.Name, id, err)
		}
		if id == n.cfg.ID {
			n.role = role
		}
	}
	return nil
}

func (s *shadowEnv) acted(what string) {
	s.n.violate("node %d: node %d's role, built on this process only to keep Cluster.Role's order and never stepped, %s",
		s.n.cfg.ID, s.id, what)
}

func (s *shadowEnv) Self() protocol.NodeID { return s.id }
func (s *shadowEnv) Nodes() int            { return s.n.lay.Nodes }
func (s *shadowEnv) Now() int64            { return (*nodeEnv)(s.n).Now() }
func (s *shadowEnv) Rand() uint64          { return s.rng.Uint64() }
func (s *shadowEnv) Memory() []byte        { return s.mem }
func (s *shadowEnv) Region(node protocol.NodeID) (transport.Region, bool) {
	return (*nodeEnv)(s.n).Region(node)
}
func (s *shadowEnv) Send(to protocol.NodeID, m protocolapi.Message) {
	s.acted(fmt.Sprintf("sent %v", m))
}
func (s *shadowEnv) After(int64, uint64)                            { s.acted("set a timer") }
func (s *shadowEnv) Read([]byte, transport.Region, uint64, uint64)  { s.acted("posted a READ") }
func (s *shadowEnv) Write(transport.Region, uint64, []byte, uint64) { s.acted("posted a WRITE") }
func (s *shadowEnv) CompareAndSwap(transport.Region, uint64, uint64, uint64, uint64) {
	s.acted("posted a CAS")
}
func (s *shadowEnv) FetchAndAdd(transport.Region, uint64, uint64, uint64) { s.acted("posted a FAA") }
func (s *shadowEnv) ReadPage(uint64, []byte, uint64)                      { s.acted("read a page") }
func (s *shadowEnv) WritePage(uint64, []byte, uint64)                     { s.acted("wrote a page") }
func (s *shadowEnv) Busy(int64)                                           {}
func (s *shadowEnv) Complete(op protocolapi.Op, _ protocolapi.Result) {
	s.acted(fmt.Sprintf("completed access %d", op.ID))
}
