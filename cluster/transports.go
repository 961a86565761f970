package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/ibverbs"
	"github.com/scalestore-go/scalestore/transport/shm"
	"github.com/scalestore-go/scalestore/transport/tcp"
)

// TransportConfig names a node's transport and its peers.
type TransportConfig struct {
	Kind      string // tcp, shm, auto or ibverbs
	Self      protocol.NodeID
	Listen    string                     // this node's TCP address
	Peers     map[protocol.NodeID]string // every node's TCP address
	ClusterID uint64
	TLS       *tls.Config
	// SocketDir holds the shared-memory bootstrap sockets (shm, auto);
	// node i listens at SocketDir/node-i.sock.
	SocketDir string
	// ShmSpin is how long a waiting shm reader polls before it parks
	// (negative: park at once); 0 is the transport's default.
	ShmSpin time.Duration
	// RDMA selects the device and addressing of the ibverbs transport.
	RDMA   RDMAConfig
	Logger *slog.Logger
}

// RDMAConfig is the device side of an ibverbs transport (docs/rdma.md).
type RDMAConfig struct {
	Device    string // empty: the first device
	Port      int    // 0: port 1
	GIDIndex  int    // negative: automatic (LID on InfiniBand, a RoCE v2 GID on Ethernet)
	MTU       int    // 0: the port's active MTU
	Mailboxes int    // mailbox slots per peer; 0: the transport's default
	// OpenDevice, if set, gives the device instead of opening the one
	// Device names: tests pass a fake (ibverbs.NewFabric().NewDevice),
	// which needs no RDMA hardware and no ibverbs build tag.
	OpenDevice func() (ibverbs.Device, error)
}

// Kinds lists the transports.
const Kinds = "tcp, shm, auto, ibverbs"

// Resolve decides what auto means: shared memory when every peer is on
// this host (a loopback address), TCP otherwise.
func (c TransportConfig) Resolve() string {
	if c.Kind != "auto" {
		return c.Kind
	}
	for _, addr := range c.Peers {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return "tcp"
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "tcp"
		}
	}
	return "shm"
}

// SocketPath is node id's shared-memory bootstrap socket.
func (c TransportConfig) SocketPath(id protocol.NodeID) string {
	return filepath.Join(c.SocketDir, fmt.Sprintf("node-%d.sock", id))
}

// New builds the transport; handler receives its messages.
func (c TransportConfig) New(handler transport.Handler) (transport.Transport, error) {
	switch kind := c.Resolve(); kind {
	case "tcp":
		return tcp.New(tcp.Config{Self: c.Self, Listen: c.Listen, Peers: c.Peers, ClusterID: c.ClusterID,
			Handler: handler, TLS: c.TLS, Logger: c.Logger})
	case "shm":
		if c.SocketDir == "" {
			return nil, fmt.Errorf("cluster: the shm transport needs a socket directory")
		}
		peers := map[protocol.NodeID]string{}
		for id := range c.Peers {
			peers[id] = c.SocketPath(id)
		}
		return shm.New(shm.Config{Self: c.Self, SocketPath: c.SocketPath(c.Self), Peers: peers, ClusterID: c.ClusterID,
			Handler: handler, Logger: c.Logger, Spin: c.ShmSpin})
	case "ibverbs":
		return c.newIBVerbs(handler)
	default:
		return nil, fmt.Errorf("cluster: unknown transport %q (want one of %s)", kind, Kinds)
	}
}

// newIBVerbs opens the RDMA transport: on RDMA.OpenDevice's device if set,
// else on the device RDMA names (a binary built with -tags ibverbs).
func (c TransportConfig) newIBVerbs(handler transport.Handler) (transport.Transport, error) {
	if c.TLS != nil {
		return nil, errors.New("cluster: TLS is for the tcp transport; ibverbs exchanges its queue pairs in the clear and its data never crosses TCP")
	}
	if c.RDMA.OpenDevice == nil && !ibverbs.Built {
		return nil, ibverbs.ErrNotBuilt
	}
	r := c.RDMA
	cfg := ibverbs.Config{Self: c.Self, Addrs: c.Peers, Handler: handler, Device: r.Device, Port: r.Port,
		UseGIDIndex: r.GIDIndex >= 0, GIDIndex: max(r.GIDIndex, 0), MTU: r.MTU, Mailboxes: r.Mailboxes}
	open := func() (transport.Transport, error) {
		if r.OpenDevice == nil {
			return ibverbs.Open(cfg)
		}
		dev, err := r.OpenDevice()
		if err != nil {
			return nil, err
		}
		return ibverbs.New(dev, cfg)
	}
	if c.Listen == "" || c.Listen == c.Peers[c.Self] {
		return open()
	}
	// The out-of-band listener binds Listen (e.g. 0.0.0.0:7000 behind
	// the address the peers dial).
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: ibverbs: listening for peers on %s: %w", c.Listen, err)
	}
	cfg.Listener = ln
	t, err := open()
	if err != nil {
		ln.Close()
	}
	return t, err
}

// ParsePeers reads "0=host:port,1=host:port,...".
func ParsePeers(s string) (map[protocol.NodeID]string, error) {
	peers := map[protocol.NodeID]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		var n int
		if _, err := fmt.Sscanf(id, "%d", &n); !ok || err != nil || n < 0 || n > 255 || fmt.Sprint(n) != id {
			return nil, fmt.Errorf("peer %q: want ID=HOST:PORT with ID in 0..255", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: %v", part, err)
		}
		if _, dup := peers[protocol.NodeID(n)]; dup {
			return nil, fmt.Errorf("peer %d named twice", n)
		}
		peers[protocol.NodeID(n)] = addr
	}
	if len(peers) == 0 {
		return nil, fmt.Errorf("no peers")
	}
	return peers, nil
}
