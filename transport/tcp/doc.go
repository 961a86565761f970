// Package tcp is a transport.Transport over TCP, optionally with mutual TLS:
// the transport real ScaleStore-Go clusters use when they have no RDMA
// (paper §3.5 uses RDMA RC queue pairs; TCP gives the same per-pair order).
//
// Connection model: every node dials one connection to every peer it knows
// an address of, eagerly (at New or SetPeerAddr), and retries with
// exponential backoff until the peer is up, so nodes may start in any
// order. A node's messages and one-sided verb requests to a peer travel on
// the connection it dialed (one bounded queue, one writer, so a Write after
// a Send to the same peer is ordered after it); the peer answers verbs on
// that same connection. Messages from a peer arrive on the connection the
// peer dialed, handled by one goroutine per peer, in order.
//
// Every connection opens with a fixed handshake (magic, version, cluster id,
// the dialer's id and the id it expects to reach) that the acceptor answers
// with a reason code; after it, frames carry an 8-byte header (kind, length)
// checked against the largest body of their kind. Nothing read from the
// network can panic the process: a bad handshake or a malformed frame
// closes that connection with a logged error, and the dialer reconnects.
// The wire format is documented in docs/transport-tcp.md.
//
// Delivery is in order and at most once: a message queued or in flight
// when a connection breaks may be lost (the peer restarted, or the frame
// was refused), exactly as a node crash loses it. A peer that cannot be
// reached for Config.PeerTimeout is down: queued messages are dropped and
// Send and the verbs return errors wrapping transport.ErrPeerDown until the
// connection is re-established. A verb that timed out may still be applied
// by the peer later, as with a lost RDMA completion.
//
// Run to completion (poll.go): on plain TCP, TrySend writes a message on
// the caller's goroutine when nothing is queued to that peer, and Poll lets
// any goroutine consume the inbound connections in turns with their
// receive goroutines, so a waiting worker handles its own reply.
//
// One-sided verbs are emulated: the receive loop of the node that owns a
// region serves Read, Write, CompareAndSwap and FetchAndAdd requests
// against it (bounds, key and alignment checked; atomics with sync/atomic
// on the word, so they are atomic with the owner's own atomic accesses).
//
// It imports transport and protocol only of this module.
package tcp
