package scalestore

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/btree"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/membership"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/resp"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/storage/nvme"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/ibverbs"
)

// KV is what a single-node DB and a node of a cluster both offer: code
// written against it runs on either, one line (Open or Join) apart.
type KV interface {
	Get(key, dst []byte) (val []byte, ok bool, err error)
	GetBatch(keys, vals [][]byte, found []bool) error
	Put(key, val []byte) error
	PutIf(key, val []byte, cond func(old []byte, found bool) bool) (applied bool, err error)
	Modify(key []byte, fn func(old []byte, found bool) (val []byte, exists, write bool)) error
	Delete(key []byte) (found bool, err error)
	Scan(from, to []byte, fn func(key, val []byte) bool) error
	NewSession() *Session
	Stats() Stats
	Close() error
}

var (
	_ KV = (*DB)(nil)
	_ KV = (*Cluster)(nil)
)

// ClusterOptions configure Join: one node of a cluster, started in this
// process. Every node of a cluster is given the same Peers, ClusterID and
// Bootstrap (one configuration file copied to every host: docs/deploy.md).
type ClusterOptions struct {
	// ID is this node, 0..255; Peers maps every node (this one too) to its
	// TCP address. Listen, if set, is where this node listens instead of
	// Peers[ID] (e.g. 0.0.0.0:7000 behind the address peers dial).
	ID     int
	Peers  map[int]string
	Listen string
	// ClusterID names the cluster: nodes of another cluster are refused
	// (default 1).
	ClusterID uint64
	// Bootstrap is the node that creates the catalog of a new cluster
	// (default 0). The other nodes find it there; it must be in Peers.
	Bootstrap int
	// Transport is tcp (default), shm (every node on this host; SocketDir
	// holds the bootstrap sockets), auto (shm when every peer is on a
	// loopback address) or ibverbs (RDMA: a binary built with -tags
	// ibverbs, an RDMA device chosen by RDMA; Peers are then the
	// addresses of the out-of-band TCP channel that connects the queue
	// pairs, docs/rdma.md). Transports lists what this binary has.
	Transport string
	SocketDir string
	// RDMA selects the device of the ibverbs transport.
	RDMA RDMAOptions
	// TLS, for tcp, is mutual TLS between the nodes (tcp.LoadTLS).
	TLS *tls.Config
	// Data is the directory of this node's page store (empty: in memory,
	// nothing survives Close). A store is reopened only if its node closed
	// it cleanly (Close, SIGTERM to the node command); Reformat discards
	// one that was not.
	Data     string
	Reformat bool
	// CachePages is the buffer pool in 4 KiB frames (default 16384, 64 MiB).
	CachePages int
	// Timeout is how long an operation waits for a peer before the node
	// reports it down (default 10 s); JoinTimeout how long Join waits for
	// the bootstrap node and, in a cluster without membership that writes
	// through, for every peer to have rolled its transaction records
	// forward (the start gate, docs/transactions.md; default 2 min);
	// ShutdownTimeout how long Close
	// waits for the peers to hand back this node's pages (default 30 s).
	Timeout, JoinTimeout, ShutdownTimeout time.Duration
	// RESP, if set, serves the Redis protocol at this address (host:port)
	// on the default table; RESPPassword requires AUTH; RESPTLS serves it
	// over TLS.
	RESP         string
	RESPPassword string
	RESPTLS      *tls.Config
	// RESPUnprotected turns protected mode off: without it (and without
	// RESPPassword), RESP clients that do not connect from the loopback
	// interface get Redis's -DENIED and are closed.
	RESPUnprotected bool
	// RESPLoop is how RESP connections are served: resp.LoopEpoll (""
	// means it on Linux) on a few event loops, or resp.LoopGoroutine, a
	// goroutine per connection (resp.Config.Loop).
	RESPLoop string
	// RESPLoops is how many event loops serve RESP (0: GOMAXPROCS, half of
	// them for clients that pipeline or wait for peers: resp.Config.Loops).
	RESPLoops int
	// Durability is what a write that returned survives: DurabilityNone
	// (the paper: a page lives in the caches until it is evicted or the
	// cluster stops cleanly) or DurabilityProcess (the default: every page
	// a write changed is on its directory's store before the write
	// returns, so the death of any node's process loses no acknowledged
	// write; docs/durability.md), or DurabilitySync (process, and each
	// write-through also waits for its directory's device cache to be
	// flushed, one flush for the write-throughs that wait together: it
	// survives power loss). A node without Data keeps none: its store is in
	// memory.
	Durability string
	// Etcd, if set, are the client URLs of an etcd cluster that keeps the
	// membership (package membership): a node whose process dies is out of
	// the view once its lease (LeaseTTL, default 2 s) expires, and the
	// others go on without it; operations on its pages fail with
	// actors.ErrDirectoryDown until it is back. Without Etcd a dead node
	// fails its peers' operations that need it (after Timeout). Needs
	// durability process or sync.
	Etcd     []string
	LeaseTTL time.Duration
	// Replicas is how many nodes keep each directory's pages
	// (docs/replication.md): 2, the default with Etcd, keeps every page on
	// a primary and a backup, so that every key stays served through any
	// one node's death; 1, the default without, keeps each page on its
	// directory's node only. 2 needs Etcd: placement follows the
	// membership view.
	Replicas int
	Logger   *slog.Logger

	// rdmaDevice, if set, gives the ibverbs transport its device: the
	// tests' fake verbs (ibverbs.NewFabric), in place of a real device.
	rdmaDevice func() (ibverbs.Device, error)
}

// RDMAOptions select the RDMA device and addressing of the ibverbs
// transport (ClusterOptions.RDMA; docs/rdma.md). The zero value takes the
// first device's port 1, its active MTU and automatic addressing.
type RDMAOptions struct {
	Device string // empty: the first device (ibv_devices lists them)
	Port   int    // 0: port 1
	// UseGIDIndex makes the port use GID table entry GIDIndex (show_gids
	// lists them); unset, InfiniBand routes by LID and RoCE takes a RoCE
	// v2 GID.
	UseGIDIndex bool
	GIDIndex    int
	MTU         int // path MTU cap in bytes; 0: the port's active MTU
	Mailboxes   int // mailbox slots per peer, the same on every node; 0: 16
}

func (r RDMAOptions) config() cluster.RDMAConfig {
	c := cluster.RDMAConfig{Device: r.Device, Port: r.Port, GIDIndex: -1, MTU: r.MTU, Mailboxes: r.Mailboxes}
	if r.UseGIDIndex {
		c.GIDIndex = r.GIDIndex
	}
	return c
}

