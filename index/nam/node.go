package nam

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A node of the fine-grained levels lives in a slot of a memory server's
// region. Its layout:
//
//	[0,8)    version word: version<<1 | lock bit (one-sided atomics only)
//	[8,12)   CRC-32C of bytes [12,NodeSize): a READ racing a write-back is
//	         seen torn and retried (a READ of many cache lines is not atomic)
//	[12]     level: 0 for a leaf
//	[13]     flags: bit 0, the node has a high key; bit 1, the node is
//	         invalid (Cell: a copy left behind by a meganode split, whose
//	         slot may be reused; a reader restarts its search); bit 2, a
//	         head node (FG and hybrid leaf level: no keys of the index, its
//	         entries are (low key, pointer) of a group of leaves, its
//	         sibling the next group's head node; see heads.go)
//	[14,16)  count of entries
//	[16,24)  high key: the node holds keys below it; above, see the sibling
//	[24,32)  sibling: the remote pointer of the right neighbour
//	[32,40)  low key: the node holds keys from it on (a reader that reached
//	         a node whose low key is above its key came by a stale pointer
//	         to a reused slot, and restarts)
//	[40,...) entries of (key, value) for a leaf, (low key, child) inside
//	[504,512) a leaf's head pointer: its group's head node (or 0); the
//	         entries end at 504 at most (MaxFanout)
//
// Slot 0 of every region is the server's header: word 0 the next free slot
// (fetch-and-add allocates), word 1 the root pointer (server 0's, FG).
const (
	NodeSize    = 512
	headerSize  = 40
	entrySize   = 16
	MaxFanout   = (NodeSize - headerSize) / entrySize
	lockBit     = 1
	flagHasHigh = 1
	flagInvalid = 2
	flagHead    = 4
	headOff     = NodeSize - 8
	allocWord   = 0
	rootWord    = 8
)

// Ptr is a remote pointer: bit 63 set for a valid pointer, the server in
// bits 48..62, the slot below.
type Ptr uint64

const ptrValid = 1 << 63

// MakePtr is the pointer to slot of server.
func MakePtr(server int, slot uint64) Ptr {
	return Ptr(ptrValid | uint64(server)<<48 | slot&(1<<48-1))
}

// Valid reports whether p points somewhere.
func (p Ptr) Valid() bool { return p&ptrValid != 0 }

// Server is the memory server p points into.
func (p Ptr) Server() int { return int(p>>48) & 0x7fff }

// Slot is the slot p points at.
func (p Ptr) Slot() uint64 { return uint64(p) & (1<<48 - 1) }

func (p Ptr) String() string {
	if !p.Valid() {
		return "nil"
	}
	return fmt.Sprintf("%d:%d", p.Server(), p.Slot())
}

// Node is a decoded node (a client's copy).
type Node struct {
	Word    uint64 // the version word as read
	Level   uint8
	HasHigh bool
	Invalid bool
	// IsHead marks a head node; Head is a leaf's pointer to its group's
	// head node (heads.go): hints for prefetching scans, never trusted.
	IsHead  bool
	Head    Ptr
	High    uint64
	Low     uint64
	Sibling Ptr
	Keys    []uint64
	Vals    []uint64 // values in a leaf, child pointers inside
}

// Locked reports whether the copy was read while a writer held the node.
func (n *Node) Locked() bool { return n.Word&lockBit != 0 }

// Covers reports whether key belongs to this node rather than to a node on
// its right (B-link: move right when it does not).
func (n *Node) Covers(key uint64) bool { return !n.HasHigh || key < n.High }

// Holds reports whether key is in the node's range [Low, High): a node
// that holds key is where a search for it may go on from.
func (n *Node) Holds(key uint64) bool { return key >= n.Low && n.Covers(key) }

