package selccproc

import (
	"flag"
	"fmt"
	"io"

	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/linecache"
	"github.com/scalestore-go/scalestore/protocol"
)

// defaultLines is --records of `cluster --protocol selcc` unless given:
// lines of 4 KiB, where ScaleStore's default 100,000 would map 400 MiB.
const defaultLines = 4096

// Design is SELCC's code for `scalestore cluster`, `node` and `bench
// cluster`: --nodes compute node processes (ids 0..C-1) and
// --memory-nodes memory node processes (C..), the register workload on
// --records lines for --duration, and with --check porcupine on the whole
// history. A memory node that received a message is a violation (they
// have no handler).
func Design() *cluster.Design {
	var lines, frames int
	var gamma float64
	return &cluster.Design{
		Title: "SELCC",
		Bench: true,
		NodeFlags: func(fs *flag.FlagSet) {
			fs.IntVar(&lines, "lines", 1024, "selcc memory node: the lines it holds")
			fs.IntVar(&frames, "frames", 256, "selcc compute node: cache frames")
			fs.Float64Var(&gamma, "gamma", 4, "selcc compute node: the lease threshold (0: off)")
		},
		Plan: func(name string, c cluster.ClusterConfig) (cluster.Plan, error) {
			records := c.Records
			if !c.RecordsSet {
				records = defaultLines
			}
			m := c.MemoryNodes
			frames := max(2, min(records, int(c.CacheBytes/protocol.PageSize)))
			return cluster.Plan{Records: records,
				NodeArgs: []string{"--lines", fmt.Sprint((records + m - 1) / m), "--frames", fmt.Sprint(frames)},
				Running: fmt.Sprintf("%s: %d compute and %d memory nodes over %s, %d lines of %d bytes; running for %v\n",
					name, c.Nodes, m, c.Transport, records, linecache.LineSize, c.Duration),
				Dropped:         "the memory nodes received %d messages; they have no handler",
				DroppedToMemory: true,
				Report: func(r cluster.Report) string {
					return fmt.Sprintf("%s: %d memory nodes, %d messages to them; %s", r.Name, r.MemoryNodes, r.Dropped, r.Figures)
				}}, nil
		},
		Serve: func(name string, d cluster.DesignNode, in io.Reader, out io.Writer) error {
			n, err := NewNode(Config{ID: d.ID, Memory: d.Memory, Lines: lines, Frames: frames, Threads: d.Threads,
				Gamma: gamma, NewTransport: d.NewTransport, Logger: d.Logger})
			if err != nil {
				return err
			}
			defer n.Close()
			role := "compute"
			if d.Memory {
				role = "memory"
			}
			d.Logger.Info(name+" node started", "node", d.ID, "role", role, "transport", d.Transport)
			return Serve(n, in, out)
		},
	}
}
