package tcp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// errMalformed marks a frame that breaks the wire format; the connection
// it arrived on is closed.
var errMalformed = errors.New("tcp: malformed frame")

// Frame header: kind (1 byte), three reserved zero bytes, body length
// (uint32, little-endian).
const hdrSize = 8

// kind says what a frame's body holds.
type kind uint8

const (
	kindMsg   kind = 1 // 64-byte protocol frame + payload (dialer -> acceptor)
	kindRead  kind = 2 // verb request (dialer -> acceptor)
	kindWrite kind = 3
	kindCAS   kind = 4
	kindFAA   kind = 5
	kindReply kind = 6 // verb reply (acceptor -> dialer)
)

func (k kind) String() string {
	switch k {
	case kindMsg:
		return "message"
	case kindRead:
		return "read"
	case kindWrite:
		return "write"
	case kindCAS:
		return "compare-and-swap"
	case kindFAA:
		return "fetch-and-add"
	case kindReply:
		return "reply"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Which kinds each side of a connection may receive: the acceptor gets
// messages and verb requests, the dialer only replies.
const (
	acceptorKinds = 1<<kindMsg | 1<<kindRead | 1<<kindWrite | 1<<kindCAS | 1<<kindFAA
	dialerKinds   = 1 << kindReply
)

// Verb bodies start with a 24-byte header: request id (uint64), region key
// (uint32), length n (uint32: bytes to read, bytes written, 8 for atomics),
// offset (uint64). CAS adds old and new, FAA adds delta; Write adds the n
// bytes. A reply's header is id (uint64), status (uint32), zero (uint32),
// value (uint64: the previous word of an atomic), then the bytes read.
const (
	verbHdrSize = 24
	// maxVerbData bounds the bytes of one Read or Write frame; longer
	// verbs are split into several frames, so the receive buffer stays
	// small.
	maxVerbData = 32 << 10
	maxMsgBody  = protocol.FrameSize + transport.MaxPayload
	maxBody     = max(maxMsgBody, verbHdrSize+maxVerbData)
	// The reader's buffer holds any whole frame, so bodies are handed out
	// without a copy.
	readerSize = 64 << 10
	writerSize = 64 << 10
)

// Reply status codes.
const (
	statusOK         uint32 = 0
	statusAccess     uint32 = 1 // no such key, or out of bounds
	statusMisaligned uint32 = 2
	statusMalformed  uint32 = 3
)

// checkLen checks a body length against its kind.
func checkLen(k kind, n uint32) error {
	lo, hi := uint32(0), uint32(0)
	switch k {
	case kindMsg:
		lo, hi = protocol.FrameSize, maxMsgBody
	case kindRead:
		lo, hi = verbHdrSize, verbHdrSize
	case kindWrite, kindReply:
		lo, hi = verbHdrSize, verbHdrSize+maxVerbData
	case kindCAS:
		lo, hi = verbHdrSize+16, verbHdrSize+16
	case kindFAA:
		lo, hi = verbHdrSize+8, verbHdrSize+8
	default:
		return fmt.Errorf("%w: unknown kind %d", errMalformed, uint8(k))
	}
	if n < lo || n > hi {
		return fmt.Errorf("%w: %v body of %d bytes, want %d to %d", errMalformed, k, n, lo, hi)
	}
	return nil
}

func appendHeader(b []byte, k kind, n int) []byte {
	b = append(b, byte(k), 0, 0, 0)
	return binary.LittleEndian.AppendUint32(b, uint32(n))
}

// frameReader reads frames from a bufio.Reader of readerSize, handing out
// bodies that point into its buffer: valid until release.
type frameReader struct {
	br      *bufio.Reader
	allowed uint32 // bit k set: kind k may arrive
	held    int    // bytes of the current frame not yet discarded
}

// next reads one frame. io.EOF means the peer closed between frames; an
// error wrapping errMalformed means it broke the format.
func (r *frameReader) next() (kind, []byte, error) {
	r.release()
	h, err := r.br.Peek(hdrSize)
	if err != nil {
		if err == io.EOF && len(h) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	k, n := kind(h[0]), binary.LittleEndian.Uint32(h[4:])
	if h[1]|h[2]|h[3] != 0 {
		return 0, nil, fmt.Errorf("%w: reserved header bytes % x", errMalformed, h[1:4])
	}
	if err := checkLen(k, n); err != nil { // also refuses unknown kinds
		return 0, nil, err
	}
	if r.allowed&(1<<k) == 0 {
		return 0, nil, fmt.Errorf("%w: unexpected %v frame on this connection", errMalformed, k)
	}
	total := hdrSize + int(n)
	b, err := r.br.Peek(total)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	r.held = total
	return k, b[hdrSize:], nil
}

// release discards the current frame; its body is no longer valid.
func (r *frameReader) release() {
	if r.held > 0 {
		r.br.Discard(r.held)
		r.held = 0
	}
}

// ready reports whether a whole further frame is already buffered after
// the current one, so a reply flush can wait for it.
func (r *frameReader) ready() bool {
	buffered := r.br.Buffered() - r.held
	if buffered < hdrSize {
		return false
	}
	b, err := r.br.Peek(r.held + hdrSize)
	if err != nil {
		return false
	}
	n := binary.LittleEndian.Uint32(b[r.held+4:])
	return uint64(buffered) >= hdrSize+uint64(n)
}

// verbReq is a decoded verb request.
type verbReq struct {
	kind kind
	id   uint64
	key  uint32
	n    uint32
	off  uint64
	a, b uint64 // CAS: old, new; FAA: delta
	data []byte // Write: the bytes
}

func appendVerbHdr(b []byte, k kind, id uint64, key, n uint32, off uint64, extra int) []byte {
	b = appendHeader(b, k, verbHdrSize+extra)
	b = binary.LittleEndian.AppendUint64(b, id)
	b = binary.LittleEndian.AppendUint32(b, key)
	b = binary.LittleEndian.AppendUint32(b, n)
	return binary.LittleEndian.AppendUint64(b, off)
}

// decodeVerb decodes the body of a verb request whose length checkLen
// accepted.
func decodeVerb(k kind, body []byte) (verbReq, error) {
	if len(body) < verbHdrSize {
		return verbReq{}, fmt.Errorf("%w: %v body of %d bytes", errMalformed, k, len(body))
	}
	v := verbReq{
		kind: k,
		id:   binary.LittleEndian.Uint64(body),
		key:  binary.LittleEndian.Uint32(body[8:]),
		n:    binary.LittleEndian.Uint32(body[12:]),
		off:  binary.LittleEndian.Uint64(body[16:]),
	}
	rest := body[verbHdrSize:]
	switch k {
	case kindRead:
		if v.n > maxVerbData || len(rest) != 0 {
			return v, fmt.Errorf("%w: read of %d bytes", errMalformed, v.n)
		}
	case kindWrite:
		if int(v.n) != len(rest) {
			return v, fmt.Errorf("%w: write of %d bytes carries %d", errMalformed, v.n, len(rest))
		}
		v.data = rest
	case kindCAS:
		if v.n != 8 || len(rest) != 16 {
			return v, fmt.Errorf("%w: compare-and-swap of %d bytes", errMalformed, v.n)
		}
		v.a, v.b = binary.LittleEndian.Uint64(rest), binary.LittleEndian.Uint64(rest[8:])
	case kindFAA:
		if v.n != 8 || len(rest) != 8 {
			return v, fmt.Errorf("%w: fetch-and-add of %d bytes", errMalformed, v.n)
		}
		v.a = binary.LittleEndian.Uint64(rest)
	default:
		return v, fmt.Errorf("%w: %v is not a verb", errMalformed, k)
	}
	return v, nil
}

// reply is a decoded verb reply.
type reply struct {
	id     uint64
	status uint32
	value  uint64
	data   []byte
}

func appendReplyHdr(b []byte, id uint64, status uint32, value uint64, n int) []byte {
	b = appendHeader(b, kindReply, verbHdrSize+n)
	b = binary.LittleEndian.AppendUint64(b, id)
	b = binary.LittleEndian.AppendUint32(b, status)
	b = binary.LittleEndian.AppendUint32(b, 0)
	return binary.LittleEndian.AppendUint64(b, value)
}

func decodeReply(body []byte) (reply, error) {
	if len(body) < verbHdrSize {
		return reply{}, fmt.Errorf("%w: reply of %d bytes", errMalformed, len(body))
	}
	r := reply{
		id:     binary.LittleEndian.Uint64(body),
		status: binary.LittleEndian.Uint32(body[8:]),
		value:  binary.LittleEndian.Uint64(body[16:]),
		data:   body[verbHdrSize:],
	}
	if binary.LittleEndian.Uint32(body[12:]) != 0 || r.status > statusMalformed {
		return r, fmt.Errorf("%w: reply status %d", errMalformed, r.status)
	}
	if r.status != statusOK && len(r.data) != 0 {
		return r, fmt.Errorf("%w: failed reply carries %d bytes", errMalformed, len(r.data))
	}
	return r, nil
}
