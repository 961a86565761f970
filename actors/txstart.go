package actors

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
)

// Transaction records rolled forward at start (docs/transactions.md,
// "Durability").
//
// A commit of several leaves keeps its record on its committer's disk
// (the root package's txfile.go) until every leaf is on its directory's
// store. With membership the record is also at a buddy, which rolls it
// in a view change (txrecord.go); the disk's records roll only after a
// crash of every process of a view, in the node's first view change
// (TxRestartRolls), behind the membership's gate (the root package's
// passRollingGate).
//
// What follows is the start without membership. A record still open
// when the cluster restarts was cut between two write-throughs: at its
// node's next start its pages are rolled forward, each to its directory
// (this node's own: written here; a peer's: TTxRoll, acknowledged with
// TTxAck once durable), reusing the rolls of view changes (txrecord.go).
//
// No reader may see a page of such a record before every page of it is
// rolled, and a directory serves its pages as soon as its transport
// listens. So every node passes a start gate before any worker of its
// own runs: it asks each peer (TTxGate, Epoch 0) until the peer answers
// that its rolls are acknowledged (TxGateRolled). A node answers
// TxGateRolling before that, which tells the asker the node listens: the
// asker's own rolls to that node's directory go then. Rolls never wait
// for a gate (a directory writes a TTxRoll whenever it gets it), and a
// node answers whatever it is doing, so nodes that start in any order
// cannot wait for each other in a cycle. Peers' requests need no holding:
// a peer sends one only after its own gate, which it passed only once
// every node had rolled.
//
// The gate's questions and answers go straight to the transport, and a
// refused one is asked again: a peer that is not up yet must not fail
// the node, as a refused protocol message would.

// TxRollPage is one page of a transaction record read from the node's
// disk at start: its id and new image.
type TxRollPage struct {
	PID  protocol.PID
	Data []byte
}

// TxStartRolls keeps records read from this node's disk at start, to
// roll forward: the pages of this node's own directory are written at
// once, the others when TxRollTo names their directory.
func (n *Node) TxStartRolls(records [][]TxRollPage) {
	for _, rec := range records {
		if len(rec) == 0 {
			continue
		}
		r := &txRecord{committer: n.id, id: n.txNext(), mine: true}
		for _, p := range rec {
			r.pages = append(r.pages, txPage{pid: p.PID, data: p.Data, roll: true})
		}
		n.txr.records = append(n.txr.records, r)
	}
	n.TxRollTo(n.id)
}

// TxRestartRolls keeps records read from this node's disk at its
// restart with membership, when every process of its last view died
// (membership.Restart): unlike TxStartRolls, no page is written at once;
// each goes in the view changes that follow (TxViewChange), to its
// directory's current primary once that one is a member. Call it before
// the node's first view.
func (n *Node) TxRestartRolls(records [][]TxRollPage) {
	for _, rec := range records {
		if len(rec) == 0 {
			continue
		}
		r := &txRecord{committer: n.id, id: n.txNext(), mine: true, restart: true}
		for _, p := range rec {
			r.pages = append(r.pages, txPage{pid: p.PID, data: p.Data, roll: true})
		}
		n.txr.records = append(n.txr.records, r)
	}
}

// TxRestartPending is how many records TxRestartRolls kept are not
// rolled forward (acknowledged) yet.
func (l *Local) TxRestartPending() int {
	k := 0
	l.Locked(func() {
		for _, r := range l.node.txr.records {
			if r.restart {
				k++
			}
		}
	})
	return k
}

// TxRollTo sends the rolls of the kept records' pages of directory dir
// that are not sent yet, and reports how many it sent.
func (n *Node) TxRollTo(dir protocol.NodeID) int {
	sent := 0
	for _, r := range n.txr.records {
		for j := range r.pages {
			p := &r.pages[j]
			if !p.roll || p.acked || p.rolling != 0 || p.pid.Dir() != dir {
				continue
			}
			p.rolling = n.txNext()
			sent++
			if dir == n.id {
				pid, seq := p.pid, p.rolling
				n.writeDurable(pid, p.data, func() { n.txRollDone(pid, seq) })
				continue
			}
			n.send(protocol.Message{Type: protocol.TTxRoll, To: dir, PID: p.pid, Epoch: p.rolling}, p.data)
		}
	}
	return sent
}

