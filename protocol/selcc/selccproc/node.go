package selccproc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/linecache"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/ycsb"
)

// Config configures one SELCC node process.
type Config struct {
	ID      protocol.NodeID
	Memory  bool // a memory node; else a compute node
	Lines   int  // memory: the lines it holds
	Frames  int  // compute: cache frames
	Threads int  // compute: workload threads
	// Gamma is the lease threshold (0: off).
	Gamma        float64
	NewTransport func(transport.Handler) (transport.Transport, error)
	Logger       *slog.Logger
}

// Node is one SELCC node process.
type Node struct {
	cfg Config
	tr  transport.Transport
	mem []byte // off-heap (the transport's or mmap'd): registered memory must not move
	// mmapped: mem is our own mapping, unmapped by Close (else the
	// transport's, released by its Close).
	mmapped  bool
	frameMem []byte // the cache's frames (mmap'd), unmapped by Close
	region   transport.Region
	cache    *linecache.Cache
	stop     atomic.Bool
	served   chan struct{}
	// MemoryMessages counts messages that reached a memory node (0 by
	// design).
	MemoryMessages atomic.Uint64
	deliver        atomic.Pointer[linecache.Cache]
}

// NewNode starts the node's transport and registers its memory: the
// lines of a memory node, the reply slots of a compute node.
func NewNode(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Node{cfg: cfg, served: make(chan struct{})}
	size := linecache.ReplyBytes(cfg.Threads)
	if cfg.Memory {
		size = linecache.MemoryBytes(cfg.Lines)
	}
	if size <= 0 {
		return nil, fmt.Errorf("selccproc: node %d: nothing to register (lines %d, threads %d)", cfg.ID, cfg.Lines, cfg.Threads)
	}
	tr, err := cfg.NewTransport(n.handle)
	if err != nil {
		return nil, fmt.Errorf("selccproc: node %d: %w", cfg.ID, err)
	}
	n.tr = tr
	// Memory the transport allocates its peers may map (shm: their verbs
	// on it are then memory accesses of the calling thread).
	var mem []byte
	if a, ok := tr.(transport.Allocator); ok {
		mem, err = a.AllocMemory(size)
	} else {
		mem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		n.mmapped = err == nil
	}
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("selccproc: node %d: allocating %d bytes: %w", cfg.ID, size, err)
	}
	n.mem = mem
	if n.region, err = tr.Register(mem); err != nil {
		n.Close()
		return nil, fmt.Errorf("selccproc: node %d: registering memory: %w", cfg.ID, err)
	}
	return n, nil
}

// handle receives a message: an invalidation for a compute node's cache.
func (n *Node) handle(from protocol.NodeID, frame, _ []byte) {
	if n.cfg.Memory {
		n.MemoryMessages.Add(1)
		n.cfg.Logger.Error("selcc: a memory node received a message; memory nodes have no handler", "from", from)
		return
	}
	m, err := protocol.Decode(frame)
	if err == nil && m.From != from {
		err = fmt.Errorf("frame claims to come from node %d", m.From)
	}
	c := n.deliver.Load()
	if err == nil && c == nil {
		err = errors.New("an invalidation before the cache was set up")
	}
	if err == nil {
		err = c.Deliver(&m)
	}
	if err != nil {
		n.cfg.Logger.Error("selcc: dropped a message", "from", from, "err", err)
	}
}

// Peers sets up a compute node's cache once every node registered.
func (n *Node) Peers(computes []protocol.NodeID, replies []transport.Region, memory []transport.Region) error {
	if n.cfg.Memory {
		return nil
	}
	self := -1
	for i, id := range computes {
		if id == n.cfg.ID {
			self = i
		}
	}
	if self < 0 || len(replies) != len(computes) {
		return fmt.Errorf("selccproc: node %d: not among the compute nodes %v", n.cfg.ID, computes)
	}
	mem := map[protocol.NodeID]transport.Region{}
	for _, r := range memory {
		mem[r.Node] = r
	}
	// The frames' memory, populated now: a miss's READ lands in a page
	// that is there (RDMA registers a cache's buffers, pinning them), not
	// in one the kernel allocates and zeroes on the way.
	frameMem, err := unix.Mmap(-1, 0, max(n.cfg.Frames, 1)*linecache.LineSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("selccproc: node %d: mapping %d frames: %w", n.cfg.ID, n.cfg.Frames, err)
	}
	n.frameMem = frameMem
	c, err := linecache.New(linecache.Config{
		Self: selcc.Node(self), ID: n.cfg.ID, Computes: computes, Replies: replies, ReplyMem: n.mem,
		Memory: mem, Frames: n.cfg.Frames, FrameMem: frameMem, Threads: n.cfg.Threads, Gamma: n.cfg.Gamma, Priority: true,
		RTT: 20_000, PollEvery: 1_000, Inbox: len(computes) * n.cfg.Threads * 2,
		Post: linecache.Sequential{V: n.tr},
		Send: func(m *protocol.Message) error {
			var f [protocol.FrameSize]byte
			protocol.Encode(f[:], m)
			return n.tr.Send(m.To, f[:], nil)
		},
		Now: func() int64 { return time.Now().UnixNano() },
	})
	if err != nil {
		return err
	}
	n.cache = c
	n.deliver.Store(c)
	go func() {
		defer close(n.served)
		c.Serve(&linecache.Thread{P: linecache.NewGoroutineWaiter()}, n.stop.Load)
	}()
	return nil
}

// Region is the node's registered memory.
func (n *Node) Region() transport.Region { return n.region }

// lineOf is line i of a cluster with memory nodes memory (round-robin).
func lineOf(memory []protocol.NodeID, i int) protocol.PID {
	return protocol.MakePID(memory[i%len(memory)], uint64(i/len(memory)))
}

