package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport/tcp"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// scalestoreBinary builds the command once for the multi-process tests.
func scalestoreBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "scalestore-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "scalestore")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = err
			t.Logf("%s", out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func lastJSON(t *testing.T, out []byte, v any) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, out)
	}
}

// TestClusterProcesses: three node processes over tcp and over shm run a
// checked YCSB mix: no violations, pages moved between nodes, and the
// exported history is linearizable on its own.
func TestClusterProcesses(t *testing.T) {
	bin := scalestoreBinary(t)
	for _, kind := range []string{"tcp", "shm"} {
		t.Run(kind, func(t *testing.T) {
			hist := filepath.Join(t.TempDir(), "history.jsonl")
			out, err := exec.Command(bin, "cluster", "--nodes", "3", "--transport", kind, "--records", "3000", "--threads", "2",
				"--read-ratio", "0.8", "--duration", "700ms", "--history-out", hist, "--json", "--quiet").CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var res clusterResult
			lastJSON(t, out, &res)
			if res.Violations != 0 || !res.Checked || res.RemotePageFetches == 0 || res.Ops == 0 {
				t.Fatalf("violations %d checked %v remote fetches %d ops %d\n%s", res.Violations, res.Checked, res.RemotePageFetches, res.Ops, out)
			}
			ops, err := readHistory(hist)
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != res.HistoryOps {
				t.Fatalf("history file has %d ops, the run reported %d", len(ops), res.HistoryOps)
			}
			if r, _ := checker.Check(ops, time.Minute); !r.Ok {
				t.Fatalf("exported history not linearizable on keys %v", r.BadPages)
			}
		})
	}
}

// TestClusterGoesOnWhenANodeDies: with --kill, node 2's process is killed
// (kill -9) in the middle of a checked run over tcp and over shm; the
// others agree on a view without it, finish the run
// (operations on its pages fail and are counted) and the whole history,
// the killed node's acknowledged writes included, is linearizable.
func TestClusterGoesOnWhenANodeDies(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin := scalestoreBinary(t)
	for _, kind := range []string{"tcp", "shm"} {
		t.Run(kind, func(t *testing.T) {
			out, err := exec.Command(bin, "cluster", "--nodes", "3", "--transport", kind, "--records", "3000", "--threads", "2",
				"--read-ratio", "0.8", "--duration", "5s", "--kill", "2@1s", "--lease", "2s", "--check", "--json", "--quiet").CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var res clusterResult
			lastJSON(t, out, &res)
			if res.Violations != 0 || !res.Checked || res.Killed == nil || *res.Killed != 2 || res.Ops == 0 {
				t.Fatalf("violations %d checked %v killed %v ops %d\n%s", res.Violations, res.Checked, res.Killed, res.Ops, out)
			}
			if res.ToViewMS <= 0 || res.ToViewMS > 5000 {
				// A liveness bound, not the target (two leases), which
				// the crashtest's figures show.
				t.Fatalf("the view without node 2 came %.0f ms after the kill\n%s", res.ToViewMS, out)
			}
			t.Logf("%s: kill to view %.0f ms, %d operations served, %d failed on node 2's pages", kind, res.ToViewMS, res.Ops, res.Unavailable)
		})
	}
}

