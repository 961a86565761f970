package cell

import (
	"fmt"

	"github.com/scalestore-go/scalestore/index/nam"
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
//	reserve a = slots for a meganode from key on moving to this server,
//	        b = its high key if c is 1 (server to server)
//	adopt   key = a reserved slot, a = the meganode's first key; the node
//	        (NodeSize bytes) follows the request
//	unlock  the meganode from key on is here: writes into it go on
//
// A reply to a server's call names its op in leaf, and echoes its key in
// value (reserve: the first slot in next).
// A reply is a 32-byte header, status (1), found (1), stale (1), a zero byte,
// count (4), value (8), leaf (8), next (8), then count entries of (key,
// value). search: found and value (a leaf meganode's value, or, in the
// root meganode, the leaf meganode's root), leaf the leaf it ended at.
// put/delete: found (delete: whether the key was there). scan: the
// entries; found when more follow, from key value at leaf next.
// codec encodes both. StatusMoved: the search or write reached a node of another server,
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
	opReserve
	opAdopt
	opUnlock
	opCount
)

func (o op) String() string {
	names := [...]string{"invalid", "search", "put", "delete", "scan", "link", "reserve", "adopt", "unlock"}
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

// codec is Cell's shape of the index designs' call codec
// (index/nam/codec.go): three arguments, a leaf word, the stale flag.
var codec = nam.Codec{Name: "cell", Args: 3, Ops: uint8(opCount), MaxStatus: StatusRetry, Leaf: true, Stale: true}

const (
	requestSize = 40
	// MaxReplySize bounds a reply.
	MaxReplySize   = nam.MaxReplySize
	maxScanEntries = (MaxReplySize - 32) / 16
)

type request struct {
	op      op
	key     uint64
	a, b, c uint64
}

func (r *request) encode(b []byte) []byte {
	return codec.EncodeRequest(b, nam.Request{Op: uint8(r.op), Key: r.key, A: r.a, B: r.b, C: r.c})
}

func decodeRequest(b []byte) (request, error) {
	w, err := codec.DecodeRequest(b, uint8(opScan))
	return request{op: op(w.Op), key: w.Key, a: w.A, b: w.B, c: w.C}, err
}

type reply struct {
	status            uint8
	found, stale      bool
	value, leaf, next uint64
	keys, vals        []uint64
}

func (r *reply) encode(b []byte) []byte {
	return codec.EncodeReply(b, &nam.Reply{Status: r.status, Found: r.found, Stale: r.stale, Value: r.value,
		Leaf: r.leaf, Next: r.next, Keys: r.keys, Vals: r.vals})
}

func decodeReply(b []byte, r *reply) error {
	w := nam.Reply{Keys: r.keys, Vals: r.vals}
	err := codec.DecodeReply(b, &w)
	*r = reply{status: w.Status, found: w.Found, stale: w.Stale, value: w.Value, leaf: w.Leaf, next: w.Next, keys: w.Keys, vals: w.Vals}
	return err
}
