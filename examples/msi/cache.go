package msi

import (
	"fmt"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// A cache line's states: the stable I, S and M, and the transient ones
// while a request is out.
const (
	stI  uint8 = iota
	stS        // read-only copy
	stM        // the only copy, writable
	stIS       // GetS sent, no copy yet
	stIM       // GetM sent, no copy
	stSM       // GetM sent, still reading the shared copy
	stMI       // PutM sent: the line goes home; no access until PutAck
)

var stateNames = []string{"I", "S", "M", "IS", "IM", "SM", "MI"}

// line is a node's cache line of one key.
type line struct {
	state   uint8
	value   uint64
	waiting []protocolapi.Op // the workers' accesses that wait for the line, in order
}

// readable and writable say what a line's state allows locally.
func (l *line) readable() bool { return l.state == stS || l.state == stM || l.state == stSM }
func (l *line) writable() bool { return l.state == stM }

// cache is the cache side of a node.
type cache struct {
	n        *node
	lines    []line // by key
	used     int    // lines not in I (a line in transit holds its frame)
	cap      int
	evicting int      // lines in MI: a free line is coming
	blocked  []uint64 // keys waiting for a free line, in order
}

// access takes a worker's access: served now if the line allows it, or
// queued behind the line's earlier accesses until the home answers.
func (c *cache) access(op protocolapi.Op) error {
	if op.Key >= uint64(len(c.lines)) {
		c.n.env.Complete(op, protocolapi.Result{Err: fmt.Errorf("msi: key %d of %d", op.Key, len(c.lines))})
		return nil
	}
	l := &c.lines[op.Key]
	l.waiting = append(l.waiting, op)
	return c.progress(op.Key)
}

// progress serves a line's waiting accesses in order while its state
// allows, then asks the home for what the next one needs.
func (c *cache) progress(key uint64) error {
	l := &c.lines[key]
	for len(l.waiting) > 0 {
		op := l.waiting[0]
		switch {
		case op.Kind == protocolapi.OpRead && l.readable():
			c.n.env.Complete(op, protocolapi.Result{Value: l.value})
		case op.Kind != protocolapi.OpRead && l.writable():
			old := l.value
			l.value = op.Value
			c.n.env.Complete(op, protocolapi.Result{Value: old})
		default:
			return c.request(key, l, op.Kind)
		}
		l.waiting = l.waiting[1:]
	}
	return nil
}

// request asks the home for the line in the mode an access needs, unless a
// request is out already or no line is free.
func (c *cache) request(key uint64, l *line, kind protocolapi.OpKind) error {
	home := c.n.homeOf(key)
	switch l.state {
	case stI:
		if c.used >= c.cap && (c.evicting > 0 || !c.evict()) {
			c.block(key)
			return nil
		}
		c.used++
		if kind == protocolapi.OpRead {
			l.state = stIS
			c.n.env.Send(home, Msg{T: GetS, Key: key})
		} else {
			l.state = stIM
			c.n.env.Send(home, Msg{T: GetM, Key: key})
		}
	case stS:
		l.state = stSM
		c.n.env.Send(home, Msg{T: GetM, Key: key})
	}
	// IS, IM, SM, MI: the answer is on its way; M serves every access.
	return nil
}

func (c *cache) block(key uint64) {
	for _, k := range c.blocked {
		if k == key {
			return
		}
	}
	c.blocked = append(c.blocked, key)
}

// evict frees a line for a new one: a random stable line that no access
// waits for. A shared copy is dropped silently (the home's sharers are a
// superset); a modified one goes home with PutM and holds its frame until
// PutAck. It reports whether a line is free now.
func (c *cache) evict() bool {
	var victims []uint64
	for k := range c.lines {
		l := &c.lines[k]
		if (l.state == stS || l.state == stM) && len(l.waiting) == 0 {
			victims = append(victims, uint64(k))
		}
	}
	if len(victims) == 0 {
		return false
	}
	k := victims[c.n.env.Rand()%uint64(len(victims))]
	l := &c.lines[k]
	if l.state == stS {
		l.state = stI
		c.used--
		return true
	}
	l.state = stMI
	c.evicting++
	c.n.count.evictions++
	c.n.env.Send(c.n.homeOf(k), Msg{T: PutM, Key: k, Value: l.value})
	return false
}

// retry is called when a line may be free, or may have become one to
// evict (its accesses done): the keys blocked for a line try again, in
// order (those that still find none block again).
func (c *cache) retry() error {
	keys := c.blocked
	c.blocked = nil
	for _, k := range keys {
		if err := c.progress(k); err != nil {
			return err
		}
	}
	return nil
}

// receive handles a message to the cache.
func (c *cache) receive(from protocol.NodeID, m Msg) error {
	if m.Key >= uint64(len(c.lines)) {
		return fmt.Errorf("cache: %v for a key beyond %d", m, len(c.lines))
	}
	l := &c.lines[m.Key]
	env := c.n.env
	switch m.T {
	case Data:
		switch {
		case m.Mode == ModeS && l.state == stIS:
			l.state = stS
		case m.Mode == ModeM && (l.state == stIM || l.state == stSM):
			l.state = stM
		default:
			return fmt.Errorf("cache: %v in state %s", m, stateNames[l.state])
		}
		l.value = m.Value
		if err := c.progress(m.Key); err != nil {
			return err
		}
		return c.retry()
	case Inv:
		switch l.state {
		case stS:
			l.state = stI
			c.used--
		case stSM:
			l.state = stIM // the GetM is still out; its grant brings the value
		}
		// I, IS, IM, MI: the copy the home knew of is gone already.
		env.Send(from, Msg{T: InvAck, Key: m.Key})
		if l.state == stI {
			return c.retry()
		}
		return nil
	case Fetch:
		if l.state != stM && l.state != stMI {
			return fmt.Errorf("cache: %v in state %s", m, stateNames[l.state])
		}
		env.Send(from, Msg{T: WriteBack, Key: m.Key, Value: l.value})
		if l.state == stMI {
			return nil // its PutAck is coming
		}
		if m.Keep {
			l.state = stS
			return nil
		}
		l.state = stI
		c.used--
		if err := c.progress(m.Key); err != nil {
			return err
		}
		return c.retry()
	case PutAck:
		if l.state != stMI {
			return fmt.Errorf("cache: %v in state %s", m, stateNames[l.state])
		}
		l.state = stI
		c.used--
		c.evicting--
		if err := c.progress(m.Key); err != nil {
			return err
		}
		return c.retry()
	}
	return fmt.Errorf("cache: %v is not for a cache", m)
}

// describe lists the lines in transit and the accesses waiting.
func (c *cache) describe() string {
	var b strings.Builder
	for k := range c.lines {
		l := &c.lines[k]
		if l.state > stM || len(l.waiting) > 0 {
			fmt.Fprintf(&b, " key %d %s (%d waiting)", k, stateNames[l.state], len(l.waiting))
		}
	}
	if len(c.blocked) > 0 {
		fmt.Fprintf(&b, " blocked for a free line: %v", c.blocked)
	}
	return b.String()
}
