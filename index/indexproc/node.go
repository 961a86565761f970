package indexproc

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/index/cell"
	"github.com/scalestore-go/scalestore/index/indexdesign"
	"github.com/scalestore-go/scalestore/index/nam"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/shm"
)

// Config configures one index node process.
type Config struct {
	ID       protocol.NodeID
	Workload string // nam-cg, nam-fg, nam-hybrid or cell
	Memory   bool
	Computes int // compute nodes: ids 0..Computes-1
	Servers  int // memory servers: ids Computes..
	Keys     uint64
	Threads  int
	// Search is Cell's method (selector, server, client).
	Search string
	// MegaNodes: a Cell leaf meganode of more nodes splits (0: never).
	MegaNodes int
	// HeadGroup turns head nodes on for nam-fg and nam-hybrid (0: off;
	// else the leaves a head node lists, 2..nam.MaxFanout): compute node
	// 0 runs the background pass (nam.RefreshHeads) headPassEvery apart
	// during a run, and every client's scans prefetch through them.
	HeadGroup    int
	NewTransport func(transport.Handler) (transport.Transport, error)
	Logger       *slog.Logger
}

// namDesigns are the NAM-tree's designs by their registered names.
var namDesigns = map[string]nam.Design{indexdesign.NAMCoarse: nam.CoarseGrained, indexdesign.NAMFine: nam.FineGrained,
	indexdesign.NAMHybrid: nam.Hybrid}

// Slots is the node slots per server for keys on servers (the
// simulator's choice: leaves a third full, inner levels, Cell's root
// meganode).
func Slots(keys uint64, servers int) uint64 { return 32 + 4*keys/uint64(servers) }

// indexFanout is the entries per node on real processes.
const indexFanout = 16

// Node is one index node process.
type Node struct {
	cfg          Config
	tr           transport.Transport
	mem          []byte
	region       transport.Region
	server       interface{ Handle(req, out []byte) []byte }
	cellServer   *cell.Server  // the server, on a Cell memory server
	splitsLogged atomic.Uint64 // the meganode splits last logged
	nl           *nam.Layout
	cl           *cell.Layout
	// calls waiting for their replies, by call id
	mu      sync.Mutex
	waiting map[uint64]chan []byte
	nextID  atomic.Uint64
	// batchInLine: a batch of READs goes back to back from the caller
	// (shm; fabric.ReadBatch).
	batchInLine bool
	// Bad counts messages refused (malformed, unexpected, unknown call).
	Bad atomic.Uint64
}

