package prefetch

import "unsafe"

// Range hints every cache line that b[from:to] touches (clamped to b), at
// most max+1 lines: a node's slot array, say, before a binary search over
// it.
func Range(b []byte, from, to, max int) {
	to = min(to, len(b))
	if from < 0 || from >= to {
		return
	}
	for i := 0; from < to && i < max; i++ {
		Line(unsafe.Pointer(&b[from]))
		from += 64
	}
	Line(unsafe.Pointer(&b[to-1])) // the last line, when from was not at a line's start
}
