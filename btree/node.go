package btree

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"

	"github.com/scalestore-go/scalestore/internal/prefetch"

	"github.com/scalestore-go/scalestore/protocol"
)

const (
	// PageTrailer bytes at the end of every page belong to the storage layer
	// (checksum and slot number on an NVMe store).
	PageTrailer = 16
	usable      = protocol.PageSize - PageTrailer
	headerSize  = 16
	// slotSize: the key's head (its 8 bytes after the node's prefix, see
	// flagPrefix, as a big-endian integer, zero-padded), then offset, key
	// length and value length, 2 bytes each, and 2 spare bytes. The head
	// lets a search compare keys without leaving the slot array
	// (LeanStore's "key heads"): with keys of at most 8 bytes, as in YCSB,
	// a lookup touches no key in the heap.
	slotSize = 16

	// MaxKey is the longest key.
	MaxKey = 256
	// MaxEntry bounds a key and its value together (YCSB needs 8 + 128).
	MaxEntry = 1024
	// MaxValue is the longest value.
	MaxValue = MaxEntry - 1

	kindLeaf  = 1
	kindInner = 2

	// flagShortInline (header byte 1): the node keeps no key of at most
	// 8 bytes in its heap, since the slot's key head holds all of it
	// (with the key length). Every node written since this flag exists
	// has it; a page written before has not, and is converted when it is
	// next compacted. For YCSB's 8-byte keys and 128-byte values this is
	// 144 bytes an entry instead of 152: 28 entries a leaf, not 26.
	flagShortInline = 1

	// flagPrefix (header byte 1) is set when header byte 7 holds p > 0:
	// every key of the node starts with the same p bytes (the node's
	// prefix, read from slot 0's key in the heap), and a slot's head is
	// built from the key's bytes [p, p+8) instead of [0, 8). Keys that
	// share their first 8 bytes (redis-benchmark's "counter:000000012345"
	// and "key:000000012345") all had one head, and every step of a
	// search compared keys in the heap; after their prefix the heads tell
	// them apart again. A search compares the searched key with the
	// prefix once, then searches the heads of the rest.
	//
	// p is the longest prefix the node's keys share, chosen when the node
	// is compacted or made by a split, or takes its second key
	// (choosePrefix), and lowered (every
	// head rewritten, O(n) but rare) by an insert of a key that does not
	// share it (insertAt). The nodes keep no fence keys, from which
	// LeanStore takes the prefix and which would not need the lowering;
	// the keys' own prefix is at least as long, and between two
	// compactions a lowering happens at most once per byte of p.
	//
	// A node with a prefix keeps every key whole in its heap (its prefix
	// is slot 0's key's), so p > 0 needs every key longer than 8 bytes
	// (flagShortInline keeps shorter keys in their heads alone): a short
	// key's insert sets p to 0. Keys themselves are stored as before, so
	// the prefix changes no node's room. A node without the flag (p = 0,
	// as every node written before the flag) is today's format exactly;
	// a binary that predates the flag refuses a node with it (its valid
	// rejects unknown flags) instead of misreading its heads.
	flagPrefix = 2

	// maxPrefix bounds p: it is one header byte (a key has at most MaxKey
	// bytes, and two different keys share at most MaxKey-1).
	maxPrefix = MaxKey - 1
)

// node is a view of a B-tree page (a slotted page):
//
//	0 kind  1 flags (flagShortInline, flagPrefix)  2-3 count  4-5 start
//	of the entry heap (grows down)
//	6 the slot of the latest insert (a hint for splits)  7 the prefix
//	length p (flagPrefix; zero in every page written before it, since
//	bytes 6-7 held the latest insert's slot, below maxSlots < 256)
//	8-15 upper: an inner node's rightmost child; a leaf's next leaf plus
//	one (0: none; PID 0 is a valid page)
//	16.. slots (key head, offset, key length, value length), then free
//	space, then the heap of keys and values up to `usable`. An entry's
//	heap bytes are its key (unless inlined, see flagShortInline) followed
//	by its value; the slot's offset is where they start.
//
// An inner node with n slots has n+1 children: slot i's value is the child
// holding keys <= key i; upper holds the keys greater than the last key.
//
// Every accessor checks its bounds: an optimistic reader may see a page
// that is being changed, and must get a restart, not a panic.
type node []byte

