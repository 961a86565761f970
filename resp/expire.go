package resp

import (
	"math"
	"time"
)

// cmdExpire is EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT, with NX, XX, GT
// and LT as in Redis 7.
func (c *client) cmdExpire(args [][]byte) {
	name := string(c.lowerName(args[0]))
	n, ok := parseInt(args[2])
	if !ok {
		c.error(msgNotInt)
		return
	}
	var nx, xx, gt, lt bool
	for _, a := range args[3:] {
		switch string(c.lowerName(a)) {
		case "nx":
			nx = true
		case "xx":
			xx = true
		case "gt":
			gt = true
		case "lt":
			lt = true
		default:
			c.error("ERR Unsupported option " + clip(a, 128))
			return
		}
	}
	if nx && (xx || gt || lt) {
		c.error("ERR NX and XX, GT or LT options at the same time are not compatible")
		return
	}
	if gt && lt {
		c.error("ERR GT and LT options at the same time are not compatible")
		return
	}
	now := c.s.nowMs()
	when := n
	if name == "expire" || name == "expireat" {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			c.error(invalidExpire(name))
			return
		}
		when = n * 1000
	}
	if name == "expire" || name == "pexpire" {
		if when > math.MaxInt64-now {
			c.error(invalidExpire(name))
			return
		}
		when += now
	}
	key := args[1]
	if !c.checkKey(key) {
		return
	}
	var set bool
	var out []byte
	var cerr error
	err := c.kv.modify(key, func(raw []byte, found bool) ([]byte, bool, bool) {
		set, cerr = false, nil
		p, exp, ok := live(raw, found, now)
		if !ok {
			return nil, false, found // gone, or expired: drop it
		}
		switch {
		case nx && exp != 0, xx && exp == 0:
			return nil, true, false
		case gt && (exp == 0 || when <= exp):
			return nil, true, false
		case lt && exp != 0 && when >= exp:
			return nil, true, false
		}
		set = true
		if when <= now {
			return nil, false, true // already expired: deleted now
		}
		if out, cerr = c.encodeFitting(out, key, p, when); cerr != nil {
			set = false
			return nil, true, false
		}
		return out, true, true
	})
	switch {
	case err != nil:
		c.engineError(err)
	case cerr != nil:
		c.replyErr(cerr)
	case set:
		c.int(1)
	default:
		c.int(0)
	}
}

// cmdTTL is TTL, PTTL, EXPIRETIME and PEXPIRETIME: -2 for no key, -1 for
// a key without expiry.
func (c *client) cmdTTL(args [][]byte) {
	if !c.checkKey(args[1]) {
		return
	}
	_, exp, ok, err := c.lookup(args[1])
	switch {
	case err != nil:
		c.engineError(err)
		return
	case !ok:
		c.int(-2)
		return
	case exp == 0:
		c.int(-1)
		return
	}
	switch string(c.lowerName(args[0])) {
	case "ttl":
		c.int((max(exp-c.s.nowMs(), 0) + 500) / 1000)
	case "pttl":
		c.int(max(exp-c.s.nowMs(), 0))
	case "expiretime":
		c.int((exp + 500) / 1000)
	default:
		c.int(exp)
	}
}

func (c *client) cmdPersist(args [][]byte) {
	key := args[1]
	if !c.checkKey(key) {
		return
	}
	now := c.s.nowMs()
	var done bool
	var out []byte
	err := c.kv.modify(key, func(raw []byte, found bool) ([]byte, bool, bool) {
		p, exp, ok := live(raw, found, now)
		done = ok && exp != 0
		if !done {
			return nil, false, found && !ok
		}
		out = appendValue(out[:0], p, 0)
		return out, true, true
	})
	switch {
	case err != nil:
		c.engineError(err)
	case done:
		c.int(1)
	default:
		c.int(0)
	}
}

// The background expirer: every expiryTick it examines the next
// expiryBatch keys of the keyspace (from where it stopped, from the start
// after the end) and deletes those that expired. Every node of a cluster
// runs one; a key already gone is left alone.
const (
	expiryTick  = 100 * time.Millisecond
	expiryBatch = 256
)

type expirer struct {
	stop chan struct{}
	done chan struct{}
	from []byte
	keys [][]byte
}

func (s *Server) startExpirer() {
	s.expiry.stop, s.expiry.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.expiry.done)
		t := time.NewTicker(expiryTick)
		defer t.Stop()
		for {
			select {
			case <-s.expiry.stop:
				return
			case <-t.C:
				if err := s.expireSome(); err != nil {
					s.log.Debug("resp: background expiry", "err", err)
				}
			}
		}
	}()
}

func (s *Server) stopExpirer() {
	if s.expiry.stop == nil {
		return
	}
	close(s.expiry.stop)
	<-s.expiry.done
}

// expireSome is one step of the background expirer; it returns how many
// keys it deleted.
func (s *Server) expireSome() error {
	e := &s.expiry
	now := s.nowMs()
	e.keys = e.keys[:0]
	examined := 0
	var last []byte
	err := s.eng.Scan(e.from, nil, func(key, val []byte) bool {
		examined++
		last = append(last[:0], key...)
		if _, exp := decodeValue(val); expired(exp, now) {
			e.keys = append(e.keys, append([]byte(nil), key...))
		}
		return examined < expiryBatch
	})
	if err != nil {
		return err
	}
	if examined < expiryBatch {
		e.from = nil
	} else {
		e.from = append(last, 0)
	}
	for _, k := range e.keys {
		if err := s.dropExpired(k); err != nil {
			return err
		}
	}
	return nil
}
