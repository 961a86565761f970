package gam

import (
	"fmt"
	"slices"
	"strings"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// A cached line's states: the stable ones and those of a request out.
const (
	lineInvalid   uint8 = iota
	lineShared          // read-only copy
	lineDirty           // the only copy, writable
	lineToShared        // ReadShared out, no copy yet
	lineToDirty         // ReadExclusive out, no copy
	lineUpgrading       // ReadExclusive out, still reading the shared copy
	lineEvicting        // Evict out: no access until EvictAck
)

var lineNames = []string{"I", "S", "D", "I->S", "I->D", "S->D", "D->I"}

// line is a node's cached copy of a key it does not home.
type line struct {
	state   uint8
	value   uint64
	waiting []req // accesses that wait for the line, in arrival order
}

func (l *line) readable() bool {
	return l.state == lineShared || l.state == lineDirty || l.state == lineUpgrading
}
func (l *line) writable() bool { return l.state == lineDirty }

// stable reports whether no request of the line is out.
func (l *line) stable() bool { return l.state <= lineDirty }

// cache is a node's cache of the keys other nodes home, bounded to cap
// lines: a line not invalid holds a frame, in transit too.
type cache struct {
	n        *node
	lines    []line // by key; the keys this node homes stay invalid
	used     int
	cap      int
	evicting int      // lines evicting: a frame is coming free
	blocked  []uint64 // keys whose next access waits for a free frame, in order
}

// access queues r on its key's line and serves what the line allows.
func (c *cache) access(r req) {
	l := &c.lines[r.op.Key]
	l.waiting = append(l.waiting, r)
	c.progress(r.op.Key)
}

// progress serves a line's accesses in order while its state allows,
// then asks the home for what the next one needs.
func (c *cache) progress(key uint64) {
	l := &c.lines[key]
	for len(l.waiting) > 0 {
		r := l.waiting[0]
		switch {
		case r.op.Kind == protocolapi.OpRead && l.readable():
			l.waiting = l.waiting[1:]
			c.n.finish(r, l.value)
		case r.op.Kind != protocolapi.OpRead && l.writable():
			l.waiting = l.waiting[1:]
			old := l.value
			l.value = r.op.Value
			c.n.cl.wrote(key, l.value)
			c.n.finish(r, old)
		default:
			c.request(key, l, r.op.Kind == protocolapi.OpRead)
			return
		}
	}
}

// request asks the home for the line, unless a request is out already
// or no frame is free (then the key waits for one).
func (c *cache) request(key uint64, l *line, read bool) {
	home := c.n.homeOf(key)
	switch l.state {
	case lineInvalid:
		if c.used >= c.cap && (c.evicting > 0 || !c.evict()) {
			if !slices.Contains(c.blocked, key) {
				c.blocked = append(c.blocked, key)
			}
			return
		}
		c.used++
		if read {
			l.state = lineToShared
			c.n.send(home, Msg{T: ReadShared, Key: key})
		} else {
			l.state = lineToDirty
			c.n.send(home, Msg{T: ReadExclusive, Key: key})
		}
	case lineShared:
		l.state = lineUpgrading
		c.n.send(home, Msg{T: ReadExclusive, Key: key})
	}
}

// evict frees a frame: a random stable line that no access waits for. A
// shared copy goes silently (the home's sharers are a superset); a dirty
// one goes home with Evict and keeps its frame until EvictAck. It reports
// whether a frame is free now.
func (c *cache) evict() bool {
	var victims []uint64
	for k := range c.lines {
		if l := &c.lines[k]; (l.state == lineShared || l.state == lineDirty) && len(l.waiting) == 0 {
			victims = append(victims, uint64(k))
		}
	}
	if len(victims) == 0 {
		return false
	}
	k := victims[c.n.env.Rand()%uint64(len(victims))]
	l := &c.lines[k]
	if l.state == lineShared {
		l.state = lineInvalid
		c.used--
		return true
	}
	l.state = lineEvicting
	c.evicting++
	c.n.count.evictions++
	c.n.send(c.n.homeOf(k), Msg{T: Evict, Key: k, Value: l.value})
	return false
}

// retry lets the keys that wait for a frame try again, in order, when
// one may be free or a line may have become one to evict (its request
// answered, its accesses served); those that still find none wait again.
func (c *cache) retry() {
	keys := c.blocked
	c.blocked = nil
	for _, k := range keys {
		c.progress(k)
	}
}

// drop invalidates a line that held a frame and serves what waits.
func (c *cache) drop(key uint64, l *line) {
	if l.state == lineEvicting {
		c.evicting--
	}
	l.state = lineInvalid
	c.used--
	c.progress(key)
	c.retry()
}

// receive handles a message from key's home.
func (c *cache) receive(from protocol.NodeID, m Msg) error {
	l := &c.lines[m.Key]
	switch m.T {
	case Grant:
		switch {
		case m.Shared && l.state == lineToShared:
			l.state = lineShared
		case !m.Shared && (l.state == lineToDirty || l.state == lineUpgrading):
			l.state = lineDirty
		default:
			return fmt.Errorf("gam: cache of node %d: %v in state %s", c.n.id, m, lineNames[l.state])
		}
		l.value = m.Value
		c.progress(m.Key)
		c.retry()
		return nil
	case Invalidate:
		c.n.send(from, Msg{T: InvalidateAck, Key: m.Key})
		switch l.state {
		case lineShared:
			c.drop(m.Key, l)
		case lineUpgrading:
			l.state = lineToDirty // the ReadExclusive is out; its grant brings the value
		}
		// I, I->S, I->D, D->I: the copy the home knew of is gone already.
		return nil
	case FetchShared, FetchInvalidate:
		if l.state != lineDirty && l.state != lineEvicting {
			return fmt.Errorf("gam: cache of node %d: %v in state %s", c.n.id, m, lineNames[l.state])
		}
		c.n.send(from, Msg{T: WriteBack, Key: m.Key, Value: l.value})
		switch {
		case l.state == lineEvicting:
			// Its EvictAck is coming.
		case m.T == FetchShared:
			l.state = lineShared
		default:
			c.drop(m.Key, l)
		}
		return nil
	case EvictAck:
		if l.state != lineEvicting {
			return fmt.Errorf("gam: cache of node %d: %v in state %s", c.n.id, m, lineNames[l.state])
		}
		c.drop(m.Key, l)
		return nil
	}
	return fmt.Errorf("gam: cache of node %d: %v is not for a cache", c.n.id, m)
}

// describe lists the lines in transit, the accesses waiting and the keys
// waiting for a frame.
func (c *cache) describe() string {
	var b strings.Builder
	for k := range c.lines {
		if l := &c.lines[k]; !l.stable() || len(l.waiting) > 0 {
			fmt.Fprintf(&b, " key %d %s (%d waiting)", k, lineNames[l.state], len(l.waiting))
		}
	}
	if len(c.blocked) > 0 {
		fmt.Fprintf(&b, " waiting for a frame: %v", c.blocked)
	}
	return b.String()
}