// Transports are the values ClusterOptions.Transport takes in this binary:
// ibverbs only in one built with -tags ibverbs.
func Transports() []string {
	if ibverbs.Built {
		return []string{"tcp", "shm", "auto", "ibverbs"}
	}
	return []string{"tcp", "shm", "auto"}
}

// The durability settings (ClusterOptions.Durability).
const (
	DurabilityNone    = "none"
	DurabilityProcess = "process"
	DurabilitySync    = "sync"
)

// writesThrough reports whether writes are written through (process or
// sync).
func (o ClusterOptions) writesThrough() bool { return o.Durability != DurabilityNone }

// DefaultTable is the table Join's handle reads and writes.
const DefaultTable = "default"

// Cluster is this process's node of a cluster: Get, Put and the rest of KV
// on the default table, whose pages any node reads and writes (they move
// between the nodes by the coherence protocol). Table opens or creates
// another named table. Safe for concurrent use.
type Cluster struct {
	opts  ClusterOptions
	node  *cluster.Node
	store Store
	peers []protocol.NodeID
	id    identity
	cat   *btree.Tree
	def   *DB
	resp  *resp.Server

	// replicas are the node's stores of other directories (Replicas 2);
	// freshStore: its own store was made afresh by this Join.
	replicas   *replicaStores
	freshStore bool
	// txFile keeps the records of commits of several leaves (a cluster
	// that writes through: txfile.go); txPending are those it held open
	// at start, rolled forward before the node serves.
	txFile    *txFile
	txPending []txPending
	// rolling: with membership, txPending roll forward at this start
	// (every process of the node's last view died: restartDecision).
	// listedRolling: the membership lists the node as rolling; it takes
	// itself out once its records are rolled (passRollingGate).
	rolling, listedRolling bool
	// nlog is the node's redo log when it logs alone (nodelog.go).
	nlog *nodeLog

	mu     sync.Mutex
	tables map[string]*DB
	closed atomic.Bool
	pins   *pinBudget // the tables' transaction commits share the cache
}

// identity is what every node agrees on, kept in the catalog (the cluster)
// and in each node's store (the cluster it belongs to).
type identity struct {
	clusterID   uint64
	peersHash   uint64
	bootstrap   uint64
	incarnation uint64 // random, made when the cluster was created
}

func (id identity) encode() []byte {
	b := make([]byte, 32)
	binary.LittleEndian.PutUint64(b, id.clusterID)
	binary.LittleEndian.PutUint64(b[8:], id.peersHash)
	binary.LittleEndian.PutUint64(b[16:], id.bootstrap)
	binary.LittleEndian.PutUint64(b[24:], id.incarnation)
	return b
}

func decodeIdentity(b []byte) (identity, bool) {
	if len(b) != 32 {
		return identity{}, false
	}
	return identity{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]),
		binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:])}, true
}

// The catalog is a B-tree on the bootstrap node: its first tree, so its
// catalog page is slot 1 (btree.Create allocates the root, then the
// catalog). Keys: identityKey, and tablePrefix+name for each table.
const (
	identityKey = "\x00cluster"
	tablePrefix = "t/"
)

func catalogPID(bootstrap protocol.NodeID) protocol.PID { return protocol.MakePID(bootstrap, 1) }

// nodeMetaMagic starts a cluster node's store metadata ("SSGONODE").
const nodeMetaMagic = 0x45444F4E4F475353

// nodeMeta is a cluster node's store metadata: which cluster and node it
// belongs to, and how many pages its directory allocated.
type nodeMeta struct {
	id        identity
	node      uint64
	allocated uint64
	// writeThrough: the node ran with DurabilityProcess since this was
	// written, so every acknowledged write is on its store even if the
	// process was killed.
	writeThrough bool
	// logged: the node logs alone (nodelog.go): its pages are those of
	// its last checkpoint, under the records of logEpoch in its log.
	logged   bool
	logEpoch uint64
}

func (m nodeMeta) encode() []byte {
	b := make([]byte, 8, 64)
	binary.LittleEndian.PutUint64(b, nodeMetaMagic)
	b = append(b, m.id.encode()...)
	b = binary.LittleEndian.AppendUint64(b, m.node)
	b = binary.LittleEndian.AppendUint64(b, m.allocated)
	var flags uint64
	if m.writeThrough {
		flags |= 1
	}
	if m.logged {
		flags |= 2
		b = binary.LittleEndian.AppendUint64(b, flags)
		return binary.LittleEndian.AppendUint64(b, m.logEpoch)
	}
	return binary.LittleEndian.AppendUint64(b, flags)
}

func decodeNodeMeta(b []byte) (nodeMeta, error) {
	if (len(b) != 56 && len(b) != 64 && len(b) != 72) || binary.LittleEndian.Uint64(b) != nodeMetaMagic {
		return nodeMeta{}, fmt.Errorf("its metadata (%d bytes) is not a cluster node's", len(b))
	}
	id, _ := decodeIdentity(b[8:40])
	m := nodeMeta{id: id, node: binary.LittleEndian.Uint64(b[40:]), allocated: binary.LittleEndian.Uint64(b[48:])}
	if len(b) >= 64 {
		m.writeThrough = binary.LittleEndian.Uint64(b[56:])&1 != 0
	}
	if len(b) == 72 {
		m.logged = binary.LittleEndian.Uint64(b[56:])&2 != 0
		m.logEpoch = binary.LittleEndian.Uint64(b[64:])
	}
	return m, nil
}

