package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
	"github.com/scalestore-go/scalestore/transport"
)

// NodeConfig configures one node.
type NodeConfig struct {
	ID           protocol.NodeID
	CachePages   int
	Store        storage.PageStore
	Logger       *slog.Logger
	Timeout      time.Duration // how long a worker may wait on a peer (default 10 s)
	NewTransport func(handler transport.Handler) (transport.Transport, error)
	// ActorDelivery routes every incoming frame through the handler
	// actor's inbox (hollywood's mailbox) instead of handling it on the
	// transport's goroutine; slower by a goroutine hand-off per message.
	ActorDelivery bool
	// NoReaderNaps keeps the transport's readers parking as soon as they
	// find nothing, even while workers poll (shm's readers otherwise nap:
	// transport/shm/nap.go).
	NoReaderNaps bool
	// PollSpin is how long a waiting worker polls the transport (where it
	// can be polled: shm) before it sleeps; 0: workers do not poll.
	PollSpin time.Duration
	// Trace times the hops of remote fetches (actors.RemoteTrace; Run
	// reports them).
	Trace bool
}

// Node is one node of a running cluster.
type Node struct {
	ID   protocol.NodeID
	RT   *actors.Local
	Host *actors.Host
	Tr   transport.Transport
	tree *btree.Tree
	log  *slog.Logger
	ops  atomic.Uint64
	// fetches holds the latency of ownership requests for pages of other
	// directories (under the runtime's lock).
	fetches *hdrhistogram.Histogram
	// OnObtained, when set (under the runtime's lock), sees every
	// ownership request's latency too (the metrics).
	OnObtained func(pid protocol.PID, mode protocol.Mode, waited time.Duration)
}

// StartNode starts the runtime, the transport and the actors of one node.
func StartNode(cfg NodeConfig) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rt, err := actors.NewClusterNode(actors.ClusterConfig{
		Config: actors.Config{ID: cfg.ID, CacheFrames: cfg.CachePages},
		Logger: cfg.Logger, RequestTimeout: cfg.Timeout,
	}, cfg.Store)
	if err != nil {
		return nil, err
	}
	n := &Node{ID: cfg.ID, RT: rt, log: cfg.Logger}
	if cfg.Trace {
		rt.EnableTrace()
	}
	// Frames may arrive as soon as the transport listens, before the host
	// exists: the forwarder waits for it.
	ready := make(chan struct{})
	var deliver transport.Handler
	forward := func(from protocol.NodeID, frame, payload []byte) {
		<-ready
		deliver(from, frame, payload)
	}
	tr, err := cfg.NewTransport(forward)
	if err != nil {
		rt.Stop()
		return nil, fmt.Errorf("cluster: node %d: %w", cfg.ID, err)
	}
	var hopts []actors.HostOption
	if !cfg.ActorDelivery {
		hopts = append(hopts, actors.InlineFrames())
	}
	host, h, err := actors.NewHost(rt, cfg.ID, tr, hopts...)
	if err != nil {
		tr.Close()
		rt.Stop()
		return nil, err
	}
	deliver = h
	close(ready)
	if p, ok := tr.(interface{ Poll() int }); ok && !cfg.ActorDelivery && cfg.PollSpin > 0 {
		// Workers serve incoming frames themselves (run to completion):
		// the reader goroutines remain for when no worker runs.
		var every time.Duration
		if pi, ok := tr.(interface{ PollInterval() time.Duration }); ok {
			every = pi.PollInterval()
		}
		rt.SetPoller(p.Poll, cfg.PollSpin, every)
		if naps, ok := tr.(actors.ReaderNaps); ok && !cfg.NoReaderNaps {
			rt.SetReaderNaps(naps)
		}
	}
	n.Tr, n.Host = tr, host
	n.fetches = hdrhistogram.New(1, 60_000_000, 3)
	rt.Locked(func() {
		rt.OnObtained = func(pid protocol.PID, mode protocol.Mode, waited time.Duration) {
			if pid.Dir() != n.ID {
				// A page whose directory is another node: at least a
				// round trip to it.
				_ = n.fetches.RecordValue(int64(waited))
			}
			if n.OnObtained != nil {
				n.OnObtained(pid, mode, waited)
			}
		}
	})
	return n, nil
}

// Stop ends the node: workers still waiting get an error.
func (n *Node) Stop() error {
	n.RT.Stop()
	n.Host.Stop()
	return n.Tr.Close()
}

func (n *Node) session(w *bufmgr.Worker) btree.Session {
	return btree.Session{Cache: n.RT.Node().Cache(), Worker: w, Allocate: n.RT.Allocate}
}

// CreateTable creates the B-tree (its catalog page lives on this node) and
// returns its catalog PID, which the other nodes Open.
func (n *Node) CreateTable() (protocol.PID, error) {
	err := n.RT.Do(func(w *bufmgr.Worker) error {
		t, err := btree.Create(n.session(w))
		n.tree = t
		return err
	})
	if err != nil {
		return 0, err
	}
	return n.tree.Catalog(), nil
}

// OpenTable uses the tree created on another node.
func (n *Node) OpenTable(catalog protocol.PID) { n.tree = btree.Open(catalog) }

var errNoTable = errors.New("cluster: no table: create or open it first")

// Get implements ycsb.Engine.
func (n *Node) Get(key, dst []byte) (val []byte, ok bool, err error) {
	if n.tree == nil {
		return dst, false, errNoTable
	}
	err = n.RT.Do(func(w *bufmgr.Worker) error {
		val, ok, err = n.tree.Get(n.session(w), key, dst)
		return err
	})
	n.ops.Add(1)
	return val, ok, err
}

// Put implements ycsb.Engine.
func (n *Node) Put(key, val []byte) error {
	if n.tree == nil {
		return errNoTable
	}
	err := n.RT.Do(func(w *bufmgr.Worker) error { return n.tree.Put(n.session(w), key, val) })
	n.ops.Add(1)
	return err
}

// Stats are a node's counters.
type Stats struct {
	Ops           uint64 `json:"ops"`
	CacheHits     uint64 `json:"cache_hits"`
	CacheMisses   uint64 `json:"cache_misses"`
	RemoteFetches uint64 `json:"remote_page_fetches"`
	Invalidations uint64 `json:"invalidations"`
	Evictions     uint64 `json:"evictions"`
	SSDReads      uint64 `json:"ssd_reads"`
	SSDWrites     uint64 `json:"ssd_writes"`
	BadFrames     uint64 `json:"bad_frames"`
}

// Stats reads the node's counters.
func (n *Node) Stats() Stats {
	var s Stats
	n.RT.Locked(func() {
		node := n.RT.Node()
		cs := node.Cache().Stats()
		s = Stats{CacheHits: cs.Hits, CacheMisses: cs.Misses, RemoteFetches: node.Stats.RemoteFetches,
			Invalidations: node.Stats.Invalidations, Evictions: node.Stats.Evictions,
			SSDReads: n.RT.Reads, SSDWrites: n.RT.Writes}
	})
	s.BadFrames = n.RT.BadFrames.Load()
	s.Ops = n.ops.Load()
	return s
}

// Value layout of the YCSB table in a checked run: the first 8 bytes of
// every value are a unique write id, so a read names the write it saw.
func writeID(node protocol.NodeID, thread int, seq uint64) uint64 {
	return uint64(node+1)<<56 | uint64(thread&0xff)<<48 | seq&(1<<48-1)
}

func valueID(v []byte) uint64 {
	if len(v) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(v)
}
