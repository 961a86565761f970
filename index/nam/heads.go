package nam

import (
	"fmt"

	"github.com/scalestore-go/scalestore/transport"
)

// Head nodes (paper §4.3) on the leaf level of FG and hybrid trees.
//
// A head node is a node of its own slot, flagged head, that lists a group
// of up to n consecutive leaves: its entries are (low key, pointer) of
// each, its high key the group's last leaf's high key, its sibling the next
// group's head node. Every leaf of a group carries the group's head node in
// its Head field (the node's last 8 bytes), and a leaf split off inherits
// its left neighbour's, so a scan that starts anywhere in a group knows
// the head node at once (the paper puts head nodes into the leaf chain
// instead; a separate slot keeps the chain, and so lookups, inserts and
// CheckTree, as they were).
//
// RefreshHeads is the background pass that installs and refreshes them:
// it walks the leaf level, cuts it into groups (keeping a group's head node
// while the group is at most n leaves), rewrites the head nodes whose list
// changed and points every leaf at its group's. Only the pass writes head
// nodes and Head fields, under the nodes' locks like any write.
//
// A scan (Client.HeadNodes) uses them only to prefetch: on reaching the
// first leaf it reads the leaf's sibling and its head node in one batch;
// then, at each leaf it has not prefetched, it reads that leaf together
// with every leaf the head node lists below the scan's end and the next
// head node, all in flight at once (BatchReader). It still follows the
// sibling pointers: a prefetched copy is used only for the pointer the
// current leaf's sibling names, and only if it is a leaf whose low key is
// the current leaf's high key; otherwise (a leaf split off after the pass,
// a stale or garbled head node) the scan reads the sibling: the paper's
// extra READ for an outdated head node. Each key still comes from a READ,
// during the scan, of the leaf that held it then (a leaf's low key never
// changes, and its keys stay below its high key), so a scan with head nodes
// is as correct as one without.

// DefaultHeadGroup is the leaves a head node lists (the paper's n).
const DefaultHeadGroup = 8

// A leaf's head pointer lies after the last entry a node can have.
var _ [headOff - headerSize - MaxFanout*entrySize]struct{}

// ReadOp is one READ of a batch: Err is set when it completed.
type ReadOp struct {
	Dst    []byte
	Region transport.Region
	Off    uint64
	Err    error
}

// BatchReader is a Fabric that keeps several READs in flight: ReadBatch
// issues every op's READ before it waits, and returns when all completed
// (one round trip for the batch). A Fabric without it has the Client read
// them one after the other.
type BatchReader interface {
	ReadBatch(ops []ReadOp)
}

// ReadBatch reads ops through f: at once if f is a BatchReader, else one
// after the other.
func ReadBatch(f Fabric, ops []ReadOp) {
	if b, ok := f.(BatchReader); ok && len(ops) > 1 {
		b.ReadBatch(ops)
		return
	}
	for i := range ops {
		ops[i].Err = f.Read(ops[i].Dst, ops[i].Region, ops[i].Off)
	}
}

// fetched is a leaf a scan read ahead.
type fetched struct {
	p    Ptr
	n    Node
	ok   bool // decoded, unlocked
	used bool
}

// prefetch is a scan's state of head nodes and leaves read ahead.
type prefetch struct {
	got      []fetched
	head     Node // read, not yet expanded
	haveHead bool
	headPtr  Ptr    // the first leaf's head node, not yet read
	covered  uint64 // keys below it were listed by a head node expanded
	ops      []ReadOp
	bufs     [][]byte
	isHead   []bool
	ptrs     []Ptr
}

func (pf *prefetch) reset(head Ptr) {
	pf.got = pf.got[:0]
	pf.haveHead, pf.headPtr, pf.covered = false, head, 0
}

func (pf *prefetch) has(p Ptr) bool {
	for i := range pf.got {
		if pf.got[i].p == p {
			return true
		}
	}
	return false
}

func copyNode(dst, src *Node) {
	keys, vals := dst.Keys, dst.Vals
	*dst = *src
	dst.Keys = append(keys[:0], src.Keys...)
	dst.Vals = append(vals[:0], src.Vals...)
}

// usableLeaf reports whether a prefetched copy may stand for the sibling
// whose low key is low.
func usableLeaf(f *fetched, low uint64) bool {
	return f.ok && f.n.Level == 0 && !f.n.IsHead && !f.n.Invalid && f.n.Low == low
}

