package main

import (
	"fmt"
	"io"

	"github.com/scalestore-go/scalestore/linecache"
	"github.com/scalestore-go/scalestore/protocol"
)

// clusterRunSELCC runs 'cluster --protocol selcc': --nodes compute node
// processes (ids 0..C-1) and --memory-nodes memory node processes (C..),
// the register workload on --records lines for --duration, and with
// --check porcupine on the whole history. A memory node that received a
// message is a violation (they have no handler).
func clusterRunSELCC(f clusterFlags, stderr io.Writer) (clusterResult, error) {
	c, m := f.nodes, f.memoryNodes
	lines := (f.records + m - 1) / m
	frames := max(2, min(f.records, int(f.cacheBytes/protocol.PageSize)))
	res, dropped, err := runMemoryNodes(f, memoryNodeDesign{protocol: "selcc", name: "selcc",
		args: []string{"--lines", fmt.Sprint(lines), "--frames", fmt.Sprint(frames)},
		running: fmt.Sprintf("selcc: %d compute and %d memory nodes over %s, %d lines of %d bytes; running for %v\n",
			c, m, f.kind, f.records, linecache.LineSize, f.duration),
		dropped: "the memory nodes received %d messages; they have no handler"}, stderr)
	res.MemoryMessages = dropped
	return res, err
}
