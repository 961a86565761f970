package cell

import (
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/index/nam"
	"github.com/scalestore-go/scalestore/transport"
)

// Layout is what every client knows: the servers' regions and the root
// meganode's root node.
type Layout struct {
	Regions []transport.Region
	Slots   uint64 // node slots per server, the header's included
	Root    nam.Ptr
	// CacheLevel: a client caches the nodes of leaf meganodes at this
	// level and above (0: none, as the paper's Fig. 4; leaves are never
	// cached). The static root meganode is always cached.
	CacheLevel int
	// ScanBatch is the most entries a server-side scan call asks for
	// (default, and at most, what one reply holds).
	ScanBatch int
}

// Search is how a client searches a leaf meganode.
type Search uint8

const (
	// Selector chooses per request (the paper's locality selector).
	Selector Search = iota
	// ServerSide: one call to the meganode's server.
	ServerSide
	// ClientSide: one READ per level of the meganode.
	ClientSide
)

// ParseSearch reads a Search's name.
func ParseSearch(s string) (Search, error) {
	switch s {
	case "selector", "auto", "":
		return Selector, nil
	case "server":
		return ServerSide, nil
	case "client":
		return ClientSide, nil
	}
	return 0, fmt.Errorf("cell: search %q: want selector, server or client", s)
}

func (s Search) String() string {
	return [...]string{"selector", "server", "client"}[s]
}

// Mutations are the deliberate bugs of the client.
type Mutations struct {
	// NoMoveRight trusts a node, reached through a cached parent, for a
	// key beyond its high key.
	NoMoveRight func() bool
	// CacheLeaves caches leaves too, and answers gets from the cache.
	CacheLeaves func() bool
	// NoLowCheck trusts a node whose keys start above the key searched
	// for (a slot a meganode split freed and a later split reused).
	NoLowCheck func() bool
}

// Stats count a client's remote work and choices.
type Stats struct {
	Reads, Calls, Retries, CacheHits uint64
	// Restarts counts operations started again from the top: a node a
	// meganode split left behind was read, or a write waited for a split.
	Restarts uint64
	// ServerSearches and ClientSearches count the searches of leaf
	// meganodes by method.
	ServerSearches, ClientSearches uint64
}

// maxCached bounds a client's node cache; when full it starts over.
const maxCached = 1 << 16

// Client runs the operations of one client thread.
type Client struct {
	L      *Layout
	F      nam.Fabric
	Search Search
	// Now is the clock of the selector's latency samples (ns); Rand its
	// exploration's randomness. The selector needs both.
	Now  func() int64
	Rand func() uint64
	// NoOutlierRejection and NoHistoryExpiry turn off the selector's
	// defenses against transient conditions (selector.go): an ablation,
	// for the figure that shows what they are for.
	NoOutlierRejection, NoHistoryExpiry bool
	Mut                                 Mutations
	// Stats are the client's counters.
	Stats Stats

	cache    map[nam.Ptr]*nam.Node
	megaLeaf nam.Ptr   // the root meganode's leaf the last search went through
	path     []nam.Ptr // the cached nodes the current walk used
	buf      []byte
	node     nam.Node
	req      []byte
	rep      []byte
	r        reply
	est      []estimate
}

var errRetries = errors.New("cell: node stayed locked or torn through every retry")

// errRestart: the operation starts again from the top (a node a meganode
// split left behind, or a write that waits for a split). Never returned
// to the caller.
var errRestart = errors.New("cell: restart")

const maxRetries = 100_000

func (c *Client) region(p nam.Ptr) (transport.Region, error) {
	if !p.Valid() || p.Server() >= len(c.L.Regions) || p.Slot() == 0 || p.Slot() >= c.L.Slots {
		return transport.Region{}, fmt.Errorf("cell: remote pointer %v out of range", p)
	}
	return c.L.Regions[p.Server()], nil
}

// read fetches the node at p into n, retrying while it is locked or torn.
func (c *Client) read(p nam.Ptr, n *nam.Node) error {
	r, err := c.region(p)
	if err != nil {
		return err
	}
	if len(c.buf) != nam.NodeSize {
		c.buf = make([]byte, nam.NodeSize)
	}
	for range maxRetries {
		c.Stats.Reads++
		if err := c.F.Read(c.buf, r, p.Slot()*nam.NodeSize); err != nil {
			return err
		}
		err := nam.Decode(c.buf, n)
		if err == nil && !n.Locked() {
			if n.Invalid {
				return errRestart
			}
			return nil
		}
		if err != nil && !nam.IsTorn(err) {
			return fmt.Errorf("cell: node %v: %w", p, err)
		}
		c.Stats.Retries++
	}
	return errRetries
}

