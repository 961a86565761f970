package main

import (
	"fmt"
	"io"
)

// clusterRunIndex runs 'cluster --workload nam-cg|nam-fg|nam-hybrid|cell':
// --nodes compute node processes (ids 0..C-1) and --memory-nodes memory
// servers (C..), gets, scans, puts and deletes of --records keys for
// --duration, and with --check porcupine per key on the whole history. A
// message a node refused (malformed, unexpected, a reply nobody waits
// for) is a violation.
func clusterRunIndex(f clusterFlags, stderr io.Writer) (clusterResult, error) {
	c, m := f.nodes, f.memoryNodes
	res, _, err := runMemoryNodes(f, memoryNodeDesign{protocol: "index", name: f.workload,
		args: []string{"--index-workload", f.workload, "--keys", fmt.Sprint(f.records), "--computes", fmt.Sprint(c),
			"--servers", fmt.Sprint(m), "--search", f.search, "--cell-mega-nodes", fmt.Sprint(f.megaNodes),
			"--head-nodes=" + fmt.Sprint(f.headNodes), "--head-group", fmt.Sprint(f.headGroup)},
		running: fmt.Sprintf("%s: %d compute nodes of %d threads and %d memory servers over %s, %d keys; running for %v\n",
			f.workload, c, f.threads, m, f.kind, f.records, f.duration),
		dropped: "the nodes refused %d messages (see the log)"}, stderr)
	if f.headNodes && (f.workload == "nam-fg" || f.workload == "nam-hybrid") {
		res.HeadGroup = f.headGroup
	}
	return res, err
}