func (n node) kind() byte        { return n[0] }
func (n node) isLeaf() bool      { return n[0] == kindLeaf }
func (n node) count() int        { return min(int(binary.LittleEndian.Uint16(n[2:])), maxSlots) }
func (n node) heapStart() int    { return int(binary.LittleEndian.Uint16(n[4:])) }
func (n node) upper() uint64     { return binary.LittleEndian.Uint64(n[8:]) }
func (n node) setUpper(v uint64) { binary.LittleEndian.PutUint64(n[8:], v) }
func (n node) setCount(c int)    { binary.LittleEndian.PutUint16(n[2:], uint16(c)) }
func (n node) setHeap(h int)     { binary.LittleEndian.PutUint16(n[4:], uint16(h)) }

// lastInsert is the slot of the node's latest insert: a hint for
// splitInto, which may be stale after a removal.
func (n node) lastInsert() int     { return int(n[6]) }
func (n node) setLastInsert(i int) { n[6] = byte(i) }

// prefixLen is p, the length of the prefix every key of the node shares
// (see flagPrefix).
func (n node) prefixLen() int { return int(n[7]) }

// prefix is the node's prefix: slot 0's key's first p bytes. ok is false
// when slot 0 cannot hold them (a torn page under an optimistic reader).
func (n node) prefix() (pre []byte, ok bool) {
	p := n.prefixLen()
	if p == 0 {
		return nil, true
	}
	off, kl, _ := n.slot(0)
	if kl < p || off < headerSize || off+p > usable {
		return nil, false
	}
	return n[off : off+p], true
}

// setPrefix makes p the node's prefix length and rewrites every slot's
// head from its key's bytes after p. The caller makes sure that every key
// starts with the same p bytes and, for p > 0, is kept in the heap.
func (n node) setPrefix(p int) {
	if p == n.prefixLen() && (p > 0) == (n[1]&flagPrefix != 0) {
		return
	}
	for i := range n.count() {
		k := n.key(i)
		// Every key is at least p bytes long but in a damaged page, whose
		// heads are wrong anyway: no panic for it.
		binary.LittleEndian.PutUint64(n[headerSize+i*slotSize:], keyHead(k[min(p, len(k)):]))
	}
	n[7] = byte(p)
	if p > 0 {
		n[1] |= flagPrefix
	} else {
		n[1] &^= flagPrefix
	}
}

// choosePrefix sets the node's prefix to the longest its keys share: none
// for fewer than two keys, or when a key lives in its head alone.
func (n node) choosePrefix() {
	c := n.count()
	p := 0
	if c >= 2 && n[1]&flagShortInline != 0 {
		first := n.key(0)
		p = min(len(first), maxPrefix)
		for i := range c {
			k := n.key(i)
			if n.heapKey(len(k)) == 0 {
				p = 0
				break
			}
			p = sharedLen(first[:p], k)
		}
	}
	n.setPrefix(p)
}

// sharedLen is how many bytes a and b share at their start.
func sharedLen(a, b []byte) int {
	m := min(len(a), len(b))
	for i := range m {
		if a[i] != b[i] {
			return i
		}
	}
	return m
}

func initNode(b []byte, kind byte) {
	clear(b[:headerSize])
	n := node(b)
	n[0] = kind
	n[1] = flagShortInline
	n.setHeap(usable)
}

// heapKey is how many bytes of a key of kl bytes the node keeps in its
// heap: none for a short key in a node that inlines them.
func (n node) heapKey(kl int) int {
	if kl <= 8 && n[1]&flagShortInline != 0 {
		return 0
	}
	return kl
}

