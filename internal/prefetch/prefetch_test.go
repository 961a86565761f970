package prefetch

import (
	"testing"
	"unsafe"
)

// A hint must never fault: Range clamps its bounds to the slice, and out
// of range or empty bounds do nothing.
func TestRangeStaysInBounds(t *testing.T) {
	b := make([]byte, 200)
	for _, c := range [][3]int{{0, 200, 8}, {0, 1 << 20, 100}, {150, 10, 4}, {-5, 10, 4}, {199, 200, 1}, {200, 300, 4}, {64, 128, 0}} {
		Range(b, c[0], c[1], c[2])
	}
	Range(nil, 0, 10, 4)
	Line(nil) // a prefetch of an unmapped address is dropped, not faulted
	Lines(nil, 4)
	Lines(unsafe.Pointer(&b[0]), 0)
	Lines(unsafe.Pointer(&b[0]), -1)
	Lines(unsafe.Pointer(&b[0]), 3)
}
