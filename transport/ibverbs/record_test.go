package ibverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
)

func setupRecord(from, to uint8) Record {
	return Record{Kind: KindSetup, From: nodeID(from), To: nodeID(to), LID: 7, GID: [16]byte{0xfe, 0x80, 15: 1}, MTU: 4096,
		Msg: QPNum{0x101, 0x123456}, OSOut: QPNum{0x102, 1}, OSIn: QPNum{0xFFFFFF, 0xFFFFFF},
		RingAddr: 0x7f0000001000, RingKey: 0xdeadbeef, Slots: 16, SlotSize: slotSize,
		CreditAddr: 0x7f0000100000, ProbeAddr: 0x7f0000100008}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{Kind: KindHello, From: 3, To: 1},
		setupRecord(1, 2),
		{Kind: KindReady, From: 2, To: 1},
		{Kind: KindReset, From: 1, To: 2, LID: 9, MTU: 1024, OSOut: QPNum{5, 6}},
		{Kind: KindResetDone, From: 2, To: 1, GID: [16]byte{1}, MTU: 256, OSIn: QPNum{7, 8}},
	} {
		b := r.Marshal()
		got, err := UnmarshalRecord(b[:])
		if err != nil {
			t.Fatalf("%v: %v", r.Kind, err)
		}
		if got != r {
			t.Fatalf("round trip of %+v gave %+v", r, got)
		}
	}
}

// Every way a record can be malformed is an ErrRecord, never a panic.
func TestRecordRejectsMalformed(t *testing.T) {
	good := setupRecord(1, 2)
	mutate := func(f func(r *Record)) []byte {
		r := good
		f(&r)
		b := r.Marshal()
		return b[:]
	}
	raw := func(f func(b []byte)) []byte {
		b := good.Marshal()
		f(b[:])
		return b[:]
	}
	cases := map[string][]byte{
		"empty":              nil,
		"short":              raw(func(b []byte) {})[:RecordSize-1],
		"bad magic":          raw(func(b []byte) { b[0] = 'X' }),
		"bad checksum":       raw(func(b []byte) { b[20] ^= 1 }),
		"version":            mutateVersion(good, 2),
		"reserved byte":      withCRC(raw(func(b []byte) { b[100] = 1 })),
		"unknown kind":       mutate(func(r *Record) { r.Kind = 99 }),
		"from equals to":     mutate(func(r *Record) { r.To = r.From }),
		"QPN zero":           mutate(func(r *Record) { r.Msg.QPN = 0 }),
		"QPN beyond 24 bits": mutate(func(r *Record) { r.OSOut.QPN = 1 << 24 }),
		"PSN beyond 24 bits": mutate(func(r *Record) { r.OSIn.PSN = 1 << 24 }),
		"MTU":                mutate(func(r *Record) { r.MTU = 1500 }),
		"no slots":           mutate(func(r *Record) { r.Slots = 0 }),
		"too many slots":     mutate(func(r *Record) { r.Slots = MaxMailboxes + 1 }),
		"slot size":          mutate(func(r *Record) { r.SlotSize = 4096 }),
		"ring wraps":         mutate(func(r *Record) { r.RingAddr = ^uint64(0) - 4095 }),
		"unaligned credit":   mutate(func(r *Record) { r.CreditAddr++ }),
		"hello with fields":  mutate(func(r *Record) { r.Kind = KindHello }),
		"reset without QP":   mutate(func(r *Record) { *r = Record{Kind: KindReset, From: 1, To: 2, MTU: 1024} }),
	}
	for name, b := range cases {
		if _, err := UnmarshalRecord(b); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: %v, want ErrRecord", name, err)
		}
	}
}

func nodeID(n uint8) protocol.NodeID { return protocol.NodeID(n) }

// withCRC recomputes the checksum, so that a test reaches the checks after
// it.
func withCRC(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[offCRC:], crc32.Checksum(b[:offCRC], castagnoli))
	return b
}

func mutateVersion(r Record, v uint16) []byte {
	b := r.Marshal()
	b[offVersion] = byte(v)
	b[offVersion+1] = byte(v >> 8)
	return withCRC(b[:])
}

// Bootstrap over loopback TCP, both directions at once, as two nodes do.
func TestBootstrapLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, b := setupRecord(1, 2), setupRecord(2, 1)
	b.RingKey = 0x1234
	got := make(chan Record, 1)
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		r, err := Bootstrap(c, b)
		got <- r
		errc <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r, err := Bootstrap(c, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if r != b || <-got != a {
		t.Fatal("records differ after the exchange")
	}
}

// net.Pipe has no buffering: a write-then-read exchange would deadlock.
func TestBootstrapPipe(t *testing.T) {
	x, y := net.Pipe()
	defer x.Close()
	defer y.Close()
	done := make(chan error, 1)
	go func() {
		_, err := Bootstrap(y, Record{Kind: KindReady, From: 2, To: 1})
		done <- err
	}()
	if r, err := Bootstrap(x, Record{Kind: KindReady, From: 1, To: 2}); err != nil || r.From != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A peer that sends garbage, too little, the wrong kind or the wrong
// addressing is refused with an error, promptly.
func TestBootstrapRejectsBadPeers(t *testing.T) {
	local := Record{Kind: KindReady, From: 1, To: 2}
	wrongKind := Record{Kind: KindHello, From: 2, To: 1}.Marshal()
	wrongNode := Record{Kind: KindReady, From: 3, To: 1}.Marshal()
	cases := map[string][]byte{
		"garbage":    bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 8),
		"truncated":  []byte("SSIB"),
		"wrong kind": wrongKind[:],
		"wrong node": wrongNode[:],
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write(send)
				c.(*net.TCPConn).CloseWrite() // all this peer ever says
				io.Copy(io.Discard, c)        // read the other side's record
				c.Close()
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = Bootstrap(c, local)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrRecord) && !strings.Contains(err.Error(), "read record") {
				t.Fatalf("error %v", err)
			}
		})
	}
}

func FuzzUnmarshalRecord(f *testing.F) {
	for _, r := range []Record{setupRecord(1, 2), {Kind: KindHello, From: 1, To: 2}, {Kind: KindReset, From: 1, To: 2, MTU: 512, OSOut: QPNum{1, 2}}} {
		b := r.Marshal()
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := UnmarshalRecord(b)
		if err != nil {
			return
		}
		again := r.Marshal()
		if !bytes.Equal(again[:], b) {
			t.Fatalf("accepted record does not re-encode to its bytes")
		}
	})
}
