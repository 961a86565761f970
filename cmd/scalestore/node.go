package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/scalestore-go/scalestore"
	"github.com/scalestore-go/scalestore/cluster"
	"github.com/scalestore-go/scalestore/membership"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocols"
	"github.com/scalestore-go/scalestore/resp"
	"github.com/scalestore-go/scalestore/storage"
	"github.com/scalestore-go/scalestore/storage/memfile"
	"github.com/scalestore-go/scalestore/storage/nvme"
	"github.com/scalestore-go/scalestore/transport/tcp"
	"github.com/scalestore-go/scalestore/ycsb"
)

const nodeUsage = `Usage: scalestore node --id N --listen ADDR --peers 0=ADDR,1=ADDR,... [--resp ADDR] [flags]
       scalestore node --config cluster.toml --id N [flags]

Runs one node of a cluster: the message handler, the directory for the
pages it allocates, the page provider and the workers' cache, hosted as
hollywood actors over the chosen transport, and the cluster's tables: any
node reads and writes any key, and the pages move by the protocol. With
--resp it serves the Redis protocol (GET, SET, DEL, MGET, SCAN, ...) on
the default table, so redis-cli and every Redis client can use the cluster.

Nodes start in any order: the --bootstrap node (default 0) creates the
catalog of a new cluster, the others wait for it and are refused if their
--cluster-id, --peers or store belong to another cluster. SIGTERM (or
SIGINT) stops a node cleanly: it hands its pages back and waits for the
others to stop too (--shutdown-timeout), so a cluster stopped together
and started again on the same --data holds every key. --config describes
the whole deployment in one TOML file copied to every host (docs/deploy.md).
'scalestore cluster' starts nodes as child processes and drives them.

  --transport tcp      TCP connections with a handshake (optional mutual TLS)
  --transport shm      shared memory after L5 (peers on this host); the
                       bootstrap sockets live in --socket-dir
  --transport auto     shm when every peer address is a loopback address,
                       tcp otherwise
  --transport ibverbs  RDMA (a binary built with -tags ibverbs and an RDMA
                       device)

Flags:
`

type nodeFlags struct {
	id                     int
	listen, peers, kind    string
	data, cache, logFile   string
	metrics, socketDir     string
	clusterID              uint64
	tlsCert, tlsKey, tlsCA string
	control                bool
	protocol, role         string
	threads                int
	timeout, shmSpin       time.Duration
	rdma                   cluster.RDMAConfig
	actorDelivery          bool
	reformat               bool
	compute                bool
	pollSpin               time.Duration
	readerNaps             bool
	trace                  bool
	keys                   uint64
	computes, servers      int
	resp, respPassword     string
	respProtected          bool
	respLoop               string
	respLoops              int
	config                 string
	bootstrap              int
	joinTimeout, stopLimit time.Duration
	procs                  int
	durability             string
	etcd                   string
	lease                  time.Duration
	replicas               int
	faultSignals           bool
	// A plug-in protocol's node: its cache lines, mutant and options.
	cacheLines int
	mutant     string
	opts       map[string]string
	// entries are the registrations (their process designs hold the
	// values of their node flags).
	entries []protocols.Entry
}