// valid checks the page's header; false means a torn or foreign page. The
// entries are checked as they are read (key, value), so an optimistic reader
// pays only for the slots it looks at.
//
// A prefix (flagPrefix) must be set with its flag, in a node that inlines
// short keys, and lie in slot 0's key, whole in the heap: a page whose
// prefix length is bogus is refused here as torn or foreign.
func (n node) valid() bool {
	if len(n) < usable || (n.kind() != kindLeaf && n.kind() != kindInner) || n[1]&^(flagShortInline|flagPrefix) != 0 {
		return false
	}
	c, h := n.count(), n.heapStart()
	if headerSize+c*slotSize > h || h > usable {
		return false
	}
	p := n.prefixLen()
	if p == 0 && n[1]&flagPrefix == 0 {
		return true
	}
	if p == 0 || n[1]&flagPrefix == 0 || n[1]&flagShortInline == 0 || c == 0 {
		return false
	}
	off, kl, _ := n.slot(0)
	return kl > 8 && kl >= p && kl <= MaxKey && off >= h && off+kl <= usable
}

// maxSlots bounds the slot count a page can hold: an optimistic reader may
// see any bytes in the count field while a writer changes the page (it
// restarts on validation), and must not index past the page meanwhile.
const maxSlots = (usable - headerSize) / slotSize

func (n node) slot(i int) (off, kl, vl int) {
	if i < 0 || i >= maxSlots {
		return 0, 0, 0
	}
	s := n[headerSize+i*slotSize+8 : headerSize+i*slotSize+14]
	return int(binary.LittleEndian.Uint16(s)), int(binary.LittleEndian.Uint16(s[2:])), int(binary.LittleEndian.Uint16(s[4:]))
}

// head is slot i's key head (0 when out of bounds, like slot).
func (n node) head(i int) uint64 {
	if i < 0 || i >= maxSlots {
		return 0
	}
	return binary.LittleEndian.Uint64(n[headerSize+i*slotSize:])
}

// keyHead is the head of key: its first 8 bytes as a big-endian integer,
// zero-padded, so heads order like the keys they start (ties aside).
func keyHead(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

func (n node) setSlot(i, off int, head uint64, kl, vl int) {
	s := n[headerSize+i*slotSize : headerSize+(i+1)*slotSize]
	binary.LittleEndian.PutUint64(s, head)
	binary.LittleEndian.PutUint16(s[8:], uint16(off))
	binary.LittleEndian.PutUint16(s[10:], uint16(kl))
	binary.LittleEndian.PutUint16(s[12:], uint16(vl))
	binary.LittleEndian.PutUint16(s[14:], 0)
}

// span is where slot i's value lies in the page and its key's length; ok
// is false if the slot points outside the page (a page changing under an
// optimistic reader, who restarts on validation).
func (n node) span(i int) (lo, hi, kl int, ok bool) {
	off, kl, vl := n.slot(i)
	lo = off + n.heapKey(kl)
	hi = lo + vl
	if off < headerSize || hi > usable || kl > MaxKey {
		return 0, 0, 0, false
	}
	return lo, hi, kl, true
}

// appendKey appends slot i's key to dst; nothing if the slot points
// outside the page, like span.
func (n node) appendKey(dst []byte, i int) []byte {
	lo, _, kl, ok := n.span(i)
	if !ok {
		return dst
	}
	if n.heapKey(kl) == 0 {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], n.head(i))
		return append(dst, b[:kl]...)
	}
	return append(dst, n[lo-kl:lo]...)
}

// key is slot i's key, a copy when the node inlines it (see appendKey).
func (n node) key(i int) []byte {
	lo, _, kl, ok := n.span(i)
	if !ok {
		return nil
	}
	if n.heapKey(kl) == 0 {
		return n.appendKey(nil, i)
	}
	return n[lo-kl : lo]
}

// value is slot i's value, empty if out of bounds like key.
func (n node) value(i int) []byte {
	lo, hi, _, ok := n.span(i)
	if !ok {
		return nil
	}
	return n[lo:hi]
}

// child is an inner slot's child PID, 0 if the slot is out of bounds.
func (n node) child(i int) uint64 {
	v := n.value(i)
	if len(v) != 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(v)
}

