package nam

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/transport"
)

// Fabric is what a compute node's thread needs: the one-sided verbs and
// a blocking remote procedure call. Each call returns when its answer is
// there; the simulator parks the calling coroutine meanwhile.
type Fabric interface {
	Read(dst []byte, r transport.Region, off uint64) error
	Write(r transport.Region, off uint64, src []byte) error
	CompareAndSwap(r transport.Region, off uint64, old, new uint64) (uint64, error)
	FetchAndAdd(r transport.Region, off uint64, delta uint64) (uint64, error)
	// Call sends req to memory server server and returns its reply
	// (appended to out).
	Call(server int, req, out []byte) ([]byte, error)
}

// Layout is what every compute node knows of the memory servers: their
// regions, their slots, and the key range each owns (CG, hybrid).
type Layout struct {
	Design  Design
	Regions []transport.Region
	Slots   uint64   // node slots per server, the header's included
	Bounds  []uint64 // Bounds[i] is server i's lowest key; Bounds[0] is 0
	Fanout  int      // entries per node before it splits (at most MaxFanout)
	// ScanBatch is the most entries a CG scan call asks for (default, and
	// at most, what one reply holds).
	ScanBatch int
}

// Owner is the server whose range holds key.
func (l *Layout) Owner(key uint64) int {
	i := len(l.Bounds) - 1
	for i > 0 && key < l.Bounds[i] {
		i--
	}
	return i
}

// Mutations are the deliberate bugs of the compute side.
type Mutations struct {
	// UnlockedWrite writes a leaf back without taking its lock.
	UnlockedWrite func() bool
	// NoMoveRight trusts a node reached by a stale pointer for a key
	// beyond its high key.
	NoMoveRight func() bool
	// TrustHead makes a scan take the next leaf a head node listed
	// instead of the one its sibling pointer names.
	TrustHead func() bool
}

// Stats count a client's remote work.
type Stats struct {
	Reads, Writes, Atomics, Calls, Retries uint64
	// Scans with head nodes: Prefetched counts the READs issued ahead,
	// PrefetchHits the leaves a scan took from them, StaleHeads the
	// leaves a scan read though a head node it had expanded covered
	// their range (an outdated head node: the paper's extra READ).
	Prefetched, PrefetchHits, StaleHeads uint64
}

// Client runs operations of one compute thread.
type Client struct {
	L   *Layout
	F   Fabric
	Mut Mutations
	// Alloc picks the server of the next new node (round robin from a
	// per-client start, so clients spread their nodes).
	Alloc int
	// HeadNodes makes scans prefetch leaves through head nodes (FG and
	// hybrid; heads.go), where RefreshHeads installed them.
	HeadNodes bool
	Stats     Stats

	buf      []byte
	req, rep []byte
	node     Node
	right    Node
	path     []Ptr
	root     Ptr
	r        reply

	pf         prefetch
	passLeaves []leafInfo
}

// ErrFull is returned when a server has no free node slot.
var ErrFull = errors.New("nam: memory server out of node slots")

// errRetries: a node stayed locked or torn for too long.
var errRetries = errors.New("nam: node stayed locked through every retry")

const maxRetries = 100_000

func (c *Client) off(p Ptr) uint64 { return p.Slot() * NodeSize }

func (c *Client) region(p Ptr) (transport.Region, error) {
	if !p.Valid() || p.Server() >= len(c.L.Regions) || p.Slot() == 0 || p.Slot() >= c.L.Slots {
		return transport.Region{}, fmt.Errorf("nam: remote pointer %v out of range", p)
	}
	return c.L.Regions[p.Server()], nil
}

// read fetches the node at p into n, retrying while it is locked or torn.
func (c *Client) read(p Ptr, n *Node) error {
	r, err := c.region(p)
	if err != nil {
		return err
	}
	if len(c.buf) != NodeSize {
		c.buf = make([]byte, NodeSize)
	}
	for range maxRetries {
		c.Stats.Reads++
		if err := c.F.Read(c.buf, r, c.off(p)); err != nil {
			return err
		}
		err := Decode(c.buf, n)
		if err == nil && !n.Locked() {
			return nil
		}
		if err != nil && !errors.Is(err, errTorn) {
			return fmt.Errorf("nam: node %v: %w", p, err)
		}
		c.Stats.Retries++
	}
	return errRetries
}

// lock takes the node at p if it still has the version of the copy n.
func (c *Client) lock(p Ptr, n *Node) (bool, error) {
	r, err := c.region(p)
	if err != nil {
		return false, err
	}
	c.Stats.Atomics++
	prev, err := c.F.CompareAndSwap(r, c.off(p), n.Word, n.Word|lockBit)
	return err == nil && prev == n.Word, err
}