func runNode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, nodeUsage); fs.PrintDefaults() }
	var f nodeFlags
	fs.IntVar(&f.id, "id", -1, "this node's id, 0..255")
	fs.StringVar(&f.listen, "listen", "", "TCP address to listen at (host:port)")
	fs.StringVar(&f.peers, "peers", "", "every node's address: 0=host:port,1=host:port,...")
	fs.StringVar(&f.kind, "transport", "tcp", "tcp, shm, auto or ibverbs")
	fs.StringVar(&f.data, "data", "", "directory of the node's page store (empty: in memory)")
	fs.StringVar(&f.cache, "cache", "256MiB", "buffer pool size (KiB, MiB, GiB suffixes)")
	fs.StringVar(&f.logFile, "log", "", "append the node's log to this file (default stderr)")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics at /metrics and pprof at /debug/pprof on this address")
	fs.StringVar(&f.socketDir, "socket-dir", os.TempDir(), "directory of the shared-memory bootstrap sockets")
	fs.Uint64Var(&f.clusterID, "cluster-id", 1, "cluster id: nodes of other clusters are refused")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "certificate for mutual TLS (tcp)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "key of --tls-cert")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "CA that signed every node's certificate")
	fs.DurationVar(&f.shmSpin, "shm-spin", 20*time.Microsecond, "how long a waiting shm reader polls before it sleeps (negative: sleep at once; 0: the transport's default); short, since a node's links and workers share few cores")
	fs.StringVar(&f.rdma.Device, "rdma-device", "", "ibverbs: the RDMA device (ibv_devices lists them; empty: the first)")
	fs.IntVar(&f.rdma.Port, "rdma-port", 1, "ibverbs: the device's port")
	fs.IntVar(&f.rdma.GIDIndex, "rdma-gid-index", -1, "ibverbs: GID table entry to use (show_gids lists them; -1: LID on InfiniBand, a RoCE v2 GID on Ethernet)")
	fs.IntVar(&f.rdma.MTU, "rdma-mtu", 0, "ibverbs: path MTU cap in bytes (0: the port's active MTU)")
	fs.IntVar(&f.rdma.Mailboxes, "rdma-mailboxes", 0, "ibverbs: mailbox slots per peer, at least the workers plus one (0: default 16)")
	fs.BoolVar(&f.actorDelivery, "actor-delivery", false, "route incoming frames through the handler actor's inbox (a goroutine hand-off per message) instead of the transport's goroutine")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long a worker waits for a peer before the node reports it down")
	fs.BoolVar(&f.control, "control", false, "take commands on stdin (used by 'scalestore cluster')")
	fs.StringVar(&f.protocol, "protocol", "scalestore", "scalestore, a registered protocol with a process design of its own (with --control: a node of 'scalestore cluster --protocol selcc' or of 'scalestore cluster --workload nam-*|cell', the index designs: --protocol nam-cg and so on), or a protocol built on protocolapi (with --control: a node of 'scalestore cluster --protocol P', deployed with --computes, --threads, --keys, --cache-lines, --mutate and --opt as every other node)")
	fs.IntVar(&f.cacheLines, "cache-lines", 0, "a plug-in protocol: cache lines a node (0: the protocol's default)")
	fs.StringVar(&f.mutant, "mutate", "", "a plug-in protocol: the mutant to apply")
	optionFlag(fs, &f.opts)
	fs.Uint64Var(&f.keys, "keys", 10_000, "an index design: the key space")
	fs.IntVar(&f.computes, "computes", 1, "an index design: compute nodes (ids 0..computes-1; memory servers follow)")
	fs.IntVar(&f.servers, "servers", 1, "an index design: memory servers")
	fs.StringVar(&f.role, "role", "compute", "a process design (selcc, an index design): memory (registers its memory; selcc's runs no handler) or compute (runs --threads workers)")
	fs.IntVar(&f.threads, "threads", 2, "a process design's compute node: workload threads")
	f.entries = protocols.Entries()
	for _, d := range protocols.Designs(f.entries) {
		if d.NodeFlags != nil {
			d.NodeFlags(fs)
		}
	}
	fs.BoolVar(&f.readerNaps, "reader-naps", true, "shm: the transport's readers nap while the node's workers poll (no wake-up per message while every worker has a core); false: they park at once and every message wakes them, which serves a peer sooner when busy threads outnumber the cores (cluster passes false then)")
	fs.DurationVar(&f.pollSpin, "poll-spin", -1, "shm and plain tcp: the longest a worker waiting for a peer polls the transport itself, running the message handler inline, before it sleeps (0: workers never poll; the transport's reader goroutines deliver everything; negative: 50us over shm, 150us over tcp, a few of each transport's round trips)")
	fs.BoolVar(&f.trace, "trace-remote", false, "time the hops of remote page fetches (queueing, peer handler, wake-up) for the run's result")
	fs.BoolVar(&f.compute, "compute", false, "a compute node of the decoupled architecture (paper §6.6): a cache and no pages of its own (its store has no slots, so nothing is allocated on it; --data is ignored)")
	fs.BoolVar(&f.reformat, "reformat", false, "format the node's store under --data even if its last node was killed (its pages are discarded)")
	fs.StringVar(&f.resp, "resp", "", "serve the Redis protocol (RESP) on the default table at this address, e.g. 127.0.0.1:6379 (empty: none)")
	fs.StringVar(&f.respPassword, "resp-password", "", "RESP clients must AUTH with this password (or set SCALESTORE_RESP_PASSWORD); with --tls-cert the RESP port serves TLS too")
	fs.StringVar(&f.respLoop, "resp-loop", "epoll", "how RESP connections are served: epoll (ready connections in batches on event loops, see --resp-loops; TLS connections still get a goroutine each) or goroutine (a goroutine per connection)")
	fs.IntVar(&f.respLoops, "resp-loops", 0, "how many event loops --resp-loop epoll runs. 0: one per scheduler slot (GOMAXPROCS), of which half (at least one) take new connections, and the others take connections while their clients pipeline (4 or more commands per read) or while the node's commands wait for pages from peers (a loop waits with them) (docs/bench.md, \"The request path\"). N: N loops that all take connections, which never move")
	fs.BoolVar(&f.respProtected, "resp-protected-mode", true, "without --resp-password, answer RESP clients that do not connect from the loopback interface with -DENIED (Redis's protected mode); false serves them")
	fs.StringVar(&f.config, "config", "", "a TOML file describing the whole cluster (cluster_id, bootstrap, transport, data, cache and one [[node]] per node with id, address, resp); flags given here win")
	fs.IntVar(&f.procs, "procs", 0, "Go scheduler slots (GOMAXPROCS) for the node; 0: Go's default and the transport's adjustments. On a host whose clients share the node's cores, 1 avoids a thread wake-up per request (bench resp: 1.1x redis-server at -P 1, but 0.7x of 2 slots at -P 16)")
	fs.StringVar(&f.durability, "durability", "process", "what an acknowledged write survives: process (every page a write changed is on its directory's store before the write returns: the death of any node's process loses no acknowledged write, and a killed node's store is recovered at its next start), sync (process, and the directory's device cache flushed before the acknowledgement, one flush for the writes that wait together: power loss) or none (the paper: pages live in the caches until evicted or the cluster stops cleanly; faster writes)")
	fs.StringVar(&f.etcd, "etcd", "", "etcd client URLs (comma-separated) that keep the cluster's membership: a node whose process dies is out of the view once its --lease expires and the others go on without it (its pages fail with an error naming it until it is back); empty: no membership, a dead node fails the operations that need it after --timeout. Needs --data and durability process or sync")
	fs.DurationVar(&f.lease, "lease", 2*time.Second, "with --etcd: the membership lease; a dead node is out of the view within two of them (whole seconds)")
	fs.IntVar(&f.replicas, "replicas", 0, "how many nodes keep each directory's pages: 2 keeps a primary and a backup, so every key stays served through any one node's death (docs/replication.md); 1 keeps them on their own node only. 0: 2 with --etcd, 1 without; 2 needs --etcd")
	fs.BoolVar(&f.faultSignals, "fault-signals", false, "fault injection for tests (crashtest --cluster): SIGUSR1 cuts the node off its peers and etcd, as a network partition would; SIGUSR2 reconnects it")
	fs.IntVar(&f.bootstrap, "bootstrap", 0, "the node that creates the catalog of a new cluster (every node names the same one)")
	fs.DurationVar(&f.joinTimeout, "join-timeout", 2*time.Minute, "how long a node waits at start for the bootstrap node and, without --etcd and with --data, for every peer to roll its cut transactions forward (start the nodes of such a cluster together)")
	fs.DurationVar(&f.stopLimit, "shutdown-timeout", 30*time.Second, "at SIGTERM, how long the node waits for its peers to hand its pages back (they do when they stop too)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "node: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if f.config != "" {
		if err := applyConfig(f.config, &f, flagsSet(fs)); err != nil {
			fmt.Fprintf(stderr, "node: %v\n", err)
			return 2
		}
	}
	respPasswordFromEnv(&f)
	if err := serveNode(f, stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "node: %v\n", err)
		return 1
	}
	return 0
}