// walk descends by READs from p to the leaf level for key (in c.node),
// from the cache where it holds a node; it caches every node it reads
// with all, else those of level cacheFrom and above (0: none; leaves only
// under the CacheLeaves mutant). Following a right link drops the cached
// parent that sent it there (from, for p itself). A node that is invalid,
// or whose keys start above key, was reached by a pointer a meganode
// split made stale: the walk drops the cached nodes it used and returns
// errRestart.
func (c *Client) walk(key uint64, p nam.Ptr, all bool, cacheFrom int, from nam.Ptr) (nam.Ptr, error) {
	if c.cache == nil {
		c.cache = map[nam.Ptr]*nam.Node{}
	}
	parent := from
	_, parentCached := c.cache[from]
	// want is the level the next node must have: one below its parent's
	// when descending, at least the current one when moving right (to a
	// meganode's root, perhaps). A node off it came by a stale pointer,
	// and a walk that trusted it could go round in circles.
	want, exact := -1, false
	c.path = c.path[:0]
	leaves := fire(c.Mut.CacheLeaves)
	for steps := uint64(0); ; steps++ {
		if steps > c.L.Slots*uint64(len(c.L.Regions)) {
			return 0, fmt.Errorf("cell: search for key %d does not end", key)
		}
		n, cached := c.cache[p]

		if cached {
			c.Stats.CacheHits++
			copyNode(&c.node, n)
			c.path = append(c.path, p)
		} else {
			if err := c.read(p, &c.node); err != nil {
				if err == errRestart {
					c.dropPath()
				}
				return 0, err
			}
			if all || cacheFrom > 0 && int(c.node.Level) >= cacheFrom || leaves {
				if len(c.cache) >= maxCached {
					clear(c.cache)
				}
				cp := &nam.Node{}
				copyNode(cp, &c.node)
				c.cache[p] = cp
				c.path = append(c.path, p)
			}
		}
		if key < c.node.Low && !fire(c.Mut.NoLowCheck) ||
			want >= 0 && (int(c.node.Level) < want || exact && int(c.node.Level) != want) {
			c.dropPath()
			return 0, errRestart
		}
		if !c.node.Covers(key) && !(parentCached && fire(c.Mut.NoMoveRight)) {
			if parentCached {
				delete(c.cache, parent)
			}
			if cached {
				delete(c.cache, p)
			}
			if !c.node.Sibling.Valid() {
				return 0, fmt.Errorf("cell: key %d beyond node %v, which has no right neighbour", key, p)
			}
			p, parentCached = c.node.Sibling, false
			want, exact = int(c.node.Level), false
			continue
		}
		if c.node.Level == 0 {
			return p, nil
		}
		parent, parentCached = p, cached
		want, exact = int(c.node.Level)-1, true
		p = c.node.Child(key)
	}
}

// dropPath forgets the cached nodes the current walk went through.
func (c *Client) dropPath() {
	for _, p := range c.path {
		delete(c.cache, p)
	}
	c.path = c.path[:0]
}

func copyNode(dst, src *nam.Node) {
	keys, vals := append(dst.Keys[:0], src.Keys...), append(dst.Vals[:0], src.Vals...)
	*dst = *src
	dst.Keys, dst.Vals = keys, vals
}

// meganode is the root of the leaf meganode that holds key, from the
// cached root meganode.
func (c *Client) meganode(key uint64) (nam.Ptr, error) {
	leaf, err := c.walk(key, c.L.Root, true, 0, 0)
	if err != nil {
		return 0, err
	}
	c.megaLeaf = leaf
	return c.node.Child(key), nil
}

func (c *Client) call(server int, r request) error {
	c.req = r.encode(c.req)
	c.Stats.Calls++
	var err error
	if c.rep, err = c.F.Call(server, c.req, c.rep[:0]); err != nil {
		return err
	}
	if err := decodeReply(c.rep, &c.r); err != nil {
		return err
	}
	switch c.r.status {
	case StatusOK, StatusMoved:
		return nil
	case StatusRetry:
		return errRestart
	case StatusFull:
		return fmt.Errorf("cell: %v of key %d: %w", r.op, r.key, errFull)
	}
	return fmt.Errorf("cell: server %d refused %v of key %d (status %d)", server, r.op, r.key, c.r.status)
}

// callAt sends r, with the pointer p as its argument arg ('a', 'b' or
// 'c'), to the server of p, following StatusMoved to other servers.
func (c *Client) callAt(p nam.Ptr, r request, arg byte) error {
	for range maxRetries {
		if _, err := c.region(p); err != nil {
			return err
		}
		switch arg {
		case 'a':
			r.a = uint64(p)
		case 'b':
			r.b = uint64(p)
		default:
			r.c = uint64(p)
		}
		if err := c.call(p.Server(), r); err != nil {
			return err
		}
		if c.r.status == StatusOK {
			return nil
		}
		p = nam.Ptr(c.r.next)
	}
	return errRetries
}

