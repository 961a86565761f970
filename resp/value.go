package resp

import (
	"encoding/binary"
	"time"
)

// A stored value is either the string itself (every value written before
// expiry existed, and every value without a TTL), or a header and then
// the string:
//
//	0xff 'S' 'x'   magic
//	1              version
//	8 bytes        expiry, Unix milliseconds, big-endian (0: none)
//
// The header travels with the value, so the TTL survives restarts and
// moves with the page. A string that itself starts with the magic is
// stored behind a header (expiry 0), so that it is never mistaken for one;
// a value of an unknown version reads as a plain string.
const (
	hdrVersion = 1
	hdrLen     = 12
)

var hdrMagic = [3]byte{0xff, 'S', 'x'}

func hasMagic(b []byte) bool {
	return len(b) >= 3 && b[0] == hdrMagic[0] && b[1] == hdrMagic[1] && b[2] == hdrMagic[2]
}

// decodeValue splits a stored value into the string and its expiry (0:
// none).
func decodeValue(raw []byte) (payload []byte, expireAt int64) {
	if len(raw) >= hdrLen && hasMagic(raw) && raw[3] == hdrVersion {
		return raw[hdrLen:], int64(binary.BigEndian.Uint64(raw[4:hdrLen]))
	}
	return raw, 0
}

// appendValue appends the stored form of payload with expiry expireAt (0:
// none) to dst.
func appendValue(dst, payload []byte, expireAt int64) []byte {
	if expireAt == 0 && !hasMagic(payload) {
		return append(dst, payload...)
	}
	dst = append(dst, hdrMagic[0], hdrMagic[1], hdrMagic[2], hdrVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(expireAt))
	return append(dst, payload...)
}

// storedLen is the length of payload's stored form.
func storedLen(payload []byte, expireAt int64) int {
	if expireAt == 0 && !hasMagic(payload) {
		return len(payload)
	}
	return hdrLen + len(payload)
}

// expired reports whether a value with expiry expireAt is gone at now
// (Unix milliseconds).
func expired(expireAt, now int64) bool { return expireAt != 0 && expireAt <= now }

// nowMs is the server's clock in Unix milliseconds.
func (s *Server) nowMs() int64 {
	if s.now != nil {
		return s.now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// nowMicros is the server's clock in Unix microseconds.
func (s *Server) nowMicros() int64 {
	if s.now != nil {
		return s.now().UnixMicro()
	}
	return time.Now().UnixMicro()
}