// nextLeaf brings the leaf q, the sibling of the current leaf whose high
// key is low, into c.node, for a scan that ends before to.
func (c *Client) nextLeaf(q Ptr, low, to uint64) error {
	if !c.HeadNodes {
		return c.read(q, &c.node)
	}
	pf := &c.pf
	if fire(c.Mut.TrustHead) {
		// The mutant: the next leaf the head node listed, whatever the
		// sibling pointer says.
		for i := range pf.got {
			if f := &pf.got[i]; !f.used && f.ok && f.n.Level == 0 && !f.n.IsHead {
				f.used = true
				copyNode(&c.node, &f.n)
				return nil
			}
		}
	}
	for i := range pf.got {
		if f := &pf.got[i]; f.p == q && !f.used {
			f.used = true
			if usableLeaf(f, low) {
				c.Stats.PrefetchHits++
				copyNode(&c.node, &f.n)
				return nil
			}
			break
		}
	}
	// Not prefetched (or unusable): read it, with the next batch.
	if low < pf.covered {
		c.Stats.StaleHeads++ // a head node listed this range without q
	}
	pf.ptrs, pf.isHead = append(pf.ptrs[:0], q), append(pf.isHead[:0], false)
	switch {
	case pf.haveHead:
		h := &pf.head
		for i, k := range h.Keys {
			p := Ptr(h.Vals[i])
			if k >= low && k < to && p != q && !pf.has(p) && len(pf.ptrs) < MaxFanout+1 {
				pf.ptrs, pf.isHead = append(pf.ptrs, p), append(pf.isHead, false)
			}
		}
		pf.covered = ^uint64(0)
		if h.HasHigh {
			pf.covered = h.High
			if h.High < to && h.Sibling.Valid() {
				pf.ptrs, pf.isHead = append(pf.ptrs, h.Sibling), append(pf.isHead, true)
			}
		}
		pf.haveHead = false
	case pf.headPtr.Valid():
		pf.ptrs, pf.isHead = append(pf.ptrs, pf.headPtr), append(pf.isHead, true)
		pf.headPtr = 0
	}
	pf.ops = pf.ops[:0]
	for i, p := range pf.ptrs {
		r, err := c.region(p)
		if err != nil {
			if i == 0 {
				return err
			}
			pf.ptrs[i] = 0 // a garbled head node's entry: not read
			continue
		}
		for len(pf.bufs) <= len(pf.ops) {
			pf.bufs = append(pf.bufs, make([]byte, NodeSize))
		}
		pf.ops = append(pf.ops, ReadOp{Dst: pf.bufs[len(pf.ops)], Region: r, Off: c.off(p)})
	}
	c.Stats.Reads += uint64(len(pf.ops))
	c.Stats.Prefetched += uint64(len(pf.ops) - 1)
	ReadBatch(c.F, pf.ops)
	j := 0
	var first error
	for i, p := range pf.ptrs {
		if !p.Valid() {
			continue
		}
		op := &pf.ops[j]
		j++
		if op.Err != nil {
			if i == 0 {
				first = op.Err
			}
			continue // a READ ahead that failed is only a hint lost
		}
		switch {
		case i == 0:
			if err := Decode(op.Dst, &c.node); err != nil || c.node.Locked() {
				// Locked or torn: read it again until it is not.
				if err := c.read(q, &c.node); err != nil {
					return err
				}
			}
		case pf.isHead[i]:
			err := Decode(op.Dst, &pf.head)
			pf.haveHead = err == nil && !pf.head.Locked() && pf.head.IsHead
		default:
			pf.got = append(pf.got, fetched{p: p})
			f := &pf.got[len(pf.got)-1]
			err := Decode(op.Dst, &f.n)
			f.ok = err == nil && !f.n.Locked()
		}
	}
	return first
}

// HeadStats count what a head pass did.
type HeadStats struct {
	Leaves, Groups int
	// NewHeads were allocated; HeadWrites rewrote a head node's list;
	// LeafWrites set a leaf's Head.
	NewHeads, HeadWrites, LeafWrites int
}

type leafInfo struct {
	p         Ptr
	low, high uint64
	hasHigh   bool
	head      Ptr
}

type headGroup struct {
	first, end int
	head       Ptr
}

