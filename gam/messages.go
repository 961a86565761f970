package gam

import (
	"encoding/binary"
	"fmt"

	"github.com/scalestore-go/scalestore/protocolapi"
)

// The message types (protocolapi.Message.Type), named after what GAM's
// worker threads send each other.
const (
	// ReadShared: cache -> home, for a read-only copy of Key.
	ReadShared uint8 = iota + 1
	// ReadExclusive: cache -> home, for the only, writable copy of Key
	// (the cache may hold it shared already: an upgrade).
	ReadExclusive
	// Grant: home -> cache, Key with its Value, Shared or not.
	Grant
	// Invalidate: home -> sharer: drop your copy of Key.
	Invalidate
	// InvalidateAck: sharer -> home.
	InvalidateAck
	// FetchShared: home -> owner: write Key back and keep a shared copy.
	FetchShared
	// FetchInvalidate: home -> owner: write Key back and drop it.
	FetchInvalidate
	// WriteBack: owner -> home, Key's Value, the answer to a fetch.
	WriteBack
	// Evict: owner -> home, dropping dirty Key for room: its Value.
	Evict
	// EvictAck: home -> evicting owner: the value is home, free the line.
	EvictAck
)

var typeNames = []string{"ReadShared", "ReadExclusive", "Grant", "Invalidate", "InvalidateAck",
	"FetchShared", "FetchInvalidate", "WriteBack", "Evict", "EvictAck"}

// Msg is every GAM message; the fields its type does not use are zero.
type Msg struct {
	T      uint8
	Key    uint64
	Shared bool   // Grant: a read-only copy (else the writable one)
	Value  uint64 // Grant, WriteBack, Evict
	// Seq numbers the messages on one link from 1 (node.send): the
	// receiver takes them in that order (see node.arrive).
	Seq uint32
}

// Type implements protocolapi.Message.
func (m Msg) Type() uint8 { return m.T }

// AboutKey implements protocolapi.Keyed.
func (m Msg) AboutKey() uint64 { return m.Key }

func (m Msg) String() string {
	name := fmt.Sprintf("type(%d)", m.T)
	if m.T >= 1 && int(m.T) <= len(typeNames) {
		name = typeNames[m.T-1]
	}
	switch m.T {
	case Grant:
		mode := "exclusive"
		if m.Shared {
			mode = "shared"
		}
		return fmt.Sprintf("%s key=%d %s value=%d", name, m.Key, mode, m.Value)
	case WriteBack, Evict:
		return fmt.Sprintf("%s key=%d value=%d", name, m.Key, m.Value)
	}
	return fmt.Sprintf("%s key=%d", name, m.Key)
}

// hasValue says whether a type carries the line's value (its payload).
func hasValue(t uint8) bool { return t == Grant || t == WriteBack || t == Evict }

// The body's layout: bytes 0-7 the key (little endian), byte 8 the
// shared flag of a Grant, 9-12 the link's sequence number, the rest zero. The value travels as an 8-byte
// payload, as a line's data does.
const (
	offShared = 8
	offSeq    = 9
	bodyUsed  = 13
)

// codec is GAM's protocolapi.Codec.
type codec struct{}

func (codec) MessageTypes() []string { return typeNames }

func (codec) Encode(m protocolapi.Message, body []byte) ([]byte, error) {
	msg, ok := m.(Msg)
	if !ok {
		return nil, fmt.Errorf("gam: a %T is not a GAM message", m)
	}
	if msg.Shared && msg.T != Grant {
		return nil, fmt.Errorf("gam: %v marked shared", msg)
	}
	binary.LittleEndian.PutUint64(body, msg.Key)
	if msg.Shared {
		body[offShared] = 1
	}
	binary.LittleEndian.PutUint32(body[offSeq:], msg.Seq)
	if !hasValue(msg.T) {
		if msg.Value != 0 {
			return nil, fmt.Errorf("gam: %v carries value %d", msg, msg.Value)
		}
		return nil, nil
	}
	return binary.LittleEndian.AppendUint64(make([]byte, 0, 8), msg.Value), nil
}

func (codec) Decode(t uint8, body, payload []byte) (protocolapi.Message, error) {
	if t == 0 || int(t) > len(typeNames) {
		return nil, fmt.Errorf("unknown type %d", t)
	}
	if len(body) < bodyUsed {
		return nil, fmt.Errorf("a body of %d bytes, want at least %d", len(body), bodyUsed)
	}
	for i := bodyUsed; i < len(body); i++ {
		if body[i] != 0 {
			return nil, fmt.Errorf("byte %d of the body is %#x, want 0", i, body[i])
		}
	}
	m := Msg{T: t, Key: binary.LittleEndian.Uint64(body), Seq: binary.LittleEndian.Uint32(body[offSeq:])}
	switch f := body[offShared]; {
	case f > 1:
		return nil, fmt.Errorf("shared flag %d", f)
	case f == 1 && t != Grant:
		return nil, fmt.Errorf("shared flag on a %s", typeNames[t-1])
	default:
		m.Shared = f == 1
	}
	want := 0
	if hasValue(t) {
		want = 8
	}
	if len(payload) != want {
		return nil, fmt.Errorf("a payload of %d bytes, want %d", len(payload), want)
	}
	if want > 0 {
		m.Value = binary.LittleEndian.Uint64(payload)
	}
	return m, nil
}
