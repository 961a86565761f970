package sim_test

import (
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/sim"
	"github.com/scalestore-go/scalestore/transport/transporttest"
)

// The conformance suite of every transport, on the simulator's network and
// verbs.
func TestNetConformance(t *testing.T) {
	transporttest.Run(t, func(t testing.TB, handlers []transport.Handler) []transport.Transport {
		n := sim.NewNet(1, handlers)
		ts := make([]transport.Transport, len(handlers))
		for i := range ts {
			ts[i] = n.Node(protocol.NodeID(i))
		}
		return ts
	})
}
