package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

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
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxCommand)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var cmd Command
		var rep Reply
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			rep.Error = fmt.Sprintf("bad command: %v", err)
		} else if cmd.Op == "quit" {
			return enc.Encode(rep)
		} else if err := n.execute(&cmd, &rep); err != nil {
			rep.Error = err.Error()
		}
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("cluster: control reply: %w", err)
		}
	}
	return sc.Err()
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
		wl := *cmd.Workload
		wl.History = cmd.HistoryFile != ""
		res, ops := n.Run(wl)
		rep.Result = &res
		if wl.History {
			h := checker.NewHistory(len(ops))
			for _, op := range ops {
				h.Add(op)
			}
			return writeHistory(cmd.HistoryFile, h)
		}
		return nil
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