// Run runs the register workload for wl.Duration on wl.Threads
// goroutines: each operation reads or writes one of wl.Records lines
// (zipfian), a write putting a unique id at both ends of the line.
func (n *Node) Run(wl cluster.Workload, memory []protocol.NodeID) (cluster.RunResult, []checker.Op) {
	var res cluster.RunResult
	if n.cache == nil || len(memory) == 0 {
		res.Errors = append(res.Errors, "run before peers")
		return res, nil
	}
	fetchHists := make([]*hdrhistogram.Histogram, wl.Threads) // each thread's misses
	res, ops := cluster.RunThreads(wl, n.cfg.ID, func(w cluster.Thread) func() (int64, error) {
		r := w.Rand()
		pick := mrand.New(mrand.NewSource(int64(r.Uint64()))) // the chooser's own
		choose := ycsb.NewChooser(int64(wl.Records), wl.Zipf) // its generator is not safe to share
		serve := n.inlineServer()
		waiter := linecache.NewGoroutineWaiter()
		waiter.Idle = serve.run
		th := &linecache.Thread{P: waiter, Slot: w.Index()}
		var misses uint64
		var done uint
		fetches := hdrhistogram.New(1, int64(10*time.Second), 3)
		fetchHists[w.Index()] = fetches
		return func() (int64, error) {
			if done++; done%inlineEvery == 0 {
				serve.run()
			}
			if serve.err != nil {
				return 0, serve.err
			}
			i := int(choose(pick))
			line := lineOf(memory, i)
			op := checker.Op{Client: w.Client(), Page: uint64(i), Call: time.Now().UnixNano()}
			var err error
			if r.Float64() < wl.ReadRatio {
				op.Kind = checker.KindRead
				err = n.cache.Access(th, line, selcc.Read, func(data []byte) {
					v, whole := checker.PageValue(data)
					if !whole {
						v = checker.TornValue
					}
					op.Value = v
				})
			} else {
				v := w.NextWrite()
				op.Kind, op.Value = checker.KindWrite, v
				err = n.cache.Access(th, line, selcc.Write, func(data []byte) {
					checker.PutPageValue(data, v, false)
					checker.PutPageValue(data, v, true)
				})
			}
			op.Return = time.Now().UnixNano()
			if err == nil && wl.History {
				w.Record(op)
			}
			if th.Misses != misses {
				// An operation that missed: its acquire is a remote fetch
				// (its verbs, FAA or CAS and READ, and what the cache did
				// between them).
				misses = th.Misses
				fetches.RecordValue(max(th.MissNanos, 1))
			}
			return op.Return - op.Call, err
		}
	})
	fetches := hdrhistogram.New(1, int64(10*time.Second), 3)
	for _, h := range fetchHists {
		if h != nil {
			fetches.Merge(h)
		}
	}
	res.Fetches = fetches.Export()
	s := &n.cache.Stats
	res.Stats = cluster.Stats{Ops: uint64(res.Ops), CacheHits: atomic.LoadUint64(&s.Hits), CacheMisses: atomic.LoadUint64(&s.Misses),
		RemoteFetches: atomic.LoadUint64(&s.Misses), Invalidations: atomic.LoadUint64(&s.Invalidations), Evictions: atomic.LoadUint64(&s.Evictions)}
	return res, ops
}

// inlineEvery is how many operations a worker runs between two looks at
// its node's messages (and the looks it takes whenever it waits).
const inlineEvery = 8

// inlineServer is a worker's share of the node's message handling: it
// takes what the peers sent (the transport's Poll, where it has one) and
// answers the invalidations itself (linecache's run to completion).
type inlineServer struct {
	n    *Node
	poll func() int
	t    *linecache.Thread // the handler thread for the answers' verbs
	err  error             // the first failed answer: the worker stops with it
}

func (n *Node) inlineServer() *inlineServer {
	s := &inlineServer{n: n, t: &linecache.Thread{P: linecache.NewGoroutineWaiter()}}
	if p, ok := n.tr.(interface{ Poll() int }); ok {
		s.poll = p.Poll
	}
	return s
}

func (s *inlineServer) run() {
	c := s.n.cache
	c.BeginInline()
	if s.poll != nil {
		s.poll()
	}
	if _, err := c.ServeWaiting(s.t); err != nil && s.err == nil {
		s.err = fmt.Errorf("selccproc: node %d: answering an invalidation: %w", s.n.cfg.ID, err)
	}
	c.EndInline()
}

// Close stops the node.
func (n *Node) Close() error {
	n.stop.Store(true)
	if c := n.deliver.Load(); c != nil {
		c.WakeHandler()
		<-n.served
	}
	var err error
	if n.tr != nil {
		err = n.tr.Close()
	}
	if n.mmapped {
		unix.Munmap(n.mem)
	}
	if n.frameMem != nil {
		unix.Munmap(n.frameMem) // the handler and the workers stopped
	}
	return err
}

// Serve answers control commands for a SELCC node.
func Serve(n *Node, in io.Reader, out io.Writer) error {
	var memory []protocol.NodeID
	return cluster.ServeRegions(cluster.RegionNode{Region: n.Region(),
		Peers: func(cmd *cluster.RegionCommand) error {
			memory = memory[:0]
			for _, r := range cmd.Memory {
				memory = append(memory, r.Node)
			}
			return n.Peers(cmd.Computes, cmd.Replies, cmd.Memory)
		},
		Run:     func(wl cluster.Workload) (cluster.RunResult, []checker.Op) { return n.Run(wl, memory) },
		Dropped: n.MemoryMessages.Load}, in, out)
}
