package protocol

import (
	"testing"

	"pgregory.net/rapid"
)

// genMessage draws a valid message of any type, every field the type may
// carry drawn over its whole range (so a field the encoder forgets is
// noticed as soon as it is drawn non-zero), every field it may not carry
// zero. The generator follows Validate's rules; the property checks that
// too.
func genMessage() *rapid.Generator[Message] { return genMessageOf(typeInvalid) }

// genMessageOf is genMessage of type ty only (typeInvalid: any type): a
// filter on the type would reject all but one draw in typeCount, more
// than rapid allows.
func genMessageOf(ty Type) *rapid.Generator[Message] {
	return rapid.Custom(func(t *rapid.T) Message {
		var m Message
		m.Type = ty
		if ty == typeInvalid {
			m.Type = Type(rapid.IntRange(int(TRequest), int(typeCount)-1).Draw(t, "type"))
		}
		m.From = NodeID(rapid.Uint8().Draw(t, "from"))
		m.To = NodeID(rapid.Uint8().Filter(func(to uint8) bool { return NodeID(to) != m.From }).Draw(t, "to"))
		switch m.Type {
		case TRequest, TGrant, TForward, TTransfer, TTransferReply, TDone, TLineInvalidate:
			m.Mode = Mode(rapid.IntRange(int(ModeShared), int(ModeExclusive)).Draw(t, "mode"))
		}
		m.Epoch = rapid.Uint32().Draw(t, "epoch")
		if m.Type == TTxGate {
			m.Epoch %= TxGateRolled + 1 // a question or one of two answers
		}
		switch m.Type {
		case TEvict, TEvictReply:
			m.Count = uint16(rapid.IntRange(1, MaxEvictBatch).Draw(t, "count"))
		case THoldings, TRebuilt:
			m.Count = uint16(rapid.IntRange(0, MaxViewBatch).Draw(t, "count"))
			if rapid.Bool().Draw(t, "last") {
				m.Flags |= FlagLast
			}
		case TIndexCall, TIndexReply:
			m.Count = uint16(rapid.IntRange(1, PageSize).Draw(t, "count"))
			m.PID = PID(rapid.Uint64().Draw(t, "pid"))
		default:
			m.PID = PID(rapid.Uint64().Draw(t, "pid"))
		}
		if m.Type == TGrant || m.Type == TForward {
			for i := range m.Set {
				m.Set[i] = rapid.Uint64().Draw(t, "set")
			}
			m.Set.Remove(m.To)
			m.Target = NodeID(rapid.Uint8().Filter(func(x uint8) bool { return m.Type != TForward || NodeID(x) != m.To }).Draw(t, "target"))
		}
		switch m.Type {
		case TForward, TGrant, TTransfer, TInvalidate, TLineInvalidate:
			m.K = rapid.Uint32().Draw(t, "k")
		}
		if m.Type == TForward || m.Type == TTransfer || m.Type == TLineInvalidate {
			m.Pred = rapid.Uint32().Draw(t, "pred")
		}
		switch m.Type {
		case TGrant:
			if rapid.Bool().Draw(t, "nodata") {
				m.Flags |= FlagNoData
			}
		case TAllocReply:
			if rapid.Bool().Draw(t, "full") {
				m.Flags |= FlagFull
			} else {
				m.PID = MakePID(m.From, m.PID.Slot())
			}
		}
		if (m.Type == TGrant || m.Type == TTransferReply) && rapid.Bool().Draw(t, "dirty") {
			m.Flags |= FlagDirty
		}
		if m.PayloadLen() == PageSize && rapid.Bool().Draw(t, "unreadable") {
			m.Flags |= FlagUnreadable
		}
		m.View = uint32(rapid.IntRange(0, MaxView).Draw(t, "view"))
		return m
	})
}

// TestCodecRoundTripProperty: every field of every message type survives
// Encode and Decode, and the frame depends on every field: a frame whose
// Pred bytes were dropped (the encode-drops-pred mutant) decodes to another
// message whenever Pred was set.
func TestCodecRoundTripProperty(t *testing.T) {
	seen := map[Type]bool{}
	roundTrip := func(t *rapid.T, m Message) {
		seen[m.Type] = true
		if err := m.Validate(); err != nil {
			t.Fatalf("the generator made an invalid %v: %v", m, err)
		}
		var b [FrameSize]byte
		Encode(b[:], &m)
		got, err := Decode(b[:])
		if err != nil {
			t.Fatalf("%+v: decode: %v", m, err)
		}
		if got != m {
			t.Fatalf("round trip changed the message:\n got %+v\nwant %+v", got, m)
		}
		clear(b[28:32])
		dropped, err := Decode(b[:])
		if m.Pred != 0 && err == nil && dropped == m {
			t.Fatalf("%+v: a frame without Pred decodes to the same message", m)
		}
	}
	rapid.Check(t, func(t *rapid.T) { roundTrip(t, genMessage().Draw(t, "message")) })
	// Every type is checked: the types the random draws missed (each is
	// missed by 100 draws now and then) get a run of their own.
	for ty := TRequest; ty < typeCount; ty++ {
		if !seen[ty] {
			rapid.Check(t, func(t *rapid.T) {
				roundTrip(t, genMessageOf(ty).Draw(t, "message"))
			})
		}
		if !seen[ty] {
			t.Errorf("the generator never drew a %v", ty)
		}
	}
}
