// Package storage defines PageStore, the interface every page store
// implements: the in-memory one the simulator uses (storage/memfile) and the
// O_DIRECT NVMe one (storage/nvme, later).
//
// It must import nothing of this module but protocol constants.
package storage

import "errors"

// PageStore reads and writes whole pages by slot. Implementations must be
// safe to call from one goroutine at a time; callers serialize.
type PageStore interface {
	// ReadPage fills buf (protocol.PageSize bytes) with slot's content; a
	// slot never written reads as zeros.
	ReadPage(slot uint64, buf []byte) error
	// WritePage stores buf (protocol.PageSize bytes) as slot's content.
	WritePage(slot uint64, buf []byte) error
	// Slots is the capacity in pages.
	Slots() uint64
	Close() error
}

// ErrOutOfRange is returned for a slot beyond the store's capacity.
var ErrOutOfRange = errors.New("storage: slot out of range")

// ErrTransient marks an error the caller may retry.
var ErrTransient = errors.New("storage: transient I/O error")
