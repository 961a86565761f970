package protocolapi

import (
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Message is one decoded message of a protocol: the protocol's own Go
// type. The framework sees it only through Type and String (traces,
// charts, violations) and through the protocol's Codec.
type Message interface {
	// Type is the message's type number, 1 up to len(Codec.MessageTypes()).
	Type() uint8
	// String describes the message in one line for traces (without its
	// sender and receiver, which the frame's header carries).
	String() string
}

// Codec puts a protocol's messages on the wire and takes them off it. A
// message travels as the real transports carry every message: a frame of
// protocol.FrameSize (64) bytes and a payload of at most a page. The
// frame's first HeaderSize bytes are the framework's (FrameMagic, the
// type, the sender, the receiver); the remaining BodySize bytes and the
// payload are the codec's.
type Codec interface {
	// MessageTypes names the message types: type t is MessageTypes()[t-1].
	// At most 255; the names appear in traces and charts.
	MessageTypes() []string
	// Encode writes m's fields into body (BodySize bytes, zeroed) and
	// returns the payload that travels with it (nil: none; at most
	// transport.MaxPayload bytes).
	Encode(m Message, body []byte) (payload []byte, err error)
	// Decode parses a body of type t and its payload (valid only during
	// the call: a message that keeps the payload copies it). It validates
	// every field and returns an error, never panics, on anything a peer
	// could send.
	Decode(t uint8, body, payload []byte) (Message, error)
}

// The plug-in frame's layout: byte 0 FrameMagic, 1 the type, 2 the
// sender, 3 the receiver, 4..63 the codec's body.
const (
	FrameMagic = 0xC5 // ScaleStore's own frames start with 0xA5
	HeaderSize = 4
	BodySize   = protocol.FrameSize - HeaderSize
)

// ErrMalformed is wrapped by every error of DecodeFrame.
var ErrMalformed = errors.New("protocolapi: malformed frame")

// EncodeFrame writes m from -> to into frame (protocol.FrameSize bytes)
// with c and returns its payload. Every environment sends through it, so
// a message is encoded the same way in the simulator and on a transport.
func EncodeFrame(c Codec, frame []byte, from, to protocol.NodeID, m Message) ([]byte, error) {
	if len(frame) != protocol.FrameSize {
		return nil, fmt.Errorf("protocolapi: a frame buffer of %d bytes, want %d", len(frame), protocol.FrameSize)
	}
	if m == nil {
		return nil, errors.New("protocolapi: encoding a nil message")
	}
	if t := m.Type(); t == 0 || int(t) > len(c.MessageTypes()) {
		return nil, fmt.Errorf("protocolapi: encoding %v: type %d is not one of the codec's %d types", m, t, len(c.MessageTypes()))
	}
	clear(frame)
	frame[0], frame[1], frame[2], frame[3] = FrameMagic, m.Type(), byte(from), byte(to)
	payload, err := c.Encode(m, frame[HeaderSize:])
	if err != nil {
		return nil, fmt.Errorf("protocolapi: encoding %v: %w", m, err)
	}
	if len(payload) > transport.MaxPayload {
		return nil, fmt.Errorf("protocolapi: encoding %v: a payload of %d bytes, more than %d", m, len(payload), transport.MaxPayload)
	}
	return payload, nil
}

// DecodeFrame checks a frame's header and decodes its body and payload
// with c. Nothing in frame or payload makes it panic.
func DecodeFrame(c Codec, frame, payload []byte) (from, to protocol.NodeID, m Message, err error) {
	if len(frame) != protocol.FrameSize {
		return 0, 0, nil, fmt.Errorf("%w: %d bytes, want %d", ErrMalformed, len(frame), protocol.FrameSize)
	}
	if frame[0] != FrameMagic {
		return 0, 0, nil, fmt.Errorf("%w: magic %#x, want %#x", ErrMalformed, frame[0], FrameMagic)
	}
	t := frame[1]
	if t == 0 || int(t) > len(c.MessageTypes()) {
		return 0, 0, nil, fmt.Errorf("%w: unknown type %d", ErrMalformed, t)
	}
	from, to = protocol.NodeID(frame[2]), protocol.NodeID(frame[3])
	if m, err = c.Decode(t, frame[HeaderSize:], payload); err != nil {
		return from, to, nil, fmt.Errorf("%w: %s %d->%d: %w", ErrMalformed, c.MessageTypes()[t-1], from, to, err)
	}
	if m == nil || m.Type() != t {
		return from, to, nil, fmt.Errorf("%w: %s %d->%d decoded as another type", ErrMalformed, c.MessageTypes()[t-1], from, to)
	}
	return from, to, m, nil
}

// TypeName names the type of an encoded frame, without decoding it (a
// trace of frames that failed to decode still names them).
func TypeName(c Codec, frame []byte) string {
	if len(frame) < 2 || frame[0] != FrameMagic || frame[1] == 0 || int(frame[1]) > len(c.MessageTypes()) {
		return "malformed"
	}
	return c.MessageTypes()[frame[1]-1]
}

// RoundTrip encodes m and decodes it again, and reports an error unless
// the decoded message describes itself as m does: a codec's tests call it
// on every message type.
func RoundTrip(c Codec, m Message) error {
	var frame [protocol.FrameSize]byte
	payload, err := EncodeFrame(c, frame[:], 1, 2, m)
	if err != nil {
		return err
	}
	from, to, got, err := DecodeFrame(c, frame[:], payload)
	if err != nil {
		return err
	}
	if from != 1 || to != 2 || got.String() != m.String() {
		return fmt.Errorf("protocolapi: %v 1->2 came back as %v %d->%d", m, got, from, to)
	}
	return nil
}