// NewNode starts the node's transport and, on a memory server,
// formats and registers its region.
func NewNode(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Servers < 1 || cfg.Computes < 1 || cfg.Keys < 1 {
		return nil, fmt.Errorf("indexproc: node %d: %d servers, %d compute nodes, %d keys", cfg.ID, cfg.Servers, cfg.Computes, cfg.Keys)
	}
	if cfg.HeadGroup != 0 && (cfg.HeadGroup < 2 || cfg.HeadGroup > nam.MaxFanout) {
		return nil, fmt.Errorf("indexproc: node %d: head group of %d leaves: want 2..%d (0: no head nodes)", cfg.ID, cfg.HeadGroup, nam.MaxFanout)
	}
	n := &Node{cfg: cfg, waiting: map[uint64]chan []byte{}}
	slots := Slots(cfg.Keys, cfg.Servers)
	self := int(cfg.ID) - cfg.Computes
	// Every process formats the same tree; a server keeps its region.
	mems := make([][]byte, cfg.Servers)
	for i := range mems {
		if cfg.Memory && i == self {
			m, err := unix.Mmap(-1, 0, int(slots*nam.NodeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
			if err != nil {
				return nil, fmt.Errorf("indexproc: server %d: mapping %d slots: %w", cfg.ID, slots, err)
			}
			n.mem, mems[i] = m, m
			continue
		}
		mems[i] = make([]byte, slots*nam.NodeSize)
	}
	regions := make([]transport.Region, cfg.Servers)
	if indexdesign.IsCell(cfg.Workload) {
		if _, err := cell.ParseSearch(cfg.Search); err != nil {
			return nil, err
		}
		servers := make([]*cell.Server, cfg.Servers)
		for i := range servers {
			servers[i] = &cell.Server{MegaNodes: cfg.MegaNodes}
		}
		n.cl = &cell.Layout{Regions: regions, Slots: slots}
		if err := cell.Format(n.cl, mems, servers, cell.Lows(2*cfg.Servers, cfg.Keys), indexFanout); err != nil {
			return nil, err
		}
		if cfg.Memory {
			n.server, n.cellServer = servers[self], servers[self]
		}
	} else {
		design, ok := namDesigns[cfg.Workload]
		if !ok {
			return nil, fmt.Errorf("indexproc: workload %q: want nam-cg, nam-fg, nam-hybrid or cell", cfg.Workload)
		}
		servers := make([]*nam.Server, cfg.Servers)
		for i := range servers {
			servers[i] = &nam.Server{}
		}
		n.nl = &nam.Layout{Design: design, Regions: regions, Slots: slots, Bounds: nam.Bounds(cfg.Servers, cfg.Keys, false), Fanout: indexFanout}
		if err := nam.Format(n.nl, mems, servers); err != nil {
			return nil, err
		}
		if cfg.Memory {
			n.server = servers[self]
		}
	}
	tr, err := cfg.NewTransport(n.handle)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("indexproc: node %d: %w", cfg.ID, err)
	}
	n.tr = tr
	_, n.batchInLine = tr.(*shm.Transport)
	if cfg.Memory {
		if n.region, err = tr.Register(n.mem); err != nil {
			n.Close()
			return nil, fmt.Errorf("indexproc: server %d: registering memory: %w", cfg.ID, err)
		}
	}
	return n, nil
}

// handle answers a call (a server) or wakes the caller of a reply (a
// compute node). Anything else is counted and logged, never trusted.
func (n *Node) handle(from protocol.NodeID, frame, payload []byte) {
	m, err := protocol.Decode(frame)
	switch {
	case err != nil:
	case m.From != from:
		err = fmt.Errorf("frame claims to come from node %d", m.From)
	case n.server != nil && m.Type == protocol.TIndexCall:
		rep := n.server.Handle(payload, make([]byte, 0, 64))
		out := protocol.Message{Type: protocol.TIndexReply, From: n.cfg.ID, To: from, PID: m.PID, Count: uint16(len(rep))}
		var f [protocol.FrameSize]byte
		protocol.Encode(f[:], &out)
		err = n.tr.Send(from, f[:], rep)
		if err == nil && n.cellServer != nil {
			err = n.splitMeganodes()
		}
	case n.cellServer != nil && m.Type == protocol.TIndexReply && int(from) >= n.cfg.Computes:
		// A server's reply to this server's call (a split's or a link).
		if err = n.cellServer.HandleReply(payload); err == nil {
			err = n.splitMeganodes()
		}
	case n.server == nil && m.Type == protocol.TIndexReply:
		n.mu.Lock()
		ch := n.waiting[uint64(m.PID)]
		delete(n.waiting, uint64(m.PID))
		n.mu.Unlock()
		if ch == nil {
			err = fmt.Errorf("a reply to call %d, which nobody waits for", m.PID)
			break
		}
		ch <- append([]byte(nil), payload...)
	default:
		err = fmt.Errorf("unexpected %v", m.Type)
	}
	if err != nil {
		n.Bad.Add(1)
		n.cfg.Logger.Error("index: dropped a message", "from", from, "err", err)
	}
}

// splitMeganodes runs a Cell meganode split under way as far as it can go
// without a reply, on the thread that answered the call that started it
// or the reply it waited for (the paper's servers split on their polling
// thread too: other calls wait, one-sided READs do not), and sends the
// calls the server makes to servers (a split's reserve, adopts and unlock
// to the new meganode's server, its link to the root meganode's).
func (n *Node) splitMeganodes() error {
	s := n.cellServer
	for {
		for s.Ready() {
			if _, err := s.Step(); err != nil {
				return err
			}
		}
		out := s.TakeOutgoing()
		if len(out) == 0 {
			break
		}
		for _, o := range out {
			to := protocol.NodeID(n.cfg.Computes + o.To)
			if to == n.cfg.ID {
				if err := s.HandleReply(s.Handle(o.Req, nil)); err != nil {
					return err
				}
				continue
			}
			m := protocol.Message{Type: protocol.TIndexCall, From: n.cfg.ID, To: to, Count: uint16(len(o.Req))}
			var f [protocol.FrameSize]byte
			protocol.Encode(f[:], &m)
			if err := n.tr.Send(to, f[:], o.Req); err != nil {
				return fmt.Errorf("a meganode split's call to server %d: %w", to, err)
			}
		}
	}
	if d, adopted := s.SplitCounts(); d&(d-1) == 0 && n.splitsLogged.Swap(d) < d {
		n.cfg.Logger.Info("index: meganode splits", "done", d, "meganodes moved here", adopted)
	}
	return nil
}

// callTimeout bounds the wait for a reply: a server that died is an
// error, not a hang.
const callTimeout = 10 * time.Second

// fabric is a compute thread's nam.Fabric over the node's transport. It
// counts what its thread waited for: waits are round trips (a verb, a
// call, a batch of READs in flight together), reads the READs.
type fabric struct {
	n            *Node
	ch           chan []byte
	waits, reads uint64
	wg           sync.WaitGroup
}

func (f *fabric) Read(dst []byte, r transport.Region, off uint64) error {
	f.waits++
	f.reads++
	return f.n.tr.Read(dst, r, off)
}
func (f *fabric) Write(r transport.Region, off uint64, src []byte) error {
	f.waits++
	return f.n.tr.Write(r, off, src)
}
func (f *fabric) CompareAndSwap(r transport.Region, off, old, new uint64) (uint64, error) {
	f.waits++
	return f.n.tr.CompareAndSwap(r, off, old, new)
}
func (f *fabric) FetchAndAdd(r transport.Region, off, delta uint64) (uint64, error) {
	f.waits++
	return f.n.tr.FetchAndAdd(r, off, delta)
}

// ReadBatch is nam.BatchReader: a scan's prefetch of the leaves a head
// node lists. transport.Transport has no asynchronous READ, but shm and
// tcp both keep any number of verbs in flight from concurrent goroutines
// (each waits for its own answer by id), so a batch overlaps by issuing
// all but the first READ from goroutines of their own. That pays a
// goroutine hand-off per READ, which only a slow round trip repays:
// measured on the 2-core development machine ('cluster --workload nam-fg
// --nodes 1 --memory-nodes 2 --threads 1 --read-ratio 0.6 --scan-len 100',
// three runs each), a scan took 358us on average with goroutines against
// 442us back to back over tcp (4.0 round trips waited for instead of
// 4.7), but 236us against 219us over shm, whose verb is a copy through a
// shared ring on a spinning reader: there the READs go back to back from
// the calling goroutine.
func (f *fabric) ReadBatch(ops []nam.ReadOp) {
	f.reads += uint64(len(ops))
	if f.n.batchInLine || len(ops) < 2 {
		f.waits += uint64(len(ops))
		for i := range ops {
			ops[i].Err = f.n.tr.Read(ops[i].Dst, ops[i].Region, ops[i].Off)
		}
		return
	}
	f.waits++
	f.wg.Add(len(ops) - 1)
	for i := 1; i < len(ops); i++ {
		go func(op *nam.ReadOp) {
			defer f.wg.Done()
			op.Err = f.n.tr.Read(op.Dst, op.Region, op.Off)
		}(&ops[i])
	}
	ops[0].Err = f.n.tr.Read(ops[0].Dst, ops[0].Region, ops[0].Off)
	f.wg.Wait()
}

func (f *fabric) Call(server int, req, out []byte) ([]byte, error) {
	n := f.n
	if server < 0 || server >= n.cfg.Servers {
		return out, fmt.Errorf("index: call to server %d of %d", server, n.cfg.Servers)
	}
	f.waits++
	id := n.nextID.Add(1)
	n.mu.Lock()
	n.waiting[id] = f.ch
	n.mu.Unlock()
	to := protocol.NodeID(n.cfg.Computes + server)
	m := protocol.Message{Type: protocol.TIndexCall, From: n.cfg.ID, To: to, PID: protocol.PID(id), Count: uint16(len(req))}
	var fr [protocol.FrameSize]byte
	protocol.Encode(fr[:], &m)
	if err := n.tr.Send(to, fr[:], req); err != nil {
		n.mu.Lock()
		delete(n.waiting, id)
		n.mu.Unlock()
		return out, fmt.Errorf("index: call to server %d: %w", server, err)
	}
	select {
	case rep := <-f.ch:
		return append(out, rep...), nil
	case <-time.After(callTimeout):
		n.mu.Lock()
		delete(n.waiting, id)
		n.mu.Unlock()
		return out, fmt.Errorf("index: server %d did not answer call %d within %v: %w", server, id, callTimeout, transport.ErrPeerDown)
	}
}

// Peers gives a compute node every server's region.
func (n *Node) Peers(servers []transport.Region) error {
	if n.cfg.Memory {
		return nil
	}
	if len(servers) != n.cfg.Servers {
		return fmt.Errorf("indexproc: node %d: %d server regions, want %d", n.cfg.ID, len(servers), n.cfg.Servers)
	}
	if n.cl != nil {
		copy(n.cl.Regions, servers)
	} else {
		copy(n.nl.Regions, servers)
	}
	return nil
}

type indexClient interface {
	Get(key uint64) (uint64, bool, error)
	Put(key, val uint64) error
	Delete(key uint64) (bool, error)
	Scan(from, to uint64, fn func(k, v uint64) bool) error
}

func (n *Node) client(t int) (indexClient, *fabric) {
	f := &fabric{n: n, ch: make(chan []byte, 1)}
	if n.cl != nil {
		how, _ := cell.ParseSearch(n.cfg.Search)
		r := rand.New(rand.NewPCG(uint64(n.cfg.ID), uint64(t)))
		return &cell.Client{L: n.cl, F: f, Search: how, Now: func() int64 { return time.Now().UnixNano() }, Rand: r.Uint64}, f
	}
	return &nam.Client{L: n.nl, F: f, Alloc: int(n.cfg.ID)<<8 | t, HeadNodes: n.headNodes()}, f
}

// headNodes reports whether this node's tree has head nodes.
func (n *Node) headNodes() bool {
	return n.cfg.HeadGroup > 0 && n.nl != nil && n.nl.Design != nam.CoarseGrained
}

// headPassEvery is the pause between two head passes of compute node 0.
// (A pass over the leaves of 2,000 keys takes about 25ms over tcp on the
// 2-core development machine: a shorter pause would have the pass busy
// most of the run, competing with the clients for the cores.)
const headPassEvery = 50 * time.Millisecond

// headPass runs nam.RefreshHeads on its own client (and fabric) until
// stop is closed: right away, then headPassEvery after each pass ends (a
// pass over a big leaf level that takes longer is not run back to back).
func (n *Node) headPass(stop <-chan struct{}) (passes int, busy time.Duration, err error) {
	c := &nam.Client{L: n.nl, F: &fabric{n: n, ch: make(chan []byte, 1)}, Alloc: int(n.cfg.ID)<<8 | 0xff}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return passes, busy, nil
		case <-t.C:
		}
		start := time.Now()
		if _, err := c.RefreshHeads(n.cfg.HeadGroup); err != nil {
			return passes, busy, fmt.Errorf("head pass %d: %w", passes+1, err)
		}
		busy += time.Since(start)
		passes++
		t.Reset(headPassEvery)
	}
}

