package resp

import (
	crand "crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"
)

// A stored value is either the string itself (every value written before
// expiry existed, and every value without a TTL), or a header and then
// the string:
//
//	0xff 'S' 'x'   magic
//	1 or 2         version
//	8 bytes        expiry, Unix milliseconds, big-endian (0: none)
//	8 bytes        version 2 only: the watch tag
//
// Version 3 is the manifest of a large value stored in chunks (big.go).
//
// The header travels with the value, so the TTL survives restarts and
// moves with the page. A string that itself starts with the magic is
// stored behind a header (expiry 0), so that it is never mistaken for one;
// a value of an unknown version reads as a plain string.
//
// The watch tag is how EXEC knows that a watched key was written at all
// since WATCH, even back to the same string (multi.go): WATCH puts a tag
// no other value carries on a live key that has none, and every write
// stores a value without one (appendValue never writes a tag), so the
// stored bytes WATCH saw are there at EXEC only if nothing wrote the key
// in between, on any node.
const (
	hdrVersion       = 1
	hdrLen           = 12
	hdrVersionTagged = 2
	hdrLenTagged     = 20
)

var hdrMagic = [3]byte{0xff, 'S', 'x'}

func hasMagic(b []byte) bool {
	return len(b) >= 3 && b[0] == hdrMagic[0] && b[1] == hdrMagic[1] && b[2] == hdrMagic[2]
}

// decodeValue splits a stored value into the string and its expiry (0:
// none).
func decodeValue(raw []byte) (payload []byte, expireAt int64) {
	if len(raw) >= hdrLen && hasMagic(raw) {
		switch {
		case raw[3] == hdrVersion:
			return raw[hdrLen:], int64(binary.BigEndian.Uint64(raw[4:hdrLen]))
		case raw[3] == hdrVersionTagged && len(raw) >= hdrLenTagged:
			return raw[hdrLenTagged:], int64(binary.BigEndian.Uint64(raw[4:hdrLen]))
		case isManifest(raw):
			// A large value's manifest (big.go), as scans see it: its
			// expiry, not its string.
			return nil, int64(binary.BigEndian.Uint64(raw[4:hdrLen]))
		}
	}
	return raw, 0
}

// Payload is the string of a value the RESP server stored (the value
// itself, or what follows its header), and its expiry in Unix
// milliseconds (0: none), for Go code that reads keys RESP clients write.
// It does not say whether the value has expired.
func Payload(raw []byte) (s []byte, expireAt int64) { return decodeValue(raw) }

// hasTag reports whether raw carries a watch tag.
func hasTag(raw []byte) bool {
	return len(raw) >= hdrLenTagged && hasMagic(raw) && raw[3] == hdrVersionTagged
}

// appendTagged appends the stored form of payload with expiry expireAt
// and watch tag tag to dst.
func appendTagged(dst, payload []byte, expireAt int64, tag uint64) []byte {
	dst = append(dst, hdrMagic[0], hdrMagic[1], hdrMagic[2], hdrVersionTagged)
	dst = binary.BigEndian.AppendUint64(dst, uint64(expireAt))
	dst = binary.BigEndian.AppendUint64(dst, tag)
	return append(dst, payload...)
}

// watchTags hands out watch tags: a random start per process, then one
// more per tag, so no two tags of a process are equal and two processes'
// (two nodes') meet with odds of about one in 2^64 / tags.
var watchTags atomic.Uint64

func init() {
	var b [8]byte
	if _, err := crand.Read(b[:]); err == nil {
		watchTags.Store(binary.LittleEndian.Uint64(b[:]))
	} else {
		watchTags.Store(uint64(time.Now().UnixNano()))
	}
}

func newWatchTag() uint64 { return watchTags.Add(1) }

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

// encodeFitting is what a Modify callback stores for payload with expiry
// exp, encoded into out's storage, or the error that it is too big for
// key.
func (c *client) encodeFitting(out, key, payload []byte, exp int64) ([]byte, error) {
	if n := storedLen(payload, exp); !c.fits(key, n) {
		return nil, c.tooBig(key, n)
	}
	return appendValue(out[:0], payload, exp), nil
}

// modifyFailed replies the error of a Modify, the engine's (err) or the
// command's own (cerr), and reports whether there was one.
func (c *client) modifyFailed(err, cerr error) bool {
	switch {
	case err != nil:
		c.engineError(err)
	case cerr != nil:
		c.replyErr(cerr)
	default:
		return false
	}
	return true
}
