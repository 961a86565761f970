package resp

const (
	msgBitOffset = "ERR bit offset is not an integer or out of range"
	msgBitValue  = "ERR bit is not an integer or out of range"
	// maxBitOffset is Redis's: a string of 512 MB.
	maxBitOffset = 4*1024*1024*1024 - 1
)

func parseBitOffset(b []byte) (int64, bool) {
	n, ok := parseInt(b)
	return n, ok && n >= 0 && n <= maxBitOffset
}

// cmdSetBit: SETBIT key offset 0|1, the old bit in reply; the string grows
// with zero bytes to hold the bit.
func (c *client) cmdSetBit(args [][]byte) {
	key := args[1]
	off, ok := parseBitOffset(args[2])
	if !ok {
		c.error(msgBitOffset)
		return
	}
	if len(args[3]) != 1 || (args[3][0] != '0' && args[3][0] != '1') {
		c.error(msgBitValue)
		return
	}
	on := args[3][0] == '1'
	if !c.checkKey(key) {
		return
	}
	now := c.s.nowMs()
	byteAt := int(off >> 3)
	mask := byte(1) << (7 - uint(off&7))
	var old int64
	var buf, out []byte
	var cerr error
	err := c.kv.modify(key, func(raw []byte, found bool) ([]byte, bool, bool) {
		p, exp, live := live(raw, found, now)
		if !live {
			exp = 0
		}
		cerr, old = nil, 0
		if byteAt >= c.s.maxValue {
			cerr = c.tooBig(key, byteAt+1)
			return nil, false, false
		}
		buf = append(buf[:0], p...)
		for len(buf) <= byteAt {
			buf = append(buf, 0)
		}
		if buf[byteAt]&mask != 0 {
			old = 1
		}
		if on {
			buf[byteAt] |= mask
		} else {
			buf[byteAt] &^= mask
		}
		if out, cerr = c.encodeFitting(out, key, buf, exp); cerr != nil {
			return nil, false, false
		}
		return out, true, true
	})
	if !c.modifyFailed(err, cerr) {
		c.int(old)
	}
}

func (c *client) cmdGetBit(args [][]byte) {
	off, ok := parseBitOffset(args[2])
	if !ok {
		c.error(msgBitOffset)
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
	i := off >> 3
	if i >= int64(len(v)) || v[i]&(1<<(7-uint(off&7))) == 0 {
		c.int(0)
		return
	}
	c.int(1)
}

// cmdLCS: LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN], the
// longest common subsequence by the textbook dynamic programme, and its
// matching ranges found walking the table back from the end, last range
// first, as Redis reports them.
func (c *client) cmdLCS(args [][]byte) {
	var getLen, getIdx, withLen bool
	var minLen int64
	for i := 3; i < len(args); i++ {
		switch string(c.lowerName(args[i])) {
		case "idx":
			getIdx = true
		case "len":
			getLen = true
		case "withmatchlen":
			withLen = true
		case "minmatchlen":
			if i+1 == len(args) {
				c.syntaxError()
				return
			}
			i++
			n, ok := parseInt(args[i])
			if !ok {
				c.error(msgNotInt)
				return
			}
			minLen = max(n, 0)
		default:
			c.syntaxError()
			return
		}
	}
	if getLen && getIdx {
		c.error("ERR If you want both the length and indexes, please just use IDX.")
		return
	}
	if !c.checkKeys(args[1:3]) {
		return
	}
	var a, b []byte
	err := c.atomic(true, func() error {
		v, _, _, err := c.lookup(args[1])
		if err != nil {
			return err
		}
		a = append(a[:0], v...)
		v, _, _, err = c.lookup(args[2])
		if err != nil {
			return err
		}
		b = append(b[:0], v...)
		return nil
	})
	if err != nil {
		c.replyErr(err)
		return
	}
	w := len(b) + 1
	t := make([]uint32, (len(a)+1)*w)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				t[i*w+j] = t[(i-1)*w+j-1] + 1
			} else {
				t[i*w+j] = max(t[(i-1)*w+j], t[i*w+j-1])
			}
		}
	}
	total := t[len(a)*w+len(b)]
	if getLen {
		c.int(int64(total))
		return
	}
	type match struct{ a0, a1, b0, b1 int }
	var ranges []match
	seq := make([]byte, total)
	k := int(total)
	cur, open := match{}, false
	emit := func() {
		if open && (minLen == 0 || int64(cur.a1-cur.a0+1) >= minLen) {
			ranges = append(ranges, cur)
		}
		open = false
	}
	for i, j := len(a), len(b); i > 0 && j > 0; {
		if a[i-1] == b[j-1] {
			seq[k-1] = a[i-1]
			k--
			switch {
			case !open:
				cur, open = match{i - 1, i - 1, j - 1, j - 1}, true
			case cur.a0 == i && cur.b0 == j:
				cur.a0, cur.b0 = i-1, j-1
			default:
				emit()
			}
			if open && (cur.a0 == 0 || cur.b0 == 0) {
				emit()
			}
			i, j = i-1, j-1
			continue
		}
		if t[(i-1)*w+j] > t[i*w+j-1] {
			i--
		} else {
			j--
		}
		emit()
	}
	if !getIdx {
		c.bulk(seq)
		return
	}
	c.array(4)
	c.bulkString("matches")
	c.array(len(ranges))
	for _, r := range ranges {
		if withLen {
			c.array(3)
		} else {
			c.array(2)
		}
		c.array(2)
		c.int(int64(r.a0))
		c.int(int64(r.a1))
		c.array(2)
		c.int(int64(r.b0))
		c.int(int64(r.b1))
		if withLen {
			c.int(int64(r.a1 - r.a0 + 1))
		}
	}
	c.bulkString("len")
	c.int(int64(total))
}
