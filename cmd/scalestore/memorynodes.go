package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
)

// memoryNodeDesign is a design that runs on a cluster of --nodes compute
// node processes (ids 0..C-1), which run its workload, and --memory-nodes
// memory node processes (C..), which hold its data: the index designs,
// SELCC and the plug-in protocols (whose layout makes the nodes above C). What sets one apart from the other is here; the rest is
// runMemoryNodes.
type memoryNodeDesign struct {
	protocol string   // the nodes' --protocol (and the temporary directory's name)
	name     string   // the result's protocol
	args     []string // the node arguments of the design's own
	running  string   // the progress line before the run
	dropped  string   // what the nodes' dropped messages mean, with one %d: any is a violation
	// finalRead: after the run, node 0 reads every key once more (a
	// plug-in protocol's nodes).
	finalRead bool
}

// runMemoryNodes runs design d: it starts the processes, has every node
// register its memory ("setup"), gives every node every region ("peers"),
// runs the workload on the compute nodes for --duration ("run"), adds up
// the messages the nodes dropped or the violations they found ("stats")
// and, with --check, checks the compute nodes' histories with porcupine per
// key (or a plug-in protocol's own check).
func runMemoryNodes(f clusterFlags, d memoryNodeDesign, stderr io.Writer) (res clusterResult, dropped uint64, err error) {
	c, m := f.nodes, f.memoryNodes
	p, end, err := launch(f, d.protocol, c+m, stderr, func(i int, p *processes) []string {
		role := "compute"
		if i >= c {
			role = "memory"
		}
		return append([]string{"node", "--control", "--protocol", d.protocol, "--role", role, "--id", fmt.Sprint(i),
			"--listen", p.addrs[i], "--peers", strings.Join(p.peers, ","), "--transport", f.kind, "--socket-dir", p.tmp,
			"--log", p.logFile, "--threads", fmt.Sprint(f.threads)}, d.args...)
	})
	defer end(&err)
	if err != nil {
		return res, 0, err
	}
	children := p.children
	regions := make([]transport.Region, c+m)
	if err := each(children, func(i int, ch *child) error {
		rep, err := ch.regionCall(cluster.RegionCommand{Command: cluster.Command{Op: "setup"}})
		regions[i] = rep.Region
		return err
	}); err != nil {
		return res, 0, err
	}
	computes := make([]protocol.NodeID, c)
	for i := range computes {
		computes[i] = protocol.NodeID(i)
	}
	if err := each(children, func(i int, ch *child) error {
		_, err := ch.regionCall(cluster.RegionCommand{Command: cluster.Command{Op: "peers"}, Computes: computes,
			Replies: regions[:c], Memory: regions[c:]})
		return err
	}); err != nil {
		return res, 0, err
	}
	history := p.history(f)
	if !f.quiet {
		fmt.Fprint(stderr, d.running)
	}
	results := make([]cluster.RunResult, c)
	err = each(children[:c], func(i int, ch *child) error {
		// The index designs draw their keys uniformly: they ignore Zipf.
		wl := cluster.Workload{Records: f.records, ReadRatio: f.readRatio, Zipf: f.zipf, Threads: f.threads,
			Duration: f.duration, Seed: 42, Nodes: c, Index: i, ScanLen: f.scanLen, RMW: f.workload == protocolapi.WorkloadRMW}
		rep, err := ch.regionCall(cluster.RegionCommand{Command: cluster.Command{Op: "run", Workload: &wl, HistoryFile: history("run", i)}})
		if err == nil && rep.Result != nil {
			results[i] = *rep.Result
			if len(rep.Result.Errors) > 0 {
				err = fmt.Errorf("node %d: %s", i, rep.Result.Errors[0])
			}
		}
		return err
	})
	if err != nil {
		return res, 0, err
	}
	if d.finalRead {
		wl := cluster.Workload{Records: f.records, Threads: 1, FinalRead: true}
		rep, err := children[0].regionCall(cluster.RegionCommand{Command: cluster.Command{Op: "run", Workload: &wl, HistoryFile: history("final", 0)}})
		if err == nil && rep.Result != nil && len(rep.Result.Errors) > 0 {
			err = fmt.Errorf("node 0, the final read: %s", rep.Result.Errors[0])
		}
		if err != nil {
			return res, 0, err
		}
	}
	res = aggregate(f, results, 0)
	res.Protocol, res.MemoryNodes = d.name, m
	var ns, waits, reads uint64
	for _, r := range results {
		res.Scans, ns, waits, reads = res.Scans+r.Scans, ns+r.ScanNanos, waits+r.ScanWaits, reads+r.ScanReads
	}
	if s := float64(res.Scans); s > 0 {
		res.ScanMeanUs, res.ScanRoundTrips, res.ScanReads = float64(ns)/s/1e3, float64(waits)/s, float64(reads)/s
	}
	var found []string
	for _, ch := range children {
		rep, err := ch.regionCall(cluster.RegionCommand{Command: cluster.Command{Op: "stats"}})
		if err != nil {
			return res, dropped, err
		}
		dropped += rep.Dropped
		found = append(found, rep.Violations...)
		res.Counters = addCounters(res.Counters, rep.Counters)
	}
	if dropped > 0 {
		res.Violations++
		fmt.Fprintf(stderr, "cluster: "+d.dropped+"\n", dropped)
		for _, v := range found {
			fmt.Fprintf(stderr, "  %s\n", v)
		}
	}
	if f.check {
		paths := make([]string, c)
		for i := range paths {
			paths[i] = history("run", i)
		}
		if d.finalRead {
			paths = append(paths, history("final", 0))
		}
		err = checkHistories(f, paths, &res, f.progress(stderr))
	}
	return res, dropped, err
}

// regionCall sends a command to an index or SELCC node.
func (c *child) regionCall(cmd cluster.RegionCommand) (cluster.RegionReply, error) {
	var rep cluster.RegionReply
	err := c.exchange(cmd.Op, cmd, &rep, func() string { return rep.Error })
	return rep, err
}
