package resp

import (
	"bytes"
	"math/rand/v2"
)

// delLive deletes key and reports whether it held a live (unexpired)
// value.
func (c *client) delLive(key []byte, now int64) (bool, error) {
	var ok bool
	err := c.kv.modify(key, func(raw []byte, found bool) ([]byte, bool, bool) {
		_, _, ok = live(raw, found, now)
		return nil, false, found
	})
	return ok, err
}

// cmdDel is DEL and UNLINK: atomic across the keys.
func (c *client) cmdDel(args [][]byte) {
	now := c.s.nowMs()
	c.countKeys(args[1:], false, func(k []byte) (bool, error) { return c.delLive(k, now) })
}

// countKeys answers how many of keys has holds for, checked atomically
// across them (readOnly: nothing is written).
func (c *client) countKeys(keys [][]byte, readOnly bool, has func(key []byte) (bool, error)) {
	if !c.checkKeys(keys) {
		return
	}
	var n int64
	err := c.atomicIf(len(keys) > 1, readOnly, func() error {
		n = 0
		for _, k := range keys {
			ok, err := has(k)
			if err != nil {
				return err
			}
			if ok {
				n++
			}
		}
		return nil
	})
	if err != nil {
		c.replyErr(err)
		return
	}
	c.int(n)
}

// atomicIf is atomic when on, else fn as it is (a command on one key is
// atomic already).
func (c *client) atomicIf(on, readOnly bool, fn func() error) error {
	if !on {
		return fn()
	}
	return c.atomic(readOnly, fn)
}

// checkKeys checks every key against MaxKey.
func (c *client) checkKeys(keys [][]byte) bool {
	for _, k := range keys {
		if !c.checkKey(k) {
			return false
		}
	}
	return true
}

// cmdExists is EXISTS (and TOUCH): a key named twice counts twice, as in
// Redis; atomic across the keys.
func (c *client) cmdExists(args [][]byte) {
	c.countKeys(args[1:], true, func(k []byte) (bool, error) {
		_, _, ok, err := c.lookup(k)
		return ok, err
	})
}

// cmdMGet reads every key at one instant.
func (c *client) cmdMGet(args [][]byte) {
	keys := args[1:]
	if !c.checkKeys(keys) {
		return
	}
	n := len(keys)
	if cap(c.vals) < n {
		c.vals = append(c.vals[:cap(c.vals)], make([][]byte, n-cap(c.vals))...)
	}
	if cap(c.found) < n {
		c.found = make([]bool, n)
	}
	vals, found := c.vals[:n], c.found[:n]
	var err error
	if n == 1 {
		err = c.mgetInto(keys, vals, found) // one key: no transaction (and no allocation)
	} else {
		err = c.atomic(true, func() error { return c.mgetInto(keys, vals, found) })
	}
	if err != nil {
		c.replyErr(err)
	} else {
		c.array(n)
		for i := range n {
			if found[i] {
				c.bulk(vals[i])
			} else {
				c.null()
			}
		}
	}
	if n > keepArgs {
		c.vals, c.found = nil, nil
	}
}

func (c *client) mgetInto(keys, vals [][]byte, found []bool) error {
	for i, k := range keys {
		v, _, ok, err := c.lookup(k)
		if err != nil {
			return err
		}
		vals[i], found[i] = append(vals[i][:0], v...), ok
	}
	return nil
}

func (c *client) msetArgs(args [][]byte, name string) bool {
	if len(args)%2 == 0 {
		c.multiFailed()
		c.arity(name)
		return false
	}
	for i := 1; i < len(args); i += 2 {
		if !c.checkStored(args[i], args[i+1], 0) {
			return false
		}
	}
	return true
}

// putPlain sets key to val with no expiry.
func (c *client) putPlain(key, val []byte) error {
	if hasMagic(val) {
		return c.kv.put(key, appendValue(nil, val, 0))
	}
	return c.kv.put(key, val)
}