var errTorn = errors.New("nam: node read torn (checksum)")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Decode reads a node from its bytes, checking the checksum and the
// entries' bounds and order: what a READ brought must not be trusted
// further than that.
func Decode(b []byte, n *Node) error {
	if len(b) != NodeSize {
		return fmt.Errorf("nam: node of %d bytes", len(b))
	}
	n.Word = binary.LittleEndian.Uint64(b)
	if crc32.Checksum(b[12:], castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		return errTorn
	}
	n.Level = b[12]
	n.HasHigh = b[13]&flagHasHigh != 0
	n.Invalid = b[13]&flagInvalid != 0
	n.IsHead = b[13]&flagHead != 0
	count := int(binary.LittleEndian.Uint16(b[14:]))
	if count > MaxFanout || b[13]&^(flagHasHigh|flagInvalid|flagHead) != 0 {
		return fmt.Errorf("nam: node header: %d entries, flags %#x", count, b[13])
	}
	n.High = binary.LittleEndian.Uint64(b[16:])
	n.Sibling = Ptr(binary.LittleEndian.Uint64(b[24:]))
	n.Low = binary.LittleEndian.Uint64(b[32:])
	n.Head = Ptr(binary.LittleEndian.Uint64(b[headOff:]))
	n.Keys, n.Vals = n.Keys[:0], n.Vals[:0]
	for i := range count {
		e := b[headerSize+i*entrySize:]
		k := binary.LittleEndian.Uint64(e)
		if i > 0 && k <= n.Keys[i-1] {
			return fmt.Errorf("nam: node keys out of order at entry %d", i)
		}
		n.Keys = append(n.Keys, k)
		n.Vals = append(n.Vals, binary.LittleEndian.Uint64(e[8:]))
	}
	return nil
}

// Encode writes n into b (NodeSize bytes), checksum included; the version
// word is left to the caller (it changes by atomics only).
func Encode(b []byte, n *Node) {
	clear(b[8:])
	b[12] = n.Level
	if n.HasHigh {
		b[13] |= flagHasHigh
	}
	if n.Invalid {
		b[13] |= flagInvalid
	}
	if n.IsHead {
		b[13] |= flagHead
	}
	binary.LittleEndian.PutUint64(b[headOff:], uint64(n.Head))
	binary.LittleEndian.PutUint16(b[14:], uint16(len(n.Keys)))
	binary.LittleEndian.PutUint64(b[16:], n.High)
	binary.LittleEndian.PutUint64(b[24:], uint64(n.Sibling))
	binary.LittleEndian.PutUint64(b[32:], n.Low)
	for i, k := range n.Keys {
		e := b[headerSize+i*entrySize:]
		binary.LittleEndian.PutUint64(e, k)
		binary.LittleEndian.PutUint64(e[8:], n.Vals[i])
	}
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[12:], castagnoli))
}

// Find is the index of key in a leaf and whether it is there; otherwise
// where it would go.
func (n *Node) Find(key uint64) (int, bool) {
	lo, hi := 0, len(n.Keys)
	for lo < hi {
		m := (lo + hi) / 2
		if n.Keys[m] < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(n.Keys) && n.Keys[lo] == key
}

// Child is the child of an inner node that covers key: the last entry
// whose low key is at most key.
func (n *Node) Child(key uint64) Ptr {
	i, found := n.Find(key)
	if !found {
		i--
	}
	if i < 0 {
		i = 0
	}
	return Ptr(n.Vals[i])
}

// Insert puts (key, val) in order, replacing key's value if present.
func (n *Node) Insert(key, val uint64) {
	i, found := n.Find(key)
	if found {
		n.Vals[i] = val
		return
	}
	n.Keys = append(n.Keys, 0)
	n.Vals = append(n.Vals, 0)
	copy(n.Keys[i+1:], n.Keys[i:])
	copy(n.Vals[i+1:], n.Vals[i:])
	n.Keys[i], n.Vals[i] = key, val
}

// Remove deletes key and reports whether it was there.
func (n *Node) Remove(key uint64) bool {
	i, found := n.Find(key)
	if !found {
		return false
	}
	n.Keys = append(n.Keys[:i], n.Keys[i+1:]...)
	n.Vals = append(n.Vals[:i], n.Vals[i+1:]...)
	return true
}

// Split moves the upper half of n into right and returns the split key:
// n keeps the keys below it, with right as its sibling-to-be.
func (n *Node) Split(right *Node) uint64 {
	mid := len(n.Keys) / 2
	right.Level, right.Invalid = n.Level, false
	right.IsHead, right.Head = false, n.Head // the same group, until the head pass says otherwise
	right.HasHigh, right.High, right.Sibling = n.HasHigh, n.High, n.Sibling
	right.Keys = append(right.Keys[:0], n.Keys[mid:]...)
	right.Vals = append(right.Vals[:0], n.Vals[mid:]...)
	sep := n.Keys[mid]
	n.Keys, n.Vals = n.Keys[:mid], n.Vals[:mid]
	n.HasHigh, n.High = true, sep
	right.Low = sep
	return sep
}

// IsTorn reports whether err is a checksum mismatch of Decode: a READ that
// raced a write and should be retried.
func IsTorn(err error) bool { return errors.Is(err, errTorn) }