// writeBack writes n's body to p, then unlocks it (a new version).
func (c *Client) writeBack(p Ptr, n *Node, locked bool) error {
	r, err := c.region(p)
	if err != nil {
		return err
	}
	Encode(c.buf, n)
	c.Stats.Writes++
	if err := c.F.Write(r, c.off(p)+8, c.buf[8:]); err != nil {
		return err
	}
	if !locked {
		return nil
	}
	c.Stats.Atomics++
	_, err = c.F.FetchAndAdd(r, c.off(p), 1)
	return err
}

// allocate takes a free slot of the next server and writes n there,
// unlocked.
func (c *Client) allocate(n *Node) (Ptr, error) {
	s := c.Alloc % len(c.L.Regions)
	c.Alloc++
	r := c.L.Regions[s]
	c.Stats.Atomics++
	slot, err := c.F.FetchAndAdd(r, allocWord, 1)
	if err != nil {
		return 0, err
	}
	if slot >= c.L.Slots {
		return 0, fmt.Errorf("%w: server %d", ErrFull, s)
	}
	p := MakePtr(s, slot)
	b := make([]byte, NodeSize)
	Encode(b, n)
	c.Stats.Writes++
	return p, c.F.Write(r, c.off(p), b)
}

// Root reads the FG tree's root pointer.
func (c *Client) loadRoot() error {
	var w [8]byte
	c.Stats.Reads++
	if err := c.F.Read(w[:], c.L.Regions[0], rootWord); err != nil {
		return err
	}
	c.root = Ptr(binary.LittleEndian.Uint64(w[:]))
	return nil
}

// leaf finds the leaf that covers key, its copy in c.node: by one-sided
// READs from the root (FG, recording the path of inner nodes) or by a
// locate call (hybrid).
func (c *Client) leaf(key uint64) (Ptr, error) {
	var p Ptr
	c.path = c.path[:0]
	if c.L.Design == Hybrid {
		var err error
		if p, err = c.locate(key); err != nil {
			return 0, err
		}
	} else {
		if !c.root.Valid() {
			if err := c.loadRoot(); err != nil {
				return 0, err
			}
		}
		p = c.root
	}
	for {
		if err := c.read(p, &c.node); err != nil {
			return 0, err
		}
		if !c.node.Covers(key) && !fire(c.Mut.NoMoveRight) {
			p = c.node.Sibling
			continue
		}
		if c.node.Level == 0 {
			return p, nil
		}
		c.path = append(c.path, p)
		p = c.node.Child(key)
	}
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
	if c.r.status != statusOK {
		return fmt.Errorf("nam: server %d refused %v of key %d: status %d", server, r.op, r.key, c.r.status)
	}
	return nil
}

func (c *Client) locate(key uint64) (Ptr, error) {
	if err := c.call(c.L.Owner(key), request{op: opLocate, key: key}); err != nil {
		return 0, err
	}
	if !c.r.found {
		return 0, fmt.Errorf("nam: server %d knows no leaf for key %d", c.L.Owner(key), key)
	}
	return Ptr(c.r.value), nil
}

// Get returns key's value.
func (c *Client) Get(key uint64) (uint64, bool, error) {
	if c.L.Design == CoarseGrained {
		if err := c.call(c.L.Owner(key), request{op: opGet, key: key}); err != nil {
			return 0, false, err
		}
		return c.r.value, c.r.found, nil
	}
	if _, err := c.leaf(key); err != nil {
		return 0, false, err
	}
	i, ok := c.node.Find(key)
	if !ok {
		return 0, false, nil
	}
	return c.node.Vals[i], true, nil
}

// Put sets key to val.
func (c *Client) Put(key, val uint64) error {
	if c.L.Design == CoarseGrained {
		return c.call(c.L.Owner(key), request{op: opPut, key: key, a: val})
	}
	_, err := c.modify(key, func(n *Node) bool { n.Insert(key, val); return true })
	return err
}

// Delete removes key and reports whether it was there. Leaves are not
// merged (as the paper's trees, which leave space to garbage collection).
func (c *Client) Delete(key uint64) (bool, error) {
	if c.L.Design == CoarseGrained {
		if err := c.call(c.L.Owner(key), request{op: opDelete, key: key}); err != nil {
			return false, err
		}
		return c.r.found, nil
	}
	return c.modify(key, func(n *Node) bool { return n.Remove(key) })
}

// modify locks the leaf of key, applies fn, and writes it back, splitting
// it when it overflows.
func (c *Client) modify(key uint64, fn func(n *Node) bool) (bool, error) {
	for range maxRetries {
		p, err := c.leaf(key)
		if err != nil {
			return false, err
		}
		locked := !fire(c.Mut.UnlockedWrite)
		if locked {
			ok, err := c.lock(p, &c.node)
			if err != nil {
				return false, err
			}
			if !ok {
				c.Stats.Retries++
				continue // changed since we read it: again from the top
			}
		}
		changed := fn(&c.node)
		if len(c.node.Keys) <= c.L.Fanout {
			if !changed {
				if locked {
					return false, c.unlock(p)
				}
				return false, nil
			}
			return true, c.writeBack(p, &c.node, locked)
		}
		return true, c.split(p, &c.node, locked, 0)
	}
	return false, errRetries
}