// TestClusterElastic: the elastic schedule on processes (2 storage nodes,
// 3 compute nodes joining and leaving) over shm and tcp, checked: no
// violation, every compute node worked, each node that left handed back
// the pages it held and no directory names it, and the schedule's seconds
// are all in the timeline.
func TestClusterElastic(t *testing.T) {
	bin := scalestoreBinary(t)
	for _, kind := range []string{"shm", "tcp"} {
		t.Run(kind, func(t *testing.T) {
			out, err := exec.Command(bin, "cluster", "--elastic", "--nodes", "2", "--compute-nodes", "3", "--transport", kind,
				"--records", "3000", "--threads", "1", "--read-ratio", "0.8", "--duration", "2500ms", "--check", "--json", "--quiet").CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var res clusterResult
			lastJSON(t, out, &res)
			if !res.Elastic || res.Violations != 0 || !res.Checked || res.Ops == 0 || res.ComputeNodes != 3 || len(res.Timeline) != 2 {
				t.Fatalf("elastic %v violations %d checked %v ops %d compute %d timeline %v\n%s",
					res.Elastic, res.Violations, res.Checked, res.Ops, res.ComputeNodes, res.Timeline, out)
			}
			if len(res.Left) != 2 {
				t.Fatalf("%d compute nodes left, want 2\n%s", len(res.Left), out)
			}
			for _, l := range res.Left {
				if l.PagesHanded == 0 || l.FramesLeft != 0 || l.NamedBy != 0 {
					t.Fatalf("compute node %d left: handed %d, holds %d, named by %d pages\n%s", l.Node, l.PagesHanded, l.FramesLeft, l.NamedBy, out)
				}
			}
		})
	}
}

// TestClusterSELCC: SELCC on processes, two compute nodes and a memory
// node over shm and tcp: a checked register mix with no violation, lines
// moved between the compute nodes, and no message to the memory node.
func TestClusterSELCC(t *testing.T) {
	bin := scalestoreBinary(t)
	for _, kind := range []string{"shm", "tcp"} {
		t.Run(kind, func(t *testing.T) {
			out, err := exec.Command(bin, "cluster", "--protocol", "selcc", "--nodes", "2", "--transport", kind, "--records", "64",
				"--threads", "2", "--read-ratio", "0.7", "--duration", "700ms", "--check", "--json", "--quiet").CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var res clusterResult
			lastJSON(t, out, &res)
			if res.Violations != 0 || !res.Checked || res.Ops == 0 || res.Invalidations == 0 || res.MemoryMessages != 0 || res.Protocol != "selcc" {
				t.Fatalf("violations %d checked %v ops %d invalidations %d memory messages %d\n%s",
					res.Violations, res.Checked, res.Ops, res.Invalidations, res.MemoryMessages, out)
			}
		})
	}
}

// TestClusterIndexes: the NAM-tree's hybrid and FG and Cell on processes
// (two compute nodes, two memory servers) over shm and tcp: a checked mix
// of gets, scans, puts and deletes with no violation and no refused
// message; Cell's meganodes split under it (at most 8 nodes each); FG and
// hybrid run head nodes (the default): compute node 0's background pass
// ran, and over tcp FG's scans kept READs in flight together (fewer round
// trips than READs).
func TestClusterIndexes(t *testing.T) {
	bin := scalestoreBinary(t)
	for _, wl := range []string{"nam-hybrid", "nam-fg", "cell"} {
		for _, kind := range []string{"shm", "tcp"} {
			t.Run(wl+"/"+kind, func(t *testing.T) {
				logFile := filepath.Join(t.TempDir(), "nodes.log")
				d := "700ms"
				if wl == "cell" {
					d = "2s" // enough puts for a meganode to split on a loaded host
				}
				out, err := exec.Command(bin, "cluster", "--workload", wl, "--nodes", "2", "--memory-nodes", "2", "--transport", kind,
					"--records", "2000", "--threads", "2", "--read-ratio", "0.7", "--duration", d, "--check", "--json", "--quiet",
					"--cell-mega-nodes", "8", "--scan-len", "40", "--log", logFile).CombinedOutput()
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				logs, _ := os.ReadFile(logFile)
				if wl == "cell" && !bytes.Contains(logs, []byte("index: meganode splits")) {
					t.Fatalf("no meganode split in the run:\n%s", logs)
				}
				var res clusterResult
				lastJSON(t, out, &res)
				if res.Violations != 0 || !res.Checked || res.Ops == 0 || res.HistoryOps == 0 || res.Protocol != wl || res.MemoryNodes != 2 {
					t.Fatalf("violations %d checked %v ops %d history %d protocol %q\n%s", res.Violations, res.Checked, res.Ops, res.HistoryOps, res.Protocol, out)
				}
				if wl == "cell" {
					return
				}
				if res.HeadGroup != 8 || res.Scans == 0 || !bytes.Contains(logs, []byte("index: head passes")) || bytes.Contains(logs, []byte("passes=0 ")) {
					t.Fatalf("head group %d, %d scans, or no head pass in the log:\n%s\n%s", res.HeadGroup, res.Scans, out, logs)
				}
				if kind == "tcp" && wl == "nam-fg" && res.ScanRoundTrips >= res.ScanReads { // (hybrid's scans make calls too)
					t.Fatalf("scans waited for %.2f round trips and issued %.2f READs: no READs in flight together\n%s", res.ScanRoundTrips, res.ScanReads, out)
				}
			})
		}
	}
}

