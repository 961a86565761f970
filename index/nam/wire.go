package nam

import (
	"encoding/binary"
	"fmt"
)

// The remote procedure calls between compute nodes and memory servers,
// carried as the payload of protocol.TIndexCall and TIndexReply.
//
// A request is 32 bytes: op (1), seven zero bytes, key, then two arguments
// (put: the value; scan: the end key, exclusive, and the most entries;
// register: the new leaf's pointer). A reply is a 24-byte header: status
// (1), found (1), two zero bytes, count (4), value (8: get's value,
// locate's leaf pointer), next (8: where a scan that stopped at its limit
// goes on), then count entries of (key, value).
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

const (
	requestSize    = 32
	replyHdrSize   = 24
	MaxReplySize   = 4096
	maxScanEntries = (MaxReplySize - replyHdrSize) / entrySize
)

type request struct {
	op   op
	key  uint64
	a, b uint64
}

func (r *request) encode(b []byte) []byte {
	b = append(b[:0], byte(r.op), 0, 0, 0, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, r.key)
	b = binary.LittleEndian.AppendUint64(b, r.a)
	return binary.LittleEndian.AppendUint64(b, r.b)
}

func decodeRequest(b []byte) (request, error) {
	if len(b) != requestSize {
		return request{}, fmt.Errorf("nam: request of %d bytes, want %d", len(b), requestSize)
	}
	r := request{op: op(b[0]), key: binary.LittleEndian.Uint64(b[8:]),
		a: binary.LittleEndian.Uint64(b[16:]), b: binary.LittleEndian.Uint64(b[24:])}
	if r.op == 0 || r.op >= opCount {
		return r, fmt.Errorf("nam: unknown op %d", b[0])
	}
	for _, z := range b[1:8] {
		if z != 0 {
			return r, fmt.Errorf("nam: %v request with reserved bytes set", r.op)
		}
	}
	if r.op == opScan && (r.a <= r.key || r.b == 0 || r.b > maxScanEntries) {
		return r, fmt.Errorf("nam: scan of [%d, %d) for %d entries", r.key, r.a, r.b)
	}
	return r, nil
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
	f := byte(0)
	if r.found {
		f = 1
	}
	b = append(b[:0], r.status, f, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.keys)))
	b = binary.LittleEndian.AppendUint64(b, r.value)
	b = binary.LittleEndian.AppendUint64(b, r.next)
	for i, k := range r.keys {
		b = binary.LittleEndian.AppendUint64(b, k)
		b = binary.LittleEndian.AppendUint64(b, r.vals[i])
	}
	return b
}

func decodeReply(b []byte, r *reply) error {
	if len(b) < replyHdrSize {
		return fmt.Errorf("nam: reply of %d bytes", len(b))
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if n > maxScanEntries || len(b) != replyHdrSize+int(n)*entrySize || b[1] > 1 || b[2]|b[3] != 0 || b[0] > statusWrongUse {
		return fmt.Errorf("nam: malformed reply (%d bytes, %d entries)", len(b), n)
	}
	r.status, r.found = b[0], b[1] == 1
	r.value, r.next = binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	r.keys, r.vals = r.keys[:0], r.vals[:0]
	for i := range int(n) {
		e := b[replyHdrSize+i*entrySize:]
		r.keys = append(r.keys, binary.LittleEndian.Uint64(e))
		r.vals = append(r.vals, binary.LittleEndian.Uint64(e[8:]))
	}
	return nil
}

// MaxScanEntries is the most entries one scan reply holds.
const MaxScanEntries = maxScanEntries
