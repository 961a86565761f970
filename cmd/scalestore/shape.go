package main

import (
	"fmt"
	"io"
)

// The shape of a cluster against the cores of the host it runs on. Every
// node process runs its workers flat out; a worker that needs a page of
// another node waits for that node to serve it, which its own workers do
// between operations. With a core per busy worker the peer's worker is on
// a CPU and answers within microseconds; with more busy workers than
// cores, one node is always off a CPU and the request waits for the OS to
// schedule it (docs/bench.md, "Three nodes on two cores").

// autoShape is the cluster shape that fits cores: two nodes at least (so
// that pages move between them), three from six cores on, and as many
// workers per node as leaves every one a core.
func autoShape(cores int) (nodes, threads int) {
	nodes = 2
	if cores >= 6 {
		nodes = 3
	}
	return nodes, max(1, cores/nodes)
}

// describeAutoShape says why autoShape chose its shape.
func describeAutoShape(nodes, threads, cores int) string {
	return fmt.Sprintf("shape: %d nodes x %d worker(s), chosen for this machine's %d cores: every busy worker has a core, "+
		"and there are two nodes at least so that pages move between them (more workers than cores would measure the OS scheduler, not the cluster: docs/bench.md)",
		nodes, threads, cores)
}

// warnOversubscribed prints, when a shared-keys ScaleStore run asks for
// more busy workers than cores, what that costs and why.
func warnOversubscribed(w io.Writer, nodes, threads, cores int) {
	if nodes < 2 || nodes*threads <= cores {
		return
	}
	fmt.Fprintf(w, "cluster: warning: %d nodes x %d workers is %d busy threads on %d cores. A worker that needs another node's page waits "+
		"until the OS schedules that node's process (a remote fetch then takes hundreds of microseconds instead of a few), "+
		"so this measures the scheduler: on a 2-core VM, 3 x 2 ran at 0.09x of its --partitioned figure, "+
		"with a remote fetch p50 of about 150 us against 3 to 5 us at 2 x 1 (docs/bench.md). --auto-shape fits the machine.\n",
		nodes, threads, nodes*threads, cores)
}
