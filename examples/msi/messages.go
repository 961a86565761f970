package msi

import (
	"encoding/binary"
	"fmt"

	"github.com/scalestore-go/scalestore/protocolapi"
)

// The message types (protocolapi.Message.Type).
const (
	// GetS: cache -> home, for a shared copy of Key.
	GetS uint8 = iota + 1
	// GetM: cache -> home, for the modifiable copy of Key.
	GetM
	// Data: home -> cache, the grant: Key in Mode (S or M) with its Value
	// (the payload).
	Data
	// Inv: home -> sharer: drop your copy of Key.
	Inv
	// InvAck: sharer -> home.
	InvAck
	// Fetch: home -> owner: send Key back (WriteBack); Keep a shared copy
	// (a reader asked) or drop it (a writer asked).
	Fetch
	// WriteBack: owner -> home, Key's Value (the payload), the answer to Fetch.
	WriteBack
	// PutM: owner -> home, evicting Key: its Value (the payload).
	PutM
	// PutAck: home -> evicting owner: the line is home, drop it.
	PutAck
)

var typeNames = []string{"GetS", "GetM", "Data", "Inv", "InvAck", "Fetch", "WriteBack", "PutM", "PutAck"}

// Mode is a copy's mode in a Data grant.
type Mode uint8

// The modes a grant gives.
const (
	ModeS Mode = iota + 1
	ModeM
)

// Msg is every MSI message: the fields its type uses are set.
type Msg struct {
	T     uint8
	Key   uint64
	Mode  Mode   // Data
	Keep  bool   // Fetch
	Value uint64 // Data, WriteBack, PutM
}

// Type implements protocolapi.Message.
func (m Msg) Type() uint8 { return m.T }

// AboutKey implements protocolapi.Keyed (charts that watch a key).
func (m Msg) AboutKey() uint64 { return m.Key }

func (m Msg) String() string {
	name := fmt.Sprintf("type(%d)", m.T)
	if m.T >= 1 && int(m.T) <= len(typeNames) {
		name = typeNames[m.T-1]
	}
	s := fmt.Sprintf("%s key=%d", name, m.Key)
	switch m.T {
	case Data:
		s += fmt.Sprintf(" mode=%s value=%d", map[Mode]string{ModeS: "S", ModeM: "M"}[m.Mode], m.Value)
	case Fetch:
		if m.Keep {
			s += " keep"
		}
	case WriteBack, PutM:
		s += fmt.Sprintf(" value=%d", m.Value)
	}
	return s
}

// carriesValue says whether a type's payload is the line's value.
func carriesValue(t uint8) bool { return t == Data || t == WriteBack || t == PutM }

// codec is MSI's protocolapi.Codec. Body: bytes 0-7 the key, 8 the mode
// (Data) or keep (Fetch), the rest zero; payload: the 8-byte value of
// Data, WriteBack and PutM.
type codec struct{}

func (codec) MessageTypes() []string { return typeNames }

func (codec) Encode(m protocolapi.Message, body []byte) ([]byte, error) {
	msg, ok := m.(Msg)
	if !ok {
		return nil, fmt.Errorf("msi: a %T is not an MSI message", m)
	}
	binary.LittleEndian.PutUint64(body, msg.Key)
	switch msg.T {
	case Data:
		body[8] = byte(msg.Mode)
	case Fetch:
		if msg.Keep {
			body[8] = 1
		}
	}
	if !carriesValue(msg.T) {
		return nil, nil
	}
	return binary.LittleEndian.AppendUint64(nil, msg.Value), nil
}

func (codec) Decode(t uint8, body, payload []byte) (protocolapi.Message, error) {
	m := Msg{T: t, Key: binary.LittleEndian.Uint64(body)}
	for i := 9; i < len(body); i++ {
		if body[i] != 0 {
			return nil, fmt.Errorf("byte %d of the body is %#x, want 0", i, body[i])
		}
	}
	switch t {
	case Data:
		if m.Mode = Mode(body[8]); m.Mode != ModeS && m.Mode != ModeM {
			return nil, fmt.Errorf("mode %d", body[8])
		}
	case Fetch:
		if body[8] > 1 {
			return nil, fmt.Errorf("keep %d", body[8])
		}
		m.Keep = body[8] == 1
	default:
		if body[8] != 0 {
			return nil, fmt.Errorf("byte 8 is %#x, want 0", body[8])
		}
	}
	want := 0
	if carriesValue(t) {
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
