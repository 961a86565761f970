//go:build linux

package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"golang.org/x/sys/unix"
)

// The handshake on the bootstrap socket: the dialer sends one hello message
// with the memfd attached (SCM_RIGHTS); the acceptor answers with a welcome
// or a reject. Both are helloSize bytes:
//
//	[0,8)   magic "SSGSHMHS"
//	[8,12)  protocol version
//	[12,16) message kind: hello, welcome or reject
//	[16,24) cluster id
//	[24]    sender's node id
//	[25]    the node id the sender expects at the other end
//	[32,40) ring size in bytes (hello)
//	[40,44) reject reason (reject)
//
// Everything after the handshake travels through the segment; the socket
// stays open, silent, as the liveness channel: when either process exits or
// closes its transport, the other reads EOF.
const (
	helloSize    = 64
	helloMagic   = 0x53_48_4d_48_53_47_53_53 // "SSGSHMHS" little endian
	protoVersion = 2                         // 2: region messages on the bootstrap socket (direct.go)

	msgHello   = 1
	msgWelcome = 2
	msgReject  = 3
)

// Reject reasons, sent back so the dialer can log why.
const (
	rejectVersion = iota + 1
	rejectCluster
	rejectNotMe
	rejectUnknownPeer
	rejectDirection
	rejectRingSize
	rejectSegment
	rejectClosed
)

var rejectText = map[uint32]string{
	rejectVersion:     "protocol version mismatch",
	rejectCluster:     "cluster id mismatch",
	rejectNotMe:       "hello addressed to another node",
	rejectUnknownPeer: "sender is not a member of the cluster",
	rejectDirection:   "the node with the lower id dials, not this one",
	rejectRingSize:    "ring size out of range or not a power of two",
	rejectSegment:     "segment unusable (not a sealable memfd, too small, or unmappable)",
	rejectClosed:      "acceptor is closing",
}

// errHandshake marks a refused or malformed handshake.
var errHandshake = errors.New("shm: handshake")

type hello struct {
	kind     uint32
	version  uint32
	cluster  uint64
	from, to protocol.NodeID
	ringSize uint64
	reason   uint32
}

func (h hello) encode() []byte {
	b := make([]byte, helloSize)
	binary.LittleEndian.PutUint64(b[0:], helloMagic)
	binary.LittleEndian.PutUint32(b[8:], h.version)
	binary.LittleEndian.PutUint32(b[12:], h.kind)
	binary.LittleEndian.PutUint64(b[16:], h.cluster)
	b[24], b[25] = byte(h.from), byte(h.to)
	binary.LittleEndian.PutUint64(b[32:], h.ringSize)
	binary.LittleEndian.PutUint32(b[40:], h.reason)
	return b
}

// decodeHello checks the magic and length; the caller checks the fields.
func decodeHello(b []byte) (hello, error) {
	if len(b) != helloSize {
		return hello{}, fmt.Errorf("%w: %d bytes, want %d", errHandshake, len(b), helloSize)
	}
	if m := binary.LittleEndian.Uint64(b[0:]); m != helloMagic {
		return hello{}, fmt.Errorf("%w: bad magic %#x (not a scalestore shm peer)", errHandshake, m)
	}
	return hello{
		version:  binary.LittleEndian.Uint32(b[8:]),
		kind:     binary.LittleEndian.Uint32(b[12:]),
		cluster:  binary.LittleEndian.Uint64(b[16:]),
		from:     protocol.NodeID(b[24]),
		to:       protocol.NodeID(b[25]),
		ringSize: binary.LittleEndian.Uint64(b[32:]),
		reason:   binary.LittleEndian.Uint32(b[40:]),
	}, nil
}

// readHello reads one hello and the fds passed with it. Every fd that came
// along is returned, so the caller can close them all if it refuses.
func readHello(conn *net.UnixConn, deadline time.Time) (b []byte, fds []int, err error) {
	if err := conn.SetReadDeadline(deadline); err != nil {
		return nil, nil, err
	}
	b = make([]byte, helloSize)
	oob := make([]byte, unix.CmsgSpace(4*4)) // room for a few fds, to see and close extras
	n, oobn, flags, _, err := conn.ReadMsgUnix(b, oob)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reading hello: %v", errHandshake, err)
	}
	fds, perr := parseRights(oob[:oobn])
	fail := func(err error) ([]byte, []int, error) {
		closeAll(fds)
		return nil, nil, err
	}
	switch {
	case perr != nil:
		return fail(fmt.Errorf("%w: control message: %v", errHandshake, perr))
	case flags&unix.MSG_CTRUNC != 0:
		return fail(fmt.Errorf("%w: control message truncated (too many fds)", errHandshake))
	}
	if n < helloSize {
		// A stream socket may split the hello; the fd came with its first byte.
		if _, err := io.ReadFull(conn, b[n:]); err != nil {
			return fail(fmt.Errorf("%w: short hello (%d bytes): %v", errHandshake, n, err))
		}
	}
	return b, fds, nil
}

func closeAll(fds []int) {
	for _, f := range fds {
		unix.Close(f)
	}
}

// parseRights extracts the fds of every SCM_RIGHTS message in oob.
func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	var bad error
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			bad = fmt.Errorf("unexpected control message level %d type %d", msgs[i].Header.Level, msgs[i].Header.Type)
			continue
		}
		f, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			bad = err
			continue
		}
		fds = append(fds, f...)
	}
	if bad != nil {
		closeAll(fds)
		return nil, bad
	}
	return fds, nil
}

// writeAll writes b with a deadline.
func writeAll(conn *net.UnixConn, b []byte, deadline time.Time) error {
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	_, err := conn.Write(b)
	return err
}
