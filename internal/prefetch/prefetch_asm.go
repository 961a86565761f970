//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line hints that the cache line at p is about to be read.
//
//go:noescape
func Line(p unsafe.Pointer)

// Lines hints the n consecutive cache lines that start at p (none when n
// <= 0): one call for a run of lines, such as the start of a page whose
// header and first slots a search reads next.
//
//go:noescape
func Lines(p unsafe.Pointer, n int)
