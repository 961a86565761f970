package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
)

// magic opens every handshake and answer, so a stray client (an HTTP
// request, a port scanner) is told apart from a node of another version.
var magic = [8]byte{'S', 'C', 'A', 'L', 'E', 'S', 'T', 'R'}

// version is the wire format's version; nodes of different versions refuse
// each other.
const version = 1

// The dialer's hello: magic (8), version (uint16), zero (uint16), the
// dialer's node id (uint16), the node id it wants to reach (uint16), the
// cluster id (uint64). Node ids are 16 bits wide on the wire so a
// corrupted or foreign id (>= protocol.MaxNodes) is reported as unknown
// rather than silently truncated.
const helloSize = 24

// The acceptor's answer: magic (8), version (uint16), reason (uint16), the
// acceptor's node id (uint16), zero (uint16).
const answerSize = 16

type hello struct {
	version  uint16
	from, to uint16
	cluster  uint64
}

// reason is why an acceptor refused a hello (reasonOK: it did not).
type reason uint16

const (
	reasonOK reason = iota
	reasonBadMagic
	reasonVersion
	reasonCluster
	reasonUnknownNode
	reasonNotPeer
	reasonWrongTarget
	reasonSelf
	reasonShutdown
	reasonReserved
)

func (r reason) String() string {
	switch r {
	case reasonOK:
		return "accepted"
	case reasonBadMagic:
		return "bad magic (not a scalestore node)"
	case reasonVersion:
		return "wrong protocol version"
	case reasonCluster:
		return "wrong cluster id"
	case reasonUnknownNode:
		return "unknown node id"
	case reasonNotPeer:
		return "node not in peers"
	case reasonWrongTarget:
		return "wrong target node id"
	case reasonSelf:
		return "node claims to be the acceptor itself"
	case reasonShutdown:
		return "acceptor shutting down"
	case reasonReserved:
		return "reserved handshake field not zero"
	}
	return fmt.Sprintf("reason %d", uint16(r))
}

// rejectError is a handshake the acceptor refused, as the dialer sees it.
type rejectError struct {
	node   protocol.NodeID
	addr   string
	reason reason
}

func (e *rejectError) Error() string {
	return fmt.Sprintf("tcp: node %d at %s rejected the handshake: %v", e.node, e.addr, e.reason)
}

var errBadAnswer = errors.New("tcp: bad handshake answer")

func encodeHello(h hello) []byte {
	b := make([]byte, 0, helloSize)
	b = append(b, magic[:]...)
	b = binary.LittleEndian.AppendUint16(b, h.version)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint16(b, h.from)
	b = binary.LittleEndian.AppendUint16(b, h.to)
	return binary.LittleEndian.AppendUint64(b, h.cluster)
}

// decodeHello checks the parts of a hello that need no configuration.
func decodeHello(b []byte) (hello, reason) {
	if len(b) != helloSize || [8]byte(b[:8]) != magic {
		return hello{}, reasonBadMagic
	}
	h := hello{
		version: binary.LittleEndian.Uint16(b[8:]),
		from:    binary.LittleEndian.Uint16(b[12:]),
		to:      binary.LittleEndian.Uint16(b[14:]),
		cluster: binary.LittleEndian.Uint64(b[16:]),
	}
	if h.version != version {
		return h, reasonVersion
	}
	if binary.LittleEndian.Uint16(b[10:]) != 0 {
		return h, reasonReserved
	}
	if h.from >= protocol.MaxNodes {
		return h, reasonUnknownNode
	}
	return h, reasonOK
}

func encodeAnswer(r reason, self protocol.NodeID) []byte {
	b := make([]byte, 0, answerSize)
	b = append(b, magic[:]...)
	b = binary.LittleEndian.AppendUint16(b, version)
	b = binary.LittleEndian.AppendUint16(b, uint16(r))
	b = binary.LittleEndian.AppendUint16(b, uint16(self))
	return binary.LittleEndian.AppendUint16(b, 0)
}

// decodeAnswer returns the acceptor's reason and node id.
func decodeAnswer(b []byte) (reason, uint16, error) {
	if len(b) != answerSize || [8]byte(b[:8]) != magic {
		return 0, 0, fmt.Errorf("%w: not a scalestore node", errBadAnswer)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != version {
		return 0, 0, fmt.Errorf("%w: version %d, want %d", errBadAnswer, v, version)
	}
	return reason(binary.LittleEndian.Uint16(b[10:])), binary.LittleEndian.Uint16(b[12:]), nil
}