func serveNode(f nodeFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.id < 0 || f.id > 255 {
		return fmt.Errorf("--id %d: want 0..255", f.id)
	}
	if err := checkTransport("node", f.kind); err != nil {
		return fmt.Errorf("--transport: %w", err)
	}
	if f.respLoop != resp.LoopEpoll && f.respLoop != resp.LoopGoroutine {
		return fmt.Errorf("--resp-loop %q: want %s or %s", f.respLoop, resp.LoopEpoll, resp.LoopGoroutine)
	}
	if f.respLoops < 0 {
		return fmt.Errorf("--resp-loops %d: want 0 or more", f.respLoops)
	}
	self := protocol.NodeID(f.id)
	peers, err := cluster.ParsePeers(f.peers)
	if err != nil {
		return fmt.Errorf("--peers: %w", err)
	}
	if _, ok := peers[self]; !ok && f.listen != "" {
		peers[self] = f.listen
	}
	if f.listen == "" {
		f.listen = peers[self]
	}
	if f.listen == "" {
		return errors.New("--listen is missing (and --peers does not name this node)")
	}
	cacheBytes, err := ycsb.ParseSize(f.cache)
	if err != nil {
		return fmt.Errorf("--cache: %w", err)
	}
	logOut := stderr
	if f.logFile != "" {
		lf, err := os.OpenFile(f.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("--log: %w", err)
		}
		defer lf.Close()
		logOut = lf
	}
	log := slog.New(slog.NewTextHandler(logOut, nil))
	tc := cluster.TransportConfig{Kind: f.kind, Self: self, Listen: f.listen, Peers: peers, ClusterID: f.clusterID,
		SocketDir: f.socketDir, ShmSpin: f.shmSpin, RDMA: f.rdma, Logger: log}
	if f.tlsCert != "" || f.tlsKey != "" || f.tlsCA != "" {
		if tc.TLS, err = tcp.LoadTLS(f.tlsCert, f.tlsKey, f.tlsCA); err != nil {
			return err
		}
	}
	for _, byWorkload := range []bool{false, true} {
		if d := designOf(f.entries, f.protocol, byWorkload); d != nil {
			return serveDesign(f, d, tc, log, stdin, stdout)
		}
	}
	if f.protocol != "scalestore" {
		p, err := lookupPlugin(f.protocol)
		if err != nil {
			return fmt.Errorf("--protocol %q: want scalestore, %s or a plug-in protocol: %w", f.protocol,
				strings.Join(designNames(f.entries, func(*cluster.Design) bool { return true }), ", "), err)
		}
		return servePlugin(f, p, tc, log, stdin, stdout)
	}
	if f.procs > 0 {
		runtime.GOMAXPROCS(f.procs)
	} else if tc.Resolve() == "shm" {
		// A shm reader with nothing to read parks in a futex call, which
		// holds its scheduler slot (P) until sysmon takes it back, up to
		// milliseconds later: give the workers enough Ps besides one per
		// link.
		runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), runtime.NumCPU()+2*len(peers)))
	}
	if f.pollSpin < 0 {
		f.pollSpin = 50 * time.Microsecond
		if tc.Resolve() == "tcp" {
			f.pollSpin = 150 * time.Microsecond
		}
	}
	if !f.control {
		return joinCluster(f, tc, cacheBytes, log)
	}
	if f.resp != "" {
		return errors.New("--resp: a node under 'scalestore cluster' (--control) serves no clients")
	}
	if f.data != "" {
		reserveIOProc()
	}
	var store storage.PageStore = memfile.New(0, nil)
	closeStore := func() {}
	if !f.compute {
		store, closeStore, err = openNodeStore(f.data, f.id, f.reformat)
	}
	if err != nil {
		return err
	}
	defer closeStore()
	if f.durability != "none" && f.durability != "process" {
		return fmt.Errorf("--durability %q: a node under 'scalestore cluster' (--control) takes none or process", f.durability)
	}
	nc := cluster.NodeConfig{ID: self, CachePages: int(cacheBytes / protocol.PageSize), Store: store,
		Logger: log, Timeout: f.timeout, NewTransport: tc.New, ActorDelivery: f.actorDelivery, NoReaderNaps: !f.readerNaps, PollSpin: f.pollSpin, Trace: f.trace,
		WriteThrough: f.durability == "process"}
	if f.etcd != "" {
		// scalestore cluster --kill: the others go on without a dead node.
		nc.Membership = &membership.Config{Endpoints: strings.Split(f.etcd, ","), Cluster: strconv.FormatUint(f.clusterID, 10),
			Node: self, Addr: f.listen, LeaseTTL: f.lease, Replicas: f.replicas, Logger: log}
		if f.replicas == 0 {
			nc.Membership.Replicas = 2
		}
		if nc.Membership.Replicas > 1 {
			var closers []func()
			defer func() {
				for _, c := range closers {
					c()
				}
			}()
			nc.ReplicaStore = func(dir protocol.NodeID, mustExist bool) (storage.PageStore, uint64, error) {
				// Beside the node's own store: its copies of directory
				// dir's pages (docs/replication.md). A node under
				// 'scalestore cluster' is never restarted on its stores.
				st, closeStore, err := openStoreFile(f.data, fmt.Sprintf("node-%d.db.dir%d", f.id, dir), true)
				if err != nil {
					return nil, 0, fmt.Errorf("directory %d's pages: %w", dir, err)
				}
				closers = append(closers, closeStore)
				return st, 0, nil
			}
		}
	} else if f.replicas > 1 {
		return fmt.Errorf("--replicas %d needs --etcd: a directory's primary and backup follow the membership view", f.replicas)
	}
	n, err := cluster.StartNode(nc)
	if err != nil {
		return err
	}
	defer n.Stop()
	log.Info("node started", "node", f.id, "listen", f.listen, "transport", tc.Resolve(), "peers", len(peers)-1, "cache_pages", cacheBytes/protocol.PageSize)
	if f.metrics != "" {
		addr, err := serveMetrics(f.metrics, n, log)
		if err != nil {
			return err
		}
		log.Info("metrics", "node", f.id, "addr", addr)
	}
	return cluster.Serve(n, stdin, stdout)
}

