package checker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unsafe"
)

// Operation kinds.
const (
	KindRead  = "read"
	KindWrite = "write"
	// KindRMW is a read-modify-write: it read Read and wrote Value, in one
	// atomic step, so two that read the same value cannot both have
	// happened (a lost update).
	KindRMW = "rmw"
)

// Op is one completed operation on a page register (or a key). Times are
// simulated nanoseconds.
type Op struct {
	Client int    `json:"client"`
	Page   uint64 `json:"page"`
	Kind   string `json:"op"`             // "read" or "write"
	Value  uint64 `json:"value"`          // value written, or value the read returned; pages start at 0
	Read   uint64 `json:"read,omitempty"` // rmw: the value it read before writing Value
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
}

// validate reports why op cannot be checked, or nil.
func (op Op) validate() error {
	if op.Kind != KindRead && op.Kind != KindWrite && op.Kind != KindRMW {
		return fmt.Errorf("op %q is none of %q, %q and %q", op.Kind, KindRead, KindWrite, KindRMW)
	}
	if op.Read != 0 && op.Kind != KindRMW {
		return fmt.Errorf("op %q carries a read value (only %q does)", op.Kind, KindRMW)
	}
	if op.Return < op.Call {
		return fmt.Errorf("return %d is before call %d", op.Return, op.Call)
	}
	return nil
}

// History is an append-only record of completed operations. It is not safe
// for concurrent use.
type History struct {
	ops []Op
}

// Storage is the memory reserved for the history's operations, as bytes:
// for a caller that advises the kernel about it (huge pages for a history
// of millions of operations, whose first touches are page faults).
func (h *History) Storage() []byte {
	ops := h.ops[:cap(h.ops)]
	if len(ops) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ops))), len(ops)*int(unsafe.Sizeof(Op{})))
}

// NewHistory returns an empty history with room for capacity operations.
func NewHistory(capacity int) *History {
	if capacity < 0 {
		capacity = 0
	}
	return &History{ops: make([]Op, 0, capacity)}
}

// Add appends op. It does not allocate while the history is within the
// capacity given to NewHistory.
func (h *History) Add(op Op) { h.ops = append(h.ops, op) }

// Ops returns the recorded operations in the order they were added. The
// slice is the history's own storage: callers must not modify it.
func (h *History) Ops() []Op { return h.ops }

// Len returns the number of recorded operations.
func (h *History) Len() int { return len(h.ops) }

