package tcp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// seedFrames are valid frames of every kind, for the fuzzers' corpus.
func seedFrames() [][]byte {
	msg := appendHeader(nil, kindMsg, protocol.FrameSize+3)
	msg = append(append(msg, msgFrame(1)...), 1, 2, 3)
	read := appendVerbHdr(nil, kindRead, 1, 0xabc, 4096, 64, 0)
	write := append(appendVerbHdr(nil, kindWrite, 2, 0xabc, 3, 8, 3), 7, 8, 9)
	cas := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(appendVerbHdr(nil, kindCAS, 3, 1, 8, 16, 16), 4), 5)
	faa := binary.LittleEndian.AppendUint64(appendVerbHdr(nil, kindFAA, 4, 1, 8, 0, 8), 1)
	rep := append(appendReplyHdr(nil, 5, statusOK, 0, 2), 1, 2)
	return [][]byte{msg, read, write, cas, faa, rep, appendReplyHdr(nil, 6, statusAccess, 0, 0)}
}

// FuzzReadFrame feeds arbitrary bytes to the frame reader and the body
// decoders, as a hostile peer would after a valid handshake: nothing may
// panic, every accepted frame respects its kind's bounds, and a valid
// stream re-encodes to itself.
func FuzzReadFrame(f *testing.F) {
	all := bytes.Join(seedFrames(), nil)
	f.Add(all)
	for _, s := range seedFrames() {
		f.Add(s)
		f.Add(s[:len(s)-1])
	}
	f.Add(appendHeader(nil, kindMsg, 1<<30))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, allowed := range []uint32{acceptorKinds, dialerKinds} {
			fr := frameReader{br: bufio.NewReaderSize(bytes.NewReader(data), readerSize), allowed: allowed}
			var consumed int
			for {
				k, body, err := fr.next()
				if err != nil {
					if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, errMalformed) {
						t.Fatalf("unexpected error %v", err)
					}
					if err == io.EOF && consumed != len(data) {
						t.Fatalf("EOF after %d of %d bytes", consumed, len(data))
					}
					break
				}
				if allowed&(1<<k) == 0 {
					t.Fatalf("%v frame passed the filter", k)
				}
				if len(body) > maxBody || checkLen(k, uint32(len(body))) != nil {
					t.Fatalf("%v body of %d bytes accepted", k, len(body))
				}
				if !bytes.Equal(data[consumed+hdrSize:consumed+hdrSize+len(body)], body) {
					t.Fatal("body differs from the input")
				}
				consumed += hdrSize + len(body)
				switch k {
				case kindMsg:
					if len(body) < protocol.FrameSize || len(body)-protocol.FrameSize > transport.MaxPayload {
						t.Fatalf("message body of %d bytes", len(body))
					}
				case kindReply:
					if r, err := decodeReply(body); err == nil {
						again := append(appendReplyHdr(nil, r.id, r.status, r.value, len(r.data)), r.data...)
						if !bytes.Equal(again[hdrSize:], body) {
							t.Fatal("reply does not re-encode to itself")
						}
					}
				default:
					v, err := decodeVerb(k, body)
					if err != nil {
						continue
					}
					if v.n > maxVerbData || len(v.data) > maxVerbData {
						t.Fatalf("verb of %d bytes", v.n)
					}
					again := appendVerbHdr(nil, k, v.id, v.key, v.n, v.off, len(body)-verbHdrSize)
					switch k {
					case kindWrite:
						again = append(again, v.data...)
					case kindCAS:
						again = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(again, v.a), v.b)
					case kindFAA:
						again = binary.LittleEndian.AppendUint64(again, v.a)
					}
					if !bytes.Equal(again[hdrSize:], body) {
						t.Fatalf("%v does not re-encode to itself", k)
					}
				}
			}
		}
	})
}

// FuzzHandshake: arbitrary hellos and answers never panic the decoders,
// and a hello that decodes re-encodes to itself.
func FuzzHandshake(f *testing.F) {
	f.Add(encodeHello(hello{version: version, from: 1, to: 2, cluster: 42}))
	f.Add(encodeAnswer(reasonCluster, 3))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= helloSize {
			b := data[:helloSize]
			if h, r := decodeHello(b); r == reasonOK {
				if !bytes.Equal(encodeHello(h), b) {
					t.Fatal("hello does not re-encode to itself")
				}
				if h.from >= protocol.MaxNodes {
					t.Fatalf("node %d accepted", h.from)
				}
			}
		} else if _, r := decodeHello(data); r != reasonBadMagic {
			t.Fatalf("short hello: %v", r)
		}
		decodeAnswer(data)
	})
}

func TestVerbReplyErrors(t *testing.T) {
	// A failed reply must not carry data; a status beyond the known ones
	// is malformed.
	bad := append(appendReplyHdr(nil, 1, statusAccess, 0, 1), 0)
	if _, err := decodeReply(bad[hdrSize:]); !errors.Is(err, errMalformed) {
		t.Errorf("failed reply with data: %v", err)
	}
	if _, err := decodeReply(appendReplyHdr(nil, 1, 9, 0, 0)[hdrSize:]); !errors.Is(err, errMalformed) {
		t.Errorf("unknown status: %v", err)
	}
	if _, err := decodeVerb(kindRead, appendVerbHdr(nil, kindRead, 1, 1, maxVerbData+1, 0, 0)[hdrSize:]); !errors.Is(err, errMalformed) {
		t.Errorf("oversized read: %v", err)
	}
	if _, err := decodeVerb(kindWrite, append(appendVerbHdr(nil, kindWrite, 1, 1, 5, 0, 3), 1, 2, 3)[hdrSize:]); !errors.Is(err, errMalformed) {
		t.Errorf("write with a wrong length: %v", err)
	}
	if s := reason(99).String(); s != "reason 99" || kind(99).String() != "kind 99" {
		t.Errorf("names: %q", s)
	}
}
