package sel

import (
	"encoding/binary"
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
)

// Word is a line's latch word: the number of readers holding it (or,
// transiently, adding and undoing a failed acquire) in bits 0-31, and the
// exclusive holder's tag in bits 32-63 (0: none).
type Word uint64

const holderShift = 32

// Readers is the reader count.
func (w Word) Readers() uint32 { return uint32(w) }

// Holder is the exclusive holder's tag, 0 if none.
func (w Word) Holder() Tag { return Tag(w >> holderShift) }

func (w Word) String() string {
	if h := w.Holder(); h != 0 {
		return fmt.Sprintf("(X %v, %d readers)", h, w.Readers())
	}
	return fmt.Sprintf("(free, %d readers)", w.Readers())
}

// Tag names an exclusive holder: its node and worker, each plus one, so
// that no tag is 0.
type Tag uint32

// MaxWorkers bounds the workers of a node (a tag's worker field).
const MaxWorkers = 1<<16 - 2

// TagOf is the tag of worker wk of node n.
func TagOf(n protocol.NodeID, wk int) Tag { return Tag(uint32(n)+1)<<16 | Tag(wk+1) }

// Node and Worker decode a tag.
func (t Tag) Node() protocol.NodeID { return protocol.NodeID(uint32(t)>>16 - 1) }
func (t Tag) Worker() int           { return int(uint32(t)&0xFFFF) - 1 }

func (t Tag) String() string {
	if t == 0 {
		return "none"
	}
	if uint32(t)>>16 == 0 || uint32(t)&0xFFFF == 0 || uint32(t)>>16 > protocol.MaxNodes {
		return fmt.Sprintf("garbage %#x", uint32(t))
	}
	return fmt.Sprintf("n%d/w%d", t.Node(), t.Worker())
}

// The deltas of the latch verbs (a subtraction is its two's complement,
// which FAA adds modulo 2^64).
const (
	readerAcquire = 1
	readerRelease = ^uint64(0) // -1
)

// exclusive is the word a writer's CAS installs; releaseExclusive the FAA
// delta that clears its tag.
func exclusive(t Tag) uint64        { return uint64(t) << holderShift }
func releaseExclusive(t Tag) uint64 { return -exclusive(t) }

// A line's data: its version at bytes 0-7 and again in its last 8 bytes,
// its value at bytes 8-15. A WRITE of a line is posted as two verbs: its
// head (its first cache line, headSize bytes, or half a line of less than
// two cache lines) and then its tail (the rest), the way a NIC places a
// long WRITE a cache line at a time.
const (
	versionOff = 0
	valueOff   = 8
	// MinLineSize is the smallest line: the versions in head and tail.
	MinLineSize = 32
	// headSize is the head of a line: one cache line.
	headSize = 64
)

// Region layout of a memory node: line slot s at s*stride, its latch word
// first (8-byte aligned, as atomics need), its data after it.
const dataOffset = 8

// lineLayout places the lines of a deployment.
type lineLayout struct {
	computes, memories int
	lineSize           int
}

func (l lineLayout) stride() uint64 { return uint64(dataOffset + l.lineSize) }

// home is the memory node of key and its slot there: keys go round-robin
// over the memory nodes, as SELCC's lines do (scenarios/selccrun.go).
func (l lineLayout) home(key uint64) (protocol.NodeID, uint64) {
	return protocol.NodeID(l.computes + int(key%uint64(l.memories))), key / uint64(l.memories)
}

// wordOff and dataOff are where key's latch word and data live in its
// memory node's region.
func (l lineLayout) wordOff(key uint64) uint64 {
	_, slot := l.home(key)
	return slot * l.stride()
}
func (l lineLayout) dataOff(key uint64) uint64 { return l.wordOff(key) + dataOffset }

// memoryBytes is the region of memory node i (0-based among the memory
// nodes) for keys keys.
func (l lineLayout) memoryBytes(i, keys int) int {
	slots := keys / l.memories
	if i < keys%l.memories {
		slots++
	}
	return slots * int(l.stride())
}

// keyOf is the key whose word or data lies at off of memory node n's
// region (a chart maps verbs to keys with it).
func (l lineLayout) keyOf(n protocol.NodeID, off uint64) (uint64, bool) {
	if int(n) < l.computes || int(n) >= l.computes+l.memories {
		return 0, false
	}
	slot := off / l.stride()
	return slot*uint64(l.memories) + uint64(int(n)-l.computes), true
}

// lineVersions reads a line's head and tail versions and its value.
func lineVersions(data []byte) (head, tail, value uint64) {
	return binary.LittleEndian.Uint64(data[versionOff:]), binary.LittleEndian.Uint64(data[len(data)-8:]),
		binary.LittleEndian.Uint64(data[valueOff:])
}

// headOf is the size of the head of a line of size bytes.
func headOf(size int) int { return min(headSize, size/2) }

// fillLine writes a line of version and value into its head and tail.
func fillLine(head, tail []byte, version, value uint64) {
	clear(head)
	clear(tail)
	binary.LittleEndian.PutUint64(head[versionOff:], version)
	binary.LittleEndian.PutUint64(head[valueOff:], value)
	binary.LittleEndian.PutUint64(tail[len(tail)-8:], version)
}
