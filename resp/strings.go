package resp

import (
	"math"
	"strconv"
)

// Redis's error replies, word for word.
const (
	msgNotInt     = "ERR value is not an integer or out of range"
	msgNotFloat   = "ERR value is not a valid float"
	msgOverflow   = "ERR increment or decrement would overflow"
	msgNaN        = "ERR increment would produce NaN or Infinity"
	msgOffset     = "ERR offset is out of range"
	msgNoSuchKey  = "ERR no such key"
	msgWrongType  = "WRONGTYPE Operation against a key holding the wrong kind of value"
	msgSameObject = "ERR source and destination objects are the same"
)

func invalidExpire(cmd string) string { return "ERR invalid expire time in '" + cmd + "' command" }

// parseInt parses as Redis's string2ll does: an optional minus, no
// leading zeros, no spaces or plus sign, within int64.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	if len(d) == 0 || d[0] < '1' || d[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, ch := range d {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		if v > (math.MaxUint64-9)/10 {
			return 0, false
		}
		v = v*10 + uint64(ch-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// parseFloat parses as Redis's string2ld does: no spaces, no NaN.
func parseFloat(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 5000 || b[0] == ' ' || b[len(b)-1] == ' ' {
		return 0, false
	}
	for _, ch := range b {
		if ch == '_' || ch == 'x' || ch == 'X' {
			return 0, false // Go's syntaxes, not C's strtold
		}
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if (err != nil && !isRange(err)) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// checkStored checks key and the stored form of a value against the
// limits (see checkEntry).
func (c *client) checkStored(key, payload []byte, expireAt int64) bool {
	if storedLen(payload, expireAt) == len(payload) {
		return c.checkEntry(key, payload)
	}
	if !c.checkKey(key) {
		return false
	}
	n := storedLen(payload, expireAt)
	if n > c.s.maxValue {
		c.error(limitError("value with its expiry header", n, c.s.maxValue, "MaxValue"))
		return false
	}
	return true
}

// fits reports, without replying, whether key and a stored value of n
// bytes are within the limits.
func (c *client) fits(key []byte, n int) bool {
	return len(key) <= c.s.maxKey && n <= c.s.maxValue
}

// tooBig is the error of a command whose result would be a stored value
// of n bytes, over the limits: Redis's words, then the limit.
func (c *client) tooBig(key []byte, n int) cmdError {
	if len(key) > c.s.maxKey {
		return cmdError("ERR key is " + strconv.Itoa(len(key)) + " bytes, over the limit of " + strconv.Itoa(c.s.maxKey) + " bytes (MaxKey)")
	}
	return cmdError("ERR string exceeds maximum allowed size (" + strconv.Itoa(n) + " bytes, over MaxValue " + strconv.Itoa(c.s.maxValue) + ")")
}

func (c *client) cmdGet(args [][]byte) {
	if !c.checkKey(args[1]) {
		return
	}
	v, _, ok, err := c.lookup(args[1])
	switch {
	case err != nil:
		c.engineError(err)
	case !ok:
		c.null()
	default:
		c.bulk(v)
	}
}

// setState is SET's (and the commands built on it) per-command state, read
// by setModify, a method value made once per connection so that SET with
// options allocates nothing.
type setState struct {
	mode     int // condAlways, condNX, condXX
	get      bool
	keepTTL  bool
	expireAt int64
	now      int64
	val      []byte
	// results of the last setModify call
	applied bool
	found   bool
	old     []byte
	out     []byte
}

const (
	condAlways = iota
	condNX
	condXX
)

func (c *client) setModify(old []byte, found bool) ([]byte, bool, bool) {
	st := &c.set
	p, exp, ok := live(old, found, st.now)
	st.found, st.applied = ok, false
	if st.get {
		st.old = append(st.old[:0], p...)
	}
	if (st.mode == condNX && ok) || (st.mode == condXX && !ok) {
		return nil, false, false
	}
	e := st.expireAt
	if st.keepTTL && ok {
		e = exp
	}
	st.out = appendValue(st.out[:0], st.val, e)
	st.applied = true
	return st.out, true, true
}

// expireArg turns an EX/PX/EXAT/PXAT argument into Unix milliseconds.
func (c *client) expireArg(arg []byte, unit string, cmd string, now int64) (int64, bool) {
	n, ok := parseInt(arg)
	if !ok {
		c.error(msgNotInt)
		return 0, false
	}
	if n <= 0 {
		c.error(invalidExpire(cmd))
		return 0, false
	}
	var ms int64
	switch unit {
	case "ex", "exat":
		if n > math.MaxInt64/1000 {
			c.error(invalidExpire(cmd))
			return 0, false
		}
		ms = n * 1000
	default:
		ms = n
	}
	if unit == "ex" || unit == "px" {
		if ms > math.MaxInt64-now {
			c.error(invalidExpire(cmd))
			return 0, false
		}
		ms += now
	}
	return ms, true
}

func (c *client) cmdSet(args [][]byte) {
	key, val := args[1], args[2]
	// The clock is read only when something needs it (EX and PX, and the
	// old value's expiry for the options that look at it): a plain SET
	// overwrites whatever is there, and the read was 5% of a -P 16 SET
	// profile.
	var now int64
	clock := func() int64 {
		if now == 0 {
			now = c.s.nowMs()
		}
		return now
	}
	c.set = setState{val: val, old: c.set.old[:0], out: c.set.out[:0]}
	st := &c.set
	var unit string
	for i := 3; i < len(args); i++ {
		var opt string
		switch string(c.lowerName(args[i])) {
		case "nx":
			opt = "nx"
		case "xx":
			opt = "xx"
		case "get":
			opt = "get"
		case "keepttl":
			opt = "keepttl"
		case "ex":
			opt = "ex"
		case "px":
			opt = "px"
		case "exat":
			opt = "exat"
		case "pxat":
			opt = "pxat"
		}
		switch opt {
		case "nx", "xx":
			want := condNX
			if opt == "xx" {
				want = condXX
			}
			if st.mode != condAlways && st.mode != want {
				c.syntaxError()
				return
			}
			st.mode = want
		case "get":
			st.get = true
		case "keepttl":
			if unit != "" {
				c.syntaxError()
				return
			}
			st.keepTTL = true
		case "ex", "px", "exat", "pxat":
			if unit != "" || st.keepTTL || i+1 == len(args) {
				c.syntaxError()
				return
			}
			unit = opt
			i++
			exp, ok := c.expireArg(args[i], unit, "set", clock())
			if !ok {
				return
			}
			st.expireAt = exp
		default:
			c.syntaxError()
			return
		}
	}
	if !c.checkStored(key, val, st.expireAt) {
		return
	}
	if st.mode == condAlways && !st.get && !st.keepTTL {
		v := val
		if storedLen(val, st.expireAt) != len(val) {
			st.out = appendValue(st.out[:0], val, st.expireAt)
			v = st.out
		}
		if err := c.kv.put(key, v); err != nil {
			c.engineError(err)
			return
		}
		c.ok()
		return
	}
	st.now = clock()
	if err := c.kv.modify(key, c.setFn); err != nil {
		c.engineError(err)
		return
	}
	switch {
	case st.get && st.found:
		c.bulk(st.old)
	case st.get:
		c.null()
	case st.applied:
		c.ok()
	default:
		c.null()
	}
	c.trimSet()
}

func (c *client) trimSet() {
	if cap(c.set.old) > keepBufBytes {
		c.set.old = nil
	}
	if cap(c.set.out) > keepBufBytes {
		c.set.out = nil
	}
	c.set.val = nil
}

func (c *client) cmdSetNX(args [][]byte) {
	if !c.checkStored(args[1], args[2], 0) {
		return
	}
	c.set = setState{mode: condNX, now: c.s.nowMs(), val: args[2], old: c.set.old[:0], out: c.set.out[:0]}
	if err := c.kv.modify(args[1], c.setFn); err != nil {
		c.engineError(err)
		return
	}
	if c.set.applied {
		c.int(1)
	} else {
		c.int(0)
	}
	c.trimSet()
}

func (c *client) setEx(args [][]byte, unit, name string) {
	now := c.s.nowMs()
	exp, ok := c.expireArg(args[2], unit, name, now)
	if !ok {
		return
	}
	key, val := args[1], args[3]
	if !c.checkStored(key, val, exp) {
		return
	}
	c.set.out = appendValue(c.set.out[:0], val, exp)
	if err := c.kv.put(key, c.set.out); err != nil {
		c.engineError(err)
		return
	}
	c.ok()
}

func (c *client) cmdSetEx(args [][]byte)  { c.setEx(args, "ex", "setex") }
func (c *client) cmdPSetEx(args [][]byte) { c.setEx(args, "px", "psetex") }

func (c *client) cmdGetSet(args [][]byte) {
	if !c.checkStored(args[1], args[2], 0) {
		return
	}
	c.set = setState{get: true, now: c.s.nowMs(), val: args[2], old: c.set.old[:0], out: c.set.out[:0]}
	if err := c.kv.modify(args[1], c.setFn); err != nil {
		c.engineError(err)
		return
	}
	if c.set.found {
		c.bulk(c.set.old)
	} else {
		c.null()
	}
	c.trimSet()
}

func (c *client) cmdGetDel(args [][]byte) {
	if !c.checkKey(args[1]) {
		return
	}
	now := c.s.nowMs()
	var old []byte
	var ok bool
	err := c.kv.modify(args[1], func(raw []byte, found bool) ([]byte, bool, bool) {
		var p []byte
		p, _, ok = live(raw, found, now)
		old = append(old[:0], p...)
		return nil, false, found // an expired key goes too
	})
	switch {
	case err != nil:
		c.engineError(err)
	case ok:
		c.bulk(old)
	default:
		c.null()
	}
}

// cmdGetEx: GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST].
func (c *client) cmdGetEx(args [][]byte) {
	key := args[1]
	if !c.checkKey(key) {
		return
	}
	now := c.s.nowMs()
	var newExp int64
	change, persist := false, false
	for i := 2; i < len(args); i++ {
		opt := string(c.lowerName(args[i]))
		switch opt {
		case "ex", "px", "exat", "pxat":
			if change || i+1 == len(args) {
				c.syntaxError()
				return
			}
			i++
			e, ok := c.expireArg(args[i], opt, "getex", now)
			if !ok {
				return
			}
			newExp, change = e, true
		case "persist":
			if change {
				c.syntaxError()
				return
			}
			change, persist = true, true
		default:
			c.syntaxError()
			return
		}
	}
	if !change {
		c.cmdGet(args[:2])
		return
	}
	var old, out []byte
	var ok bool
	var cerr error
	err := c.kv.modify(key, func(raw []byte, found bool) ([]byte, bool, bool) {
		var p []byte
		var exp int64
		p, exp, ok = live(raw, found, now)
		old, cerr = append(old[:0], p...), nil
		if !ok {
			return nil, false, found
		}
		e := newExp
		if persist {
			e = 0
		}
		if e == exp {
			return nil, true, false
		}
		if out, cerr = c.encodeFitting(out, key, p, e); cerr != nil {
			return nil, true, false
		}
		return out, true, true
	})
	switch {
	case err != nil:
		c.engineError(err)
	case cerr != nil:
		c.replyErr(cerr)
	case ok:
		c.bulk(old)
	default:
		c.null()
	}
}

func (c *client) cmdAppend(args [][]byte) {
	key, add := args[1], args[2]
	if !c.checkKey(key) {
		return
	}
	now := c.s.nowMs()
	var n int
	var out []byte
	var cerr error
	var buf []byte
	err := c.kv.modify(key, func(raw []byte, found bool) ([]byte, bool, bool) {
		p, exp, ok := live(raw, found, now)
		if !ok {
			exp = 0
		}
		buf = append(append(buf[:0], p...), add...)
		n, cerr = len(buf), nil
		if out, cerr = c.encodeFitting(out, key, buf, exp); cerr != nil {
			return nil, false, false
		}
		return out, true, true
	})
	if !c.modifyFailed(err, cerr) {
		c.int(int64(n))
	}
}

func (c *client) cmdStrlen(args [][]byte) {
	if !c.checkKey(args[1]) {
		return
	}
	v, _, _, err := c.lookup(args[1])
	if err != nil {
		c.engineError(err)
		return
	}
	c.int(int64(len(v)))
}

// cmdGetRange: GETRANGE key start end, with Redis's clamping of negative
// and out-of-range indices.
func (c *client) cmdGetRange(args [][]byte) {
	start, ok1 := parseInt(args[2])
	end, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		c.error(msgNotInt)
		return
	}
	if !c.checkKey(args[1]) {
		return
	}
	v, _, _, err := c.lookup(args[1])
	if err != nil {
		c.engineError(err)
		return
	}
	n := int64(len(v))
	if start < 0 && end < 0 && start > end {
		c.bulk(nil)
		return
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	if end >= n {
		end = n - 1
	}
	if start > end || n == 0 {
		c.bulk(nil)
		return
	}
	c.bulk(v[start : end+1])
}

func (c *client) cmdSetRange(args [][]byte) {
	key, val := args[1], args[3]
	off, ok := parseInt(args[2])
	if !ok {
		c.error(msgNotInt)
		return
	}
	if off < 0 {
		c.error(msgOffset)
		return
	}
	if !c.checkKey(key) {
		return
	}
	now := c.s.nowMs()
	var n int
	var out []byte
	var cerr error
	err := c.kv.modify(key, func(raw []byte, found bool) ([]byte, bool, bool) {
		p, exp, ok := live(raw, found, now)
		cerr, n = nil, len(p)
		if len(val) == 0 {
			return nil, false, false // creates nothing, changes nothing
		}
		if !ok {
			exp = 0
		}
		if off > int64(c.s.maxValue) || off+int64(len(val)) > int64(c.s.maxValue) {
			cerr = c.tooBig(key, int(min(off, math.MaxInt32-int64(len(val))))+len(val))
			return nil, false, false
		}
		size := max(len(p), int(off)+len(val))
		buf := make([]byte, size)
		copy(buf, p)
		copy(buf[off:], val)
		n = size
		if out, cerr = c.encodeFitting(out, key, buf, exp); cerr != nil {
			return nil, false, false
		}
		return out, true, true
	})
	if !c.modifyFailed(err, cerr) {
		c.int(int64(n))
	}
}

// incrState is INCRBY's per-command state, read by incrModify (a method
// value made once per connection: INCR allocates nothing).
type incrState struct {
	delta  int64
	result int64
	err    string
	digits [24]byte
	out    []byte
}

func (c *client) incrModify(old []byte, found bool) ([]byte, bool, bool) {
	st := &c.incr
	st.err = ""
	// The clock is read only for a value with an expiry: a counter
	// without one (the usual INCR) never needs it, and on a VM a clock
	// read was 4% of INCR -P16's profile.
	var now int64
	if found {
		if _, exp := decodeValue(old); exp != 0 {
			now = c.s.nowMs()
		}
	}
	p, exp, ok := live(old, found, now)
	var n int64
	if ok {
		v, isInt := parseInt(p)
		if !isInt {
			st.err = msgNotInt
			return nil, false, false
		}
		n = v
	} else {
		exp = 0
	}
	if (st.delta < 0 && n < math.MinInt64-st.delta) || (st.delta > 0 && n > math.MaxInt64-st.delta) {
		st.err = msgOverflow
		return nil, false, false
	}
	st.result = n + st.delta
	st.out = appendValue(st.out[:0], strconv.AppendInt(st.digits[:0], st.result, 10), exp)
	return st.out, true, true
}

func (c *client) incrBy(key []byte, delta int64) {
	if !c.checkKey(key) {
		return
	}
	c.incr.delta = delta
	if err := c.kv.modify(key, c.incrFn); err != nil {
		c.engineError(err)
		return
	}
	if c.incr.err != "" {
		c.error(c.incr.err)
		return
	}
	c.int(c.incr.result)
}

func (c *client) cmdIncr(args [][]byte) { c.incrBy(args[1], 1) }
func (c *client) cmdDecr(args [][]byte) { c.incrBy(args[1], -1) }

func (c *client) cmdIncrBy(args [][]byte) {
	d, ok := parseInt(args[2])
	if !ok {
		c.error(msgNotInt)
		return
	}
	c.incrBy(args[1], d)
}

func (c *client) cmdDecrBy(args [][]byte) {
	d, ok := parseInt(args[2])
	if !ok || d == math.MinInt64 {
		if ok {
			c.error("ERR decrement would overflow")
			return
		}
		c.error(msgNotInt)
		return
	}
	c.incrBy(args[1], -d)
}

func (c *client) cmdIncrByFloat(args [][]byte) {
	key := args[1]
	d, ok := parseFloat(args[2])
	if !ok {
		c.error(msgNotFloat)
		return
	}
	if !c.checkKey(key) {
		return
	}
	now := c.s.nowMs()
	var res []byte
	var out []byte
	var cerr string
	err := c.kv.modify(key, func(raw []byte, found bool) ([]byte, bool, bool) {
		cerr = ""
		p, exp, ok := live(raw, found, now)
		var v float64
		if ok {
			f, isFloat := parseFloat(p)
			if !isFloat {
				cerr = msgNotFloat
				return nil, false, false
			}
			v = f
		} else {
			exp = 0
		}
		r := v + d
		if math.IsNaN(r) || math.IsInf(r, 0) {
			cerr = msgNaN
			return nil, false, false
		}
		res = strconv.AppendFloat(res[:0], r, 'f', -1, 64)
		out = appendValue(out[:0], res, exp)
		return out, true, true
	})
	switch {
	case err != nil:
		c.engineError(err)
	case cerr != "":
		c.error(cerr)
	default:
		c.bulk(res)
	}
}
