package tcp

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Config configures one node's transport.
type Config struct {
	// Self is this node.
	Self protocol.NodeID
	// Listen is the address to listen at, e.g. "127.0.0.1:0" (Addr
	// returns the port chosen).
	Listen string
	// Peers holds the address of every other node of the cluster. Only
	// these nodes may connect. An entry for Self is ignored; an empty
	// address makes the node a member whose address comes later, by
	// SetPeerAddr (for tests that listen at port 0 first).
	Peers map[protocol.NodeID]string
	// ClusterID must match on both ends of every connection, so nodes of
	// two clusters sharing hosts never talk to each other.
	ClusterID uint64
	// Handler receives every message (never a one-sided verb).
	Handler transport.Handler
	// TLS, when set, turns on mutual TLS: the same config serves both
	// ends; the acceptor requires and verifies client certificates
	// against ClientCAs (RootCAs if nil). See LoadTLS. Nil: plain TCP.
	TLS *tls.Config
	// Logger receives connection errors and state changes; nil discards.
	Logger *slog.Logger
	// QueueLen bounds the send queue to each peer (frames); default 1024.
	QueueLen int
	// DialTimeout bounds one connection attempt; default 2s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds the (TLS and) node handshake of a
	// connection, on both ends; default 5s.
	HandshakeTimeout time.Duration
	// PeerTimeout: how long a Send may wait for a full queue, a verb for
	// its reply, a write for the peer to read, and how long a peer may be
	// unreachable before it counts as down; default 5s.
	PeerTimeout time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff between
	// connection attempts; defaults 20ms and 2s.
	BackoffMin, BackoffMax time.Duration
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.QueueLen <= 0 {
		c.QueueLen = 1024
	}
	def(&c.DialTimeout, 2*time.Second)
	def(&c.HandshakeTimeout, 5*time.Second)
	def(&c.PeerTimeout, 5*time.Second)
	def(&c.BackoffMin, 20*time.Millisecond)
	def(&c.BackoffMax, 2*time.Second)
	c.BackoffMax = max(c.BackoffMax, c.BackoffMin)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.Handler == nil {
		return errors.New("tcp: Config.Handler is nil")
	}
	if c.Listen == "" {
		return errors.New("tcp: Config.Listen is empty")
	}
	if c.TLS != nil && len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil {
		return errors.New("tcp: Config.TLS has no certificate (mutual TLS needs one per node)")
	}
	return nil
}
