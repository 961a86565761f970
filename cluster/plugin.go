package cluster

import (
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"time"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/procrunner"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/ycsb"
)

// A protocol built on protocolapi on real processes ('scalestore cluster
// --protocol P'): each node process runs a procrunner.Node, and the
// control protocol is the one of the designs on compute and memory nodes
// (serveRegions): "setup" returns the node's region, "peers" gives it
// every node's region and builds its role, "run" runs its workers (a
// compute node's; with Workload.FinalRead, one read of every key), "stats"
// returns the violations it found and its protocol's counters.

// ServePlugin answers control commands for a node of a plug-in protocol.
func ServePlugin(n *procrunner.Node, in io.Reader, out io.Writer) error {
	region, _ := n.Region()
	return serveRegions(regionNode{region: region,
		// The regions of the nodes that run workers, then of the others:
		// every node's, in order.
		peers: func(cmd *RegionCommand) error {
			return n.Connect(append(append([]transport.Region(nil), cmd.Replies...), cmd.Memory...))
		},
		run: func(wl Workload) (RunResult, []checker.Op) { return RunPlugin(n, wl) },
		stats: func(rep *RegionReply) error {
			viol, faults, count := n.Failures()
			if len(faults) > 0 {
				return fmt.Errorf("the node's environment failed: %s", faults[0])
			}
			rep.Dropped, rep.Violations, rep.Counters = uint64(count), viol, n.Counters()
			return nil
		}}, in, out)
}

// RunPlugin runs wl.Threads workers on n for wl.Duration, each access a
// read or, with the chance 1-wl.ReadRatio, a write (a read-modify-write
// with wl.RMW) of a key below wl.Records (zipfian) with a value unique in
// the cluster. With wl.FinalRead it reads every key once instead, on
// worker 0 (after every node's workers stopped: a lost write cannot pass
// it). A worker stops at the node's first violation; the violations are
// the node's to report ("stats").
func RunPlugin(n *procrunner.Node, wl Workload) (RunResult, []checker.Op) {
	id := n.ID()
	if wl.Threads > n.Workers() || wl.Records < 1 {
		return RunResult{Errors: []string{fmt.Sprintf("node %d runs %d workers on %d keys, asked for %d threads on %d records",
			id, n.Workers(), n.Keys(), wl.Threads, wl.Records)}}, nil
	}
	var unavailable int64
	if wl.FinalRead {
		w := &workloadThread{node: id, client: int(id) << 8}
		start := time.Now()
		var res RunResult
		for key := range uint64(wl.Records) {
			if _, err := pluginAccess(n, w, protocolapi.Op{Kind: protocolapi.OpRead, Key: key}, wl.History, &unavailable); err != nil {
				if !errors.Is(err, errStopThread) {
					res.Errors = append(res.Errors, err.Error())
				}
				break
			}
			res.Ops++
		}
		res.Seconds, res.Unavailable = time.Since(start).Seconds(), unavailable
		return res, w.ops
	}
	write := protocolapi.OpWrite
	if wl.RMW {
		write = protocolapi.OpRMW
	}
	threadUnavailable := make([]int64, wl.Threads)
	res, ops := runThreads(wl, id, func(w *workloadThread) func() (int64, error) {
		pick := mrand.New(mrand.NewSource(int64(w.r.Uint64()))) // the chooser's own
		choose := ycsb.NewChooser(int64(wl.Records), wl.Zipf)   // its generator is not safe to share
		return func() (int64, error) {
			op := protocolapi.Op{Worker: w.t, Kind: protocolapi.OpRead, Key: uint64(choose(pick))}
			if w.r.Float64() >= wl.ReadRatio {
				op.Kind, op.Value = write, w.nextWrite()
			}
			return pluginAccess(n, w, op, wl.History, &threadUnavailable[w.t])
		}
	})
	for _, u := range threadUnavailable {
		res.Unavailable += u
	}
	return res, ops
}

// pluginAccess runs one access of worker w and records it (with history):
// its latency, or errStopThread once the node failed.
func pluginAccess(n *procrunner.Node, w *workloadThread, op protocolapi.Op, history bool, unavailable *int64) (int64, error) {
	op.Worker = w.t
	call := time.Now().UnixNano()
	res, err := n.Access(op)
	ret := time.Now().UnixNano()
	switch {
	case errors.Is(err, procrunner.ErrFailed) || errors.Is(err, procrunner.ErrClosed):
		return 0, errStopThread // the node reports why
	case err != nil:
		return 0, err
	case res.Err != nil: // unavailable, for a reason of the world: not in the history
		*unavailable++
		return ret - call, nil
	}
	if history {
		h := checker.Op{Client: w.client, Page: op.Key, Call: call, Return: ret}
		switch op.Kind {
		case protocolapi.OpRead:
			h.Kind, h.Value = checker.KindRead, res.Value
		case protocolapi.OpWrite:
			h.Kind, h.Value = checker.KindWrite, op.Value
		case protocolapi.OpRMW:
			h.Kind, h.Value, h.Read = checker.KindRMW, op.Value, res.Value
		}
		w.ops = append(w.ops, h)
	}
	return ret - call, nil
}
