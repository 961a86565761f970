package cluster

import (
	"fmt"
	"io"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
)

// The index designs, SELCC and the plug-in protocols (plugin.go) run on
// compute nodes (ids 0..C-1), which run the workload, and memory nodes
// (C..), which hold the data in registered memory (a plug-in's nodes above
// C are whatever its layout makes them); the nodes meet through their
// regions. All answer the same
// control commands: "setup" registers the node's memory and returns its
// region, "peers" gives a compute node every node's region, "run" runs the
// design's workload on a compute node, "stats" counts the messages the
// node dropped.

// RegionCommand extends Command with what "peers" gives a compute node.
type RegionCommand struct {
	Command
	// Computes are the compute nodes and Replies their regions (SELCC's
	// reply slots; an index compute node registers none).
	Computes []protocol.NodeID  `json:"computes,omitempty"`
	Replies  []transport.Region `json:"replies,omitempty"`
	// Memory are the memory nodes' regions.
	Memory []transport.Region `json:"memory,omitempty"`
}

// RegionReply extends Reply with the node's region ("setup") and the
// messages it dropped ("stats"): an index node's refusals (malformed,
// unexpected, a reply nobody waits for), every message that reached a
// SELCC memory node (it has no handler).
type RegionReply struct {
	Reply
	Region  transport.Region `json:"region"`
	Dropped uint64           `json:"dropped"`
	// Violations, from a plug-in protocol's node ("stats"): the first of
	// the violations it found (Dropped counts them all).
	Violations []string `json:"violations,omitempty"`
	// Counters, from a plug-in protocol's node ("stats"): its own
	// (protocolapi.Counterer) for this node's role.
	Counters []protocolapi.Counter `json:"counters,omitempty"`
}

// regionNode is a node of the index designs or of SELCC as its control
// loop drives it.
type regionNode struct {
	region  transport.Region
	peers   func(*RegionCommand) error
	run     func(Workload) (RunResult, []checker.Op)
	dropped func() uint64
	// stats, if set, answers "stats" instead of dropped.
	stats func(*RegionReply) error
}

// serveRegions answers control commands for a node of the index designs or
// of SELCC.
func serveRegions(n regionNode, in io.Reader, out io.Writer) error {
	return serveControl(in, out, func(cmd *RegionCommand, rep *RegionReply) error {
		switch {
		case cmd.Op == "setup":
			rep.Region = n.region
		case cmd.Op == "peers":
			return n.peers(cmd)
		case cmd.Op == "run" && cmd.Workload != nil:
			return cmd.run(&rep.Reply, n.run)
		case cmd.Op == "stats" && n.stats != nil:
			return n.stats(rep)
		case cmd.Op == "stats":
			rep.Dropped = n.dropped()
		default:
			return fmt.Errorf("unknown command %q", cmd.Op)
		}
		return nil
	})
}
