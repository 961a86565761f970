// Package memfile is an in-memory storage.PageStore for the simulator and
// tests. Faults are not decided here: an Injector, which the simulator backs
// with its seeded PRNG, says which operation fails. Latency belongs to the
// simulator's clock, not to this store.
package memfile

import (
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
)

// Op names an operation for the Injector.
type Op uint8

const (
	// OpRead is a page read.
	OpRead Op = iota
	// OpWrite is a page write.
	OpWrite
)

// Injector decides whether an operation fails; a returned error is passed to
// the caller (wrap storage.ErrTransient for retryable ones).
type Injector interface {
	Inject(op Op, slot uint64) error
}

// Store keeps pages in memory, allocated on first write.
type Store struct {
	pages  [][]byte
	slots  uint64
	inject Injector
	closed bool
	// Reads and Writes count successful operations.
	Reads, Writes uint64
}

var _ storage.PageStore = (*Store)(nil)

// New makes a store of slots pages. inject may be nil.
func New(slots uint64, inject Injector) *Store {
	return &Store{slots: slots, inject: inject}
}

func (s *Store) check(op Op, slot uint64, buf []byte) error {
	if s.closed {
		return fmt.Errorf("memfile: store closed")
	}
	if slot >= s.slots {
		return fmt.Errorf("memfile: slot %d of %d: %w", slot, s.slots, storage.ErrOutOfRange)
	}
	if len(buf) != protocol.PageSize {
		return fmt.Errorf("memfile: buffer of %d bytes, want %d", len(buf), protocol.PageSize)
	}
	if s.inject != nil {
		if err := s.inject.Inject(op, slot); err != nil {
			return fmt.Errorf("memfile: slot %d: %w", slot, err)
		}
	}
	return nil
}

// ReadPage implements storage.PageStore.
func (s *Store) ReadPage(slot uint64, buf []byte) error {
	if err := s.check(OpRead, slot, buf); err != nil {
		return err
	}
	if slot < uint64(len(s.pages)) && s.pages[slot] != nil {
		copy(buf, s.pages[slot])
	} else {
		clear(buf)
	}
	s.Reads++
	return nil
}

// WritePage implements storage.PageStore.
func (s *Store) WritePage(slot uint64, buf []byte) error {
	if err := s.check(OpWrite, slot, buf); err != nil {
		return err
	}
	for uint64(len(s.pages)) <= slot {
		s.pages = append(s.pages, nil)
	}
	if s.pages[slot] == nil {
		s.pages[slot] = make([]byte, protocol.PageSize)
	}
	copy(s.pages[slot], buf)
	s.Writes++
	return nil
}

// Slots implements storage.PageStore.
func (s *Store) Slots() uint64 { return s.slots }

// Close implements storage.PageStore.
func (s *Store) Close() error { s.closed = true; return nil }
