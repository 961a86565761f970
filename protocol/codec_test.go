package protocol

import (
	"errors"
	"testing"
)

func sampleMessages() []Message {
	var set NodeSet
	set.Add(2)
	set.Add(200)
	return []Message{
		{Type: TRequest, From: 1, To: 0, Mode: ModeShared, PID: MakePID(0, 42)},
		{Type: TGrant, From: 0, To: 1, Mode: ModeExclusive, PID: MakePID(0, 42), Epoch: 7, Set: set, Target: 2, K: 3},
		{Type: TGrant, From: 0, To: 1, Mode: ModeExclusive, PID: MakePID(0, 42), Flags: FlagNoData},
		{Type: TForward, From: 0, To: 1, Mode: ModeExclusive, PID: MakePID(0, 1), Epoch: 9, Target: 3, K: 1, Set: set},
		{Type: TBusy, From: 0, To: 5, PID: MakePID(0, 1)},
		{Type: TTransfer, From: 1, To: 3, Mode: ModeExclusive, PID: MakePID(255, MaxSlot), Epoch: 1 << 31, K: 2},
		{Type: TTransferReply, From: 3, To: 1, Mode: ModeShared, PID: MakePID(0, 1), Flags: FlagDirty},
		{Type: TInvalidate, From: 1, To: 2, PID: MakePID(0, 1), Epoch: 4, K: 1},
		{Type: TInvalidateAck, From: 2, To: 1, PID: MakePID(0, 1)},
		{Type: TDone, From: 2, To: 0, Mode: ModeShared, PID: MakePID(0, 1)},
		{Type: TEvict, From: 2, To: 0, Count: 100},
		{Type: TEvictReply, From: 0, To: 2, Count: 1},
		{Type: TEvictData, From: 2, To: 0, PID: MakePID(0, 1)},
		{Type: TGrant, From: 0, To: 1, Mode: ModeShared, PID: MakePID(0, 42), Flags: FlagUnreadable},
		{Type: TTransferReply, From: 3, To: 1, Mode: ModeExclusive, PID: MakePID(0, 1), Flags: FlagUnreadable},
		{Type: TEvictData, From: 2, To: 0, PID: MakePID(0, 1), Flags: FlagUnreadable},
		{Type: TAlloc, From: 2, To: 0},
		{Type: TAllocReply, From: 0, To: 2, PID: MakePID(0, 9)},
		{Type: TAllocReply, From: 0, To: 2, Flags: FlagFull},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		if err := m.Validate(); err != nil {
			t.Fatalf("%v: sample invalid: %v", m, err)
		}
		var b [FrameSize]byte
		Encode(b[:], &m)
		got, err := Decode(b[:])
		if err != nil {
			t.Fatalf("%v: decode: %v", m, err)
		}
		if got != m {
			t.Fatalf("round trip changed the message:\n got %+v\nwant %+v", got, m)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good := Message{Type: TForward, From: 0, To: 1, Mode: ModeExclusive, PID: MakePID(0, 1), Target: 3}
	cases := map[string]func(b []byte) []byte{
		"short":                           func(b []byte) []byte { return b[:63] },
		"long":                            func(b []byte) []byte { return append(b, 0) },
		"magic":                           func(b []byte) []byte { b[0] = 0; return b },
		"unknown type":                    func(b []byte) []byte { b[1] = 200; return b },
		"zero type":                       func(b []byte) []byte { b[1] = 0; return b },
		"self-addressed":                  func(b []byte) []byte { b[3] = b[2]; return b },
		"bad mode":                        func(b []byte) []byte { b[4] = 9; return b },
		"no mode":                         func(b []byte) []byte { b[4] = 0; return b },
		"unknown flag":                    func(b []byte) []byte { b[5] = 0x80; return b },
		"unreadable without a page":       func(b []byte) []byte { b[5] = byte(FlagUnreadable); return b },
		"last flag outside a view change": func(b []byte) []byte { b[5] = byte(FlagLast); return b },
		"pred on forward ok, on busy not": func(b []byte) []byte { b[1] = byte(TBusy); b[4] = 0; b[24] = 0; b[28] = 1; return b },
		"count":                           func(b []byte) []byte { b[6] = 1; return b },
		"target is requester": func(b []byte) []byte {
			b[24] = b[3]
			return b
		},
		"invalidate requester": func(b []byte) []byte { b[32] = 1 << 1; return b },
	}
	for name, mutate := range cases {
		var b [FrameSize]byte
		Encode(b[:], &good)
		bad := mutate(append([]byte(nil), b[:]...))
		if _, err := Decode(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: want ErrMalformed, got %v", name, err)
		}
	}
	batch := Message{Type: TEvict, From: 1, To: 0, Count: MaxEvictBatch + 1}
	if err := batch.Validate(); err == nil {
		t.Error("a batch over MaxEvictBatch validated")
	}
}

func TestEvictEntries(t *testing.T) {
	in := []EvictEntry{{PID: MakePID(1, 5), Epoch: 3, Served: 2}, {PID: MakePID(1, 6)}}
	b := make([]byte, len(in)*EvictEntrySize)
	EncodeEvictEntries(b, in)
	out, err := DecodeEvictEntries(nil, b, len(in), false)
	if err != nil || len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Fatalf("round trip: %v %v", out, err)
	}
	if _, err := DecodeEvictEntries(nil, b, len(in), true); err == nil {
		t.Fatal("a request batch decoded as a reply (no decisions)")
	}
	if _, err := DecodeEvictEntries(nil, b[:20], len(in), false); err == nil {
		t.Fatal("a short batch decoded")
	}
	in[0].Decision = EvictPull
	in[1].Decision = EvictDeclined
	EncodeEvictEntries(b, in)
	out, err = DecodeEvictEntries(out, b, 2, true)
	if err != nil || out[0].Decision != EvictPull || out[1].Decision != EvictDeclined {
		t.Fatalf("reply round trip: %v %v", out, err)
	}
}

func TestPID(t *testing.T) {
	p := MakePID(1, 15)
	if uint64(p) != 0x010000000000000F || p.Dir() != 1 || p.Slot() != 15 {
		t.Fatalf("paper §3.3 example: got %#x dir %d slot %d", uint64(p), p.Dir(), p.Slot())
	}
	var s NodeSet
	for _, n := range []NodeID{0, 63, 64, 255} {
		s.Add(n)
	}
	if s.Len() != 4 || !s.Has(255) || s.Has(1) {
		t.Fatalf("node set: %v", s)
	}
	if n, ok := s.Nth(2); !ok || n != 64 {
		t.Fatalf("Nth(2) = %d %v", n, ok)
	}
	s.Remove(63)
	if s.String() != "{0,64,255}" {
		t.Fatalf("String = %s", s.String())
	}
}

// FuzzDecode: nothing a peer sends may crash the decoder, and whatever it
// accepts must encode back to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		var b [FrameSize]byte
		Encode(b[:], &m)
		f.Add(b[:])
	}
	f.Add(make([]byte, 10))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		var out [FrameSize]byte
		Encode(out[:], &m)
		if string(out[:]) != string(b) {
			t.Fatalf("accepted frame does not re-encode to itself")
		}
	})
}

// FuzzDecodeEvictEntries: batch payloads from peers never crash the decoder.
func FuzzDecodeEvictEntries(f *testing.F) {
	f.Add(make([]byte, 32), 2, true)
	f.Fuzz(func(t *testing.T, b []byte, count int, reply bool) {
		if count < 0 || count > MaxEvictBatch {
			return
		}
		_, _ = DecodeEvictEntries(nil, b, count, reply)
	})
}
