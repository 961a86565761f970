package cell

import (
	"encoding/binary"
	"fmt"
)

// The calls from clients to servers, carried as the payload of
// protocol.TIndexCall and TIndexReply.
//
// A request is 40 bytes: op (1), seven zero bytes, key, then three
// arguments:
//
//	search  a = the node to start at (on this server)
//	put     a = value, b = the leaf the client found (a hint)
//	delete  b = the leaf hint
//	scan    a = end key (exclusive), b = most entries, c = the leaf hint
//	link    a = the root of the meganode whose keys start at key (from the
//	        server that split it to the root meganode's)
//
// A reply is a 32-byte header, status (1), found (1), stale (1), a zero byte,
// count (4), value (8), leaf (8), next (8), then count entries of (key,
// value). search: found and value (a leaf meganode's value, or, in the
// root meganode, the leaf meganode's root), leaf the leaf it ended at.
// put/delete: found (delete: whether the key was there). scan: the
// entries; found when more follow, from key value at leaf next.
// StatusMoved: the search or write reached a node of another server,
// whose pointer is next; the client goes on there. stale: the search's
// start node no longer covered the key (a meganode split moved it right):
// the client drops the cached node that named it.
type op uint8

const (
	opSearch op = iota + 1
	opPut
	opDelete
	opScan
	opLink
	opCount
)

func (o op) String() string {
	names := [...]string{"invalid", "search", "put", "delete", "scan", "link"}
	if o < opCount {
		return names[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Reply statuses.
const (
	StatusOK    = 0
	StatusBad   = 1 // a malformed request, or a pointer that is not a node of this server
	StatusMoved = 2 // continue at next, on another server
	StatusFull  = 3 // the server has no free node slot
	// StatusRetry: start the operation again from the top: the key's
	// meganode is being split (a write waits), or the request named a
	// node that a meganode split left behind.
	StatusRetry = 4
)

const (
	requestSize    = 40
	replyHdrSize   = 32
	entrySize      = 16
	MaxReplySize   = 4096
	maxScanEntries = (MaxReplySize - replyHdrSize) / entrySize
)

type request struct {
	op      op
	key     uint64
	a, b, c uint64
}

func (r *request) encode(b []byte) []byte {
	b = append(b[:0], byte(r.op), 0, 0, 0, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, r.key)
	b = binary.LittleEndian.AppendUint64(b, r.a)
	b = binary.LittleEndian.AppendUint64(b, r.b)
	return binary.LittleEndian.AppendUint64(b, r.c)
}

func decodeRequest(b []byte) (request, error) {
	if len(b) != requestSize {
		return request{}, fmt.Errorf("cell: request of %d bytes, want %d", len(b), requestSize)
	}
	r := request{op: op(b[0]), key: binary.LittleEndian.Uint64(b[8:]), a: binary.LittleEndian.Uint64(b[16:]),
		b: binary.LittleEndian.Uint64(b[24:]), c: binary.LittleEndian.Uint64(b[32:])}
	if r.op == 0 || r.op >= opCount {
		return r, fmt.Errorf("cell: unknown op %d", b[0])
	}
	for _, z := range b[1:8] {
		if z != 0 {
			return r, fmt.Errorf("cell: %v request with reserved bytes set", r.op)
		}
	}
	if r.op == opScan && (r.a <= r.key || r.b == 0 || r.b > maxScanEntries) {
		return r, fmt.Errorf("cell: scan of [%d, %d) for %d entries", r.key, r.a, r.b)
	}
	return r, nil
}

type reply struct {
	status            uint8
	found, stale      bool
	value, leaf, next uint64
	keys, vals        []uint64
}

func (r *reply) encode(b []byte) []byte {
	f := byte(0)
	if r.found {
		f = 1
	}
	st := byte(0)
	if r.stale {
		st = 1
	}
	b = append(b[:0], r.status, f, st, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.keys)))
	b = binary.LittleEndian.AppendUint64(b, r.value)
	b = binary.LittleEndian.AppendUint64(b, r.leaf)
	b = binary.LittleEndian.AppendUint64(b, r.next)
	for i, k := range r.keys {
		b = binary.LittleEndian.AppendUint64(b, k)
		b = binary.LittleEndian.AppendUint64(b, r.vals[i])
	}
	return b
}

func decodeReply(b []byte, r *reply) error {
	if len(b) < replyHdrSize {
		return fmt.Errorf("cell: reply of %d bytes", len(b))
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if n > maxScanEntries || len(b) != replyHdrSize+int(n)*entrySize || b[1] > 1 || b[2] > 1 || b[3] != 0 || b[0] > StatusRetry {
		return fmt.Errorf("cell: malformed reply (%d bytes, %d entries)", len(b), n)
	}
	r.status, r.found, r.stale = b[0], b[1] == 1, b[2] == 1
	r.value = binary.LittleEndian.Uint64(b[8:])
	r.leaf = binary.LittleEndian.Uint64(b[16:])
	r.next = binary.LittleEndian.Uint64(b[24:])
	r.keys, r.vals = r.keys[:0], r.vals[:0]
	for i := range int(n) {
		e := b[replyHdrSize+i*entrySize:]
		r.keys = append(r.keys, binary.LittleEndian.Uint64(e))
		r.vals = append(r.vals, binary.LittleEndian.Uint64(e[8:]))
	}
	return nil
}
