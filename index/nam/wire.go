package nam

import "fmt"

// The remote procedure calls between compute nodes and memory servers,
// carried as the payload of protocol.TIndexCall and TIndexReply.
//
// A request is 32 bytes: op (1), seven zero bytes, key, then two arguments
// (put: the value; scan: the end key, exclusive, and the most entries;
// register: the new leaf's pointer). A reply is a 24-byte header: status
// (1), found (1), two zero bytes, count (4), value (8: get's value,
// locate's leaf pointer), next (8: where a scan that stopped at its limit
// goes on), then count entries of (key, value). codec.go encodes both.
type op uint8

const (
	opGet op = iota + 1
	opPut
	opDelete
	opScan
	opLocate   // hybrid: the leaf that covers key
	opRegister // hybrid: a leaf split off at key lives at the pointer
	opCount
)

func (o op) String() string {
	names := [...]string{"invalid", "get", "put", "delete", "scan", "locate", "register"}
	if o < opCount {
		return names[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Reply status codes.
const (
	statusOK       = 0
	statusBad      = 1 // malformed request
	statusNotMine  = 2 // the key lies outside this server's range
	statusWrongUse = 3 // the op does not fit the server's design
)

// codec is the NAM-tree's shape of the shared call codec (codec.go): two
// arguments, no leaf word, no stale flag.
var codec = Codec{Name: "nam", Args: 2, Ops: uint8(opCount), MaxStatus: statusWrongUse}

const maxScanEntries = (MaxReplySize - 24) / entrySize

type request struct {
	op   op
	key  uint64
	a, b uint64
}

func (r *request) encode(b []byte) []byte {
	return codec.EncodeRequest(b, Request{Op: uint8(r.op), Key: r.key, A: r.a, B: r.b})
}

func decodeRequest(b []byte) (request, error) {
	w, err := codec.DecodeRequest(b, uint8(opScan))
	return request{op: op(w.Op), key: w.Key, a: w.A, b: w.B}, err
}

type reply struct {
	status uint8
	found  bool
	value  uint64
	next   uint64
	keys   []uint64
	vals   []uint64
}

func (r *reply) encode(b []byte) []byte {
	return codec.EncodeReply(b, &Reply{Status: r.status, Found: r.found, Value: r.value, Next: r.next, Keys: r.keys, Vals: r.vals})
}

func decodeReply(b []byte, r *reply) error {
	w := Reply{Keys: r.keys, Vals: r.vals}
	err := codec.DecodeReply(b, &w)
	*r = reply{status: w.Status, found: w.Found, value: w.Value, next: w.Next, keys: w.Keys, vals: w.Vals}
	return err
}

// MaxScanEntries is the most entries one scan reply holds.
const MaxScanEntries = maxScanEntries