// TestClusterGarbageOnPort: while a cluster runs, random bytes, an HTTP
// request and a node of another cluster connect to a node's port; each is
// refused with a logged error and the run ends with no violations.
func TestClusterGarbageOnPort(t *testing.T) {
	bin := scalestoreBinary(t)
	logFile := filepath.Join(t.TempDir(), "nodes.log")
	cmd := exec.Command(bin, "cluster", "--nodes", "3", "--transport", "tcp", "--records", "3000", "--duration", "2s",
		"--check", "--json", "--quiet", "--log", logFile)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The nodes log their listen addresses.
	re := regexp.MustCompile(`listen=(127\.0\.0\.1:\d+)`)
	var addr string
	for deadline := time.Now().Add(20 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(logFile)
		if m := re.FindSubmatch(b); m != nil {
			addr = string(m[1])
		}
	}
	if addr == "" {
		cmd.Process.Kill()
		t.Fatalf("no node logged its listen address\n%s", out.String())
	}
	send := func(b []byte) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Errorf("dial %s: %v", addr, err)
			return
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Write(b)
		c.Read(make([]byte, 64)) // the answer or the close
		c.Close()
	}
	junk := make([]byte, 300)
	rand.Read(junk)
	send(junk)
	send([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	// A node of another cluster (id 1 of cluster 99) tries to join.
	rogue, err := tcp.New(tcp.Config{Self: 1, Listen: "127.0.0.1:0", Peers: map[protocol.NodeID]string{0: addr}, ClusterID: 99,
		Handler: func(protocol.NodeID, []byte, []byte) {}, PeerTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rogue.Send(0, make([]byte, protocol.FrameSize), nil)
	time.Sleep(300 * time.Millisecond) // its dial and handshake run in the background
	rogue.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var res clusterResult
	lastJSON(t, out.Bytes(), &res)
	if res.Violations != 0 || res.Ops == 0 {
		t.Fatalf("violations %d ops %d\n%s", res.Violations, res.Ops, out.String())
	}
	logged, _ := os.ReadFile(logFile)
	if n := strings.Count(string(logged), "rejected incoming connection"); n < 3 {
		t.Fatalf("%d rejections logged, want one per bad connection (3)\n%s", n, logged)
	}
}

// TestNodeIbverbsUnavailable: this build has no RDMA support, and says so.
func TestNodeIbverbsUnavailable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"node", "--id", "0", "--listen", "127.0.0.1:0", "--peers", "0=127.0.0.1:1,1=127.0.0.1:2", "--transport", "ibverbs"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "ibverbs") {
		t.Fatalf("exit %d, stderr %q: want non-zero naming ibverbs", code, stderr.String())
	}
}

// --resp-loop takes epoll or goroutine, --resp-loops a count; anything
// else is refused before the node starts, naming the flag.
func TestNodeRESPLoopFlags(t *testing.T) {
	for _, c := range []struct{ flag, value string }{{"--resp-loop", "io_uring"}, {"--resp-loop", ""}, {"--resp-loops", "-1"}} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"node", "--id", "0", "--listen", "127.0.0.1:0", "--peers", "0=127.0.0.1:1", c.flag, c.value}, &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), c.flag) {
			t.Errorf("%s %q: exit %d, stderr %q: want non-zero naming the flag", c.flag, c.value, code, stderr.String())
		}
	}
}
