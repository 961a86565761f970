package resp

import "bytes"

// multiState is a connection's MULTI and WATCH state.
type multiState struct {
	queued [][][]byte // the commands since MULTI, copied
	failed bool       // a command was refused while queueing: EXEC aborts
	watch  []watched
	// dirty: the client read a watched key with another value than WATCH
	// saw, so EXEC aborts.
	dirty bool
}

// watched is a key WATCH saw: its stored value then (or that it was
// absent), which EXEC compares with what is there at its commit.
//
// WATCH tags the value of a live key (value.go) unless it carries a tag
// already, and every write stores a value without one: the bytes WATCH
// saw are still there at EXEC only if no one wrote the key in between,
// on any node, even back to the same string, as Redis has it. A key
// absent at WATCH has no value to tag: one created and deleted again in
// between, which the client did not read, does not abort (see sawWatched
// for one it did read). So does a value too big for the tag's 8 bytes
// more, which is compared by its bytes.
type watched struct {
	key   []byte
	raw   []byte
	found bool
}

const (
	msgExecAbort   = "EXECABORT Transaction discarded because of previous errors."
	msgNestedMulti = "ERR MULTI calls can not be nested"
)

// multiFailed records, inside MULTI, a command refused while queueing.
func (c *client) multiFailed() {
	if c.multi {
		c.tx.failed = true
	}
}

func (c *client) queue(args [][]byte) {
	cp := make([][]byte, len(args))
	for i, a := range args {
		cp[i] = bytes.Clone(a)
		if cp[i] == nil {
			cp[i] = []byte{}
		}
	}
	c.tx.queued = append(c.tx.queued, cp)
	c.status("QUEUED")
}

func (c *client) cmdMulti(args [][]byte) {
	if c.multi {
		c.error(msgNestedMulti)
		return
	}
	c.multi = true
	c.tx.queued, c.tx.failed = nil, false
	c.ok()
}

func (c *client) cmdDiscard(args [][]byte) {
	if !c.multi {
		c.error("ERR DISCARD without MULTI")
		return
	}
	c.endMulti()
	c.ok()
}

func (c *client) endMulti() {
	c.multi = false
	c.tx.queued, c.tx.failed = nil, false
	c.tx.watch, c.tx.dirty = nil, false
}

func (c *client) cmdWatch(args [][]byte) {
	if c.multi {
		c.error("ERR WATCH inside MULTI is not allowed")
		return
	}
	if !c.checkKeys(args[1:]) {
		return
	}
	now := c.s.nowMs()
	for _, k := range args[1:] {
		w, err := c.watchKey(k, now)
		if err != nil {
			c.engineError(err)
			return
		}
		c.tx.watch = append(c.tx.watch, w)
	}
	c.ok()
}

// watchKey tags key's value if it is live and has no tag yet, in one
// Modify, and returns what EXEC must find there. A tag already there is
// kept: every client watching the key then holds the same bytes, and the
// first write replaces them for all of them (a tag is only ever added to
// an untagged value, which no current watcher holds).
func (c *client) watchKey(key []byte, now int64) (watched, error) {
	w := watched{key: bytes.Clone(key)}
	err := c.eng.Modify(key, func(old []byte, found bool) ([]byte, bool, bool) {
		payload, exp, ok := live(old, found, now)
		switch {
		case !ok:
			w.raw, w.found = nil, false
			return nil, false, false
		case hasTag(old) || !c.fits(key, hdrLenTagged+len(payload)):
			w.raw, w.found = append(w.raw[:0], old...), true
			return nil, false, false
		}
		w.raw, w.found = appendTagged(w.raw[:0], payload, exp, newWatchTag()), true
		return w.raw, true, true
	})
	return w, err
}

func (c *client) cmdUnwatch(args [][]byte) {
	c.tx.watch, c.tx.dirty = nil, false
	c.ok()
}

// sawWatched notes a read of key by this client after WATCH: a value
// other than the one WATCH saw means the key changed in between, and EXEC
// must abort even if the key is back to that value by then (a client that
// read the intermediate value decided on it).
func (c *client) sawWatched(key, raw []byte, found bool) {
	if found {
		if _, exp := decodeValue(raw); expired(exp, c.s.nowMs()) {
			raw, found = nil, false
		}
	}
	for _, w := range c.tx.watch {
		if bytes.Equal(w.key, key) && (w.found != found || !bytes.Equal(w.raw, raw)) {
			c.tx.dirty = true
		}
	}
}

// cmdExec runs the queued commands in one transaction of the engine: no
// other client's command comes between them, on this node or another. A
// watched key written since WATCH aborts it (a null reply): its stored
// bytes, tag included, are no longer those WATCH left.
func (c *client) cmdExec(args [][]byte) {
	if !c.multi {
		c.error("ERR EXEC without MULTI")
		return
	}
	queued, failed, watch, dirty := c.tx.queued, c.tx.failed, c.tx.watch, c.tx.dirty
	c.endMulti()
	if failed {
		c.error(msgExecAbort)
		return
	}
	if dirty {
		c.out = append(c.out, "*-1\r\n"...)
		return
	}
	mark, errs := len(c.out), c.nErrs
	aborted := false
	err := c.atomic(false, func() error {
		c.out, c.nErrs, aborted = c.out[:mark], errs, false
		now := c.s.nowMs()
		for _, w := range watch {
			raw, found, err := c.kv.get(w.key, nil)
			if err != nil {
				return err
			}
			if _, _, ok := live(raw, found, now); !ok {
				raw, found = nil, false
			}
			if found != w.found || !bytes.Equal(raw, w.raw) {
				aborted = true
				return nil
			}
		}
		c.array(len(queued))
		for _, q := range queued {
			c.exec(q)
		}
		return nil
	})
	if err != nil {
		c.out, c.nErrs = c.out[:mark], errs
		c.replyErr(err)
		return
	}
	if aborted {
		c.out = c.out[:mark]
		c.out = append(c.out, "*-1\r\n"...)
	}
}