// retry runs op again while it asks to start from the top.
func (c *Client) retry(op func() error) error {
	for range maxRetries {
		err := op()
		if err != errRestart {
			return err
		}
		c.Stats.Restarts++
	}
	return errRetries
}

// find searches the leaf meganode of key by the chosen method; it returns
// the leaf and whether key is there with its value. It may return
// errRestart.
func (c *Client) find(key uint64) (leaf nam.Ptr, val uint64, found bool, err error) {
	root, err := c.meganode(key)
	if err != nil {
		return 0, 0, false, err
	}
	server := root.Server()
	if server >= len(c.L.Regions) {
		return 0, 0, false, fmt.Errorf("cell: meganode root %v out of range", root)
	}
	if c.choose(server) == ServerSide {
		c.Stats.ServerSearches++
		start := c.now()
		if err := c.callAt(root, request{op: opSearch, key: key}, 'a'); err != nil {
			return 0, 0, false, err
		}
		if c.r.stale {
			delete(c.cache, c.megaLeaf)
		}
		c.sample(server, ServerSide, c.now()-start, 0)
		return nam.Ptr(c.r.leaf), c.r.value, c.r.found, nil
	}
	c.Stats.ClientSearches++
	start, reads := c.now(), c.Stats.Reads
	leaf, err = c.walk(key, root, false, c.L.CacheLevel, c.megaLeaf)
	if err != nil {
		return 0, 0, false, err
	}
	c.sample(server, ClientSide, c.now()-start, c.Stats.Reads-reads)
	i, ok := c.node.Find(key)
	if ok {
		val = c.node.Vals[i]
	}
	return leaf, val, ok, nil
}

func (c *Client) now() int64 {
	if c.Now == nil {
		return 0
	}
	return c.Now()
}

// Get returns key's value.
func (c *Client) Get(key uint64) (v uint64, ok bool, err error) {
	err = c.retry(func() (err error) {
		_, v, ok, err = c.find(key)
		return err
	})
	return v, ok, err
}

// Put sets key to val: a search for its leaf, then a call to the leaf's
// server, which does the write.
func (c *Client) Put(key, val uint64) error {
	return c.retry(func() error {
		leaf, _, _, err := c.find(key)
		if err != nil {
			return err
		}
		return c.callAt(leaf, request{op: opPut, key: key, a: val}, 'b')
	})
}

// Delete removes key and reports whether it was there (leaves are not
// merged).
func (c *Client) Delete(key uint64) (found bool, err error) {
	err = c.retry(func() error {
		leaf, _, _, err := c.find(key)
		if err != nil {
			return err
		}
		if err := c.callAt(leaf, request{op: opDelete, key: key}, 'b'); err != nil {
			return err
		}
		found = c.r.found
		return nil
	})
	return found, err
}

// Scan calls fn for the keys in [from, to) in order until it returns
// false. It is not a snapshot: each leaf is read as of its own READ, or
// each server's part as of its call. A node a meganode split left behind
// makes it search again from the first key it has not yet given.
func (c *Client) Scan(from, to uint64, fn func(k, v uint64) bool) error {
	if from >= to {
		return nil
	}
	done := false
	return c.retry(func() error {
		if done {
			return nil
		}
		var err error
		done, from, err = c.scan(from, to, fn)
		return err
	})
}

// scan is one attempt of Scan; it returns whether the scan is over, and
// the key to start again from.
func (c *Client) scan(from, to uint64, fn func(k, v uint64) bool) (bool, uint64, error) {
	// The scan goes on the way its first search went.
	before := c.Stats.ServerSearches
	leaf, _, _, err := c.find(from)
	if err != nil {
		return false, from, err
	}
	if c.Stats.ServerSearches > before {
		batch := uint64(maxScanEntries)
		if c.L.ScanBatch > 0 && c.L.ScanBatch < maxScanEntries {
			batch = uint64(c.L.ScanBatch)
		}
		for {
			if err := c.callAt(leaf, request{op: opScan, key: from, a: to, b: batch}, 'c'); err != nil {
				return false, from, err
			}
			for i, k := range c.r.keys {
				if !fn(k, c.r.vals[i]) {
					return true, from, nil
				}
			}
			if !c.r.found {
				return true, from, nil
			}
			from, leaf = c.r.value, nam.Ptr(c.r.next)
		}
	}
	for {
		for i, k := range c.node.Keys {
			if k >= from && k < to && !fn(k, c.node.Vals[i]) {
				return true, from, nil
			}
		}
		if !c.node.HasHigh || c.node.High >= to {
			return true, from, nil
		}
		from = c.node.High
		if err := c.read(c.node.Sibling, &c.node); err != nil {
			return false, from, err
		}
		if !c.node.Covers(from) || from < c.node.Low && !fire(c.Mut.NoLowCheck) || c.node.Level != 0 {
			return false, from, errRestart
		}
	}
}

// NodeSize is the size of a small node (the NAM-tree's format).
const NodeSize = nam.NodeSize
