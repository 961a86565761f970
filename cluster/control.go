package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
)

// The control protocol: `scalestore cluster` drives each child node with
// one JSON command per line on the child's stdin and reads one JSON reply
// per line on its stdout. The child exits when its stdin closes, so a dead
// parent takes its children with it.

// Command is one control command.
type Command struct {
	Op      string       `json:"op"` // create, open, load, run, stats, names, quit
	Catalog protocol.PID `json:"catalog,omitempty"`
	From    int          `json:"from,omitempty"`
	To      int          `json:"to,omitempty"`
	// Hashed, for load, uses the hashed key order (ycsb.HashedKey).
	Hashed bool `json:"hashed,omitempty"`
	// HistoryFile, for load and run, receives the operations as JSON lines.
	HistoryFile string    `json:"history_file,omitempty"`
	Workload    *Workload `json:"workload,omitempty"`
	// Node, for names: the node whose mentions in this node's directory to
	// count.
	Node int `json:"node,omitempty"`
}

// Reply answers a command.
type Reply struct {
	Error   string       `json:"error,omitempty"`
	Catalog protocol.PID `json:"catalog,omitempty"`
	Result  *RunResult   `json:"result,omitempty"`
	Stats   *Stats       `json:"stats,omitempty"`
	// Names answers names: the pages of this node's directory that name
	// Command.Node as their owner or a sharer.
	Names int `json:"names,omitempty"`
}

// maxCommand bounds one command line.
const maxCommand = 1 << 20

// Serve answers commands from in on out until quit or the end of in.
func Serve(n *Node, in io.Reader, out io.Writer) error {
	return serveControl(in, out, n.execute)
}

func (c *Command) opName() string    { return c.Op }
func (r *Reply) setError(why string) { r.Error = why }

// serveControl is the control loop of every kind of node: one JSON command
// per line from in, one JSON reply per line on out, until quit or the end
// of in. exec answers a command; its error becomes the reply's.
func serveControl[C any, R any, PC interface {
	*C
	opName() string
}, PR interface {
	*R
	setError(string)
}](in io.Reader, out io.Writer, exec func(PC, PR) error) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxCommand)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		cmd, rep := PC(new(C)), PR(new(R))
		err := json.Unmarshal(sc.Bytes(), cmd)
		switch {
		case err != nil:
			err = fmt.Errorf("bad command: %v", err)
		case cmd.opName() == "quit":
			return enc.Encode(rep)
		default:
			err = exec(cmd, rep)
		}
		if err != nil {
			rep.setError(err.Error())
		}
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("cluster: control reply: %w", err)
		}
	}
	return sc.Err()
}

// writeOps writes a run's operations to path as JSON lines ("": none).
func writeOps(path string, ops []checker.Op) error {
	h := checker.NewHistory(len(ops))
	for _, op := range ops {
		h.Add(op)
	}
	return writeHistory(path, h)
}

// run answers a "run": the workload on run, its result in rep, and with a
// HistoryFile its operations written there.
func (c *Command) run(rep *Reply, run func(Workload) (RunResult, []checker.Op)) error {
	wl := *c.Workload
	wl.History = c.HistoryFile != ""
	res, ops := run(wl)
	rep.Result = &res
	if wl.History {
		return writeOps(c.HistoryFile, ops)
	}
	return nil
}

func (n *Node) execute(cmd *Command, rep *Reply) error {
	switch cmd.Op {
	case "create":
		pid, err := n.CreateTable()
		rep.Catalog = pid
		return err
	case "open":
		n.OpenTable(cmd.Catalog)
		return nil
	case "load":
		var hist *checker.History
		if cmd.HistoryFile != "" {
			hist = checker.NewHistory(cmd.To - cmd.From)
		}
		if err := n.Load(cmd.From, cmd.To, cmd.Hashed, hist); err != nil {
			return err
		}
		return writeHistory(cmd.HistoryFile, hist)
	case "run":
		if cmd.Workload == nil {
			return errors.New("run without a workload")
		}
		return cmd.run(rep, n.Run)
	case "stats":
		s := n.Stats()
		rep.Stats = &s
		return nil
	case "names":
		if cmd.Node < 0 || cmd.Node >= protocol.MaxNodes {
			return fmt.Errorf("names: node %d out of range", cmd.Node)
		}
		rep.Names = n.RT.Names(protocol.NodeID(cmd.Node))
		return nil
	}
	return fmt.Errorf("unknown command %q", cmd.Op)
}

func writeHistory(path string, h *checker.History) error {
	if path == "" || h == nil {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := h.WriteJSONLines(f); err != nil {
		f.Close()
		return fmt.Errorf("history %s: %w", path, err)
	}
	return f.Close()
}

// workloadThread is one workload thread of an index or SELCC node.
type workloadThread struct {
	t      int
	node   protocol.NodeID
	r      *rand.Rand   // seeded by the workload's seed, the node and t
	client int          // the thread's client in the history
	seq    uint64       // its writes so far
	ops    []checker.Op // what it recorded (the design appends, with wl.History)
}

// nextWrite is the unique value of the thread's next write.
func (w *workloadThread) nextWrite() uint64 {
	w.seq++
	return writeID(w.node, w.t, w.seq)
}

// errStopThread, from a thread's operation, stops the thread without an
// error of its own (its node reports why: a plug-in protocol's violation).
var errStopThread = errors.New("cluster: the thread stops")

// runThreads runs wl.Threads workload threads of node for wl.Duration and
// merges what they measured: each thread calls the operation start gives
// it until the run ends or the operation fails; an operation returns its
// latency in ns.
func runThreads(wl Workload, node protocol.NodeID, start func(w *workloadThread) func() (int64, error)) (RunResult, []checker.Op) {
	var res RunResult
	var stop atomic.Bool
	var mu sync.Mutex
	lat := hdrhistogram.New(1, 60_000_000_000, 3)
	var ops []checker.Op
	var wg sync.WaitGroup
	begin := time.Now()
	for t := range wl.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &workloadThread{t: t, node: node, r: rand.New(rand.NewPCG(uint64(wl.Seed), uint64(node)<<8|uint64(t))), client: int(node)<<8 | t}
			op := start(w)
			h := hdrhistogram.New(1, 60_000_000_000, 3)
			var errs []string
			for !stop.Load() {
				ns, err := op()
				if err != nil {
					if !errors.Is(err, errStopThread) {
						errs = append(errs, err.Error())
					}
					break
				}
				_ = h.RecordValue(ns)
			}
			mu.Lock()
			lat.Merge(h)
			ops = append(ops, w.ops...)
			res.Ops += h.TotalCount()
			res.Errors = append(res.Errors, errs...)
			mu.Unlock()
		}()
	}
	time.Sleep(wl.Duration)
	stop.Store(true)
	wg.Wait()
	res.Seconds = time.Since(begin).Seconds()
	res.Latencies = lat.Export()
	res.Stats = Stats{Ops: uint64(res.Ops)}
	return res, ops
}
