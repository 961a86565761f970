package btree

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/scalestore-go/scalestore/internal/prefetch"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
)

// Session is what one worker needs to use a tree on its node: the node's
// cache, the worker, and how to allocate a page.
type Session struct {
	Cache    *bufmgr.Cache
	Worker   *bufmgr.Worker
	Allocate func(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error)
	// AllocateInner, when set, allocates the pages of inner nodes and new
	// roots (Allocate: leaves). A cluster puts them on the table's home
	// node, so that a dead node takes only its own leaves out of reach,
	// not the path to everybody's (docs/durability.md).
	AllocateInner func(w *bufmgr.Worker) (bufmgr.ExclusiveGuard, error)
	// Persist, when set, writes a page the operation changed through to
	// its durable home, with the page still latched exclusively, before
	// the operation returns (a cluster whose writes survive a node's
	// crash). The tree calls it for every page it changed, in an order
	// that leaves a tree every search can use after a crash between any
	// two calls (split: the new page, a new root, the parent or catalog,
	// then the split node; docs/durability.md). An error means the write
	// may or may not be durable: the operation fails with it.
	Persist func(w *bufmgr.Worker, g *bufmgr.ExclusiveGuard) error
	// PersistAll, when set beside Persist, writes a split's pages through
	// together instead of one by one: in the order given, of which a crash
	// must leave a prefix durable (a store that writes them in one log
	// write, storage/nvme's write log, does), so the order above still
	// holds. An error means any of them may or may not be durable.
	PersistAll func(w *bufmgr.Worker, gs ...*bufmgr.ExclusiveGuard) error
	// Mutations break the persistence order on purpose (the simulator's
	// mutants).
	Mutations Mutations
}

// Mutations are the tree's mutation points.
type Mutations struct {
	// PersistSplitNodeFirst: a split persists the split node before its
	// parent learns of the new sibling.
	PersistSplitNodeFirst func() bool
}

// persist writes g through if the session asks for it.
func (s Session) persist(g *bufmgr.ExclusiveGuard) error {
	if s.Persist == nil {
		return nil
	}
	return s.Persist(s.Worker, g)
}

// Errors.
var (
	ErrKeySize   = fmt.Errorf("btree: key must be 1 to %d bytes", MaxKey)
	ErrEntrySize = fmt.Errorf("btree: key and value together must be at most %d bytes", MaxEntry)
	ErrCorrupt   = errors.New("btree: corrupt page")
)

// The catalog page starts with a magic that also names the node format:
// catalogMagic for a tree whose nodes may have a prefix (flagPrefix),
// catalogMagicV2 for one whose nodes may inline short keys
// (flagShortInline) but have no prefix, catalogMagicV1 for one written
// before both. A binary that predates a flag knows only the older magics,
// so it refuses a newer tree instead of misreading its nodes (its valid
// refuses a node with an unknown flag too, but a scan follows the leaves'
// links without asking it, and an old search of a node with a prefix
// would skip its keys); this one reads all three, and the embedded store
// upgrades an old catalog when it opens the tree (Upgrade).
const (
	catalogMagicV1 = 0x5343415441 // "SCATA"
	catalogMagicV2 = 0x5343415442 // "SCATB"
	catalogMagic   = 0x5343415443 // "SCATC"
)

// Tree is a B-tree identified by its catalog page, which holds the root PID.
// The value is shared by every node and worker using the tree.
type Tree struct {
	catalog protocol.PID
	guesses guessState // where leaves keep values (guess.go)
}

// Open names an existing tree by its catalog page.
func Open(catalog protocol.PID) *Tree { return &Tree{catalog: catalog} }

// Catalog is the tree's catalog page.
func (t *Tree) Catalog() protocol.PID { return t.catalog }

// Create makes a tree: a catalog page pointing to an empty root leaf.
func Create(s Session) (*Tree, error) {
	root, err := s.Allocate(s.Worker)
	if err != nil {
		return nil, fmt.Errorf("btree: allocating the root: %w", err)
	}
	initNode(root.Data(), kindLeaf)
	root.MarkDirty()
	cat, err := s.Allocate(s.Worker)
	if err != nil {
		root.Release()
		return nil, fmt.Errorf("btree: allocating the catalog: %w", err)
	}
	binary.LittleEndian.PutUint64(cat.Data(), catalogMagic)
	binary.LittleEndian.PutUint64(cat.Data()[8:], uint64(root.PID()))
	cat.MarkDirty()
	t := &Tree{catalog: cat.PID()}
	err = s.persist(&root) // the root before the catalog that names it
	if err == nil {
		err = s.persist(&cat)
	}
	cat.Release()
	root.Release()
	return t, err
}

