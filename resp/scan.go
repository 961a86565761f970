package resp

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"sync"
)

// cursorSlots is how many SCAN cursors the server remembers; a newer
// cursor takes the slot of the one cursorSlots before it.
const cursorSlots = 4096

// cursorTable maps SCAN cursor ids to the key to resume after. Ids are
// consecutive (from a random start, so that a cursor from before a
// restart is unlikely to mean anything), and id%cursorSlots is the slot.
type cursorTable struct {
	mu    sync.Mutex
	last  uint64
	slots [cursorSlots]cursorSlot
}

type cursorSlot struct {
	id    uint64
	after string
}

func (t *cursorTable) init() {
	t.last = rand.Uint64N(1 << 40)
}

// put remembers after and returns its cursor id, never 0.
func (t *cursorTable) put(after []byte) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last++
	if t.last == 0 {
		t.last = 1
	}
	t.slots[t.last%cursorSlots] = cursorSlot{id: t.last, after: string(after)}
	return t.last
}

// get returns the key cursor id resumes after, if it is still known.
func (t *cursorTable) get(id uint64) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sl := t.slots[id%cursorSlots]
	if id == 0 || sl.id != id {
		return "", false
	}
	return sl.after, true
}

// cmdScan: SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]. COUNT is
// how many keys one call examines (default 10), as in Redis; MATCH
// filters them. A pattern with a literal prefix only walks that prefix's
// key range.
func (c *client) cmdScan(args [][]byte) {
	if len(args) < 2 {
		c.arity("scan")
		return
	}
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		c.error("ERR invalid cursor")
		return
	}
	count := 10
	var pattern []byte
	stringType := true
	for i := 2; i < len(args); i += 2 {
		if i+1 == len(args) {
			c.syntaxError()
			return
		}
		switch string(c.lowerName(args[i])) {
		case "count":
			n, err := strconv.Atoi(string(args[i+1]))
			if err != nil {
				c.error("ERR value is not an integer or out of range")
				return
			}
			if n < 1 {
				c.syntaxError()
				return
			}
			count = n
		case "match":
			pattern = args[i+1]
		case "type":
			// Every value is a string.
			stringType = bytes.EqualFold(args[i+1], []byte("string"))
		default:
			c.syntaxError()
			return
		}
	}
	var from []byte
	if cursor != 0 {
		after, ok := c.s.cursors.get(cursor)
		if !ok {
			c.error("ERR invalid cursor")
			return
		}
		from = append([]byte(after), 0)
	}
	if len(pattern) == 1 && pattern[0] == '*' {
		pattern = nil
	}
	prefix := literalPrefix(pattern)
	to := prefixEnd(prefix)
	if bytes.Compare(from, prefix) < 0 {
		from = prefix
	}
	if !stringType || (to != nil && bytes.Compare(from, to) >= 0) {
		c.scanReply(0, 0)
		return
	}
	c.keys, c.ends, c.last = c.keys[:0], c.ends[:0], c.last[:0]
	examined, more := 0, false
	now := c.s.nowMs()
	err = c.eng.Scan(from, to, func(key, val []byte) bool {
		if examined == count {
			more = true
			return false
		}
		examined++
		c.last = append(c.last[:0], key...)
		if _, exp := decodeValue(val); expired(exp, now) {
			return true
		}
		if pattern == nil || globMatch(pattern, key) {
			c.keys = append(c.keys, key...)
			c.ends = append(c.ends, len(c.keys))
		}
		return true
	})
	if err != nil {
		c.engineError(err)
		return
	}
	var next uint64
	if more {
		next = c.s.cursors.put(c.last)
	}
	c.scanReply(next, len(c.ends))
	if cap(c.keys) > keepBufBytes || cap(c.ends) > keepArgs {
		c.keys, c.ends = nil, nil
	}
}

// scanReply writes [cursor, [the n keys collected]].
func (c *client) scanReply(next uint64, n int) {
	c.array(2)
	var num [20]byte
	c.bulk(strconv.AppendUint(num[:0], next, 10))
	c.array(n)
	start := 0
	for _, end := range c.ends[:n] {
		c.bulk(c.keys[start:end])
		start = end
	}
}

// literalPrefix is the part of a glob pattern before its first special
// character: every key it matches starts with it.
func literalPrefix(pattern []byte) []byte {
	for i, ch := range pattern {
		switch ch {
		case '*', '?', '[', '\\':
			return pattern[:i]
		}
	}
	return pattern
}

// prefixEnd is the least key greater than every key that starts with
// prefix, or nil if there is none (or prefix is empty).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// globMatch reports whether s matches pattern with Redis's glob rules
// (stringmatchlen): '*' any run of bytes, '?' any one byte, '[abc]' a set,
// '[^abc]' its complement, '[a-z]' a range (either way round), and '\x'
// x itself, in and out of sets. An unterminated set runs to the end of
// the pattern; a '\' that ends the pattern is a literal '\'.
//
// As in Redis, an empty s matches only an empty pattern (SCAN treats
// MATCH * as no pattern at all, so every key still matches that).
//
// '*' backtracks to the most recent star only, so matching is
// O(len(pattern)*len(s)) at worst, never exponential.
func globMatch(pattern, s []byte) bool {
	if len(s) == 0 {
		return len(pattern) == 0
	}
	p, i := 0, 0
	starP, starI := -1, 0
	for i < len(s) || p < len(pattern) {
		if p < len(pattern) {
			switch pattern[p] {
			case '*':
				starP, starI = p, i
				p++
				continue
			case '?':
				if i < len(s) {
					p++
					i++
					continue
				}
			case '[':
				if i < len(s) {
					if ok, next := matchSet(pattern, p, s[i]); ok {
						p = next
						i++
						continue
					}
				}
			case '\\':
				lit := p
				if p+1 < len(pattern) {
					lit = p + 1
				}
				if i < len(s) && s[i] == pattern[lit] {
					p = lit + 1
					i++
					continue
				}
			default:
				if i < len(s) && s[i] == pattern[p] {
					p++
					i++
					continue
				}
			}
		}
		// Mismatch: let the last star take one more byte, if any.
		if starP < 0 || starI >= len(s) {
			return false
		}
		starI++
		p, i = starP+1, starI
	}
	return true
}

// matchSet matches ch against the set that opens at pattern[open] ('[')
// and returns whether it matched and the index just past the set.
func matchSet(pattern []byte, open int, ch byte) (bool, int) {
	p := open + 1
	negate := false
	if p < len(pattern) && pattern[p] == '^' {
		negate = true
		p++
	}
	match := false
	for p < len(pattern) {
		switch {
		case pattern[p] == '\\' && p+1 < len(pattern):
			p++
			if pattern[p] == ch {
				match = true
			}
		case pattern[p] == ']':
			return match != negate, p + 1
		case p+2 < len(pattern) && pattern[p+1] == '-':
			lo, hi := pattern[p], pattern[p+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if lo <= ch && ch <= hi {
				match = true
			}
			p += 2
		default:
			if pattern[p] == ch {
				match = true
			}
		}
		p++
	}
	// Unterminated: the set runs to the end of the pattern.
	return match != negate, len(pattern)
}
