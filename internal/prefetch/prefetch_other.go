//go:build !amd64 && !arm64

package prefetch

import "unsafe"

// Line hints that the cache line at p is about to be read (a no-op here).
func Line(p unsafe.Pointer) {}

// Lines hints n consecutive cache lines from p (a no-op here).
func Lines(p unsafe.Pointer, n int) {}
