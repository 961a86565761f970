// Package filestore is a storage.PageStore in one file, with positioned
// reads and writes through the page cache of the operating system: the
// simple, portable store behind the embedded API and `scalestore kv` until
// the O_DIRECT/io_uring store lands.
//
// Layout: page 0 is the superblock (magic, version, capacity, a clean-close
// flag and the engine's metadata blob, CRC32C-protected); slot s is at byte
// (s+1)*4096. The last TrailerSize bytes of every data page hold a CRC32C of
// the rest and the slot number, so a torn, corrupted or misplaced page is
// reported (ErrCorrupt), never served. A slot never written reads as zeros.
//
// It imports storage and protocol only. Safe for one goroutine at a time.
package filestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
)

// TrailerSize bytes at the end of every page belong to the store.
const TrailerSize = 16

// MaxMeta is the largest metadata blob.
const MaxMeta = 3072

// ErrCorrupt is wrapped by every error about bad content on disk.
var ErrCorrupt = errors.New("filestore: corrupt")

const (
	magic        = "SSGOSTOR"
	version      = 1
	trailerMagic = 0x53534750 // "SSGP"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Store is an open file store.
type Store struct {
	f        *os.File
	slots    uint64
	meta     []byte
	wasClean bool
	buf      []byte
	closed   bool
}

var _ storage.PageStore = (*Store)(nil)

// Open opens the store at path, creating it with room for slots pages when
// it does not exist.
func Open(path string, slots uint64) (*Store, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return create(path, slots)
	}
	if err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	s := &Store{f: f, buf: make([]byte, protocol.PageSize)}
	if _, err := f.ReadAt(s.buf, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("filestore: reading the superblock of %s: %w (%w)", path, err, ErrCorrupt)
	}
	if err := s.parseSuper(); err != nil {
		f.Close()
		return nil, fmt.Errorf("filestore: %s: %w", path, err)
	}
	// Until the next clean close, the file is marked in use.
	if err := s.writeSuper(false); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func create(path string, slots uint64) (*Store, error) {
	if slots == 0 || slots > protocol.MaxSlot {
		return nil, fmt.Errorf("filestore: capacity of %d pages", slots)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	s := &Store{f: f, slots: slots, buf: make([]byte, protocol.PageSize), wasClean: true}
	if err := s.writeSuper(false); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return s, nil
}

// superblock: magic(8) version(4) pagesize(4) slots(8) clean(1) pad(3)
// metalen(4) meta(...) ... crc32c of [0, 4092) at 4092.
func (s *Store) parseSuper() error {
	b := s.buf
	if string(b[:8]) != magic {
		return fmt.Errorf("not a scalestore file (bad magic): %w", ErrCorrupt)
	}
	if crc32.Checksum(b[:protocol.PageSize-4], castagnoli) != binary.LittleEndian.Uint32(b[protocol.PageSize-4:]) {
		return fmt.Errorf("superblock checksum mismatch: %w", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != version {
		return fmt.Errorf("format version %d, this build reads %d: %w", v, version, ErrCorrupt)
	}
	if ps := binary.LittleEndian.Uint32(b[12:]); ps != protocol.PageSize {
		return fmt.Errorf("page size %d, this build uses %d: %w", ps, protocol.PageSize, ErrCorrupt)
	}
	s.slots = binary.LittleEndian.Uint64(b[16:])
	s.wasClean = b[24] == 1
	n := binary.LittleEndian.Uint32(b[28:])
	if n > MaxMeta {
		return fmt.Errorf("metadata of %d bytes: %w", n, ErrCorrupt)
	}
	s.meta = append([]byte(nil), b[32:32+n]...)
	return nil
}

func (s *Store) writeSuper(clean bool) error {
	b := make([]byte, protocol.PageSize)
	copy(b, magic)
	binary.LittleEndian.PutUint32(b[8:], version)
	binary.LittleEndian.PutUint32(b[12:], protocol.PageSize)
	binary.LittleEndian.PutUint64(b[16:], s.slots)
	if clean {
		b[24] = 1
	}
	binary.LittleEndian.PutUint32(b[28:], uint32(len(s.meta)))
	copy(b[32:], s.meta)
	binary.LittleEndian.PutUint32(b[protocol.PageSize-4:], crc32.Checksum(b[:protocol.PageSize-4], castagnoli))
	if _, err := s.f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("filestore: writing the superblock: %w", err)
	}
	return s.f.Sync()
}

func (s *Store) check(slot uint64, buf []byte) error {
	if s.closed {
		return errors.New("filestore: store closed")
	}
	if slot >= s.slots {
		return fmt.Errorf("filestore: slot %d of %d: %w", slot, s.slots, storage.ErrOutOfRange)
	}
	if len(buf) != protocol.PageSize {
		return fmt.Errorf("filestore: buffer of %d bytes, want %d", len(buf), protocol.PageSize)
	}
	return nil
}

// ReadPage implements storage.PageStore: the page's trailer is verified.
func (s *Store) ReadPage(slot uint64, buf []byte) error {
	if err := s.check(slot, buf); err != nil {
		return err
	}
	n, err := s.f.ReadAt(buf, int64(slot+1)*protocol.PageSize)
	if n < len(buf) {
		// Beyond the end of the file: never written.
		clear(buf[n:])
		err = nil
	}
	if err != nil {
		return fmt.Errorf("filestore: reading slot %d: %w", slot, err)
	}
	body, tr := buf[:protocol.PageSize-TrailerSize], buf[protocol.PageSize-TrailerSize:]
	if binary.LittleEndian.Uint32(tr[12:]) == 0 && allZero(buf) {
		return nil // never written
	}
	if binary.LittleEndian.Uint32(tr[12:]) != trailerMagic ||
		binary.LittleEndian.Uint32(tr) != crc32.Checksum(body, castagnoli) {
		return fmt.Errorf("filestore: slot %d: checksum mismatch (torn or corrupted page): %w", slot, ErrCorrupt)
	}
	if got := binary.LittleEndian.Uint64(tr[4:]); got != slot {
		return fmt.Errorf("filestore: slot %d holds the page of slot %d: %w", slot, got, ErrCorrupt)
	}
	return nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// WritePage implements storage.PageStore. The caller's buffer is not
// modified; its last TrailerSize bytes are replaced by the trailer on disk.
func (s *Store) WritePage(slot uint64, buf []byte) error {
	if err := s.check(slot, buf); err != nil {
		return err
	}
	copy(s.buf, buf)
	tr := s.buf[protocol.PageSize-TrailerSize:]
	binary.LittleEndian.PutUint32(tr, crc32.Checksum(s.buf[:protocol.PageSize-TrailerSize], castagnoli))
	binary.LittleEndian.PutUint64(tr[4:], slot)
	binary.LittleEndian.PutUint32(tr[12:], trailerMagic)
	if _, err := s.f.WriteAt(s.buf, int64(slot+1)*protocol.PageSize); err != nil {
		return fmt.Errorf("filestore: writing slot %d: %w", slot, err)
	}
	return nil
}

// Slots implements storage.PageStore.
func (s *Store) Slots() uint64 { return s.slots }

// Meta returns the metadata blob.
func (s *Store) Meta() []byte { return append([]byte(nil), s.meta...) }

// SetMeta replaces the metadata blob (written at Close).
func (s *Store) SetMeta(b []byte) error {
	if len(b) > MaxMeta {
		return fmt.Errorf("filestore: metadata of %d bytes (at most %d)", len(b), MaxMeta)
	}
	s.meta = append(s.meta[:0], b...)
	return nil
}

// WasClean reports whether the store was closed cleanly before this Open.
func (s *Store) WasClean() bool { return s.wasClean }

// Close syncs the data, marks the store clean and closes the file.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.f.Sync()
	if err == nil {
		err = s.writeSuper(true)
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