func (c *Client) unlock(p Ptr) error {
	r, err := c.region(p)
	if err != nil {
		return err
	}
	c.Stats.Atomics++
	_, err = c.F.FetchAndAdd(r, c.off(p), 1)
	return err
}

// split moves the upper half of the locked node n at p to a new node,
// links it, unlocks n, and installs the separator one level up.
func (c *Client) split(p Ptr, n *Node, locked bool, depth int) error {
	sep := n.Split(&c.right)
	np, err := c.allocate(&c.right)
	if err != nil {
		if locked {
			c.unlock(p)
		}
		return err
	}
	n.Sibling = np
	level := n.Level
	if err := c.writeBack(p, n, locked); err != nil {
		return err
	}
	if c.L.Design == Hybrid {
		return c.call(c.L.Owner(sep), request{op: opRegister, key: sep, a: uint64(np)})
	}
	return c.insertInner(level+1, sep, np, depth)
}

// insertInner puts (sep, child) into the node of level that covers sep;
func (c *Client) insertInner(level uint8, sep uint64, child Ptr, depth int) error {
	var p Ptr
	// The path holds the inner nodes from the root down: the one at level
	// is path[len(path)-level], if the path reaches that high.
	if i := len(c.path) - int(level); i >= 0 && i < len(c.path) {
		p = c.path[i]
	}
	for range maxRetries {
		if !p.Valid() {
			// The node that split was the root when we read it: grow the
			// tree, or find the level in a tree that grew meanwhile.
			if err := c.loadRoot(); err != nil {
				return err
			}
			var root Node
			if err := c.read(c.root, &root); err != nil {
				return err
			}
			if root.Level < level {
				// The root is the leftmost node of its level: it, not the
				// node that split, covers the keys from 0 (another split
				// of that level may not have grown the tree yet).
				nr := Node{Level: level, Keys: []uint64{0, sep}, Vals: []uint64{uint64(c.root), uint64(child)}}
				np, err := c.allocate(&nr)
				if err != nil {
					return err
				}
				c.Stats.Atomics++
				prev, err := c.F.CompareAndSwap(c.L.Regions[0], rootWord, uint64(c.root), uint64(np))
				if err != nil {
					return err
				}
				if prev == uint64(c.root) {
					c.root = np
					return nil
				}
				continue // someone else grew it: look again (the new node is garbage)
			}
			// Descend from the root to level.
			p = c.root
			for {
				if err := c.read(p, &c.node); err != nil {
					return err
				}
				if !c.node.Covers(sep) {
					p = c.node.Sibling
					continue
				}
				if c.node.Level == level {
					break
				}
				p = c.node.Child(sep)
			}
		}
		if err := c.read(p, &c.node); err != nil {
			return err
		}
		if !c.node.Covers(sep) {
			p = c.node.Sibling
			continue
		}
		ok, err := c.lock(p, &c.node)
		if err != nil {
			return err
		}
		if !ok {
			c.Stats.Retries++
			continue
		}
		c.node.Insert(sep, uint64(child))
		if len(c.node.Keys) <= c.L.Fanout {
			return c.writeBack(p, &c.node, true)
		}
		n := c.node
		n.Keys = append([]uint64(nil), c.node.Keys...)
		n.Vals = append([]uint64(nil), c.node.Vals...)
		return c.split(p, &n, true, depth+1)
	}
	return errRetries
}

// Scan calls fn for the keys in [from, to) in order until it returns
// false. It is not a snapshot: each leaf is read as of its own READ (or
// each server's part as of its call), as in the paper.
func (c *Client) Scan(from, to uint64, fn func(k, v uint64) bool) error {
	if from >= to {
		return nil
	}
	if c.L.Design == CoarseGrained {
		for s := c.L.Owner(from); s < len(c.L.Bounds); s++ {
			start := max(from, c.L.Bounds[s])
			if start >= to {
				return nil
			}
			for {
				batch := uint64(maxScanEntries)
				if c.L.ScanBatch > 0 && c.L.ScanBatch < maxScanEntries {
					batch = uint64(c.L.ScanBatch)
				}
				if err := c.call(s, request{op: opScan, key: start, a: to, b: batch}); err != nil {
					return err
				}
				for i, k := range c.r.keys {
					if !fn(k, c.r.vals[i]) {
						return nil
					}
				}
				if !c.r.found {
					break
				}
				start = c.r.next
			}
		}
		return nil
	}
	if _, err := c.leaf(from); err != nil {
		return err
	}
	c.pf.reset(c.node.Head)
	for {
		for i, k := range c.node.Keys {
			if k >= from && k < to && !fn(k, c.node.Vals[i]) {
				return nil
			}
		}
		if !c.node.HasHigh || c.node.High >= to {
			return nil
		}
		from = c.node.High // keys below it were covered by this leaf
		if err := c.nextLeaf(c.node.Sibling, from, to); err != nil {
			return err
		}
	}
}