func rootOf(cat []byte) (protocol.PID, bool) {
	if m := binary.LittleEndian.Uint64(cat); m != catalogMagic && m != catalogMagicV2 && m != catalogMagicV1 {
		return 0, false
	}
	return protocol.PID(binary.LittleEndian.Uint64(cat[8:])), true
}

// Upgrade marks a tree written before flagShortInline or flagPrefix as one
// whose nodes may inline short keys and have prefixes (nodes convert one
// by one as they are compacted), so that an older binary refuses it from
// now on. A tree of the current
// format is left as it is. Call it before the tree's first write.
func (t *Tree) Upgrade(s Session) error {
	cat := s.Cache.Exclusive(s.Worker, t.catalog)
	defer cat.Release()
	d := cat.Data()
	switch binary.LittleEndian.Uint64(d) {
	case catalogMagic:
		return nil
	case catalogMagicV1, catalogMagicV2:
		binary.LittleEndian.PutUint64(d, catalogMagic)
		cat.MarkDirty()
		return nil
	}
	return t.badCatalog()
}

// corruptNode is the error for a page whose header is not a B-tree node's:
// an unreadable page (bufmgr.ErrUnreadable) that fails only the operations
// that need it, as one that fails its checksum does.
func corruptNode(pid protocol.PID) error {
	return &bufmgr.PageError{PID: pid, Err: fmt.Errorf("%w: %w: its header is not a B-tree node's "+
		"(a page never written reads as zeros)", bufmgr.ErrUnreadable, ErrCorrupt)}
}

// badCatalog is the error for a catalog page that names no root: an
// unreadable page, behind which every key is lost.
func (t *Tree) badCatalog() error {
	return &bufmgr.PageError{PID: t.catalog, Err: fmt.Errorf("%w: %w: the catalog names no root: it was never "+
		"written (a page never written reads as zeros) or is damaged, so no key of the tree can be found",
		bufmgr.ErrUnreadable, ErrCorrupt)}
}

// step is one optimistic read of a node; ok false means restart.
type path struct {
	parent  bufmgr.OptimisticGuard
	isCat   bool // parent is the catalog
	current bufmgr.OptimisticGuard
	// guess is the offset in current (a leaf) where its parent guessed
	// the key's value to be, -1 for none (guess.go).
	guess int32
}

// descend follows the tree optimistically to the leaf for key. With
// forInsert, a node on the way that might not take one more entry of
// kl+vl bytes is split first (and the descent restarts), so a parent always
// has room for a separator.
func (t *Tree) descend(s Session, key []byte, forInsert bool, kl, vl int) (path, error) {
	var p path
	for attempt := 0; ; attempt++ {
		if attempt > 1_000_000 {
			return path{}, fmt.Errorf("btree: descent did not settle: %w", ErrCorrupt)
		}
		restart, err := t.try(s, &p, key, forInsert, kl, vl)
		if err != nil {
			return path{}, err
		}
		if !restart {
			return p, nil
		}
	}
}

// try is one optimistic descent; restart true means start over. It fills
// *p in place: a lookup is short enough that copying guards back through
// return values shows in its profile.
func (t *Tree) try(s Session, p *path, key []byte, forInsert bool, kl, vl int) (restart bool, err error) {
	p.parent, p.isCat = s.Cache.Optimistic(s.Worker, t.catalog), true
	root, ok := rootOf(p.parent.Data())
	if p.parent.HasChanged() {
		return true, nil
	}
	if !ok {
		return false, t.badCatalog()
	}
	p.current = s.Cache.Optimistic(s.Worker, root)
	if p.parent.HasChanged() {
		return true, nil
	}
	p.guess = -1
	depth := 0
	for {
		n := node(p.current.Data())
		// The header and the first slots (all of a leaf's slots, for
		// YCSB's entries) before the header says how many there are, then
		// the rest of what the search reads: one round of misses a node,
		// not one per step of the binary search.
		prefetch.Lines(unsafe.Pointer(&n[64]), leadLines-1)
		valid := n.valid()
		if valid {
			n.prefetchSearch(leadLines)
		}
		leaf := valid && n.isLeaf()
		full := false
		var next uint64
		slot := -1
		if valid {
			if forInsert {
				if leaf {
					full = !n.roomFor(key, vl)
				} else {
					full = !n.room(MaxKey, 8)
				}
			}
			if !leaf && !full {
				slot, next = n.childSlotFor(key)
			}
		}
		if p.current.HasChanged() {
			return true, nil
		}
		if !valid {
			return false, corruptNode(p.current.PID())
		}
		if full {
			return true, t.split(s, *p, key)
		}
		if leaf {
			t.noteLeafDepth(depth)
			return false, nil
		}
		if depth++; depth == int(t.guesses.leafDepth.Load()) {
			p.guess = t.guessFor(s, n, slot, protocol.PID(next), key)
		}
		p.parent, p.isCat = p.current, false
		p.current = s.Cache.Optimistic(s.Worker, protocol.PID(next))
		if p.parent.HasChanged() {
			return true, nil
		}
	}
}

