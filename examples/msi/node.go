package msi

import (
	"fmt"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// mutants says which rules a deployment breaks on purpose.
type mutants struct {
	grantWithoutInvalidation bool
	forgetWriteBack          bool
}

// node is one node's role: the home of the keys k with k mod nodes = its
// id, and a cache for every key.
type node struct {
	env    protocolapi.Env
	id     protocol.NodeID
	nodes  int
	mutant mutants
	home   home
	cache  cache
	count  counts
}

// counts are what a node did, for the run's counters.
type counts struct {
	grants, invalidations, fetches, evictions uint64
}

var _ protocolapi.Role = (*node)(nil)

func (n *node) homeOf(key uint64) protocol.NodeID { return protocol.NodeID(key % uint64(n.nodes)) }

// Step implements protocolapi.Role.
func (n *node) Step(ev protocolapi.Event) error {
	switch ev.Kind {
	case protocolapi.EventAccess:
		return n.cache.access(ev.Op)
	case protocolapi.EventMessage:
		m, ok := ev.Msg.(Msg)
		if !ok {
			return fmt.Errorf("msi: a %T is not an MSI message", ev.Msg)
		}
		switch m.T {
		case GetS, GetM, PutM, InvAck, WriteBack:
			if n.homeOf(m.Key) != n.id {
				return fmt.Errorf("node %d: %v from node %d, but key %d's home is node %d", n.id, m, ev.From, m.Key, n.homeOf(m.Key))
			}
			return n.home.receive(ev.From, m)
		}
		return n.cache.receive(ev.From, m)
	}
	return fmt.Errorf("msi: node %d has no use for a %v event", n.id, ev.Kind)
}

// Describe implements protocolapi.Role.
func (n *node) Describe() string {
	var b strings.Builder
	if d := n.cache.describe(); d != "" {
		b.WriteString("cache:" + d)
	}
	for key := uint64(n.id); key < uint64(len(n.cache.lines)); key += uint64(n.nodes) {
		if e := n.home.entry(key); e.busy || len(e.queue) > 0 {
			fmt.Fprintf(&b, " home of key %d: busy for node %d (acks due %d, write-back due %v), %d queued", key, e.requester, e.acks, e.fetch, len(e.queue))
		}
	}
	return b.String()
}