// RefreshHeads is one background pass over the leaf level of a FG or
// hybrid tree: it installs head nodes for groups of up to group leaves and
// refreshes the ones whose group changed since the last pass. It runs
// beside the clients (its writes take the nodes' locks); one pass at a
// time. A leaf added behind the walk waits for the next pass.
func (c *Client) RefreshHeads(group int) (HeadStats, error) {
	var st HeadStats
	if c.L.Design != FineGrained && c.L.Design != Hybrid {
		return st, fmt.Errorf("nam: head nodes need a fg or hybrid tree, not %q", c.L.Design)
	}
	if group < 2 || group > MaxFanout {
		return st, fmt.Errorf("nam: head group of %d leaves: want 2 to %d", group, MaxFanout)
	}
	// The leftmost leaf.
	p := MakePtr(0, 1)
	if c.L.Design == FineGrained {
		if err := c.loadRoot(); err != nil {
			return st, err
		}
		for p = c.root; ; p = Ptr(c.node.Vals[0]) {
			if err := c.read(p, &c.node); err != nil {
				return st, err
			}
			if c.node.Level == 0 {
				break
			}
			if len(c.node.Keys) == 0 {
				return st, fmt.Errorf("nam: inner node %v without entries", p)
			}
		}
	}
	leaves := c.passLeaves[:0]
	limit := c.L.Slots * uint64(len(c.L.Regions))
	for steps := uint64(0); ; steps++ {
		if steps > limit {
			return st, fmt.Errorf("nam: the leaf level loops")
		}
		if err := c.read(p, &c.node); err != nil {
			return st, err
		}
		leaves = append(leaves, leafInfo{p, c.node.Low, c.node.High, c.node.HasHigh, c.node.Head})
		if !c.node.HasHigh {
			break
		}
		p = c.node.Sibling
	}
	c.passLeaves = leaves
	st.Leaves = len(leaves)
	// Groups: a leaf that heads a group keeps its head node as long as
	// the group is at most group leaves; a full group starts another.
	used := map[Ptr]bool{}
	var groups []headGroup
	for i, lf := range leaves {
		if len(groups) > 0 {
			g := &groups[len(groups)-1]
			cut := g.end-g.first >= group || lf.low <= leaves[i-1].low ||
				lf.head.Valid() && lf.head != g.head && !used[lf.head]
			if !cut {
				g.end++
				continue
			}
		}
		h := Ptr(0)
		if lf.head.Valid() && !used[lf.head] {
			if _, err := c.region(lf.head); err == nil {
				h = lf.head
				used[h] = true
			}
		}
		groups = append(groups, headGroup{first: i, end: i + 1, head: h})
	}
	// Head nodes no group keeps are reused for the groups without one.
	var spare []Ptr
	for _, lf := range leaves {
		if lf.head.Valid() && !used[lf.head] {
			if _, err := c.region(lf.head); err == nil {
				used[lf.head] = true
				spare = append(spare, lf.head)
			}
		}
	}
	st.Groups = len(groups)
	// Right to left, so each head node's sibling is known.
	var want, have Node
	for k := len(groups) - 1; k >= 0; k-- {
		g := &groups[k]
		last := leaves[g.end-1]
		want = Node{IsHead: true, Low: leaves[g.first].low, HasHigh: last.hasHigh, High: last.high,
			Keys: want.Keys[:0], Vals: want.Vals[:0]}
		if k+1 < len(groups) {
			want.Sibling = groups[k+1].head
		}
		for _, lf := range leaves[g.first:g.end] {
			want.Keys = append(want.Keys, lf.low)
			want.Vals = append(want.Vals, uint64(lf.p))
		}
		if !g.head.Valid() && len(spare) > 0 {
			g.head, spare = spare[0], spare[1:]
		}
		if !g.head.Valid() {
			np, err := c.allocate(&want)
			if err != nil {
				return st, err
			}
			g.head = np
			st.NewHeads++
			continue
		}
		wrote, err := c.rewriteHead(g.head, &want, &have)
		if err != nil {
			return st, err
		}
		if wrote {
			st.HeadWrites++
		}
	}
	for _, g := range groups {
		for _, lf := range leaves[g.first:g.end] {
			if lf.head == g.head {
				continue
			}
			wrote, err := c.setLeafHead(lf.p, g.head)
			if err != nil {
				return st, err
			}
			if wrote {
				st.LeafWrites++
			}
		}
	}
	return st, nil
}

func sameHead(a, b *Node) bool {
	if !a.IsHead || !b.IsHead || a.Low != b.Low || a.HasHigh != b.HasHigh || a.High != b.High ||
		a.Sibling != b.Sibling || len(a.Keys) != len(b.Keys) {
		return false
	}
	for i := range a.Keys {
		if a.Keys[i] != b.Keys[i] || a.Vals[i] != b.Vals[i] {
			return false
		}
	}
	return true
}

// rewriteHead writes want to the head node at p, under its lock, unless
// it already says that.
func (c *Client) rewriteHead(p Ptr, want, have *Node) (bool, error) {
	for range maxRetries {
		if err := c.read(p, have); err != nil {
			return false, err
		}
		if sameHead(have, want) {
			return false, nil
		}
		ok, err := c.lock(p, have)
		if err != nil {
			return false, err
		}
		if ok {
			want.Word = have.Word
			return true, c.writeBack(p, want, true)
		}
		c.Stats.Retries++
	}
	return false, errRetries
}

// setLeafHead points the leaf at p at its group's head node h, under the
// leaf's lock.
func (c *Client) setLeafHead(p, h Ptr) (bool, error) {
	for range maxRetries {
		if err := c.read(p, &c.node); err != nil {
			return false, err
		}
		if c.node.Head == h || c.node.Level != 0 || c.node.IsHead {
			return false, nil
		}
		ok, err := c.lock(p, &c.node)
		if err != nil {
			return false, err
		}
		if ok {
			c.node.Head = h
			return true, c.writeBack(p, &c.node, true)
		}
		c.Stats.Retries++
	}
	return false, errRetries
}
