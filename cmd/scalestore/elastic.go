package main

import (
	"fmt"
	"io"
	"time"

	"github.com/scalestore-go/scalestore/cluster"
)

// cluster --elastic: the decoupled architecture and Fig. 10's schedule of
// paper §6.6 on real processes. --nodes storage nodes hold the pages and
// run no workers; --compute-nodes compute node processes (`node
// --compute`: a cache, no pages) run the workers. The first compute node
// works from the start; the others join one by one, then leave in reverse
// order (with 3: joins at 1/5 and 2/5 of --duration, leaves at 3/5 and
// 4/5). A joining node starts with a cold cache; a leaving node's workers
// stop and it hands back every page it holds, dirty ones written to their
// directory, then idles until the run ends. At the end every storage
// node's directory is asked how many of its pages still name a node that
// left (none may), and the throughput of each second of the schedule is
// printed.

// elasticWindow is when compute node j of c works, as offsets into a
// schedule of length d: 2c-1 equal steps, node j joins after step j and
// (j > 0) leaves after step 2c-1-j.
func elasticWindow(j, c int, d time.Duration) (join, leave time.Duration) {
	steps := time.Duration(2*c - 1)
	join = d * time.Duration(j) / steps
	leave = d
	if j > 0 {
		leave = d * (steps - time.Duration(j)) / steps
	}
	return join, leave
}

// leftNode is what a compute node that left reported, and what the
// directories said of it afterwards.
type leftNode struct {
	Node        int     `json:"node"`
	LeftAfter   float64 `json:"left_after_s"`
	PagesHanded int     `json:"pages_handed"`
	FramesLeft  int     `json:"frames_left"`
	NamedBy     int     `json:"pages_naming_it"` // pages whose directory still names it (0)
}

func clusterRunElastic(f clusterFlags, stderr io.Writer) (res clusterResult, err error) {
	storage, compute := f.nodes, f.computeNodes
	total := storage + compute
	p, end, err := launch(f, "elastic", total, stderr, func(i int, p *processes) []string {
		args := f.nodeArgs(i, p.addrs, p.peers, p.tmp, p.logFile)
		if i >= storage {
			args = append(args, "--compute")
		}
		return args
	})
	defer end(&err)
	if err != nil {
		return res, err
	}
	children := p.children
	progress, history := f.progress(stderr), p.history(f)
	if err := p.openTable(); err != nil {
		return res, err
	}
	// The storage nodes load the records: the pages are theirs.
	progress("loading %d records on %d storage nodes...", f.records, storage)
	loadStart := time.Now()
	if err := each(children[:storage], func(i int, c *child) error {
		_, err := c.call(cluster.Command{Op: "load", From: i * f.records / storage, To: (i + 1) * f.records / storage,
			Hashed: f.keyOrder == "hashed", HistoryFile: history("load", i)})
		return err
	}); err != nil {
		return res, err
	}
	res.LoadSeconds = time.Since(loadStart).Seconds()
	progress("loaded %d records in %.1fs; elastic schedule of %v over %d compute nodes\n", f.records, res.LoadSeconds, f.duration, compute)
	// Every compute node gets its window at once; the schedule starts a
	// moment later, when all have it.
	startAt := time.Now().Add(200 * time.Millisecond)
	results := make([]cluster.RunResult, compute)
	err = each(children[storage:], func(j int, c *child) error {
		join, leave := elasticWindow(j, compute, f.duration)
		wl := cluster.Workload{Hashed: f.keyOrder == "hashed", Records: f.records, ReadRatio: f.readRatio, Zipf: f.zipf,
			Threads: f.threads, Duration: leave - join, Seed: 42, Nodes: compute, Index: j,
			StartAt: startAt.UnixNano(), Delay: join, Leave: j > 0}
		rep, err := c.call(cluster.Command{Op: "run", Workload: &wl, HistoryFile: history("run", storage+j)})
		if err == nil && rep.Result != nil {
			results[j] = *rep.Result
			if len(rep.Result.Errors) > 0 {
				err = fmt.Errorf("compute node %d: %s", storage+j, rep.Result.Errors[0])
			}
		}
		if err == nil && j > 0 {
			progress("compute node %d left after %.1fs, handing back %d pages\n", storage+j, leave.Seconds(), results[j].PagesHanded)
		}
		return err
	})
	if err != nil {
		return res, err
	}
	res = aggregate(f, results, res.LoadSeconds)
	res.Nodes, res.ComputeNodes, res.Elastic = storage, compute, true
	// Throughput: the whole schedule, and each second of it.
	res.OpsPerSec = float64(res.Ops) / f.duration.Seconds()
	for _, r := range results {
		for i, n := range r.PerSecond {
			for len(res.Timeline) <= i {
				res.Timeline = append(res.Timeline, 0)
			}
			res.Timeline[i] += n
		}
	}
	if secs := int(f.duration / time.Second); secs > 0 && len(res.Timeline) > secs {
		res.Timeline = res.Timeline[:secs]
	}
	// Every page of a node that left is accounted for: it holds none, and
	// no directory names it.
	for j := 1; j < compute; j++ {
		id := storage + j
		_, leave := elasticWindow(j, compute, f.duration)
		l := leftNode{Node: id, LeftAfter: leave.Seconds(), PagesHanded: results[j].PagesHanded, FramesLeft: results[j].FramesLeft}
		for _, c := range children[:storage] {
			r, err := c.call(cluster.Command{Op: "names", Node: id})
			if err != nil {
				return res, err
			}
			l.NamedBy += r.Names
		}
		res.Left = append(res.Left, l)
		if l.FramesLeft > 0 || l.NamedBy > 0 {
			return res, fmt.Errorf("compute node %d left, but it still holds %d pages and %d pages' directories name it", id, l.FramesLeft, l.NamedBy)
		}
	}
	if f.check {
		// Storage nodes only load, compute nodes only run.
		var paths []string
		for i := range total {
			phase := "run"
			if i < storage {
				phase = "load"
			}
			paths = append(paths, history(phase, i))
		}
		err = checkHistories(f, paths, &res, progress)
	}
	return res, err
}

// printElastic prints the schedule's throughput per second and the nodes
// that left.
func printElastic(w io.Writer, res clusterResult) {
	fmt.Fprintf(w, "throughput per second of the schedule (ops/s):")
	for _, n := range res.Timeline {
		fmt.Fprintf(w, " %d", n)
	}
	fmt.Fprintln(w)
	for _, l := range res.Left {
		fmt.Fprintf(w, "compute node %d left after %.1fs: handed back %d pages; it holds %d, and %d pages' directories name it\n",
			l.Node, l.LeftAfter, l.PagesHanded, l.FramesLeft, l.NamedBy)
	}
}
