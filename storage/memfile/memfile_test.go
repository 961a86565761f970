package memfile_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
	"github.com/scalestore-go/scalestore/storage/memfile"
)

// pattern fills a page with bytes that depend on seed and position, so two
// different pages (and a page and its shifted copy) differ.
func pattern(seed byte) []byte {
	b := make([]byte, protocol.PageSize)
	for i := range b {
		b[i] = seed ^ byte(i) ^ byte(i>>8)*31
	}
	return b
}

// failInjector fails the operations it is told to fail and records calls.
type failInjector struct {
	failRead, failWrite bool
	calls               []string
}

func (f *failInjector) Inject(op memfile.Op, slot uint64) error {
	f.calls = append(f.calls, fmt.Sprintf("%d:%d", op, slot))
	if (op == memfile.OpRead && f.failRead) || (op == memfile.OpWrite && f.failWrite) {
		return fmt.Errorf("test fault: %w", storage.ErrTransient)
	}
	return nil
}

func TestSlots(t *testing.T) {
	s := memfile.New(7, nil)
	if got := s.Slots(); got != 7 {
		t.Fatalf("Slots() = %d, want 7", got)
	}
}

func TestUnwrittenSlotReadsZeros(t *testing.T) {
	s := memfile.New(8, nil)
	// Write a higher slot so that lower slots exist in the backing slice
	// but were never written.
	if err := s.WritePage(5, pattern(1)); err != nil {
		t.Fatal(err)
	}
	for _, slot := range []uint64{0, 3, 6, 7} {
		buf := bytes.Repeat([]byte{0xAA}, protocol.PageSize) // garbage in
		if err := s.ReadPage(slot, buf); err != nil {
			t.Fatalf("ReadPage(%d): %v", slot, err)
		}
		if !bytes.Equal(buf, make([]byte, protocol.PageSize)) {
			t.Fatalf("slot %d: unwritten slot did not read as zeros", slot)
		}
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	s := memfile.New(16, nil)
	pages := map[uint64][]byte{0: pattern(3), 1: pattern(4), 9: pattern(5), 15: pattern(6)}
	for _, slot := range []uint64{0, 1, 9, 15} {
		if err := s.WritePage(slot, pages[slot]); err != nil {
			t.Fatalf("WritePage(%d): %v", slot, err)
		}
	}
	for _, slot := range []uint64{15, 9, 1, 0} {
		buf := make([]byte, protocol.PageSize)
		if err := s.ReadPage(slot, buf); err != nil {
			t.Fatalf("ReadPage(%d): %v", slot, err)
		}
		if !bytes.Equal(buf, pages[slot]) {
			t.Fatalf("slot %d: read back differs from what was written", slot)
		}
	}
	// Overwrite replaces the content entirely.
	if err := s.WritePage(9, pattern(77)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, protocol.PageSize)
	if err := s.ReadPage(9, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, pattern(77)) {
		t.Fatal("slot 9: overwrite not visible")
	}
}

func TestStoreCopiesBuffers(t *testing.T) {
	s := memfile.New(2, nil)
	src := pattern(9)
	if err := s.WritePage(1, src); err != nil {
		t.Fatal(err)
	}
	src[0] ^= 0xFF // mutate the caller's buffer after the write
	buf := make([]byte, protocol.PageSize)
	if err := s.ReadPage(1, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, pattern(9)) {
		t.Fatal("store kept a reference to the caller's write buffer")
	}
	buf[1] ^= 0xFF // mutate the read buffer; the store must not change
	again := make([]byte, protocol.PageSize)
	if err := s.ReadPage(1, again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, pattern(9)) {
		t.Fatal("store handed out its own page as the read buffer")
	}
}

func TestOutOfRange(t *testing.T) {
	s := memfile.New(4, nil)
	buf := make([]byte, protocol.PageSize)
	for _, slot := range []uint64{4, 5, 1 << 40, ^uint64(0)} {
		if err := s.ReadPage(slot, buf); !errors.Is(err, storage.ErrOutOfRange) {
			t.Errorf("ReadPage(%d) = %v, want ErrOutOfRange", slot, err)
		}
		if err := s.WritePage(slot, buf); !errors.Is(err, storage.ErrOutOfRange) {
			t.Errorf("WritePage(%d) = %v, want ErrOutOfRange", slot, err)
		}
	}
	// The last valid slot works.
	if err := s.WritePage(3, buf); err != nil {
		t.Fatalf("WritePage(3): %v", err)
	}
	if s.Reads != 0 || s.Writes != 1 {
		t.Fatalf("counters after failures: Reads=%d Writes=%d, want 0 and 1", s.Reads, s.Writes)
	}
}

func TestWrongBufferLength(t *testing.T) {
	s := memfile.New(4, nil)
	for _, n := range []int{0, 1, protocol.PageSize - 1, protocol.PageSize + 1, 2 * protocol.PageSize} {
		buf := make([]byte, n)
		if err := s.ReadPage(0, buf); err == nil {
			t.Errorf("ReadPage with %d-byte buffer succeeded", n)
		}
		if err := s.WritePage(0, buf); err == nil {
			t.Errorf("WritePage with %d-byte buffer succeeded", n)
		}
	}
	if err := s.ReadPage(0, nil); err == nil {
		t.Error("ReadPage with nil buffer succeeded")
	}
	if s.Reads != 0 || s.Writes != 0 {
		t.Fatalf("counters after failures: Reads=%d Writes=%d, want 0", s.Reads, s.Writes)
	}
}

func TestClosed(t *testing.T) {
	s := memfile.New(4, nil)
	if err := s.WritePage(0, pattern(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	buf := make([]byte, protocol.PageSize)
	if err := s.ReadPage(0, buf); err == nil {
		t.Error("ReadPage after Close succeeded")
	}
	if err := s.ReadPage(1, buf); err == nil {
		t.Error("ReadPage of unwritten slot after Close succeeded")
	}
	if err := s.WritePage(0, buf); err == nil {
		t.Error("WritePage after Close succeeded")
	}
	if err := s.WritePage(2, buf); err == nil {
		t.Error("WritePage of new slot after Close succeeded")
	}
	if s.Reads != 0 || s.Writes != 1 {
		t.Fatalf("counters: Reads=%d Writes=%d, want 0 and 1", s.Reads, s.Writes)
	}
}

func TestInjectedReadFault(t *testing.T) {
	inj := &failInjector{}
	s := memfile.New(4, inj)
	if err := s.WritePage(2, pattern(11)); err != nil {
		t.Fatal(err)
	}
	inj.failRead = true
	buf := bytes.Repeat([]byte{0x5A}, protocol.PageSize)
	err := s.ReadPage(2, buf)
	if err == nil {
		t.Fatal("ReadPage succeeded despite the injector failing it")
	}
	if !errors.Is(err, storage.ErrTransient) {
		t.Fatalf("ReadPage error %v does not wrap ErrTransient", err)
	}
	if s.Reads != 0 {
		t.Fatalf("Reads = %d after a failed read, want 0", s.Reads)
	}
	inj.failRead = false
	if err := s.ReadPage(2, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, pattern(11)) {
		t.Fatal("read after a failed read returned wrong content")
	}
	if s.Reads != 1 {
		t.Fatalf("Reads = %d, want 1", s.Reads)
	}
}

func TestInjectedWriteFaultLeavesPage(t *testing.T) {
	inj := &failInjector{}
	s := memfile.New(4, inj)
	if err := s.WritePage(1, pattern(21)); err != nil {
		t.Fatal(err)
	}
	inj.failWrite = true
	// A failed overwrite of a written slot...
	err := s.WritePage(1, pattern(22))
	if !errors.Is(err, storage.ErrTransient) {
		t.Fatalf("WritePage = %v, want an error wrapping ErrTransient", err)
	}
	// ...and a failed first write of a new slot.
	err = s.WritePage(3, pattern(23))
	if !errors.Is(err, storage.ErrTransient) {
		t.Fatalf("WritePage = %v, want an error wrapping ErrTransient", err)
	}
	if s.Writes != 1 {
		t.Fatalf("Writes = %d after failed writes, want 1", s.Writes)
	}
	inj.failWrite = false
	buf := make([]byte, protocol.PageSize)
	if err := s.ReadPage(1, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, pattern(21)) {
		t.Fatal("a failed write changed the stored page")
	}
	if err := s.ReadPage(3, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, make([]byte, protocol.PageSize)) {
		t.Fatal("a failed first write left data in the slot")
	}
}

func TestInjectorSeesOpAndSlot(t *testing.T) {
	inj := &failInjector{}
	s := memfile.New(8, inj)
	buf := make([]byte, protocol.PageSize)
	if err := s.WritePage(6, buf); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadPage(2, buf); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("%d:6", memfile.OpWrite), fmt.Sprintf("%d:2", memfile.OpRead)}
	if fmt.Sprint(inj.calls) != fmt.Sprint(want) {
		t.Fatalf("injector calls = %v, want %v", inj.calls, want)
	}
}

func TestCounters(t *testing.T) {
	inj := &failInjector{}
	s := memfile.New(4, inj)
	buf := make([]byte, protocol.PageSize)
	for i := range 3 {
		if err := s.WritePage(uint64(i), pattern(byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if err := s.ReadPage(uint64(i%4), buf); err != nil {
			t.Fatal(err)
		}
	}
	// Failures of every kind must not count.
	inj.failRead, inj.failWrite = true, true
	_ = s.ReadPage(0, buf)
	_ = s.WritePage(0, buf)
	inj.failRead, inj.failWrite = false, false
	_ = s.ReadPage(4, buf)
	_ = s.WritePage(4, buf)
	_ = s.ReadPage(0, buf[:10])
	_ = s.WritePage(0, buf[:10])
	if s.Reads != 5 || s.Writes != 3 {
		t.Fatalf("Reads=%d Writes=%d, want 5 and 3", s.Reads, s.Writes)
	}
	_ = s.Close()
	_ = s.ReadPage(0, buf)
	_ = s.WritePage(0, buf)
	if s.Reads != 5 || s.Writes != 3 {
		t.Fatalf("after Close: Reads=%d Writes=%d, want 5 and 3", s.Reads, s.Writes)
	}
}