// split splits p.current, whose parent is p.parent (or the catalog, for the
// root); both are latched exclusively, parent first. A restart of the
// descent follows either way.
func (t *Tree) split(s Session, p path, key []byte) error { return t.splitAt(s, p, key, nil) }

// splitAt is split; a leaf is split at sep when sep is set (its keys above
// sep move to the new page), whatever it holds.
func (t *Tree) splitAt(s Session, p path, key, at []byte) error {
	px, err := p.parent.ToExclusive(s.Worker)
	if err != nil {
		return notRestart(err) // changed: restart
	}
	nx, err := p.current.ToExclusive(s.Worker)
	if err != nil {
		px.Release()
		return notRestart(err)
	}
	defer px.Release()
	defer nx.Release()
	n := node(nx.Data())
	// Every page the split needs is allocated before anything moves: an
	// allocation that fails (a full store) must leave the tree as it was.
	alloc, inner := s.Allocate, s.Allocate
	if s.AllocateInner != nil {
		inner = s.AllocateInner
	}
	if n.kind() != kindLeaf {
		alloc = inner
	}
	right, err := alloc(s.Worker)
	if err != nil {
		return fmt.Errorf("btree: allocating a split page: %w", err)
	}
	defer right.Release()
	var root bufmgr.ExclusiveGuard
	if p.isCat {
		// A new root above the old one.
		if root, err = inner(s.Worker); err != nil {
			return fmt.Errorf("btree: allocating a new root: %w", err)
		}
	}
	var before []byte
	if s.Persist != nil {
		// If the parent cannot be persisted (its directory crashed), the
		// split is undone here: a truncated node whose parent never heard
		// of its new sibling would hide the moved entries.
		before = append([]byte(nil), nx.Data()...)
	}
	if !p.isCat {
		// A split that a crash interrupted after its parent was persisted
		// and before the node was (see below) left entries above the
		// node's bound in it: drop them before choosing a separator.
		if n.dropAbove(node(px.Data()), key) {
			nx.MarkDirty()
		}
	}
	initNode(right.Data(), n.kind())
	var sep []byte
	if at != nil && n.isLeaf() {
		sep = n.splitLeafAt(node(right.Data()), uint64(right.PID()), at)
	} else {
		sep = n.splitInto(node(right.Data()), uint64(right.PID()), key)
	}
	nx.MarkDirty()
	right.MarkDirty()
	undo := func(err error) error {
		copy(nx.Data(), before)
		return err
	}
	// Persisted in this order, a crash between any two writes leaves a
	// tree that routes every key to a page that holds it: the new page
	// first (nothing points to it yet), then what points to it (the new
	// root and the catalog, or the parent), and the split node last (until
	// then its durable copy still holds the moved entries too; dropAbove
	// removes them at its next split).
	if s.Persist != nil && s.PersistAll != nil && s.Mutations.PersistSplitNodeFirst == nil {
		return t.persistSplit(s, p, sep, &nx, &px, &right, &root, undo)
	}
	if err := s.persist(&right); err != nil {
		if p.isCat {
			root.Release()
		}
		return undo(err)
	}
	if p.isCat {
		initNode(root.Data(), kindInner)
		r := node(root.Data())
		r.setUpper(uint64(right.PID()))
		var lv [8]byte
		binary.LittleEndian.PutUint64(lv[:], uint64(nx.PID()))
		r.insertAt(0, sep, lv[:])
		root.MarkDirty()
		binary.LittleEndian.PutUint64(px.Data()[8:], uint64(root.PID()))
		px.MarkDirty()
		err := s.persist(&root)
		root.Release()
		if err == nil {
			err = s.persist(&px)
		}
		if err != nil {
			binary.LittleEndian.PutUint64(px.Data()[8:], uint64(nx.PID()))
			return undo(err)
		}
		return s.persist(&nx)
	}
	parent := node(px.Data())
	var pbefore []byte
	if s.Persist != nil {
		pbefore = append([]byte(nil), px.Data()...)
	}
	parent.insertSeparator(sep, uint64(nx.PID()), uint64(right.PID()))
	px.MarkDirty()
	if f := s.Mutations.PersistSplitNodeFirst; f != nil && f() {
		if err := s.persist(&nx); err != nil {
			return err
		}
	}
	if err := s.persist(&px); err != nil {
		copy(px.Data(), pbefore)
		return undo(err)
	}
	return s.persist(&nx)
}

