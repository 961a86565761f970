//go:build linux

package shm

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Config configures one node's shared-memory transport.
type Config struct {
	// Self is this node.
	Self protocol.NodeID
	// SocketPath is the Unix domain socket this node listens at for the
	// bootstrap handshakes (a stale socket file left by a dead process is
	// replaced; a live one is an error).
	SocketPath string
	// Peers holds the socket path of every other node of the cluster; only
	// these nodes may connect. An entry for Self is ignored, so one map can
	// serve every node.
	Peers map[protocol.NodeID]string
	// ClusterID must match on both ends of every connection.
	ClusterID uint64
	// Handler receives every message (never a one-sided verb). It is
	// called from one goroutine per peer, in the peer's order; it must not
	// call Close.
	Handler transport.Handler
	// Logger receives connection errors and state changes; nil discards.
	Logger *slog.Logger
	// RingSize is the size of each of the two message rings of a pair, a
	// power of two in [MinRingSize, MaxRingSize]; default 1 MiB.
	RingSize int
	// Spin bounds how long a waiting side (a reader with an empty ring, a
	// sender with a full one, a verb waiting for its answer) polls before
	// it parks on a futex. Readers adapt their window between 2µs and
	// Spin (see wait.go); default 100µs, negative parks at once.
	Spin time.Duration
	// PeerTimeout bounds how long a Send waits for ring space and a verb
	// for its answer before giving up with ErrPeerDown, and how long a
	// Send to a peer that never connected waits for the connection;
	// default 5s.
	PeerTimeout time.Duration
	// HandshakeTimeout bounds one bootstrap handshake on either end;
	// default 5s.
	HandshakeTimeout time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff between
	// connection attempts; defaults 5ms and 500ms (local sockets are
	// cheap to retry).
	BackoffMin, BackoffMax time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.RingSize == 0 {
		c.RingSize = 1 << 20
	}
	if c.Spin == 0 {
		c.Spin = 100 * time.Microsecond
	}
	def(&c.PeerTimeout, 5*time.Second)
	def(&c.HandshakeTimeout, 5*time.Second)
	def(&c.BackoffMin, 5*time.Millisecond)
	def(&c.BackoffMax, 500*time.Millisecond)
	c.BackoffMax = max(c.BackoffMax, c.BackoffMin)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.Handler == nil {
		return errors.New("shm: Config.Handler is nil")
	}
	if c.SocketPath == "" {
		return errors.New("shm: Config.SocketPath is empty")
	}
	if !validRingSize(uint64(c.RingSize)) {
		return fmt.Errorf("shm: Config.RingSize %d is not a power of two in [%d, %d]", c.RingSize, MinRingSize, MaxRingSize)
	}
	for id, path := range c.Peers {
		if id != c.Self && path == "" {
			return fmt.Errorf("shm: Config.Peers: node %d has no socket path", id)
		}
	}
	return nil
}

// validRingSize: a power of two in [MinRingSize, MaxRingSize].
func validRingSize(n uint64) bool {
	return n >= MinRingSize && n <= MaxRingSize && n&(n-1) == 0
}