// Run runs wl.Threads clients for wl.Duration: uniform keys below
// n.cfg.Keys; of the reads 80% gets and 20% scans of 1 to wl.ScanLen keys
// (0: 12), of the writes 80% puts of a unique value and 20% deletes. The
// history records a scan as a read of every key it covers, a delete as a
// write of 0 (an absent key reads 0). With head nodes, compute node 0 runs
// the background pass beside its clients.
func (n *Node) Run(wl cluster.Workload) (cluster.RunResult, []checker.Op) {
	var res cluster.RunResult
	if n.cfg.Memory {
		res.Errors = append(res.Errors, "a memory server runs no workload")
		return res, nil
	}
	keys := n.cfg.Keys
	scanLen := uint64(12)
	if wl.ScanLen > 0 {
		scanLen = uint64(wl.ScanLen)
	}
	var passErr error
	stopPass := func() {}
	if n.headNodes() && n.cfg.ID == 0 {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			passes, busy, err := n.headPass(stop)
			passErr = err
			n.cfg.Logger.Info("index: head passes", "passes", passes, "busy", busy, "group", n.cfg.HeadGroup)
		}()
		stopPass = func() { close(stop); <-done }
	}
	var scans, scanNanos, scanWaits, scanReads atomic.Uint64
	res, ops := cluster.RunThreads(wl, n.cfg.ID, func(w cluster.Thread) func() (int64, error) {
		r := w.Rand()
		c, f := n.client(w.Index())
		return func() (int64, error) {
			key := r.Uint64N(keys)
			call := time.Now().UnixNano()
			add := func(k uint64, kind string, v uint64) {
				if wl.History {
					w.Record(checker.Op{Client: w.Client(), Page: k, Kind: kind, Value: v, Call: call, Return: time.Now().UnixNano()})
				}
			}
			var err error
			switch {
			case r.Float64() < wl.ReadRatio && r.IntN(5) > 0:
				var v uint64
				if v, _, err = c.Get(key); err == nil {
					add(key, checker.KindRead, v)
				}
			case r.Float64() < wl.ReadRatio:
				to := min(keys, key+1+r.Uint64N(scanLen))
				seen := map[uint64]uint64{}
				w0, r0 := f.waits, f.reads
				if err = c.Scan(key, to, func(k, v uint64) bool { seen[k] = v; return true }); err == nil {
					scans.Add(1)
					scanNanos.Add(uint64(time.Now().UnixNano() - call))
					scanWaits.Add(f.waits - w0)
					scanReads.Add(f.reads - r0)
					for k := key; k < to; k++ {
						add(k, checker.KindRead, seen[k])
					}
				}
			case r.IntN(5) > 0:
				v := w.NextWrite()
				if err = c.Put(key, v); err == nil {
					add(key, checker.KindWrite, v)
				}
			default:
				if _, err = c.Delete(key); err == nil {
					add(key, checker.KindWrite, 0)
				}
			}
			return time.Now().UnixNano() - call, err
		}
	})
	stopPass()
	res.Scans, res.ScanNanos, res.ScanWaits, res.ScanReads = scans.Load(), scanNanos.Load(), scanWaits.Load(), scanReads.Load()
	if passErr != nil {
		res.Errors = append(res.Errors, passErr.Error())
	}
	return res, ops
}

// Close stops the node.
func (n *Node) Close() error {
	var err error
	if n.tr != nil {
		err = n.tr.Close()
	}
	if n.mem != nil {
		unix.Munmap(n.mem)
		n.mem = nil
	}
	return err
}

// Serve answers control commands for an index node.
func Serve(n *Node, in io.Reader, out io.Writer) error {
	return cluster.ServeRegions(cluster.RegionNode{Region: n.region, Peers: func(cmd *cluster.RegionCommand) error { return n.Peers(cmd.Memory) },
		Run: n.Run, Dropped: n.Bad.Load}, in, out)
}