// lowerBound is the first slot whose key is >= key, and whether it is equal.
// Heads decide most comparisons: a search over the heads alone (with no
// branch to mispredict) finds the slots whose head equals key's, and only
// among those, usually none or one, are keys compared (the heap is read
// only on a tie of heads with a key longer than 8 bytes).
//
// In a node with a prefix, key is compared with the prefix first: a key
// that does not start with it sorts before or after every key of the
// node, and one that does is searched for by its bytes after it.
func (n node) lowerBound(key []byte) (int, bool) {
	c := n.count()
	p := n.prefixLen()
	if p > 0 {
		pre, ok := n.prefix()
		if !ok {
			return 0, false // a torn page: the reader restarts
		}
		switch cmp := bytes.Compare(key[:min(len(key), p)], pre); {
		case cmp < 0 || cmp == 0 && len(key) < p:
			return 0, false
		case cmp > 0:
			return c, false
		}
		key = key[p:]
	}
	h := keyHead(key)
	lo := n.firstHead(h, 0, c)
	hi := lo
	if lo < c && n.head(lo) == h {
		switch {
		case lo+1 == c || n.head(lo+1) != h:
			// The usual case: one key has this head (always, for keys of
			// at most 8 bytes but those differing only in trailing zeros).
			hi = lo + 1
		case h == math.MaxUint64:
			hi = c
		default:
			hi = n.firstHead(h+1, lo+1, c)
		}
	}
	// Heads order like keys, so every key before lo is smaller and every
	// key from hi on is larger; the keys of [lo, hi) share key's head.
	for lo < hi {
		mid := (lo + hi) / 2
		if n.compareSlot(mid, h, p, key) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < c && n.compareSlot(lo, h, p, key) == 0
}

// firstHead is the first slot in [lo, hi) whose head is >= h, or hi. The
// loop's trip count depends on hi-lo alone, and each comparison moves the
// base arithmetically (the borrow of head - h), so the search has no branch
// to mispredict: each step of a binary search over random keys is a coin
// toss for the branch predictor.
//
// Each step of the first loop compares three heads, a quarter of the range
// apart, whose loads do not wait for one another: it cuts the range to a
// quarter for the latency of one load, where a binary step halves it. An
// inner node's 170 slots take 4 such steps and 2 binary ones instead of 8
// binary steps in a row.
//
// Why it is right: the answer is always in [base, base+size]. With q =
// size/4 and c of the three heads at base+q, base+2q, base+3q below h
// (they are sorted, so the first c of them), the answer is above base+cq
// when c > 0 and at most base+(c+1)q when c < 3: inside [base+cq,
// base+cq+size-3q], since size-3q >= q.
func (n node) firstHead(h uint64, lo, hi int) int {
	// The slots are read through a pointer, not a slice: with a bounds
	// check and a masked subslice at every load, the search spent as long
	// on addressing as on comparing. The clamp keeps every read inside
	// the page: the last head read is at most slot hi-1 < maxSlots.
	if len(n) < usable || lo < 0 {
		return lo
	}
	hi = min(hi, maxSlots)
	slots := unsafe.Pointer(&n[headerSize])
	head := func(i int) uint64 {
		return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(slots, i*slotSize))[:])
	}
	base, size := lo, hi-lo
	for size >= 4 {
		q := size / 4
		_, b1 := bits.Sub64(head(base+q), h, 0)
		_, b2 := bits.Sub64(head(base+2*q), h, 0)
		_, b3 := bits.Sub64(head(base+3*q), h, 0)
		base += q&-int(b1) + q&-int(b2) + q&-int(b3)
		size -= 3 * q
	}
	for size > 1 {
		half := size / 2
		_, less := bits.Sub64(head(base+half), h, 0)
		base += half & -int(less)
		size -= half
	}
	if size == 1 {
		_, less := bits.Sub64(head(base), h, 0)
		base += int(less)
	}
	return base
}

// leadLines is how many lines at a page's start a descent hints as soon as
// it has the page, before its header says how many slots there are: the
// header and 28 slots, a full leaf of YCSB's entries.
const leadLines = 8

// prefetchSlots hints the lines of the slot array that a search's first
// three steps read (the slots at every eighth of the count), so that its
// misses overlap instead of following one another. Hinting the whole array
// (32 lines for an inner node) issued more misses than the CPU can track,
// and a batch of lookups then stalled on its own prefetches.
func (n node) prefetchSlots() {
	n.prefetchPrefix()
	c := n.count()
	last := -1
	for k := 1; k < 8; k++ {
		line := (headerSize + (k*c/8)*slotSize) / 64
		if line != last && line > 0 { // line 0 is the header's, read already
			prefetch.Line(unsafe.Pointer(&n[line*64]))
			last = line
		}
	}
}