// persistSplit finishes a split whose pages are written through together
// (Session.PersistAll), in the order split documents: the new page, the new
// root and the catalog or the parent, the split node.
func (t *Tree) persistSplit(s Session, p path, sep []byte, nx, px, right, root *bufmgr.ExclusiveGuard, undo func(error) error) error {
	if p.isCat {
		initNode(root.Data(), kindInner)
		r := node(root.Data())
		r.setUpper(uint64(right.PID()))
		var lv [8]byte
		binary.LittleEndian.PutUint64(lv[:], uint64(nx.PID()))
		r.insertAt(0, sep, lv[:])
		root.MarkDirty()
		binary.LittleEndian.PutUint64(px.Data()[8:], uint64(root.PID()))
		px.MarkDirty()
		err := s.PersistAll(s.Worker, right, root, px, nx)
		root.Release()
		if err != nil {
			binary.LittleEndian.PutUint64(px.Data()[8:], uint64(nx.PID()))
			return undo(err)
		}
		return nil
	}
	pbefore := append([]byte(nil), px.Data()...)
	node(px.Data()).insertSeparator(sep, uint64(nx.PID()), uint64(right.PID()))
	px.MarkDirty()
	if err := s.PersistAll(s.Worker, right, px, nx); err != nil {
		copy(px.Data(), pbefore)
		return undo(err)
	}
	return nil
}

func checkSizes(key []byte, vlen int) error {
	if len(key) == 0 || len(key) > MaxKey {
		return ErrKeySize
	}
	if len(key)+vlen > MaxEntry {
		return ErrEntrySize
	}
	return nil
}

// Get appends the value of key to dst; ok is false when the key is absent.
func (t *Tree) Get(s Session, key, dst []byte) (val []byte, ok bool, err error) {
	if err := checkSizes(key, 0); err != nil {
		return dst, false, err
	}
	for {
		p, err := t.descend(s, key, false, 0, 0)
		if err != nil {
			return dst, false, err
		}
		// The leaf is read optimistically too (paper §5.2): copy the value
		// out, then validate; a reader writes no shared cache line.
		n := node(p.current.Data())
		mark := len(dst)
		i, found := n.lowerBound(key)
		if found {
			dst = append(dst, n.value(i)...)
		}
		if p.current.HasChanged() {
			dst = dst[:mark]
			continue
		}
		if found {
			t.learn(s, p.guess, n, i)
		}
		return dst, found, nil
	}
}

// GetGuarded is Get that also returns the optimistic guard of the leaf it
// read the key in: while the guard's HasChanged is false, the leaf (and so
// the key's value or absence) is as read. A read-only transaction checks
// all of its guards at the end instead of latching anything.
func (t *Tree) GetGuarded(s Session, key, dst []byte) (val []byte, ok bool, g bufmgr.OptimisticGuard, err error) {
	if err := checkSizes(key, 0); err != nil {
		return dst, false, g, err
	}
	for {
		p, err := t.descend(s, key, false, 0, 0)
		if err != nil {
			return dst, false, g, err
		}
		n := node(p.current.Data())
		mark := len(dst)
		i, found := n.lowerBound(key)
		if found {
			dst = append(dst, n.value(i)...)
		}
		if p.current.HasChanged() {
			dst = dst[:mark]
			continue
		}
		return dst, found, p.current, nil
	}
}

