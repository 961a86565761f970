//go:build amd64 || arm64

package prefetch

import "unsafe"

// Line hints that the cache line at p is about to be read.
//
//go:noescape
func Line(p unsafe.Pointer)