// joinCluster runs a node of a cluster that applications use (through
// --resp, or a Go program that calls scalestore.Join itself): it serves
// until SIGINT or SIGTERM, then stops cleanly.
func joinCluster(f nodeFlags, tc cluster.TransportConfig, cacheBytes int64, log *slog.Logger) error {
	peers := map[int]string{}
	for id, addr := range tc.Peers {
		peers[int(id)] = addr
	}
	if f.listen == peers[f.id] {
		f.listen = "" // Join listens at the peers' address unless told otherwise
	}
	if f.compute {
		return errors.New("--compute: a compute node runs under 'scalestore cluster --compute-nodes' (--control)")
	}
	if f.data != "" && f.procs == 0 {
		reserveIOProc()
	}
	opts := scalestore.ClusterOptions{ID: f.id, Peers: peers, Listen: f.listen, ClusterID: f.clusterID, Bootstrap: f.bootstrap,
		Transport: f.kind, SocketDir: f.socketDir, TLS: tc.TLS, Data: f.data, Reformat: f.reformat,
		CachePages: int(cacheBytes / protocol.PageSize), Timeout: f.timeout, JoinTimeout: f.joinTimeout, ShutdownTimeout: f.stopLimit,
		RESP: f.resp, RESPPassword: f.respPassword, RESPUnprotected: !f.respProtected, RESPLoop: f.respLoop, RESPLoops: f.respLoops, Durability: f.durability, Logger: log, LeaseTTL: f.lease, Replicas: f.replicas,
		RDMA: scalestore.RDMAOptions{Device: f.rdma.Device, Port: f.rdma.Port, UseGIDIndex: f.rdma.GIDIndex >= 0,
			GIDIndex: max(f.rdma.GIDIndex, 0), MTU: f.rdma.MTU, Mailboxes: f.rdma.Mailboxes}}
	if f.etcd != "" {
		opts.Etcd = strings.Split(f.etcd, ",")
	}
	if f.resp != "" && tc.TLS != nil {
		opts.RESPTLS = tc.TLS
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	c, err := scalestore.Join(opts)
	if err != nil {
		return err
	}
	log.Info("node serving", "node", f.id, "listen", tc.Listen, "resp", c.RESPAddr(), "data", f.data)
	if f.metrics != "" {
		addr, err := serveMetrics(f.metrics, c.Node(), log)
		if err != nil {
			c.Close()
			return err
		}
		log.Info("metrics", "node", f.id, "addr", addr)
	}
	// A node that lost its membership (paused or cut off longer than its
	// lease) was declared dead: it exits, leaving its store to be
	// recovered at its next start, which rejoins in a new view.
	// Without membership it stays up and says so once.
	failed := time.NewTicker(100 * time.Millisecond)
	defer failed.Stop()
	failedReported := false
	faults := make(chan os.Signal, 1)
	if f.faultSignals {
		signal.Notify(faults, syscall.SIGUSR1, syscall.SIGUSR2)
		defer signal.Stop(faults)
	}
	var s os.Signal
	for s == nil {
		select {
		case fs := <-faults:
			log.Warn("fault injection", "node", f.id, "partitioned", fs == syscall.SIGUSR1)
			c.Node().Partition(fs == syscall.SIGUSR1)
		case s = <-sig:
		case <-failed.C:
			err := c.Err()
			switch {
			case err == nil || failedReported:
			case f.etcd != "":
				log.Error("node failed: exiting (restart it to rejoin)", "node", f.id, "err", err)
				c.Abandon()
				return fmt.Errorf("node %d failed: %w", f.id, err)
			default:
				// Without membership no view change lets it rejoin:
				// it stays up, its clients get the error that names
				// the peer, until the cluster is restarted.
				log.Error("node failed: its operations fail until the cluster is restarted", "node", f.id, "err", err)
				failedReported = true
			}
		}
	}
	log.Info("stopping", "node", f.id, "signal", s.String())
	if err := c.Close(); err != nil {
		return err
	}
	log.Info("stopped cleanly", "node", f.id)
	return nil
}

// openNodeStore opens node id's page store in dir, or in memory.
//
// A cluster's pages do not survive its nodes (the protocol keeps no log and
// a node no catalog): every start formats the store. But a store whose
// node was killed is not formatted over without a word: its pages were the
// only copy of what the node held, and the start fails with
// errUncleanNodeStore unless reformat says to discard them.
func openNodeStore(dir string, id int, reformat bool) (storage.PageStore, func(), error) {
	return openStoreFile(dir, fmt.Sprintf("node-%d.db", id), reformat)
}

// openStoreFile opens (or creates) the store name in dir.
func openStoreFile(dir, name string, reformat bool) (storage.PageStore, func(), error) {
	const slots = 1 << 20
	if dir == "" {
		return memfile.New(slots, nil), func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil && !reformat {
		if err := checkNodeStore(path); err != nil {
			return nil, nil, err
		}
	}
	opts := nvme.Options{Create: true, Slots: slots}
	s, err := nvme.Open(path, opts)
	if errors.Is(err, nvme.ErrDirectUnsupported) {
		opts.NoDirect = true
		s, err = nvme.Open(path, opts)
	}
	if err != nil {
		return nil, nil, err
	}
	return s, func() { s.Close() }, nil
}

// errUncleanNodeStore: a node's store was not closed by its last node.
var errUncleanNodeStore = errors.New("the node's store was not closed cleanly")

// checkNodeStore refuses the existing store at path if its last node did
// not close it (or it is not a store), leaving it as it is.
func checkNodeStore(path string) error {
	s, err := nvme.Open(path, nvme.Options{NoIOUring: true})
	if errors.Is(err, nvme.ErrDirectUnsupported) {
		s, err = nvme.Open(path, nvme.Options{NoIOUring: true, NoDirect: true})
	}
	if err != nil {
		return fmt.Errorf("%s is not a store this node can take over: %w (remove it, or start with --reformat)", path, err)
	}
	clean := s.WasClean()
	if clean {
		return s.Close()
	}
	s.Abandon()
	return fmt.Errorf("%s: %w: its node was killed or failed, and the pages it held are lost with it "+
		"(a cluster keeps no log); remove it, or start with --reformat to discard it", path, errUncleanNodeStore)
}

// serveMetrics serves Prometheus metrics and pprof on addr.
func serveMetrics(addr string, n *cluster.Node, log *slog.Logger) (string, error) {
	reg := prometheus.NewRegistry()
	stat := func(name, help string, get func(cluster.Stats) uint64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "scalestore_" + name, Help: help},
			func() float64 { return float64(get(n.Stats())) }))
	}
	stat("ops_total", "key-value operations the node's workers completed", func(s cluster.Stats) uint64 { return s.Ops })
	stat("cache_hits_total", "page accesses served from the cache", func(s cluster.Stats) uint64 { return s.CacheHits })
	stat("cache_misses_total", "page accesses that needed the protocol", func(s cluster.Stats) uint64 { return s.CacheMisses })
	stat("remote_page_fetches_total", "pages fetched from another node", func(s cluster.Stats) uint64 { return s.RemoteFetches })
	stat("invalidations_total", "copies invalidated", func(s cluster.Stats) uint64 { return s.Invalidations })
	stat("evictions_total", "pages evicted", func(s cluster.Stats) uint64 { return s.Evictions })
	stat("ssd_reads_total", "pages read from the SSD", func(s cluster.Stats) uint64 { return s.SSDReads })
	stat("bad_frames_total", "malformed frames from peers, dropped", func(s cluster.Stats) uint64 { return s.BadFrames })
	lat := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "scalestore_request_seconds",
		Help: "time from an ownership request to its grant (message round trips and transfers)", Buckets: prometheus.ExponentialBuckets(1e-6, 2, 24)})
	reg.MustRegister(lat)
	n.RT.Locked(func() {
		n.OnObtained = func(_ protocol.PID, _ protocol.Mode, waited time.Duration) { lat.Observe(waited.Seconds()) }
	})
	for _, ev := range []string{"actor_restarted", "dead_letter", "remote_unreachable", "actor_max_restarts"} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "scalestore_actor_events_total",
			Help: "hollywood engine events", ConstLabels: prometheus.Labels{"event": ev}},
			func() float64 { return float64(n.Host.EventCount(ev)) }))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--metrics: %w", err)
	}
	go func() {
		if err := http.Serve(ln, mux); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return ln.Addr().String(), nil
}