// Put inserts key or replaces its value.
func (t *Tree) Put(s Session, key, val []byte) error {
	_, err := t.PutIf(s, key, val, nil)
	return err
}

// PutIf sets key to val if cond, called under the leaf's exclusive latch
// with the key's current value (valid only during the call) and whether it
// is there, returns true: a conditional write (Redis's SET NX and XX) that
// no other write of the key can come between. applied reports whether it
// wrote. A nil cond always writes (Put).
func (t *Tree) PutIf(s Session, key, val []byte, cond func(old []byte, found bool) bool) (applied bool, err error) {
	if err := checkSizes(key, len(val)); err != nil {
		return false, err
	}
	for {
		p, err := t.descend(s, key, true, len(key), len(val))
		if err != nil {
			return false, err
		}
		x, err := p.current.ToExclusive(s.Worker)
		if err != nil {
			if err = notRestart(err); err != nil {
				return false, err
			}
			continue
		}
		n := node(x.Data())
		i, found := n.lowerBound(key)
		if cond != nil {
			var old []byte
			if found {
				old = n.value(i)
			}
			if !cond(old, found) {
				x.Release()
				return false, nil
			}
		}
		if found {
			if _, _, ovl := n.slot(i); ovl == len(val) {
				copy(n.value(i), val) // same size: in place, no heap garbage
				x.MarkDirty()
				err := s.persist(&x)
				x.Release()
				return err == nil, err
			}
		}
		if !n.roomFor(key, len(val)) {
			// Filled up meanwhile: split on the next descent. Checked
			// before anything changes: removing the old entry first and
			// releasing the leaf without it let a reader find the key
			// missing until the retry put it back.
			x.Release()
			continue
		}
		if found {
			n.removeAt(i)
		}
		n.insertAt(i, key, val)
		x.MarkDirty()
		err = s.persist(&x)
		x.Release()
		return err == nil, err
	}
}

// Delete removes key; found reports whether it was there.
func (t *Tree) Delete(s Session, key []byte) (found bool, err error) {
	if err := checkSizes(key, 0); err != nil {
		return false, err
	}
	for {
		p, err := t.descend(s, key, false, 0, 0)
		if err != nil {
			return false, err
		}
		x, err := p.current.ToExclusive(s.Worker)
		if err != nil {
			if err = notRestart(err); err != nil {
				return false, err
			}
			continue
		}
		n := node(x.Data())
		i, found := n.lowerBound(key)
		if found {
			n.removeAt(i)
			x.MarkDirty()
			err = s.persist(&x)
		}
		x.Release()
		return found, err
	}
}

// Scan calls fn with every key in [from, to) in order (to nil: no upper
// bound) until fn returns false. Each leaf is read under a shared latch and
// released before the next is taken; key and value are only valid during
// the call. Entries inserted concurrently may or may not be seen.
func (t *Tree) Scan(s Session, from, to []byte, fn func(key, val []byte) bool) error {
	p, err := t.descend(s, from, false, 0, 0)
	if err != nil {
		return err
	}
	sg, err := p.current.ToShared()
	for err != nil {
		if p, err = t.descend(s, from, false, 0, 0); err != nil {
			return err
		}
		sg, err = p.current.ToShared()
	}
	var last, kbuf []byte
	for {
		n := node(sg.Data())
		i := 0
		if last == nil {
			i, _ = n.lowerBound(from)
		} else {
			i, _ = n.lowerBound(last)
			kbuf = n.appendKey(kbuf[:0], i)
			if i < n.count() && bytes.Equal(kbuf, last) {
				i++
			}
		}
		for ; i < n.count(); i++ {
			kbuf = n.appendKey(kbuf[:0], i)
			k := kbuf
			if to != nil && bytes.Compare(k, to) >= 0 {
				sg.Release()
				return nil
			}
			if !fn(k, n.value(i)) {
				sg.Release()
				return nil
			}
			last = append(last[:0], k...)
		}
		next := n.upper()
		sg.Release()
		if next == 0 {
			return nil
		}
		sg = s.Cache.Shared(s.Worker, protocol.PID(next-1))
	}
}

// notRestart is nil for bufmgr.ErrRestart (the page changed: the caller
// restarts) and err otherwise (an unreadable page: the operation fails).
func notRestart(err error) error {
	if errors.Is(err, bufmgr.ErrRestart) {
		return nil
	}
	return err
}
