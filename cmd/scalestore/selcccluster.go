package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/linecache"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// clusterRunSELCC runs 'cluster --protocol selcc': --nodes compute node
// processes (ids 0..C-1) and --memory-nodes memory node processes (C..),
// the register workload on --records lines for --duration, and with
// --check porcupine on the whole history. A memory node that received a
// message is a violation (they have no handler).
func clusterRunSELCC(f clusterFlags, stderr io.Writer) (res clusterResult, err error) {
	c, m := f.nodes, f.memoryNodes
	total := c + m
	lines := (f.records + m - 1) / m
	frames := max(2, min(f.records, int(f.cacheBytes/protocol.PageSize)))
	p, end, err := launch(f, "selcc", total, stderr, func(i int, p *processes) []string {
		role := "compute"
		if i >= c {
			role = "memory"
		}
		return []string{"node", "--control", "--protocol", "selcc", "--role", role, "--id", fmt.Sprint(i),
			"--listen", p.addrs[i], "--peers", strings.Join(p.peers, ","), "--transport", f.kind, "--socket-dir", p.tmp,
			"--log", p.logFile, "--lines", fmt.Sprint(lines), "--frames", fmt.Sprint(frames), "--threads", fmt.Sprint(f.threads)}
	})
	defer end(&err)
	if err != nil {
		return res, err
	}
	children, tmp := p.children, p.tmp
	call := func(ch *child, cmd cluster.SELCCCommand) (cluster.SELCCReply, error) {
		var rep cluster.SELCCReply
		err := ch.exchange(cmd.Op, cmd, &rep, func() string { return rep.Error })
		return rep, err
	}
	regions := make([]transport.Region, total)
	if err := each(children, func(i int, ch *child) error {
		rep, err := call(ch, cluster.SELCCCommand{Command: cluster.Command{Op: "setup"}})
		regions[i] = rep.Region
		return err
	}); err != nil {
		return res, err
	}
	computes := make([]protocol.NodeID, c)
	for i := range computes {
		computes[i] = protocol.NodeID(i)
	}
	if err := each(children[:c], func(i int, ch *child) error {
		_, err := call(ch, cluster.SELCCCommand{Command: cluster.Command{Op: "peers"}, Computes: computes,
			Replies: regions[:c], Memory: regions[c:]})
		return err
	}); err != nil {
		return res, err
	}
	history := func(i int) string {
		if !f.check {
			return ""
		}
		return filepath.Join(tmp, fmt.Sprintf("run-%d.jsonl", i))
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "selcc: %d compute and %d memory nodes over %s, %d lines of %d bytes; running for %v\n",
			c, m, f.kind, f.records, linecache.LineSize, f.duration)
	}
	results := make([]cluster.RunResult, c)
	err = each(children[:c], func(i int, ch *child) error {
		wl := cluster.Workload{Records: f.records, ReadRatio: f.readRatio, Zipf: f.zipf, Threads: f.threads,
			Duration: f.duration, Seed: 42, Nodes: c, Index: i}
		rep, err := call(ch, cluster.SELCCCommand{Command: cluster.Command{Op: "run", Workload: &wl, HistoryFile: history(i)}})
		if err == nil && rep.Result != nil {
			results[i] = *rep.Result
			if len(rep.Result.Errors) > 0 {
				err = fmt.Errorf("node %d: %s", i, rep.Result.Errors[0])
			}
		}
		return err
	})
	if err != nil {
		return res, err
	}
	res = aggregate(f, results, 0)
	res.Protocol, res.MemoryNodes = "selcc", m
	for _, ch := range children[c:] {
		rep, err := call(ch, cluster.SELCCCommand{Command: cluster.Command{Op: "stats"}})
		if err != nil {
			return res, err
		}
		res.MemoryMessages += rep.MemoryMessages
	}
	if res.MemoryMessages > 0 {
		res.Violations++
		fmt.Fprintf(stderr, "cluster: the memory nodes received %d messages; they have no handler\n", res.MemoryMessages)
	}
	if f.check {
		err = checkHistories(f, computeHistories(c, history), &res, f.progress(stderr))
	}
	return res, err
}
