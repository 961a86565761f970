package protocol

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// wireField is one field of Message and the frame bytes Encode writes it to
// (the layout in codec.go).
type wireField struct {
	name   string
	lo, hi int
	clear  func(m *Message) // sets the field to its zero value
}

var wireFields = []wireField{
	{"type", 1, 2, func(m *Message) { m.Type = 0 }},
	{"from", 2, 3, func(m *Message) { m.From = 0 }},
	{"to", 3, 4, func(m *Message) { m.To = 0 }},
	{"mode", 4, 5, func(m *Message) { m.Mode = 0 }},
	{"flags", 5, 6, func(m *Message) { m.Flags = 0 }},
	{"count", 6, 8, func(m *Message) { m.Count = 0 }},
	{"pid", 8, 16, func(m *Message) { m.PID = 0 }},
	{"epoch", 16, 20, func(m *Message) { m.Epoch = 0 }},
	{"k", 20, 24, func(m *Message) { m.K = 0 }},
	{"target", 24, 25, func(m *Message) { m.Target = 0 }},
	{"view", 25, 28, func(m *Message) { m.View = 0 }},
	{"pred", 28, 32, func(m *Message) { m.Pred = 0 }},
	{"set", 32, 64, func(m *Message) { m.Set = NodeSet{} }},
}

// TestCodecRoundTripPropertyEveryField: the codec round-trip property per
// field, for every field the frame carries. An encoder that drops a field
// (writes zeros in its place, like the encode-drops-pred mutant for Pred)
// is exactly a frame with that field's bytes cleared: Decode must then
// either reject the frame or return the message with that field, and only
// that field, zero; so whenever the field was set, the receiver sees a
// different message or none.
func TestCodecRoundTripPropertyEveryField(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage().Draw(t, "message")
		var frame [FrameSize]byte
		Encode(frame[:], &m)
		for _, f := range wireFields {
			want := m
			f.clear(&want)
			b := frame
			clear(b[f.lo:f.hi])
			got, err := Decode(b[:])
			if err != nil {
				if want == m {
					t.Fatalf("%+v: clearing %s (already zero) made the frame undecodable: %v", m, f.name, err)
				}
				continue
			}
			if got != want {
				t.Fatalf("%+v with %s cleared on the wire decodes to\n%+v, want\n%+v", m, f.name, got, want)
			}
		}
	})
}

// TestDecodeReadsEveryByte: Decode ignores no byte of a frame. Changing any
// one byte of a valid frame either makes Decode reject it or makes it decode
// to another message that encodes back to exactly the changed frame (the
// fuzz target's property, here from valid frames in every `go test`).
func TestDecodeReadsEveryByte(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage().Draw(t, "message")
		var frame [FrameSize]byte
		Encode(frame[:], &m)
		i := rapid.IntRange(0, FrameSize-1).Draw(t, "byte")
		v := rapid.Byte().Filter(func(v byte) bool { return v != frame[i] }).Draw(t, "value")
		frame[i] = v
		got, err := Decode(frame[:])
		if err != nil {
			return
		}
		if got == m {
			t.Fatalf("%+v: byte %d set to %#x, Decode did not notice", m, i, v)
		}
		var again [FrameSize]byte
		Encode(again[:], &got)
		if !bytes.Equal(again[:], frame[:]) {
			t.Fatalf("byte %d set to %#x: %+v re-encodes to another frame", i, v, got)
		}
	})
}