// prefetchSearch hints what one lookup's search reads in n after its
// header: the whole slot array (from line from on; the lines before are
// hinted already). The search then waits for one round of misses instead
// of one per step. A lookup alone can afford the 40 hints of a full inner
// node; a batch of lookups cannot (see prefetchSlots).
//
// An inner node's heap, where the child PIDs are, is not hinted: the one
// line of it the search ends at is read once, and the inner nodes just
// above the leaves stay in the CPU's cache when they are full (an
// ascending load fills them), so that line is usually there. Hinting the
// whole heap as well (22 more lines) cost more than it saved: 2M records
// in memory, 1.02x, 1.06x and 1.10x without it (and 1.02x, 0.97x at 6M,
// where that level does not stay in the cache).
func (n node) prefetchSearch(from int) {
	n.prefetchPrefix()
	end := (headerSize + n.count()*slotSize + 63) / 64 // count() is bounded: end <= 64
	if end > from {
		prefetch.Lines(unsafe.Pointer(&n[from*64]), end-from)
	}
}

// prefetchPrefix hints the line of the node's prefix (slot 0's key in the
// heap), which a search reads first when the node has one.
func (n node) prefetchPrefix() {
	if n.prefixLen() == 0 {
		return
	}
	if off, _, _ := n.slot(0); off >= headerSize && off < usable {
		prefetch.Line(unsafe.Pointer(&n[off]))
	}
}

// compareSlot compares slot i's key after the node's prefix of p bytes
// with suffix, a key's bytes after that prefix, whose head is h.
func (n node) compareSlot(i int, h uint64, p int, suffix []byte) int {
	sh := n.head(i)
	switch {
	case sh < h:
		return -1
	case sh > h:
		return 1
	}
	_, kl, _ := n.slot(i)
	sl := kl - p // the slot's suffix length
	switch {
	case sl <= 8 && len(suffix) <= 8:
		// Equal heads of short suffixes: they agree up to the shorter
		// length and the zero padding, so the shorter one sorts first.
		return sl - len(suffix)
	case sl <= 8:
		// The slot's suffix is suffix's first sl bytes (the rest of
		// suffix's head is zeros): a proper prefix, so it sorts first.
		return -1
	case len(suffix) <= 8:
		return 1 // the other way round
	}
	k := n.key(i)
	if len(k) < p {
		return -1 // a torn page: the reader restarts
	}
	return bytes.Compare(k[p:], suffix)
}

// childFor is the child of an inner node that covers key.
func (n node) childFor(key []byte) uint64 {
	_, c := n.childSlotFor(key)
	return c
}

// childSlotFor is the child of an inner node that covers key and the slot
// that leads to it (count() for upper).
func (n node) childSlotFor(key []byte) (int, uint64) {
	i, _ := n.lowerBound(key)
	if i == n.count() {
		return i, n.upper()
	}
	return i, n.child(i)
}

// free is the room between the slots and the heap.
func (n node) free() int { return n.heapStart() - headerSize - n.count()*slotSize }

// live is the room the entries would need after a compaction.
func (n node) live() int {
	s := 0
	for i := range n.count() {
		_, kl, vl := n.slot(i)
		s += n.heapKey(kl) + vl + slotSize
	}
	return s
}

// room reports whether an entry with a key of kl bytes and a value of vl
// fits (after compaction). A node that does not inline short keys yet
// will after its next compaction, but the key is counted whole: room must
// hold before any compaction.
func (n node) room(kl, vl int) bool {
	need := n.heapKey(kl) + vl + slotSize
	// The free gap is never more than what a compaction would leave (the
	// heap's dead bytes come back only then): when it is enough, the
	// count of the live entries (a pass over every slot, on each node of
	// every insert's descent) is not needed.
	return n.free() >= need || usable-headerSize-n.live() >= need
}

// roomFor reports whether leaf n can take key with a value of vl bytes,
// counting the space of the entry it would replace: an update of a full
// leaf with a value no larger than the old one needs no split.
func (n node) roomFor(key []byte, vl int) bool {
	if n.room(len(key), vl) {
		return true
	}
	i, found := n.lowerBound(key)
	if !found {
		return false
	}
	_, okl, ovl := n.slot(i)
	return usable-headerSize-n.live()+n.heapKey(okl)+ovl >= n.heapKey(len(key))+vl
}