// cmdMSet sets every key at one instant: no reader sees some of them
// set and not the others.
func (c *client) cmdMSet(args [][]byte) {
	if !c.msetArgs(args, "mset") {
		return
	}
	err := c.atomicIf(len(args) > 3, false, func() error {
		for i := 1; i < len(args); i += 2 {
			if err := c.putPlain(args[i], args[i+1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		c.replyErr(err)
		return
	}
	c.ok()
}

// cmdMSetNX sets every key if none of them exists, atomically.
func (c *client) cmdMSetNX(args [][]byte) {
	if !c.msetArgs(args, "msetnx") {
		return
	}
	var set bool
	err := c.atomic(false, func() error {
		set = false
		for i := 1; i < len(args); i += 2 {
			_, _, ok, err := c.lookup(args[i])
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
		}
		for i := 1; i < len(args); i += 2 {
			if err := c.putPlain(args[i], args[i+1]); err != nil {
				return err
			}
		}
		set = true
		return nil
	})
	switch {
	case err != nil:
		c.replyErr(err)
	case set:
		c.int(1)
	default:
		c.int(0)
	}
}

// scanLive calls fn for every unexpired key in [from, to) until fn
// returns false.
func (c *client) scanLive(from, to []byte, fn func(key, payload []byte) bool) error {
	now := c.s.nowMs()
	return c.eng.Scan(from, to, func(key, val []byte) bool {
		p, exp := decodeValue(val)
		if expired(exp, now) {
			return true
		}
		return fn(key, p)
	})
}

func (c *client) cmdKeys(args [][]byte) {
	pattern := args[1]
	if len(pattern) == 1 && pattern[0] == '*' {
		pattern = nil
	}
	prefix := literalPrefix(pattern)
	c.keys, c.ends = c.keys[:0], c.ends[:0]
	err := c.scanLive(prefix, prefixEnd(prefix), func(key, _ []byte) bool {
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
	c.array(len(c.ends))
	start := 0
	for _, end := range c.ends {
		c.bulk(c.keys[start:end])
		start = end
	}
	if cap(c.keys) > keepBufBytes || cap(c.ends) > keepArgs {
		c.keys, c.ends = nil, nil
	}
}

func (c *client) cmdDBSize(args [][]byte) {
	var n int64
	if err := c.scanLive(nil, nil, func(_, _ []byte) bool { n++; return true }); err != nil {
		c.engineError(err)
		return
	}
	c.int(n)
}

// cmdType: every value is a string.
func (c *client) cmdType(args [][]byte) {
	if !c.checkKey(args[1]) {
		return
	}
	_, _, ok, err := c.lookup(args[1])
	switch {
	case err != nil:
		c.engineError(err)
	case ok:
		c.status("string")
	default:
		c.status("none")
	}
}

// move copies src's stored value (its expiry with it) to dst, and deletes
// src unless keep; ok false: src does not exist, or dst does and !replace.
func (c *client) move(src, dst []byte, keep, replace bool) (ok bool, err error) {
	now := c.s.nowMs()
	raw, found, err := c.kv.get(src, nil)
	if err != nil {
		return false, err
	}
	if _, _, live := live(raw, found, now); !live {
		return false, cmdError(msgNoSuchKey)
	}
	if bytes.Equal(src, dst) {
		return true, nil
	}
	if !replace {
		draw, dfound, err := c.kv.get(dst, nil)
		if err != nil {
			return false, err
		}
		if _, _, dlive := live(draw, dfound, now); dlive {
			return false, nil
		}
	}
	if hasTag(raw) {
		// A copy is a new write of dst: without src's watch tag, or a
		// RENAME there and back would put back the very bytes a WATCH
		// of src saw.
		p, exp := decodeValue(raw)
		raw = appendValue(nil, p, exp)
	}
	if err := c.kv.put(dst, raw); err != nil {
		return false, err
	}
	if !keep {
		if _, err := c.kv.del(src); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (c *client) cmdRename(args [][]byte) {
	if !c.checkKeys(args[1:3]) {
		return
	}
	err := c.atomic(false, func() error {
		_, err := c.move(args[1], args[2], false, true)
		return err
	})
	if err != nil {
		c.replyErr(err)
		return
	}
	c.ok()
}

func (c *client) cmdRenameNX(args [][]byte) {
	if !c.checkKeys(args[1:3]) {
		return
	}
	var ok bool
	err := c.atomic(false, func() error {
		var err error
		ok, err = c.move(args[1], args[2], false, false)
		if ok && bytes.Equal(args[1], args[2]) {
			ok = false // Redis: RENAMENX of a key onto itself renames nothing
		}
		return err
	})
	switch {
	case err != nil:
		c.replyErr(err)
	case ok:
		c.int(1)
	default:
		c.int(0)
	}
}

// cmdCopy: COPY source destination [DB 0] [REPLACE].
func (c *client) cmdCopy(args [][]byte) {
	replace := false
	for i := 3; i < len(args); i++ {
		switch string(c.lowerName(args[i])) {
		case "replace":
			replace = true
		case "db":
			if i+1 == len(args) {
				c.syntaxError()
				return
			}
			i++
			db, ok := parseInt(args[i])
			if !ok {
				c.error(msgNotInt)
				return
			}
			if db != 0 {
				c.error("ERR DB index is out of range")
				return
			}
		default:
			c.syntaxError()
			return
		}
	}
	if !c.checkKeys(args[1:3]) {
		return
	}
	if bytes.Equal(args[1], args[2]) {
		c.error(msgSameObject)
		return
	}
	var ok bool
	err := c.atomic(false, func() error {
		var err error
		ok, err = c.move(args[1], args[2], true, replace)
		if err == cmdError(msgNoSuchKey) {
			ok, err = false, nil
		}
		return err
	})
	switch {
	case err != nil:
		c.replyErr(err)
	case ok:
		c.int(1)
	default:
		c.int(0)
	}
}

// flushBatch is how many keys FLUSHALL collects before it deletes them.
const flushBatch = 512

// cmdFlush is FLUSHDB and FLUSHALL [ASYNC|SYNC]: one walk over the
// keyspace that deletes every key it finds. The keyspace is the
// cluster's, so this empties every node's view of it. Keys written while
// it runs, behind its walk, stay.
func (c *client) cmdFlush(args [][]byte) {
	if len(args) > 2 {
		c.syntaxError()
		return
	}
	if len(args) == 2 {
		switch string(c.lowerName(args[1])) {
		case "async", "sync":
		default:
			c.syntaxError()
			return
		}
	}
	var from []byte
	for {
		c.keys, c.ends = c.keys[:0], c.ends[:0]
		err := c.eng.Scan(from, nil, func(key, _ []byte) bool {
			c.keys = append(c.keys, key...)
			c.ends = append(c.ends, len(c.keys))
			return len(c.ends) < flushBatch
		})
		if err != nil {
			c.engineError(err)
			return
		}
		if len(c.ends) == 0 {
			break
		}
		start, last := 0, 0
		for _, end := range c.ends {
			if _, err := c.eng.Delete(c.keys[start:end]); err != nil {
				c.engineError(err)
				return
			}
			last, start = start, end
		}
		from = append(append(from[:0], c.keys[last:start]...), 0)
		if len(c.ends) < flushBatch {
			break
		}
	}
	c.keys, c.ends = nil, nil
	c.ok()
}

// randomWindow is how many keys RANDOMKEY draws its answer from.
const randomWindow = 64

// cmdRandomKey draws a key uniformly from the randomWindow live keys that
// follow a random point of the keyspace (wrapping to the start): every key
// when there are no more than that, and a key near a random point
// otherwise.
func (c *client) cmdRandomKey(args [][]byte) {
	var seed [8]byte
	for i := range seed {
		seed[i] = byte(rand.Uint32())
	}
	c.keys, c.ends = c.keys[:0], c.ends[:0]
	collect := func(k, _ []byte) bool {
		c.keys = append(c.keys, k...)
		c.ends = append(c.ends, len(c.keys))
		return len(c.ends) < randomWindow
	}
	err := c.scanLive(seed[:], nil, collect)
	if err == nil && len(c.ends) < randomWindow {
		err = c.scanLive(nil, seed[:], collect)
	}
	switch {
	case err != nil:
		c.engineError(err)
	case len(c.ends) == 0:
		c.null()
	default:
		i := rand.IntN(len(c.ends))
		start := 0
		if i > 0 {
			start = c.ends[i-1]
		}
		c.bulk(c.keys[start:c.ends[i]])
	}
}