// reserveIOProc gives a process that runs the engine on an SSD store one
// scheduler slot (P) more than it has CPUs, unless GOMAXPROCS is set: the
// I/O goroutine waits for completions in io_uring_enter, which holds its P
// until sysmon takes it back, and the workers lose that CPU meanwhile. On 2
// cores, 8M records and a 256 MiB cache it gave 43.2K/42.6K ops/s against
// 40.4K/40.0K.
func reserveIOProc() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), runtime.NumCPU()+1))
	}
}

// serveDesign runs a node of a registered protocol's process design under
// 'scalestore cluster' (--control).
func serveDesign(f nodeFlags, d *cluster.Design, tc cluster.TransportConfig, log *slog.Logger, stdin io.Reader, stdout io.Writer) error {
	if !f.control {
		how := "--protocol"
		if d.ByWorkload {
			how = "--workload"
		}
		return fmt.Errorf("--protocol %s: a %s node runs under 'scalestore cluster %s %s' (--control)", f.protocol, f.protocol, how, f.protocol)
	}
	if f.role != "memory" && f.role != "compute" {
		return fmt.Errorf("--role %q: want memory or compute", f.role)
	}
	return d.Serve(f.protocol, cluster.DesignNode{ID: tc.Self, Memory: f.role == "memory", Threads: f.threads, Keys: f.keys,
		Computes: f.computes, Servers: f.servers, Transport: tc.Resolve(), NewTransport: tc.New, Logger: log}, stdin, stdout)
}