// WriteJSONLines writes the history as one JSON object per line, fields in
// the order client, page, op, value, read (rmw only), call, return:
//
//	{"client":1,"page":42,"op":"write","value":7,"call":100,"return":180}
//	{"client":2,"page":42,"op":"rmw","value":9,"read":7,"call":190,"return":250}
func (h *History) WriteJSONLines(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	for i := range h.ops {
		line, err := appendOpJSON(bw.AvailableBuffer(), &h.ops[i])
		if err != nil {
			return err
		}
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// appendOpJSON appends op's JSON line (with its trailing newline) to b.
func appendOpJSON(b []byte, op *Op) ([]byte, error) {
	b = append(b, `{"client":`...)
	b = strconv.AppendInt(b, int64(op.Client), 10)
	b = append(b, `,"page":`...)
	b = strconv.AppendUint(b, op.Page, 10)
	b = append(b, `,"op":`...)
	switch op.Kind {
	case KindRead:
		b = append(b, `"read"`...)
	case KindWrite:
		b = append(b, `"write"`...)
	default: // other kinds are written faithfully, with JSON escaping
		q, err := json.Marshal(op.Kind)
		if err != nil {
			return b, err
		}
		b = append(b, q...)
	}
	b = append(b, `,"value":`...)
	b = strconv.AppendUint(b, op.Value, 10)
	if op.Read != 0 {
		b = append(b, `,"read":`...)
		b = strconv.AppendUint(b, op.Read, 10)
	}
	b = append(b, `,"call":`...)
	b = strconv.AppendInt(b, op.Call, 10)
	b = append(b, `,"return":`...)
	b = strconv.AppendInt(b, op.Return, 10)
	b = append(b, "}\n"...)
	return b, nil
}

// maxLine bounds the length of one JSON line accepted by ReadJSONLines.
const maxLine = 1 << 20

// ReadJSONLines reads operations written one JSON object per line (as
// WriteJSONLines does). Blank lines are skipped. Every operation must have
// op "read", "write" or "rmw" and return >= call; unknown fields and trailing data
// are rejected. Errors name the 1-based line number.
func ReadJSONLines(r io.Reader) ([]Op, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var ops []Op
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		op, ok := parseCanonical(line)
		if !ok {
			var err error
			if op, err = parseGeneric(line); err != nil {
				return nil, fmt.Errorf("checker: line %d: %w", lineNo, err)
			}
		}
		if err := op.validate(); err != nil {
			return nil, fmt.Errorf("checker: line %d: %w", lineNo, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("checker: line %d: %w", lineNo+1, err)
	}
	return ops, nil
}

// parseGeneric decodes one line with encoding/json, strictly.
func parseGeneric(line []byte) (Op, error) {
	var op Op
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&op); err != nil {
		return Op{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Op{}, errors.New("trailing data after the JSON object")
	}
	return op, nil
}

// parseCanonical is the fast path for lines exactly as WriteJSONLines writes
// them (read or write ops). It reports false for anything else, which is then
// left to parseGeneric, so it never accepts a line encoding/json would reject.
func parseCanonical(p []byte) (Op, bool) {
	var op Op
	var ok bool
	var v int64
	if p, ok = expect(p, `{"client":`); !ok {
		return op, false
	}
	if v, p, ok = parseInt(p); !ok || int64(int(v)) != v {
		return op, false
	}
	op.Client = int(v)
	if p, ok = expect(p, `,"page":`); !ok {
		return op, false
	}
	if op.Page, p, ok = parseUint(p); !ok {
		return op, false
	}
	if p, ok = expect(p, `,"op":`); !ok {
		return op, false
	}
	if q, ok := expect(p, `"read"`); ok {
		op.Kind, p = KindRead, q
	} else if q, ok := expect(p, `"write"`); ok {
		op.Kind, p = KindWrite, q
	} else {
		return op, false
	}
	if p, ok = expect(p, `,"value":`); !ok {
		return op, false
	}
	if op.Value, p, ok = parseUint(p); !ok {
		return op, false
	}
	if p, ok = expect(p, `,"call":`); !ok {
		return op, false
	}
	if op.Call, p, ok = parseInt(p); !ok {
		return op, false
	}
	if p, ok = expect(p, `,"return":`); !ok {
		return op, false
	}
	if op.Return, p, ok = parseInt(p); !ok {
		return op, false
	}
	if p, ok = expect(p, `}`); !ok || len(p) != 0 {
		return op, false
	}
	return op, true
}

func expect(p []byte, s string) ([]byte, bool) {
	if len(p) < len(s) || string(p[:len(s)]) != s {
		return p, false
	}
	return p[len(s):], true
}

// parseUint parses a JSON non-negative integer (no leading zeros, no sign)
// that fits in a uint64.
func parseUint(p []byte) (uint64, []byte, bool) {
	n := 0
	for n < len(p) && p[n] >= '0' && p[n] <= '9' {
		n++
	}
	if n == 0 || (p[0] == '0' && n > 1) {
		return 0, p, false
	}
	var v uint64
	for _, c := range p[:n] {
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, p, false
		}
		v = v*10 + d
	}
	return v, p[n:], true
}

// parseInt parses a JSON integer that fits in an int64.
func parseInt(p []byte) (int64, []byte, bool) {
	neg := len(p) > 0 && p[0] == '-'
	q := p
	if neg {
		q = p[1:]
	}
	u, rest, ok := parseUint(q)
	if !ok {
		return 0, p, false
	}
	if neg {
		if u > 1<<63 {
			return 0, p, false
		}
		return int64(-u), rest, true // -(1<<63) wraps to MinInt64 as intended
	}
	if u > math.MaxInt64 {
		return 0, p, false
	}
	return int64(u), rest, true
}