// startGate is a node's side of the start gate (see above).
type startGate struct {
	mu sync.Mutex
	// send hands a frame straight to the transport (SetGateSender).
	send func(to protocol.NodeID, frame []byte) error
	// rolled: this node's rolls are acknowledged and its records marked
	// done; its answers say TxGateRolled.
	rolled bool
	// answers are the latest answer of each peer (0: none yet).
	answers [protocol.MaxNodes]uint32
}

// SetGateSender gives the start gate its way to the transport. A node
// without it answers no question.
func (l *Local) SetGateSender(send func(to protocol.NodeID, frame []byte) error) {
	l.gate.mu.Lock()
	l.gate.send = send
	l.gate.mu.Unlock()
}

// gateSend sends a TTxGate to node to, straight to the transport; a
// refusal is not an error (the question is asked again).
func (l *Local) gateSend(send func(to protocol.NodeID, frame []byte) error, to protocol.NodeID, epoch uint32) {
	var b [protocol.FrameSize]byte
	protocol.Encode(b[:], &protocol.Message{Type: protocol.TTxGate, From: l.node.ID(), To: to, Epoch: epoch})
	_ = send(to, b[:])
}

// onGate handles a TTxGate from a peer (outside the node's lock).
func (l *Local) onGate(m *protocol.Message) {
	g := &l.gate
	g.mu.Lock()
	if m.Epoch != 0 {
		g.answers[m.From] = max(g.answers[m.From], m.Epoch) // at most TxGateRolled: Decode checked it
		g.mu.Unlock()
		return
	}
	send, answer := g.send, protocol.TxGateRolling
	if g.rolled {
		answer = protocol.TxGateRolled
	}
	g.mu.Unlock()
	if send != nil {
		l.gateSend(send, m.From, answer)
	}
}

// ErrStartGate: a node did not hear, within its join timeout, that every
// peer (with membership: every node the view record lists as rolling)
// rolled its transaction records forward.
var ErrStartGate = errors.New("the start gate did not open")

// PassGate runs this node's start gate: it sends the rolls of the records
// TxStartRolls kept as their directories' nodes come up, calls markDone
// once every roll is acknowledged (the records are then done on disk),
// and returns once every one of peers answered that its own rolls are
// done, or with an error after timeout. No worker of the node may run
// before it returns.
func (l *Local) PassGate(peers []protocol.NodeID, timeout time.Duration, markDone func() error) error {
	self := l.node.ID()
	deadline := time.Now().Add(timeout)
	var sentTo protocol.NodeSet
	g := &l.gate
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if l.failed.Load() {
			return l.firstErr()
		}
		g.mu.Lock()
		answers, send, rolled := g.answers, g.send, g.rolled
		g.mu.Unlock()
		var waiting []protocol.NodeID
		for _, p := range peers {
			if p == self {
				continue
			}
			if answers[p] != 0 && !sentTo.Has(p) {
				sentTo.Add(p)
				l.Locked(func() { l.node.TxRollTo(p) })
			}
			if answers[p] != protocol.TxGateRolled {
				waiting = append(waiting, p)
				if send != nil {
					l.gateSend(send, p, 0)
				}
			}
		}
		pending := l.TxRecords()
		if !rolled && pending == 0 {
			if err := markDone(); err != nil {
				return fmt.Errorf("actors: node %d: marking its rolled transaction records done: %w", self, err)
			}
			g.mu.Lock()
			g.rolled, rolled = true, true
			g.mu.Unlock()
		}
		if rolled && len(waiting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			why := fmt.Sprintf("nodes %v did not say their rolls are done", waiting)
			if pending > 0 {
				why = fmt.Sprintf("%d of its own transaction records are not rolled forward (acknowledged) yet, and %s", pending, why)
			}
			return fmt.Errorf("actors: node %d: %w within %v: %s (a cluster without membership starts all its nodes together: docs/deploy.md)",
				self, ErrStartGate, timeout, why)
		}
		time.Sleep(wait)
	}
}

// Fail fails the node with err, as a storage error does: every operation
// returns it from now on.
func (l *Local) Fail(err error) {
	l.Locked(func() { l.fail(err) })
}
