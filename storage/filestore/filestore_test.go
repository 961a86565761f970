package filestore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
)

func page(seed byte) []byte {
	b := make([]byte, protocol.PageSize)
	for i := range b[:protocol.PageSize-TrailerSize] {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestRoundTripReopenAndCorruption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, 64)
	if err != nil {
		t.Fatal(err)
	}
	for slot := range uint64(10) {
		if err := s.WritePage(slot, page(byte(slot))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetMeta([]byte("catalog")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, protocol.PageSize)
	if err := s.ReadPage(40, got); err != nil || !bytes.Equal(got, make([]byte, protocol.PageSize)) {
		t.Fatalf("never-written slot: %v", err)
	}
	if err := s.ReadPage(64, got); !errors.Is(err, storage.ErrOutOfRange) {
		t.Fatalf("out of range: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !s.WasClean() || string(s.Meta()) != "catalog" || s.Slots() != 64 {
		t.Fatalf("reopen: clean=%v meta=%q slots=%d", s.WasClean(), s.Meta(), s.Slots())
	}
	for slot := range uint64(10) {
		if err := s.ReadPage(slot, got); err != nil || !bytes.Equal(got[:protocol.PageSize-TrailerSize], page(byte(slot))[:protocol.PageSize-TrailerSize]) {
			t.Fatalf("slot %d after reopen: %v", slot, err)
		}
	}
	s.Close()

	// Flip a byte of slot 3, copy slot 4 over slot 6: both are reported.
	f, _ := os.OpenFile(path, os.O_RDWR, 0)
	f.WriteAt([]byte{0xFF}, 4*protocol.PageSize+100)
	b := make([]byte, protocol.PageSize)
	f.ReadAt(b, 5*protocol.PageSize)
	f.WriteAt(b, 7*protocol.PageSize)
	f.Close()
	s, _ = Open(path, 1)
	defer s.Close()
	if err := s.ReadPage(3, got); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupted page served: %v", err)
	}
	if err := s.ReadPage(6, got); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("misplaced page served: %v", err)
	}
}

func TestBadSuperblock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	if err := os.WriteFile(path, make([]byte, 3*protocol.PageSize), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, 8); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("foreign file opened: %v", err)
	}
	// A superblock with one byte changed fails its checksum.
	good := filepath.Join(t.TempDir(), "t.db")
	s, err := Open(good, 8)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	f, _ := os.OpenFile(good, os.O_RDWR, 0)
	f.WriteAt([]byte{9}, 20)
	f.Close()
	if _, err := Open(good, 8); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged superblock opened: %v", err)
	}
}