// compact rewrites the heap without the space of deleted entries, in the
// current format: a node written before flagShortInline existed drops the
// heap copies of its short keys here. It chooses the node's prefix anew.
func (n node) compact() {
	var tmp [protocol.PageSize]byte
	copy(tmp[:], n)
	t := node(tmp[:])
	n[1] = flagShortInline | t[1]&flagPrefix // the heads are still t's
	h := usable
	for i := range t.count() {
		off, kl, vl := t.slot(i)
		from := off + t.heapKey(kl) - n.heapKey(kl) // drop a key the old format kept
		size := n.heapKey(kl) + vl
		h -= size
		copy(n[h:], t[from:from+size])
		n.setSlot(i, h, t.head(i), kl, vl)
	}
	n.setHeap(h)
	n.choosePrefix()
}

// insertAt puts key/value in slot i, shifting the slots after it. The
// caller checked room().
func (n node) insertAt(i int, key, val []byte) {
	if n.free() < n.heapKey(len(key))+len(val)+slotSize {
		n.compact() // may also drop short keys of an old page
	}
	hk := n.heapKey(len(key))
	p := n.prefixLen()
	if p > 0 {
		// Before the slots move: the prefix is slot 0's key.
		pre, ok := n.prefix()
		switch {
		case hk == 0 || !ok:
			p = 0 // a short key lives in its head alone
		default:
			p = sharedLen(pre, key)
		}
		n.setPrefix(p)
	}
	c := n.count()
	copy(n[headerSize+(i+1)*slotSize:headerSize+(c+1)*slotSize], n[headerSize+i*slotSize:headerSize+c*slotSize])
	h := n.heapStart() - hk - len(val)
	copy(n[h:], key[:hk])
	copy(n[h+hk:], val)
	n.setSlot(i, h, keyHead(key[p:]), len(key), len(val))
	n.setHeap(h)
	n.setCount(c + 1)
	n.setLastInsert(i)
	if c == 1 {
		// The second key: a node that began empty (a new root, the new
		// node of an ascending load's split) gets its prefix here, and
		// later inserts lower it as they need.
		n.choosePrefix()
	}
}

// removeAt deletes slot i (its heap space is reclaimed by the next compact).
// The keys left still share the prefix; an empty node has none, since its
// prefix lived in slot 0's key.
func (n node) removeAt(i int) {
	c := n.count()
	copy(n[headerSize+i*slotSize:], n[headerSize+(i+1)*slotSize:headerSize+c*slotSize])
	n.setCount(c - 1)
	if c == 1 {
		n.setPrefix(0)
	}
}

// splitInto moves the upper half of n into the empty node r (same kind)
// and returns the separator: every key left in n is <= sep < every key in r.
// rightPID is r's page: a leaf links to it. key is the key whose insertion
// caused the split.
//
// A leaf that is filled in ascending order (a bulk load, an append-only
// log, each of several loaders appending its own range) splits where the
// ascending run ends instead of in the middle, since a half split would
// leave every leaf of such a load half empty: twice the pages for the
// cache to hold and the disk to read. When key sorts after every key of
// n, n keeps every entry and key starts the empty r. When key continues
// the run that the leaf's last insert extended (it goes right after it)
// but other keys follow, those keys move to r and the separator is set
// just below the first of them, so the run goes on growing in n (and then
// at its end). Anything else splits in half.
//
// An inner node that is full for key, where key goes to its last child
// (the same ascending load, a level up), keeps all its entries but the
// last, whose child becomes its upper; r starts with no entry and takes
// the separators that follow. A bulk load so leaves its inner nodes full,
// not half full: half as many nodes on the level above the leaves, which
// then stays in the CPU's cache while lookups go through it. Any other key
// splits an inner node in half.
func (n node) splitInto(r node, rightPID uint64, key []byte) []byte {
	c := n.count()
	mid := c / 2
	var sep []byte
	if n.isLeaf() && c >= 2 {
		switch pos, found := n.lowerBound(key); {
		case found: // an update that no longer fits
		case pos == c:
			mid = c - 1
		case pos >= c/2 && n.lastInsert() == pos-1:
			if s := below(n.key(pos)); len(s) > 0 && bytes.Compare(key, s) <= 0 {
				mid, sep = pos-1, s
			}
		}
	}
	var kb [MaxKey]byte
	if n.isLeaf() {
		// n keeps [0, mid], r gets (mid, c).
		for i := mid + 1; i < c; i++ {
			r.insertAt(r.count(), n.appendKey(kb[:0], i), n.value(i))
		}
		if sep == nil {
			sep = n.appendKey(nil, mid)
		}
		r.setUpper(n.upper())
		n.setUpper(rightPID + 1)
		n.setCount(mid + 1)
	} else {
		if pos, _ := n.lowerBound(key); pos == c && c >= 2 {
			mid = c - 1 // an ascending load: r starts empty
		}
		// n keeps [0, mid) with mid's child as its upper; r gets (mid, c).
		for i := mid + 1; i < c; i++ {
			r.insertAt(r.count(), n.appendKey(kb[:0], i), n.value(i))
		}
		r.setUpper(n.upper())
		sep = n.appendKey(nil, mid)
		n.setUpper(n.child(mid))
		n.setCount(mid)
	}
	r.choosePrefix()
	n.compact()
	return sep
}

