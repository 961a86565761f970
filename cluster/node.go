package cluster

import (
	"context"
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
	"github.com/scalestore-go/scalestore/membership"
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
	// WriteThrough writes every page a Put changed through to its
	// directory's store before the Put returns (durability process).
	WriteThrough bool
	// Prepare, when set, runs on the new runtime before the transport
	// listens: what it creates on this node's own pages (a catalog) exists
	// before any peer can ask for it.
	Prepare func(rt *actors.Local) error
	// Membership, when set, makes the node a member of views agreed on
	// etcd (package membership): a node that dies is dropped from the view
	// once its lease expires, and the others go on without it
	// (actors/view.go). It needs WriteThrough: a view change loses the
	// copies a dead node held.
	Membership *membership.Config
	// ViewTimeout bounds how long StartNode waits for the node to be
	// active in its first view (default 30 s).
	ViewTimeout time.Duration
	// ReplicaStore opens this node's store of another node's directory
	// (actors.ReplicaConfig.Store), for Membership.Replicas 2
	// (docs/replication.md).
	ReplicaStore func(dir protocol.NodeID, mustExist bool) (storage.PageStore, uint64, error)
	// FreshStore: the node's store was made afresh (new, or reformatted).
	// With replicas it first takes itself out of the record of current
	// copies (membership.ForgetCopies), so that it serves none of what it
	// held before: it catches up on its own directory like a node that
	// returns on an older store.
	FreshStore bool
}

// Node is one node of a running cluster.
type Node struct {
	ID   protocol.NodeID
	RT   *actors.Local
	Host *actors.Host
	Tr   transport.Transport
	tree *btree.Tree
	log  *slog.Logger
	// persist is the B-tree's write-through (NodeConfig.WriteThrough).
	persist    func(w *bufmgr.Worker, g *bufmgr.ExclusiveGuard) error
	persistAll func(w *bufmgr.Worker, gs ...*bufmgr.ExclusiveGuard) error
	// allocInner allocates the tree's inner pages (setTree).
	allocInner func(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error)
	ops        atomic.Uint64
	// fetches holds the latency of ownership requests for pages of other
	// directories (under the runtime's lock).
	fetches *hdrhistogram.Histogram
	// OnObtained, when set (under the runtime's lock), sees every
	// ownership request's latency too (the metrics).
	OnObtained func(pid protocol.PID, mode protocol.Mode, waited time.Duration)
	// Member is the node's membership (NodeConfig.Membership), nil if none.
	Member *membership.Member
	views  *viewFollower
}

// StartNode starts the runtime, the transport and the actors of one node.
func StartNode(cfg NodeConfig) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// The transport exists only after the runtime: the watchdog asks it
	// through tr, set below.
	var tr atomic.Pointer[transport.Transport]
	downPeers := func() error {
		t := tr.Load()
		if t == nil {
			return nil
		}
		pd, ok := (*t).(interface{ PeerDown(protocol.NodeID) error })
		if !ok {
			return nil
		}
		var errs []error
		for id := range protocol.MaxNodes {
			if id != int(cfg.ID) {
				if err := pd.PeerDown(protocol.NodeID(id)); err != nil {
					errs = append(errs, err)
				}
			}
		}
		return errors.Join(errs...)
	}
	rt, err := actors.NewClusterNode(actors.ClusterConfig{
		Config: actors.Config{ID: cfg.ID, CacheFrames: cfg.CachePages},
		Logger: cfg.Logger, RequestTimeout: cfg.Timeout, DownPeers: downPeers,
	}, cfg.Store)
	if err != nil {
		return nil, err
	}
	n := &Node{ID: cfg.ID, RT: rt, log: cfg.Logger}
	if cfg.WriteThrough {
		n.persist, n.persistAll = rt.Persist, rt.PersistAll
	}
	if cfg.Membership != nil {
		if !cfg.WriteThrough {
			rt.Stop()
			return nil, fmt.Errorf("cluster: node %d: membership needs write-through (durability process or sync): a view change drops the copies a dead node held", cfg.ID)
		}
		n.views = newViewFollower(n)
		rt.EnableViews(n.views.validUntil, n.views.active)
		if cfg.Membership.Replicas > 1 {
			if cfg.ReplicaStore == nil {
				rt.Stop()
				return nil, fmt.Errorf("cluster: node %d: replicas %d need a store for other directories' pages (NodeConfig.ReplicaStore)", cfg.ID, cfg.Membership.Replicas)
			}
			n.views.replicas = cfg.Membership.Replicas
			rt.EnableReplicas(actors.ReplicaConfig{Store: cfg.ReplicaStore, Record: n.views.record})
		}
	}
	if cfg.Trace {
		rt.EnableTrace()
	}
	if cfg.Prepare != nil {
		if err := cfg.Prepare(rt); err != nil {
			rt.Stop()
			return nil, err
		}
	}
	// Frames may arrive as soon as the transport listens, before the host
	// exists: the forwarder waits for it.
	ready := make(chan struct{})
	var deliver transport.Handler
	forward := func(from protocol.NodeID, frame, payload []byte) {
		<-ready
		deliver(from, frame, payload)
	}
	t, err := cfg.NewTransport(forward)
	if err != nil {
		rt.Stop()
		return nil, fmt.Errorf("cluster: node %d: %w", cfg.ID, err)
	}
	tr.Store(&t)
	var hopts []actors.HostOption
	if !cfg.ActorDelivery {
		hopts = append(hopts, actors.InlineFrames())
	}
	host, h, err := actors.NewHost(rt, cfg.ID, t, hopts...)
	if err != nil {
		t.Close()
		rt.Stop()
		return nil, err
	}
	deliver = h
	close(ready)
	if p, ok := t.(interface{ Poll() int }); ok && !cfg.ActorDelivery && cfg.PollSpin > 0 {
		// Workers serve incoming frames themselves (run to completion):
		// the reader goroutines remain for when no worker runs.
		var every time.Duration
		if pi, ok := t.(interface{ PollInterval() time.Duration }); ok {
			every = pi.PollInterval()
		}
		rt.SetPoller(p.Poll, cfg.PollSpin, every)
		if naps, ok := t.(actors.ReaderNaps); ok && !cfg.NoReaderNaps {
			rt.SetReaderNaps(naps)
		}
	}
	n.Tr, n.Host = t, host
	if cfg.Membership != nil {
		if cfg.FreshStore && cfg.Membership.Replicas > 1 {
			timeout := cfg.ViewTimeout
			if timeout <= 0 {
				timeout = 30 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), min(timeout, max(cfg.Membership.DialTimeout, time.Second)))
			forgot, err := membership.ForgetCopies(ctx, *cfg.Membership)
			cancel()
			if err != nil {
				host.Stop()
				t.Close()
				rt.Stop()
				return nil, fmt.Errorf("%w: node %d: %w", ErrNoView, cfg.ID, err)
			}
			if forgot > 0 {
				cfg.Logger.Warn("a fresh store: this node no longer counts as holding the copies the membership record had on it", "node", cfg.ID, "directories", forgot)
			}
		}
		if err := n.views.join(*cfg.Membership, cfg.ViewTimeout); err != nil {
			host.Stop()
			t.Close()
			rt.Stop()
			return nil, err
		}
	}
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
	if n.views != nil {
		n.views.leave(false)
	}
	n.RT.Stop()
	n.Host.Stop()
	return n.Tr.Close()
}

