package linecache

import (
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
)

// LineSize is the size of a global cache line: a page, so that the
// workloads and checks of ScaleStore's simulator run on both protocols.
const LineSize = protocol.PageSize

// Stride is the space of one line in a memory node's region: its latch
// word at offset 0 (8-byte aligned, as RDMA atomics need), the line's data
// at DataOffset.
const (
	DataOffset = 64
	Stride     = DataOffset + LineSize
)

// MemoryBytes is the size of a memory node's region for lines lines.
func MemoryBytes(lines int) int { return lines * Stride }

// WordOffset is where the latch word of line index i lives in its region.
func WordOffset(i uint64) uint64 { return i * Stride }

// A compute node's reply region has one slot per thread that sends
// invalidations: the data a holder forwards, then one status word per
// compute node that may answer.
const (
	slotStatus = LineSize
	SlotSize   = LineSize + 8*selcc.MaxNodes
)

// ReplyBytes is the size of a compute node's reply region for slots
// sending threads.
func ReplyBytes(slots int) int { return slots * SlotSize }

func statusOffset(slot int, replier selcc.Node) uint64 {
	return uint64(slot*SlotSize+slotStatus) + 8*uint64(replier)
}