// splitLeafAt moves the entries of leaf n above sep into the empty leaf r
// and returns sep: a split at a chosen key, for a transaction whose new
// keys do not fit in a leaf that may hold none yet.
func (n node) splitLeafAt(r node, rightPID uint64, sep []byte) []byte {
	c := n.count()
	i, found := n.lowerBound(sep)
	if found {
		i++
	}
	var kb [MaxKey]byte
	for j := i; j < c; j++ {
		r.insertAt(r.count(), n.appendKey(kb[:0], j), n.value(j))
	}
	r.setUpper(n.upper())
	n.setUpper(rightPID + 1)
	n.setCount(i)
	r.choosePrefix()
	n.compact()
	return append([]byte(nil), sep...)
}

// below returns a key s < b that every key of b's length sorting before b
// sorts at or before (exactly every key before b, when b ends in a zero
// byte). Empty when b is a single zero byte: no key is below it.
func below(b []byte) []byte {
	s := append([]byte(nil), b...)
	last := len(s) - 1
	if s[last] == 0 {
		return s[:last]
	}
	s[last]--
	return s
}

// dropAbove removes from n the entries above its bound in its parent
// (the separator that routes key to n; none when n is the parent's last
// child): what a split that a crash interrupted left behind, after the
// parent had learned of the new node and before n's truncated copy was
// durable (Session.Persist). A leaf keeps the keys <= bound; an inner
// node keeps its separators below bound, and the child of the first one
// at or above it becomes its upper child, as splitInto leaves it. A leaf
// that drops entries links to the parent's next child, where they went.
// It reports whether n changed; in a tree no crash touched it never does.
func (n node) dropAbove(parent node, key []byte) bool {
	i, _ := parent.lowerBound(key)
	if i >= parent.count() {
		return false // the last child: no upper bound
	}
	bound := parent.key(i)
	var next uint64
	if i+1 < parent.count() {
		next = parent.child(i + 1)
	} else {
		next = parent.upper()
	}
	c := n.count()
	if n.isLeaf() {
		j, found := n.lowerBound(bound)
		if found {
			j++
		}
		if j >= c {
			return false
		}
		n.setCount(j)
		n.setUpper(next + 1)
		n.compact()
		return true
	}
	j, _ := n.lowerBound(bound)
	if j >= c {
		return false
	}
	n.setUpper(n.child(j))
	n.setCount(j)
	n.compact()
	return true
}

// insertSeparator records in inner node n that child left (which used to
// cover this key range alone) now covers keys <= sep and right the rest.
func (n node) insertSeparator(sep []byte, left, right uint64) {
	i, _ := n.lowerBound(sep)
	var lv [8]byte
	binary.LittleEndian.PutUint64(lv[:], left)
	if i == n.count() {
		n.setUpper(right)
	} else {
		binary.LittleEndian.PutUint64(n.value(i), right)
	}
	n.insertAt(i, sep, lv[:])
}
