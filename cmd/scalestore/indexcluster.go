package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/transport"
)

// clusterRunIndex runs 'cluster --workload nam-cg|nam-fg|nam-hybrid|cell':
// --nodes compute node processes (ids 0..C-1) and --memory-nodes memory
// servers (C..), gets, scans, puts and deletes of --records keys for
// --duration, and with --check porcupine per key on the whole history. A
// message a node refused (malformed, unexpected, a reply nobody waits
// for) is a violation.
func clusterRunIndex(f clusterFlags, stderr io.Writer) (res clusterResult, err error) {
	c, m := f.nodes, f.memoryNodes
	total := c + m
	p, end, err := launch(f, "index", total, stderr, func(i int, p *processes) []string {
		role := "compute"
		if i >= c {
			role = "memory"
		}
		return []string{"node", "--control", "--protocol", "index", "--index-workload", f.workload, "--role", role, "--id", fmt.Sprint(i),
			"--listen", p.addrs[i], "--peers", strings.Join(p.peers, ","), "--transport", f.kind, "--socket-dir", p.tmp,
			"--log", p.logFile, "--keys", fmt.Sprint(f.records), "--computes", fmt.Sprint(c), "--servers", fmt.Sprint(m),
			"--threads", fmt.Sprint(f.threads), "--search", f.search}
	})
	defer end(&err)
	if err != nil {
		return res, err
	}
	children, tmp := p.children, p.tmp
	call := func(ch *child, cmd cluster.IndexCommand) (cluster.IndexReply, error) {
		var rep cluster.IndexReply
		err := ch.exchange(cmd.Op, cmd, &rep, func() string { return rep.Error })
		return rep, err
	}
	regions := make([]transport.Region, total)
	if err := each(children, func(i int, ch *child) error {
		rep, err := call(ch, cluster.IndexCommand{Command: cluster.Command{Op: "setup"}})
		regions[i] = rep.Region
		return err
	}); err != nil {
		return res, err
	}
	if err := each(children[:c], func(i int, ch *child) error {
		_, err := call(ch, cluster.IndexCommand{Command: cluster.Command{Op: "peers"}, Servers: regions[c:]})
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
		fmt.Fprintf(stderr, "%s: %d compute nodes of %d threads and %d memory servers over %s, %d keys; running for %v\n",
			f.workload, c, f.threads, m, f.kind, f.records, f.duration)
	}
	results := make([]cluster.RunResult, c)
	err = each(children[:c], func(i int, ch *child) error {
		wl := cluster.Workload{Records: f.records, ReadRatio: f.readRatio, Threads: f.threads, Duration: f.duration, Seed: 42, Nodes: c, Index: i}
		rep, err := call(ch, cluster.IndexCommand{Command: cluster.Command{Op: "run", Workload: &wl, HistoryFile: history(i)}})
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
	res.Protocol, res.MemoryNodes = f.workload, m
	var bad uint64
	for _, ch := range children {
		rep, err := call(ch, cluster.IndexCommand{Command: cluster.Command{Op: "stats"}})
		if err != nil {
			return res, err
		}
		bad += rep.Bad
	}
	if bad > 0 {
		res.Violations++
		fmt.Fprintf(stderr, "cluster: the nodes refused %d messages (see the log)\n", bad)
	}
	if f.check {
		err = checkHistories(f, computeHistories(c, history), &res, f.progress(stderr))
	}
	return res, err
}

// computeHistories are the history files of compute nodes 0..c-1.
func computeHistories(c int, history func(int) string) []string {
	paths := make([]string, c)
	for i := range c {
		paths[i] = history(i)
	}
	return paths
}

// printLogTail prints the last lines of the nodes' log after a failed run.
func printLogTail(stderr io.Writer, logFile string) {
	if b, err := os.ReadFile(logFile); err == nil && len(b) > 0 {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		fmt.Fprintf(stderr, "the nodes' last log lines:\n%s\n", strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
}

// checkHistories reads the history files at paths, writes them to
// --history-out if asked, and checks them with porcupine per key; the keys
// not linearizable add to res.Violations.
func checkHistories(f clusterFlags, paths []string, res *clusterResult, progress func(string, ...any)) error {
	var ops []checker.Op
	for _, path := range paths {
		part, err := readHistory(path)
		if err != nil {
			return err
		}
		ops = append(ops, part...)
	}
	ops = completeHistory(ops, f)
	res.Checked, res.HistoryOps = true, len(ops)
	if f.historyOut != "" {
		if err := writeOps(f.historyOut, ops); err != nil {
			return err
		}
	}
	progress("checking %d operations with porcupine...", len(ops))
	cr, _ := checker.Check(ops, f.checkTimeout)
	progress("\n")
	res.Violations += len(cr.BadPages)
	res.Undecided = cr.Unknown
	return nil
}

// completeHistory gives the writes a view change cut (cluster.UnknownReturn)
// a return after everything else (they may have happened at any time after
// their call, or never), and, with --kill, adds the killed node's writes
// that reads saw: its history died with it, so each is a write of unknown
// time.
func completeHistory(ops []checker.Op, f clusterFlags) []checker.Op {
	if len(ops) == 0 {
		return ops
	}
	first, end := ops[0].Call, int64(0)
	for _, op := range ops {
		first, end = min(first, op.Call), max(end, op.Call)
		if op.Return != cluster.UnknownReturn {
			end = max(end, op.Return)
		}
	}
	end++
	written := map[uint64]bool{}
	for i := range ops {
		if ops[i].Return == cluster.UnknownReturn {
			ops[i].Return = end
		}
		if ops[i].Kind == checker.KindWrite {
			written[ops[i].Value] = true
		}
	}
	if f.kill == "" {
		return ops
	}
	client := 1 << 30
	for _, op := range ops {
		if op.Kind != checker.KindRead || op.Value == 0 || op.Value>>56 != uint64(f.killNode)+1 || written[op.Value] {
			continue
		}
		written[op.Value] = true
		ops = append(ops, checker.Op{Client: client, Page: op.Page, Kind: checker.KindWrite, Value: op.Value, Call: first, Return: end})
		client++
	}
	return ops
}
