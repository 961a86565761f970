package resp

import "bytes"

// Requests that redcon's parser waits on, fails differently than Redis,
// or panics on, are checked here the way Redis's own parser
// (processMultibulkBuffer) reads them: the connection loop asks only when
// redcon did not return a complete command.

const (
	maxMultibulk = 1 << 20   // arguments a command may have (Redis: INT_MAX; ours fit in maxCommandBytes anyway)
	maxBulkLen   = 512 << 20 // Redis's proto-max-bulk-len: longer is "invalid bulk length"
	maxLineBytes = 64 << 10  // a length line without its CRLF
	crlf         = "\r\n"
)

// checkRequest reads the multibulk request at the start of p (p[0] is
// '*'). skip > 0: the request is empty ("*0" or a negative count, which
// Redis ignores) and takes skip bytes; err: the request is malformed, with
// Redis's words; neither: it is well formed as far as it has arrived.
func checkRequest(p []byte) (skip int, err error) {
	n, end, err := lengthLine(p, "invalid multibulk length", "too big mbulk count string")
	if err != nil || end == 0 {
		return 0, err
	}
	if n <= 0 {
		return end, nil
	}
	if n > maxMultibulk {
		return 0, protoError("invalid multibulk length")
	}
	pos := end
	for range n {
		if pos >= len(p) {
			return 0, nil
		}
		if p[pos] != '$' {
			return 0, protoError("expected '$', got '" + string(p[pos]) + "'")
		}
		l, e, err := lengthLine(p[pos:], "invalid bulk length", "too big bulk count string")
		if err != nil || e == 0 {
			return 0, err
		}
		if l < 0 || l > maxBulkLen {
			return 0, protoError("invalid bulk length")
		}
		pos += e + int(l) + 2
	}
	return 0, nil
}

// lengthLine parses "<c><integer>\r\n" at the start of p; end is where the
// line ends (0: it has not all arrived).
func lengthLine(p []byte, invalid, tooLong string) (n int64, end int, err error) {
	i := bytes.Index(p, []byte(crlf))
	if i < 0 {
		if len(p) > maxLineBytes {
			return 0, 0, protoError(tooLong)
		}
		return 0, 0, nil
	}
	digits := p[1:i]
	neg := len(digits) > 0 && digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, 0, protoError(invalid)
	}
	for _, ch := range digits {
		if ch < '0' || ch > '9' {
			return 0, 0, protoError(invalid)
		}
		n = n*10 + int64(ch-'0')
	}
	if neg {
		n = -n
	}
	return n, i + 2, nil
}