// Kill stops the node as the death of its process would (tests of
// failures in one process): no page is handed back, its membership lease
// is left to expire (the others change the view only then), its
// connections close. Its store is left as it is: abandon it.
func (n *Node) Kill() {
	if n.views != nil {
		n.views.kill()
	}
	n.RT.Stop()
	n.Host.Stop()
	n.Tr.Close()
}

// Shutdown ends the node cleanly, as one of a cluster stopped together:
// it hands every page it holds back to its directory (Local.Leave), then
// keeps serving as a directory until no peer holds a page of its own (the
// peers are leaving too) or limit passes, then writes its pages back and
// stops. held is how many pages peers still held at the end: a non-zero
// held comes with an error, and the pages' latest values may be only in
// those peers' caches. No worker may run meanwhile.
func (n *Node) Shutdown(peers []protocol.NodeID, limit time.Duration) (held int, err error) {
	deadline := time.Now().Add(limit)
	n.RT.StopRereplication() // while this node still follows the views
	if _, err := n.RT.Leave(limit); err != nil {
		n.Stop()
		return 0, fmt.Errorf("cluster: node %d: handing its pages back: %w", n.ID, err)
	}
	if n.views != nil {
		// With membership the node leaves its view: the others give up
		// their copies of its pages (every write to them is on its store
		// already), so it need not wait for them to hand them back.
		n.views.leave(true)
		peers = nil
	}
	for {
		held = 0
		var by []protocol.NodeID
		for _, p := range peers {
			if p == n.ID {
				continue
			}
			if k := n.RT.Names(p); k > 0 {
				held += k
				by = append(by, p)
			}
		}
		if held == 0 {
			break
		}
		if time.Now().After(deadline) {
			n.Stop()
			return held, fmt.Errorf("cluster: node %d: after %v nodes %v still hold %d of its pages (were they stopped too?)", n.ID, limit, by, held)
		}
		time.Sleep(10 * time.Millisecond)
	}
	err = n.RT.Close() // writes back what the directory took back
	if n.views != nil {
		n.views.leave(true)
	}
	n.Host.Stop()
	if cerr := n.Tr.Close(); err == nil {
		err = cerr
	}
	return 0, err
}

func (n *Node) session(w *bufmgr.Worker) btree.Session {
	return btree.Session{Cache: n.RT.Node().Cache(), Worker: w, Allocate: n.RT.Allocate, AllocateInner: n.allocInner, Persist: n.persist, PersistAll: n.persistAll}
}

// setTree uses t, its inner pages allocated on its home node: a dead node
// then takes only its leaves out of reach (docs/durability.md); with
// replicated directories, on this node's own.
func (n *Node) setTree(t *btree.Tree) {
	n.tree = t
	home, rt := t.Catalog().Dir(), n.RT
	n.allocInner = func(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error) { return rt.AllocateOn(w, home) }
	if n.views != nil && n.views.replicas > 1 {
		// No home node: inner pages are allocated like leaves, on this
		// node's directory, and replicated (docs/replication.md).
		n.allocInner = rt.Allocate
	}
}

// CreateTable creates the B-tree (its catalog page lives on this node) and
// returns its catalog PID, which the other nodes Open.
func (n *Node) CreateTable() (protocol.PID, error) {
	err := n.RT.Do(func(w *bufmgr.Worker) error {
		t, err := btree.Create(n.session(w))
		if err == nil {
			n.setTree(t)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return n.tree.Catalog(), nil
}

// OpenTable uses the tree created on another node.
func (n *Node) OpenTable(catalog protocol.PID) { n.setTree(btree.Open(catalog)) }

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