// PeersHash names a peer list: the same nodes at the same addresses give
// the same hash whatever the order they were written in.
func peersHash(peers map[int]string) uint64 {
	ids := make([]int, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	h := fnv.New64a()
	for _, id := range ids {
		fmt.Fprintf(h, "%d=%s,", id, peers[id])
	}
	return h.Sum64()
}

// NodeStoreFile is node id's page store in its data directory.
func NodeStoreFile(id int) string { return fmt.Sprintf("node-%d.db", id) }

// ErrWrongCluster is returned by Join for a node whose configuration or
// store disagrees with the cluster it joins; the error says which.
var ErrWrongCluster = errors.New("scalestore: not a node of this cluster")

// Join starts this process's node of the cluster opts describes and returns
// it once it can serve: the bootstrap node creates the catalog of a new
// cluster (or reopens its own), the others wait for it (up to JoinTimeout;
// nodes may start in any order) and check that they belong: same cluster
// id, same peer list, and a store of this cluster.
func Join(opts ClusterOptions) (*Cluster, error) {
	o, tc, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	warnOpenPeerPort(o, tc)
	store, fresh, err := openClusterStore(o)
	if err != nil {
		return nil, err
	}
	self, boot := protocol.NodeID(o.ID), protocol.NodeID(o.Bootstrap)
	c := &Cluster{opts: o, store: store, tables: map[string]*DB{}, pins: newPinBudget(o.CachePages), replicas: &replicaStores{o: o}, freshStore: fresh}
	for id := range o.Peers {
		c.peers = append(c.peers, protocol.NodeID(id))
	}
	slices.Sort(c.peers)
	want := identity{clusterID: o.ClusterID, peersHash: peersHash(o.Peers), bootstrap: uint64(o.Bootstrap)}
	var stored nodeMeta
	if !fresh {
		if stored, err = decodeNodeMeta(store.Meta()); err != nil {
			store.Close() // untouched: it stays as clean as it was
			return nil, fmt.Errorf("%w: %s: %v", ErrWrongCluster, o.storePath(), err)
		}
		if err := stored.check(want, uint64(o.ID)); err != nil {
			store.Close()
			return nil, fmt.Errorf("%w: %s: %v", ErrWrongCluster, o.storePath(), err)
		}
		want.incarnation = stored.id.incarnation
	}
	if o.writesThrough() && !o.logsAlone() {
		if err := c.openTxFile(fresh, stored.allocated); err != nil {
			store.Close()
			return nil, err
		}
		if len(o.Etcd) > 0 {
			if err := c.restartDecision(); err != nil {
				c.closeTxFile()
				store.Close()
				return nil, err
			}
		}
	}
	if o.logsAlone() {
		unclean := !fresh && !store.(interface{ WasClean() bool }).WasClean()
		if c.nlog, err = openNodeLog(c, stored.logEpoch, unclean); err != nil {
			abandon(store)
			return nil, err
		}
	}
	create := self == boot
	if fresh && create && o.Replicas > 1 {
		// A bootstrap node on a fresh store (a new disk, --reformat) of a
		// replicated cluster that exists joins it: its catalog is kept by
		// the other nodes, and it takes it back like any page of its
		// directory (docs/replication.md).
		ctx, cancel := context.WithTimeout(context.Background(), min(o.JoinTimeout, membership.DefaultDialTimeout))
		exists, err := membership.Recorded(ctx, membership.Config{Endpoints: o.Etcd, Cluster: strconv.FormatUint(o.ClusterID, 10), Node: boot, DialTimeout: membership.DefaultDialTimeout})
		cancel()
		if err != nil {
			// etcd does not answer: joining the membership will fail
			// and say so; nothing is created before that.
			o.Logger.Warn("cannot tell whether the cluster exists", "node", o.ID, "err", err)
		}
		create = !exists
	}
	prepare := func(rt *actors.Local) error {
		if !fresh {
			var err error
			rt.Locked(func() { err = rt.Node().Directory().Restore(stored.allocated) })
			if err != nil {
				return fmt.Errorf("scalestore: node %d: restoring the allocator: %w", o.ID, err)
			}
			if c.rolling {
				// Before the first view: its change sends them.
				records := c.pendingPages()
				rt.Locked(func() { rt.Node().TxRestartRolls(records) })
			}
			return nil
		}
		if !create {
			return nil
		}
		// A new cluster: the catalog and the default table, on this node,
		// before any peer can ask for them.
		var inc [8]byte
		if _, err := rand.Read(inc[:]); err != nil {
			return err
		}
		want.incarnation = binary.LittleEndian.Uint64(inc[:]) | 1
		err := rt.Do(func(w *bufmgr.Worker) error {
			s := btree.Session{Cache: rt.Node().Cache(), Worker: w, Allocate: rt.Allocate}
			cat, err := btree.Create(s)
			if err != nil {
				return fmt.Errorf("scalestore: creating the cluster's catalog: %w", err)
			}
			if cat.Catalog() != catalogPID(boot) {
				return fmt.Errorf("scalestore: the catalog landed at %v, not %v", cat.Catalog(), catalogPID(boot))
			}
			if err := cat.Put(s, []byte(identityKey), want.encode()); err != nil {
				return err
			}
			t, err := btree.Create(s)
			if err != nil {
				return fmt.Errorf("scalestore: creating the default table: %w", err)
			}
			var pid [8]byte
			binary.LittleEndian.PutUint64(pid[:], uint64(t.Catalog()))
			return cat.Put(s, []byte(tablePrefix+DefaultTable), pid[:])
		})
		if err == nil && o.writesThrough() {
			// The new catalog on the store before any peer can read it.
			err = rt.WriteBack()
		}
		return err
	}
	deadline := time.Now().Add(o.JoinTimeout)
	for attempt := 1; ; attempt++ {
		err = c.start(tc, prepare, want, create)
		if err == nil {
			break
		}
		retry := errors.Is(err, transport.ErrPeerDown) || errors.Is(err, actors.ErrNoAnswer) || errors.Is(err, actors.ErrDirectoryDown)
		if create || !retry || time.Now().After(deadline) {
			if errors.Is(err, cluster.ErrNoView) {
				// It served nothing to its peers: its store is as it was.
				// A new one goes (the next start creates it afresh).
				store.Close()
				if fresh {
					os.Remove(o.storePath())
				}
			} else if fresh && !create {
				store.Close() // nothing was allocated on it
			} else {
				// Peers may have taken pages of its directory meanwhile:
				// the next start must not trust the store.
				abandon(store)
			}
			c.replicas.close(false)
			c.closeTxFile()
			c.nlog.stopBackground()
			c.nlog.abandon()
			return nil, err
		}
		// The bootstrap node is not up yet: start over (nothing was
		// written: this node allocated nothing).
		o.Logger.Info("waiting for the bootstrap node", "node", o.ID, "bootstrap", o.Bootstrap, "attempt", attempt, "err", err)
		time.Sleep(time.Second)
	}
	meta := nodeMeta{id: c.id, node: uint64(o.ID), writeThrough: o.writesThrough()}
	c.node.RT.Locked(func() {
		meta.allocated = c.node.RT.Node().Directory().Allocated()
	})
	if c.nlog != nil {
		// Replayed if it was killed, then a checkpoint that writes the
		// metadata (nodelog.go).
		err = c.startLog(!fresh && !store.(interface{ WasClean() bool }).WasClean())
	} else if err = store.SetMeta(meta.encode()); err == nil && meta.writeThrough {
		// On the store now: a kill from here on finds a store that says
		// its acknowledged writes are on it.
		err = c.node.RT.SyncStore()
	}
	if err != nil {
		c.closeAfter(err)
		return nil, err
	}
	if o.RESP != "" {
		c.resp, err = resp.Listen(resp.Config{Addr: o.RESP, Password: o.RESPPassword, TLS: o.RESPTLS,
			MaxKey: btree.MaxKey, MaxEntry: btree.MaxEntry, Info: c.info, Logger: o.Logger, Unprotected: o.RESPUnprotected, Loop: o.RESPLoop, Loops: o.RESPLoops,
			OffloadWrites: o.writesThrough() && !c.defersDurable(), Waits: c.requests}, respEngine{c})
		if err != nil {
			err = fmt.Errorf("scalestore: node %d: --resp: %w", o.ID, err)
			c.closeAfter(err)
			return nil, err
		}
	}
	o.Logger.Info("node joined", "node", o.ID, "cluster", o.ClusterID, "peers", len(o.Peers), "transport", tc.Resolve(), "fresh", fresh)
	return c, nil
}

// respEngine is the Cluster as the RESP server's engine: its
// transactions are Update and View.
type respEngine struct{ *Cluster }

func (e respEngine) Atomic(readOnly bool, fn func(tx resp.Txn) error) error {
	if readOnly {
		return e.View(func(tx *Tx) error { return fn(tx) })
	}
	return e.Update(func(tx *Tx) error { return fn(tx) })
}

// warnOpenPeerPort warns when the peer port listens on an address other
// hosts can reach and the peers do not speak TLS: anyone who reaches it
// can read and write every page.
func warnOpenPeerPort(o ClusterOptions, tc cluster.TransportConfig) {
	if tc.Resolve() != "tcp" || o.TLS != nil {
		return
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || host == "localhost" {
		return
	}
	o.Logger.Warn("the peer port listens on a non-loopback address without TLS: any host that reaches it can read and "+
		"write every page of the cluster; give the nodes mutual TLS (--tls-cert, --tls-key, --tls-ca) or keep the port on a private network",
		"node", o.ID, "listen", o.Listen)
}

// closeAfter stops a node whose Join failed after it started: cleanly if
// it can (its peers hold none of its pages), else leaving its store
// unclean.
func (c *Cluster) closeAfter(cause error) {
	c.closed.Store(true)
	defer c.closeTxFile()
	if c.nlog != nil {
		// Unclean, with its log: the next start recovers it.
		c.nlog.stopBackground()
		c.node.Stop()
		abandon(c.store)
		c.nlog.abandon()
		return
	}
	if _, err := c.node.Shutdown(c.peers, time.Second); err != nil {
		abandon(c.store)
		c.replicas.close(false)
		c.opts.Logger.Error("a node that failed to join left its store unclean", "node", c.opts.ID, "cause", cause, "err", err)
		return
	}
	c.store.Close()
	c.replicas.close(true)
}

// start starts the node and opens the catalog; a failure leaves nothing
// running.
func (c *Cluster) start(tc cluster.TransportConfig, prepare func(*actors.Local) error, want identity, boot bool) error {
	o := c.opts
	prep := prepare
	if o.Durability == DurabilitySync {
		// Before the transport listens: no peer's write-through is
		// acknowledged unflushed.
		prep = func(rt *actors.Local) error {
			rt.FlushWriteThroughs()
			return prepare(rt)
		}
	}
	nc := cluster.NodeConfig{ID: protocol.NodeID(o.ID), CachePages: o.CachePages, Store: c.store,
		Logger: o.Logger, Timeout: o.Timeout, NewTransport: tc.New, Prepare: prep, PollSpin: pollSpin(tc),
		WriteThrough: o.writesThrough() && !o.logsAlone(), ViewTimeout: o.JoinTimeout}
	if o.Replicas > 1 {
		nc.ReplicaStore, nc.FreshStore = c.replicas.open, c.freshStore
	}
	if len(o.Etcd) > 0 {
		nc.Membership = &membership.Config{Endpoints: o.Etcd, Cluster: strconv.FormatUint(o.ClusterID, 10), Node: protocol.NodeID(o.ID),
			Addr: o.Peers[o.ID], LeaseTTL: o.LeaseTTL, Replicas: o.Replicas, DialTimeout: min(o.JoinTimeout, membership.DefaultDialTimeout), Logger: o.Logger}
	}
	n, err := cluster.StartNode(nc)
	if err != nil {
		return err
	}
	c.node = n
	c.cat = btree.Open(catalogPID(protocol.NodeID(o.Bootstrap)))
	var rec []byte
	var ok bool
	deadline := time.Now().Add(o.JoinTimeout)
	for {
		err = n.RT.Do(func(w *bufmgr.Worker) error {
			rec, ok, err = c.cat.Get(c.session(w), []byte(identityKey), nil)
			return err
		})
		// With membership, a bootstrap node that is not in the view yet
		// is waited for in place: it joins the view when it starts.
		if !errors.Is(err, actors.ErrDirectoryDown) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err == nil && !ok {
		err = fmt.Errorf("%w: node %d's catalog has no cluster identity", ErrWrongCluster, o.Bootstrap)
	}
	var got identity
	if err == nil {
		got, ok = decodeIdentity(rec)
		if !ok {
			err = fmt.Errorf("%w: node %d's catalog holds a malformed cluster identity", ErrWrongCluster, o.Bootstrap)
		}
	}
	if err == nil {
		err = got.check(want, o.Bootstrap)
	}
	if err == nil && c.txFile != nil {
		// Before any worker of this node reads a table's page: the
		// catalog's pages are in no transaction's record.
		if len(o.Etcd) > 0 {
			err = c.passRollingGate(n)
		} else {
			err = c.passStartGate(n, boot)
		}
	}
	if err == nil {
		c.id = got
		c.def, err = c.table(DefaultTable, false)
	}
	if err != nil {
		if !n.RT.Failed() {
			// Refused after reading the catalog: hand its pages back, or
			// the directory would count this node as holding them when
			// the right node of this id joins.
			n.RT.Leave(o.Timeout)
		}
		n.Stop()
		c.node = nil
		return err
	}
	return nil
}

// check compares the cluster's identity (id) with what this node was
// configured with (want).
func (id identity) check(want identity, bootstrap int) error {
	switch {
	case id.clusterID != want.clusterID:
		return fmt.Errorf("%w: the cluster's id is %d, this node's --cluster-id is %d", ErrWrongCluster, id.clusterID, want.clusterID)
	case id.peersHash != want.peersHash:
		return fmt.Errorf("%w: this node's peer list differs from the one the cluster was created with (on node %d): every node needs the same --peers (or config file)", ErrWrongCluster, bootstrap)
	case id.bootstrap != want.bootstrap:
		return fmt.Errorf("%w: the cluster's bootstrap node is %d, this node's is %d", ErrWrongCluster, id.bootstrap, want.bootstrap)
	case want.incarnation != 0 && id.incarnation != want.incarnation:
		return fmt.Errorf("%w: this node's store belongs to another cluster of the same id (created %x, the running one %x): remove it or start with --reformat", ErrWrongCluster, want.incarnation, id.incarnation)
	}
	return nil
}

func (m nodeMeta) check(want identity, node uint64) error {
	switch {
	case m.node != node:
		return fmt.Errorf("the store is node %d's, not node %d's", m.node, node)
	case m.id.clusterID != want.clusterID:
		return fmt.Errorf("the store belongs to cluster %d, this node's --cluster-id is %d", m.id.clusterID, want.clusterID)
	case m.id.peersHash != want.peersHash:
		return errors.New("the store was written under another peer list: every node needs the same --peers (or config file) as when the cluster was created")
	case m.id.bootstrap != want.bootstrap:
		return fmt.Errorf("the store's cluster was bootstrapped by node %d, this node names %d", m.id.bootstrap, want.bootstrap)
	}
	return nil
}

func pollSpin(tc cluster.TransportConfig) time.Duration {
	if tc.Resolve() == "tcp" {
		return 150 * time.Microsecond
	}
	return 50 * time.Microsecond
}

func (o ClusterOptions) storePath() string { return filepath.Join(o.Data, NodeStoreFile(o.ID)) }

func (o ClusterOptions) txPath() string { return filepath.Join(o.Data, NodeTxFile(o.ID)) }

// openTxFile opens the node's file of transaction records (a cluster
// that writes through: txfile.go) and keeps the records it holds open,
// to roll forward at start (with membership, if restartDecision says
// so). A fresh store discards
// the file: its records were of the store it replaces. allocated is how
// many pages the node's own directory has.
func (c *Cluster) openTxFile(fresh bool, allocated uint64) error {
	o := c.opts
	path := o.txPath()
	if fresh {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("scalestore: node %d: %w", o.ID, err)
		}
	}
	valid := func(pid protocol.PID) error {
		switch _, ok := o.Peers[int(pid.Dir())]; {
		case !ok:
			return fmt.Errorf("its directory, node %d, is not among the peers", pid.Dir())
		case pid.Slot() >= clusterStoreSlots:
			return fmt.Errorf("its slot lies past a store's %d", uint64(clusterStoreSlots))
		case int(pid.Dir()) == o.ID && pid.Slot() >= allocated:
			return fmt.Errorf("this node's directory has %d pages", allocated)
		}
		return nil
	}
	f, pending, err := openTxFile(path, o.Durability == DurabilitySync, o.Logger, valid)
	if err != nil {
		return fmt.Errorf("scalestore: node %d: %w", o.ID, err)
	}
	if len(pending) > 0 {
		o.Logger.Warn("rolling forward the transactions its death cut between two write-throughs",
			"node", o.ID, "file", path, "records", len(pending))
	}
	c.txFile, c.txPending = f, pending
	return nil
}

func (c *Cluster) closeTxFile() {
	if c.txFile != nil {
		c.txFile.close()
	}
}

// passStartGate rolls the records the node's file held open forward and
// waits until every peer did the same (actors/txstart.go). A bootstrap
// node that creates the cluster waits for nobody: no node has a record of
// a cluster that did not exist.
func (c *Cluster) passStartGate(n *cluster.Node, boot bool) error {
	tr := n.Tr
	n.RT.SetGateSender(func(to protocol.NodeID, frame []byte) error { return tr.Send(to, frame, nil) })
	records := c.pendingPages()
	n.RT.Locked(func() { n.RT.Node().TxStartRolls(records) })
	peers := c.peers
	if boot && c.freshStore {
		peers = nil
	}
	err := n.RT.PassGate(peers, c.opts.JoinTimeout, func() error {
		if len(c.txPending) == 0 {
			return nil
		}
		if err := c.txFile.reset(); err != nil {
			return err
		}
		c.opts.Logger.Info("rolled forward the transactions its death cut", "node", c.opts.ID, "records", len(c.txPending))
		c.txPending = nil
		return nil
	})
	if err != nil {
		return fmt.Errorf("scalestore: node %d: %w", c.opts.ID, err)
	}
	return nil
}

// pendingPages are the pages of the records the node's file held open.
func (c *Cluster) pendingPages() [][]actors.TxRollPage {
	records := make([][]actors.TxRollPage, len(c.txPending))
	for i, p := range c.txPending {
		records[i] = p.pages
	}
	return records
}

// restartDecision tells, with membership and before the node registers,
// whether the records its file holds open roll forward (every process of
// its last view died: membership.Restart) or are discarded (a view
// without this node was agreed by live nodes: its buddy rolled them).
func (c *Cluster) restartDecision() error {
	o := c.opts
	cfg := membership.Config{Endpoints: o.Etcd, Cluster: strconv.FormatUint(o.ClusterID, 10), Node: protocol.NodeID(o.ID),
		LeaseTTL: o.LeaseTTL, DialTimeout: min(o.JoinTimeout, membership.DefaultDialTimeout)}
	ctx, cancel := context.WithTimeout(context.Background(), o.JoinTimeout)
	roll, err := membership.Restart(ctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("scalestore: node %d: deciding what its transaction records are worth at its restart: %w", o.ID, err)
	}
	c.listedRolling = roll
	c.rolling = (roll || txRestartAlwaysRoll) && !txRestartNoRoll
	if c.rolling || len(c.txPending) == 0 {
		return nil
	}
	if err := c.txFile.reset(); err != nil {
		return fmt.Errorf("scalestore: node %d: %w", o.ID, err)
	}
	o.Logger.Warn("discarded the transaction records its death cut: a view without this node was agreed, whose nodes rolled them forward",
		"node", o.ID, "file", c.txFile.path, "records", len(c.txPending))
	c.txPending = nil
	return nil
}

// txRestartNoRoll (a test's mutant) discards the records a node must roll
// at its restart with membership.
// txRestartAlwaysRoll, the opposite mutant, rolls them whatever the
// membership says.
var txRestartNoRoll, txRestartAlwaysRoll bool

// passRollingGate is the start gate with membership: a node listed as
// rolling (restartDecision) waits until the records it sent in its view
// changes are acknowledged, resets its file and takes itself out of the
// list; then every node waits until the list is empty, so that no worker
// reads a page before every record of the view whose processes all died
// is on the stores. It fails after JoinTimeout, naming the nodes awaited.
func (c *Cluster) passRollingGate(n *cluster.Node) error {
	o := c.opts
	deadline := time.Now().Add(o.JoinTimeout)
	if c.rolling || c.listedRolling {
		for pending := n.RT.TxRestartPending(); pending > 0; pending = n.RT.TxRestartPending() {
			if n.RT.Failed() {
				return fmt.Errorf("scalestore: node %d: rolling its transaction records forward: %w", o.ID, n.RT.Err())
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("scalestore: node %d: %w within %v: %d of its transaction records are not rolled forward (acknowledged): are their directories' nodes down?",
					o.ID, actors.ErrStartGate, o.JoinTimeout, pending)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if len(c.txPending) > 0 {
			if err := c.txFile.reset(); err != nil {
				return err
			}
			o.Logger.Info("rolled forward the transactions its death cut", "node", o.ID, "records", len(c.txPending))
			c.txPending = nil
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := n.Member.Rolled(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("scalestore: node %d: %w", o.ID, err)
		}
		c.rolling, c.listedRolling = false, false
	}
	if err := n.Member.WaitRolled(time.Until(deadline)); err != nil {
		return fmt.Errorf("scalestore: node %d: %w: %w: start them (their records roll); for a node that will not come back, "+
			"remove its id from \"rolling\" in the view key /scalestore/%d/view on etcd (membership.ForgetRolling): its records are lost",
			o.ID, actors.ErrStartGate, err, o.ClusterID)
	}
	return nil
}

// resolve checks the options and fills in the defaults.
func (opts ClusterOptions) resolve() (ClusterOptions, cluster.TransportConfig, error) {
	o := opts
	var tc cluster.TransportConfig
	if o.ID < 0 || o.ID > 255 {
		return o, tc, fmt.Errorf("scalestore: node id %d: want 0..255", o.ID)
	}
	if len(o.Peers) == 0 {
		return o, tc, errors.New("scalestore: no peers: ClusterOptions.Peers names every node and its address")
	}
	peers := map[protocol.NodeID]string{}
	for id, addr := range o.Peers {
		if id < 0 || id > 255 {
			return o, tc, fmt.Errorf("scalestore: peer id %d: want 0..255", id)
		}
		peers[protocol.NodeID(id)] = addr
	}
	if _, ok := o.Peers[o.ID]; !ok {
		return o, tc, fmt.Errorf("scalestore: the peers do not name this node (%d)", o.ID)
	}
	if _, ok := o.Peers[o.Bootstrap]; !ok {
		return o, tc, fmt.Errorf("scalestore: the bootstrap node %d is not among the peers", o.Bootstrap)
	}
	if o.Listen == "" {
		o.Listen = o.Peers[o.ID]
	}
	if o.ClusterID == 0 {
		o.ClusterID = 1
	}
	if o.Transport == "" {
		o.Transport = "tcp"
	}
	if o.SocketDir == "" {
		o.SocketDir = os.TempDir()
	}
	if o.CachePages == 0 {
		o.CachePages = 16384
	}
	if o.CachePages < 64 {
		return o, tc, fmt.Errorf("scalestore: CachePages %d: want at least 64", o.CachePages)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.JoinTimeout == 0 {
		o.JoinTimeout = 2 * time.Minute
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch o.Durability {
	case "":
		o.Durability = DurabilityProcess
	case DurabilityNone, DurabilityProcess, DurabilitySync:
	default:
		return o, tc, fmt.Errorf("scalestore: durability %q: want %s, %s or %s", o.Durability, DurabilityNone, DurabilityProcess, DurabilitySync)
	}
	if o.Data == "" {
		// A store in memory dies with its process: writing through to it
		// would buy nothing.
		o.Durability = DurabilityNone
	}
	if len(o.Etcd) > 0 {
		switch {
		case o.Data == "":
			return o, tc, errors.New("scalestore: membership (etcd) needs a store on disk (Data, --data): a node that dies and comes back must find its pages")
		case o.Durability == DurabilityNone:
			return o, tc, errors.New("scalestore: membership (etcd) needs durability process or sync: a view change drops the copies a dead node held, so every acknowledged write must be on its directory's store")
		}
		if o.LeaseTTL == 0 {
			o.LeaseTTL = membership.DefaultLeaseTTL
		}
		if o.Replicas == 0 {
			o.Replicas = 2
		}
		if o.Timeout < 4*o.LeaseTTL {
			// An operation that waits on a dead node is released by the
			// view change, up to two lease periods later: the watchdog
			// must not fail the node first.
			o.Timeout = 4 * o.LeaseTTL
		}
	}
	switch {
	case o.Replicas == 0:
		o.Replicas = 1
	case o.Replicas < 1 || o.Replicas > 2:
		return o, tc, fmt.Errorf("scalestore: %d replicas: want 1 or 2", o.Replicas)
	case o.Replicas == 2 && len(o.Etcd) == 0:
		return o, tc, errors.New("scalestore: replicas 2 needs membership (Etcd, --etcd): a directory's primary and backup follow the membership view")
	}
	tc = cluster.TransportConfig{Kind: o.Transport, Self: protocol.NodeID(o.ID), Listen: o.Listen, Peers: peers,
		ClusterID: o.ClusterID, TLS: o.TLS, SocketDir: o.SocketDir, Logger: o.Logger, RDMA: o.RDMA.config()}
	tc.RDMA.OpenDevice = o.rdmaDevice
	switch tc.Resolve() {
	case "tcp", "shm":
	case "ibverbs":
		switch {
		case !ibverbs.Built && o.rdmaDevice == nil:
			return o, tc, fmt.Errorf("scalestore: transport %q: %w", o.Transport, ibverbs.ErrNotBuilt)
		case o.TLS != nil:
			return o, tc, errors.New("scalestore: transport ibverbs: TLS is for tcp (the RDMA transport's data never crosses TCP)")
		}
	default:
		return o, tc, fmt.Errorf("scalestore: transport %q: want one of %s", o.Transport, strings.Join(Transports(), ", "))
	}
	return o, tc, nil
}

// openClusterStore opens this node's store; fresh reports a new one.
// clusterStoreSlots is the capacity of a node's stores in pages.
const clusterStoreSlots = 1 << 20

func openClusterStore(o ClusterOptions) (s Store, fresh bool, err error) {
	const slots = clusterStoreSlots
	if o.Data == "" {
		return &memoryStore{Store: memfile.New(slots, nil)}, true, nil
	}
	if o.logsAlone() {
		return openLoggedStore(o)
	}
	if err := os.MkdirAll(o.Data, 0o755); err != nil {
		return nil, false, fmt.Errorf("scalestore: %w", err)
	}
	path := o.storePath()
	// With write-through, a write is acknowledged once its page is in the
	// store's write log, many pages in one log write (a group commit), and
	// written in place later (storage/nvme's wlog.go); a killed node's log
	// is written back when its store opens. Under durability process the
	// log goes through the page cache: what the kernel took survives the
	// process; sync flushes it with O_DIRECT writes and fdatasync.
	opts := nvme.Options{Slots: slots, WriteLog: o.writesThrough(), WriteLogCached: o.Durability == DurabilityProcess}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) || o.Reformat {
		opts.Create, fresh = true, true
	} else if err != nil {
		return nil, false, fmt.Errorf("scalestore: %w", err)
	}
	st, err := nvme.Open(path, opts)
	if errors.Is(err, nvme.ErrDirectUnsupported) {
		opts.NoDirect = true
		st, err = nvme.Open(path, opts)
	}
	if err != nil {
		return nil, false, fmt.Errorf("scalestore: node %d: opening %s: %w", o.ID, path, err)
	}
	if !fresh && len(st.Meta()) == 0 && st.WasClean() {
		// Created, then stopped before it joined: nothing was written.
		fresh = true
	}
	if !fresh && !st.WasClean() {
		m, err := decodeNodeMeta(st.Meta())
		if err != nil || !m.writeThrough || !o.writesThrough() {
			st.Abandon()
			why := "it ran without write-through (durability none), so pages it held may be newer in no store"
			if err == nil && m.logged {
				why = "its writes since its last checkpoint are in its log " + o.logPath() + ", which only a node alone (one peer, no --etcd) with durability process or sync replays"
			} else if err == nil && m.writeThrough {
				why = "it ran with write-through, but this start asks for durability none; start with --durability process (or sync) to recover it"
			}
			return nil, false, fmt.Errorf("scalestore: node %d: %s: %w: its node was killed or failed, and %s; "+
				"remove it, or start with --reformat to discard it", o.ID, path, ErrUnclean, why)
		}
		// Every acknowledged write to its pages is on it (write-through):
		// its pages are the ones it had written, counted from the file.
		written, err := st.WrittenSlots()
		if err != nil {
			st.Abandon()
			return nil, false, fmt.Errorf("scalestore: node %d: %s: finding its written pages: %w", o.ID, path, err)
		}
		m.allocated = max(m.allocated, min(written, st.Slots()))
		if err := st.SetMeta(m.encode()); err != nil {
			st.Abandon()
			return nil, false, err
		}
		o.Logger.Warn("recovered a store whose node was killed: every acknowledged write is on it (write-through)",
			"node", o.ID, "store", path, "pages", m.allocated)
	}
	return st, fresh, nil
}

func (c *Cluster) session(w *bufmgr.Worker) btree.Session {
	rt, boot := c.node.RT, protocol.NodeID(c.opts.Bootstrap)
	s := btree.Session{Cache: rt.Node().Cache(), Worker: w, Allocate: rt.Allocate,
		AllocateInner: func(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error) { return rt.AllocateOn(w, boot) }}
	if c.opts.Replicas > 1 {
		// No home node: inner pages are allocated like leaves, on this
		// node's directory, and replicated like them (docs/replication.md,
		// decision 6).
		s.AllocateInner = rt.Allocate
	}
	if c.opts.writesThrough() && c.nlog == nil {
		s.Persist, s.PersistAll = c.node.RT.Persist, c.node.RT.PersistAll
	}
	return s
}

// view is a DB over one of the cluster's tables: the same runtime, another
// tree, no log, and a Close that does nothing (the Cluster closes).
func (c *Cluster) view(t *btree.Tree, name string) *DB {
	db := &DB{rt: c.node.RT, tree: t, allocate: c.node.RT.Allocate, dir: fmt.Sprintf("node %d, table %q", c.opts.ID, name), view: true,
		pins: c.pins, txFile: c.txFile, members: len(c.opts.Etcd) > 0}
	home, rt := t.Catalog().Dir(), c.node.RT
	db.allocateInner = func(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error) { return rt.AllocateOn(w, home) }
	if c.opts.Replicas > 1 {
		db.allocateInner = rt.Allocate // no home node (session)
	}
	switch {
	case c.nlog != nil:
		// The node's log (nodelog.go): records, no page written through.
		db.log, db.node, db.locks, db.tag = c.nlog.log, c.nlog, c.nlog.locks, tableTag(t)
	case c.opts.writesThrough():
		db.persist, db.persistAll = rt.Persist, rt.PersistAll
	}
	return db
}

// defersDurable reports whether the node's calls may answer before what
// they wrote is durable and wait at their end instead (a RESP connection:
// once per loop turn): a node alone that writes through, which logs
// records (nodelog.go; ClusterOptions.logsAlone).
func (c *Cluster) defersDurable() bool { return c.nlog != nil }

// Table opens the named table, creating it (on this node) if no node did:
// the returned KV's pages are shared by every node like the default
// table's. Its Close does nothing; close the Cluster.
func (c *Cluster) Table(name string) (KV, error) {
	if name == "" || len(tablePrefix)+len(name) > btree.MaxKey {
		return nil, fmt.Errorf("scalestore: table name %q: want 1 to %d bytes", name, btree.MaxKey-len(tablePrefix))
	}
	return c.table(name, true)
}

func (c *Cluster) table(name string, create bool) (*DB, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if db := c.tables[name]; db != nil {
		return db, nil
	}
	var pid protocol.PID
	created := false
	err := c.node.RT.Do(func(w *bufmgr.Worker) error {
		s := c.session(w)
		v, ok, err := c.cat.Get(s, []byte(tablePrefix+name), nil)
		if err != nil {
			return err
		}
		if ok {
			pid = protocol.PID(binary.LittleEndian.Uint64(v))
			return nil
		}
		if !create {
			return fmt.Errorf("scalestore: no table %q in the catalog", name)
		}
		t, err := btree.Create(s)
		if err != nil {
			return err
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(t.Catalog()))
		// Two nodes may create the same table at once: the first entry
		// wins, and the loser's empty tree is left unused.
		_, err = c.cat.PutIf(s, []byte(tablePrefix+name), b[:], func(old []byte, found bool) bool {
			if found {
				pid = protocol.PID(binary.LittleEndian.Uint64(old))
				return false
			}
			pid, created = t.Catalog(), true
			return true
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("scalestore: node %d: table %q: %w", c.opts.ID, name, err)
	}
	if c.nlog != nil && created {
		// The catalog's new entry is not logged: on the store now.
		if err := c.nlog.Checkpoint(); err != nil {
			return nil, fmt.Errorf("scalestore: node %d: table %q: %w", c.opts.ID, name, err)
		}
	}
	db := c.view(btree.Open(pid), name)
	c.tables[name] = db
	return db, nil
}

// Tables lists the tables in the catalog.
func (c *Cluster) Tables() ([]string, error) {
	var names []string
	err := c.node.RT.Do(func(w *bufmgr.Worker) error {
		return c.cat.Scan(c.session(w), []byte(tablePrefix), []byte("t0"), func(k, _ []byte) bool {
			names = append(names, string(k[len(tablePrefix):]))
			return true
		})
	})
	return names, err
}

// Get, GetBatch, Put, PutIf, Delete, Scan and NewSession act on the
// default table (DB's methods say what each does).
func (c *Cluster) Get(key, dst []byte) ([]byte, bool, error) { return c.def.Get(key, dst) }

// GetBatch is DB.GetBatch on the default table.
func (c *Cluster) GetBatch(keys, vals [][]byte, found []bool) error {
	return c.def.GetBatch(keys, vals, found)
}

// Put is DB.Put on the default table.
func (c *Cluster) Put(key, val []byte) error { return c.def.Put(key, val) }

// PutIf is DB.PutIf on the default table.
func (c *Cluster) PutIf(key, val []byte, cond func(old []byte, found bool) bool) (bool, error) {
	return c.def.PutIf(key, val, cond)
}

// Modify is DB.Modify on the default table.
func (c *Cluster) Modify(key []byte, fn func(old []byte, found bool) (val []byte, exists, write bool)) error {
	return c.def.Modify(key, fn)
}

// Delete is DB.Delete on the default table.
func (c *Cluster) Delete(key []byte) (bool, error) { return c.def.Delete(key) }

// Scan is DB.Scan on the default table.
func (c *Cluster) Scan(from, to []byte, fn func(key, val []byte) bool) error {
	return c.def.Scan(from, to, fn)
}

// Salvage is DB.Salvage on the default table: it reads past pages that
// cannot be read (on any node's store) and names the keys they held.
func (c *Cluster) Salvage(from, to []byte, fn func(key, val []byte) bool, skipped func(lo, hi []byte, err error) bool) error {
	return c.def.Salvage(from, to, fn, skipped)
}

// NewSession is DB.NewSession on the default table.
func (c *Cluster) NewSession() *Session { return c.def.NewSession() }

// Stats reads this node's counters.
func (c *Cluster) Stats() Stats {
	s := c.def.Stats()
	ns := c.node.Stats()
	s.RemoteFetches, s.Invalidations, s.Evictions = ns.RemoteFetches, ns.Invalidations, ns.Evictions
	return s
}

// Node is the running node underneath (its runtime, transport and
// counters), for metrics and tests.
func (c *Cluster) Node() *cluster.Node { return c.node }

// ID is this node's id.
func (c *Cluster) ID() int { return c.opts.ID }

// requests counts the node's requests for pages so far (each a wait of
// the worker that made it): resp.Config.Waits.
func (c *Cluster) requests() uint64 {
	var n uint64
	c.node.RT.Locked(func() { n = c.node.RT.Node().Stats.Requests })
	return n
}

// RESPAddr is where the node serves the Redis protocol ("" if it does not).
func (c *Cluster) RESPAddr() string {
	if c.resp == nil {
		return ""
	}
	return c.resp.Addr()
}

func (c *Cluster) info() []resp.InfoSection {
	s := c.Stats()
	u := func(v uint64) string { return fmt.Sprint(v) }
	return []resp.InfoSection{
		{Name: "Server", Fields: [][2]string{{"scalestore_node", fmt.Sprint(c.opts.ID)}, {"cluster_id", u(c.opts.ClusterID)},
			{"nodes", fmt.Sprint(len(c.opts.Peers))}, {"bootstrap_node", fmt.Sprint(c.opts.Bootstrap)}}},
		{Name: "Stats", Fields: [][2]string{{"cache_hits", u(s.CacheHits)}, {"cache_misses", u(s.CacheMisses)},
			{"remote_page_fetches", u(s.RemoteFetches)}, {"invalidations", u(s.Invalidations)}, {"evictions", u(s.Evictions)},
			{"ssd_reads", u(s.SSDReads)}, {"ssd_writes", u(s.SSDWrites)}, {"pages_allocated", u(s.Pages)},
			{"durability", c.opts.Durability}, {"write_through_flushes", u(c.node.RT.Flushes.Load())}}},
	}
}

// Close stops the node cleanly (the RESP server first): it hands every
// page it holds back to its directory and waits, up to ShutdownTimeout,
// until the peers hold none of its own pages, which they do once they
// close too; then its pages are on its store and the store is marked
// clean, so the next Join reopens it with every key. Stop every node of
// the cluster together. A node closed while its peers keep running (or
// that cannot wait for them) leaves its store marked unclean and says so:
// the peers may hold newer copies of its pages than its store.
// Err is the error that failed this node (its membership lost, a storage
// error), nil while it serves.
func (c *Cluster) Err() error {
	if !c.node.RT.Failed() {
		return nil
	}
	return c.node.RT.Err()
}

// Abandon stops a failed node without writing anything back, as a kill
// would: its store is recovered at the next start (durability process or
// sync), and with membership it rejoins in a new view.
func (c *Cluster) Abandon() {
	if c.closed.Swap(true) {
		return
	}
	if c.resp != nil {
		c.resp.Close()
	}
	c.nlog.stopBackground()
	c.node.Stop()
	abandon(c.store)
	c.nlog.abandon()
	c.replicas.close(false)
	c.closeTxFile()
}

// kill stops the node as a kill -9 of its process would: no page handed
// back, its membership lease left to expire, its stores left unclean
// (tests of a node's death in one process).
func (c *Cluster) kill() {
	if c.closed.Swap(true) {
		return
	}
	if c.resp != nil {
		c.resp.Close()
	}
	c.nlog.stopBackground()
	c.node.Kill()
	abandon(c.store)
	c.nlog.abandon()
	c.replicas.close(false)
	c.closeTxFile()
}

func (c *Cluster) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	if c.resp != nil {
		c.resp.Close()
	}
	defer c.closeTxFile()
	if err := c.nlog.quiesce(); err != nil {
		c.node.Stop()
		abandon(c.store)
		c.nlog.close()
		return fmt.Errorf("scalestore: node %d: %w; its store %s is left unclean", c.opts.ID, err, c.opts.storePath())
	}
	held, err := c.node.Shutdown(c.peers, c.opts.ShutdownTimeout)
	if err != nil {
		abandon(c.store)
		c.nlog.close() // durable (quiesce): the next start replays it
		c.replicas.close(false)
		if held > 0 {
			return fmt.Errorf("scalestore: node %d: %w; its store %s is left unclean", c.opts.ID, err, c.opts.storePath())
		}
		return fmt.Errorf("scalestore: node %d: %w", c.opts.ID, err)
	}
	meta := c.closingMeta()
	err = c.store.SetMeta(meta.encode())
	if cerr := c.store.Close(); err == nil {
		err = cerr
	}
	if cerr := c.nlog.close(); err == nil {
		err = cerr
	}
	if err != nil {
		c.replicas.close(false)
		return fmt.Errorf("scalestore: node %d: closing its store: %w", c.opts.ID, err)
	}
	return c.replicas.close(true)
}
