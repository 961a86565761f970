package nam

import (
	"encoding/binary"
	"fmt"
)

// The calls of the index designs (the NAM-tree's here, Cell's in
// index/cell) share one codec, carried as the payload of
// protocol.TIndexCall and TIndexReply; each design says its shape.
//
// A request: op (1), seven zero bytes, key (8), then Args arguments of 8
// bytes. A reply: status (1), found (0 or 1), stale (0, or 1 where the
// design has the flag), a zero byte, count (4), value (8), leaf (8, where
// the design has it), next (8), then count entries of (key, value).

// Request is a decoded call; a design names what A, B and C mean.
type Request struct {
	Op      uint8
	Key     uint64
	A, B, C uint64
}

// Reply is a decoded answer; a design names what its words mean.
type Reply struct {
	Status            uint8
	Found, Stale      bool
	Value, Leaf, Next uint64
	Keys, Vals        []uint64
}

// Codec is one design's shape of the calls.
type Codec struct {
	Name      string // in errors
	Args      int    // arguments of a request: 2 or 3
	Ops       uint8  // valid ops are 1..Ops-1
	MaxStatus uint8
	// Leaf: the reply has a leaf word; Stale: the reply may set stale.
	Leaf, Stale bool
}

// MaxReplySize bounds a reply (and so a scan's entries).
const MaxReplySize = 4096

func (c *Codec) requestSize() int { return 16 + 8*c.Args }

func (c *Codec) replyHeader() int {
	if c.Leaf {
		return 32
	}
	return 24
}

// MaxEntries is the most entries one reply holds.
func (c *Codec) MaxEntries() int { return (MaxReplySize - c.replyHeader()) / entrySize }

// EncodeRequest appends r to b[:0].
func (c *Codec) EncodeRequest(b []byte, r Request) []byte {
	b = append(b[:0], r.Op, 0, 0, 0, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, r.Key)
	args := [3]uint64{r.A, r.B, r.C}
	for _, a := range args[:c.Args] {
		b = binary.LittleEndian.AppendUint64(b, a)
	}
	return b
}

// DecodeRequest reads a request, checking its size, op and reserved
// bytes; a scan (op scan) must ask for [Key, A) and 1 to MaxEntries
// entries in B.
func (c *Codec) DecodeRequest(b []byte, scan uint8) (Request, error) {
	if len(b) != c.requestSize() {
		return Request{}, fmt.Errorf("%s: request of %d bytes, want %d", c.Name, len(b), c.requestSize())
	}
	r := Request{Op: b[0], Key: binary.LittleEndian.Uint64(b[8:])}
	args := [3]*uint64{&r.A, &r.B, &r.C}
	for i := range c.Args {
		*args[i] = binary.LittleEndian.Uint64(b[16+8*i:])
	}
	if r.Op == 0 || r.Op >= c.Ops {
		return r, fmt.Errorf("%s: unknown op %d", c.Name, b[0])
	}
	for _, z := range b[1:8] {
		if z != 0 {
			return r, fmt.Errorf("%s: op %d request with reserved bytes set", c.Name, r.Op)
		}
	}
	if r.Op == scan && (r.A <= r.Key || r.B == 0 || r.B > uint64(c.MaxEntries())) {
		return r, fmt.Errorf("%s: scan of [%d, %d) for %d entries", c.Name, r.Key, r.A, r.B)
	}
	return r, nil
}

// EncodeReply appends r to b[:0].
func (c *Codec) EncodeReply(b []byte, r *Reply) []byte {
	flag := func(f bool) byte {
		if f {
			return 1
		}
		return 0
	}
	b = append(b[:0], r.Status, flag(r.Found), flag(r.Stale && c.Stale), 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Keys)))
	b = binary.LittleEndian.AppendUint64(b, r.Value)
	if c.Leaf {
		b = binary.LittleEndian.AppendUint64(b, r.Leaf)
	}
	b = binary.LittleEndian.AppendUint64(b, r.Next)
	for i, k := range r.Keys {
		b = binary.LittleEndian.AppendUint64(b, k)
		b = binary.LittleEndian.AppendUint64(b, r.Vals[i])
	}
	return b
}

// DecodeReply reads a reply into r (reusing its slices), checking its
// size, flags and status.
func (c *Codec) DecodeReply(b []byte, r *Reply) error {
	h := c.replyHeader()
	if len(b) < h {
		return fmt.Errorf("%s: reply of %d bytes", c.Name, len(b))
	}
	n := binary.LittleEndian.Uint32(b[4:])
	maxStale := byte(0)
	if c.Stale {
		maxStale = 1
	}
	if n > uint32(c.MaxEntries()) || len(b) != h+int(n)*entrySize || b[1] > 1 || b[2] > maxStale || b[3] != 0 || b[0] > c.MaxStatus {
		return fmt.Errorf("%s: malformed reply (%d bytes, %d entries)", c.Name, len(b), n)
	}
	r.Status, r.Found, r.Stale = b[0], b[1] == 1, b[2] == 1
	r.Value = binary.LittleEndian.Uint64(b[8:])
	r.Leaf = 0
	if c.Leaf {
		r.Leaf = binary.LittleEndian.Uint64(b[16:])
	}
	r.Next = binary.LittleEndian.Uint64(b[h-8:])
	r.Keys, r.Vals = r.Keys[:0], r.Vals[:0]
	for i := range int(n) {
		e := b[h+i*entrySize:]
		r.Keys = append(r.Keys, binary.LittleEndian.Uint64(e))
		r.Vals = append(r.Vals, binary.LittleEndian.Uint64(e[8:]))
	}
	return nil
}
