//go:build linux

package nvme

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore/storage"
)

// probeDirect reports whether dir's filesystem accepts O_DIRECT I/O.
func probeDirect(dir string) error {
	p := filepath.Join(dir, "probe")
	defer os.Remove(p)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	if _, err := unix.Pwrite(fd, buf, 0); err != nil {
		return err
	}
	_, err = unix.Pread(fd, buf, 0)
	return err
}

// testDir makes a temporary directory on a filesystem that supports
// O_DIRECT: the default temp directory, else testdata-tmp in the package
// directory; it skips the test if neither does.
func testDir(t testing.TB) string {
	t.Helper()
	var reasons []string
	for _, parent := range []string{os.TempDir(), "testdata-tmp"} {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", parent, err))
			continue
		}
		dir, err := os.MkdirTemp(parent, "nvme-test-")
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", parent, err))
			continue
		}
		t.Cleanup(func() {
			os.RemoveAll(dir)
			if parent == "testdata-tmp" {
				os.Remove(parent) // only if empty
			}
		})
		if err := probeDirect(dir); err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: O_DIRECT: %v", parent, err))
			continue
		}
		return dir
	}
	t.Skipf("no temporary directory supports O_DIRECT (%s)", strings.Join(reasons, "; "))
	return ""
}

type engine struct {
	name      string
	noIOUring bool
}

var engines = []engine{{"io_uring", false}, {"pread", true}}

// create makes a fresh store of slots pages in a test directory.
func create(t testing.TB, e engine, slots uint64, depth int) (*Store, string) {
	t.Helper()
	path := filepath.Join(testDir(t), "store")
	s, err := Open(path, Options{Slots: slots, Create: true, NoIOUring: e.noIOUring, QueueDepth: depth})
	if err != nil {
		t.Fatalf("Open(create): %v", err)
	}
	checkEngine(t, s, e)
	t.Cleanup(func() { s.Close() })
	return s, path
}

func checkEngine(t testing.TB, s *Store, e engine) {
	t.Helper()
	if s.Engine() != e.name {
		if e.name == "io_uring" && s.ringErr != nil {
			t.Skipf("io_uring unavailable: %v", s.ringErr)
		}
		t.Fatalf("engine %q, want %q", s.Engine(), e.name)
	}
}

func reopen(t testing.TB, e engine, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{NoIOUring: e.noIOUring})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	checkEngine(t, s, e)
	t.Cleanup(func() { s.Close() })
	return s
}

// pattern is slot's test content with seed; its trailer bytes are junk the
// store must ignore.
func pattern(slot uint64, seed uint64) []byte {
	b := make([]byte, PageSize)
	r := rand.New(rand.NewPCG(slot, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func checkPage(t testing.TB, slot uint64, got, written []byte) {
	t.Helper()
	if !bytes.Equal(got[:DataSize], written[:DataSize]) {
		t.Fatalf("slot %d: data differs from what was written", slot)
	}
	if !allZero(got[DataSize:]) {
		t.Fatalf("slot %d: trailer bytes %x returned, want zeros", slot, got[DataSize:])
	}
}

func TestABILayout(t *testing.T) {
	if n := unsafe.Sizeof(uringParams{}); n != 120 {
		t.Fatalf("io_uring_params is %d bytes", n)
	}
	if n := unsafe.Offsetof(uringParams{}.sqOff); n != 40 {
		t.Fatalf("sq_off at %d", n)
	}
	if n := unsafe.Offsetof(uringParams{}.cqOff); n != 80 {
		t.Fatalf("cq_off at %d", n)
	}
	if n := unsafe.Offsetof(sqe{}.userData); n != 32 {
		t.Fatalf("sqe.user_data at %d", n)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			const slots = 512
			s, path := create(t, e, slots, 0)
			written := map[uint64][]byte{}
			for slot := uint64(0); slot < slots; slot += 3 {
				p := pattern(slot, 1)
				orig := bytes.Clone(p)
				if err := s.WritePage(slot, p); err != nil {
					t.Fatalf("WritePage(%d): %v", slot, err)
				}
				if !bytes.Equal(p, orig) {
					t.Fatalf("WritePage(%d) modified the caller's buffer", slot)
				}
				written[slot] = p
			}
			// Overwrite some with new content.
			for slot := uint64(0); slot < slots; slot += 9 {
				p := pattern(slot, 2)
				if err := s.WritePage(slot, p); err != nil {
					t.Fatalf("WritePage(%d): %v", slot, err)
				}
				written[slot] = p
			}
			got := make([]byte, PageSize)
			for slot, p := range written {
				if err := s.ReadPage(slot, got); err != nil {
					t.Fatalf("ReadPage(%d): %v", slot, err)
				}
				checkPage(t, slot, got, p)
			}
			// The layout: slot s at (s+1)*4096 with its trailer.
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) != (slots+1)*PageSize {
				t.Fatalf("file of %d bytes", len(raw))
			}
			page := raw[(7*3+1)*PageSize : (7*3+2)*PageSize]
			if !bytes.Equal(page[:DataSize], written[21][:DataSize]) {
				t.Fatalf("slot 21 not at offset %d", (21+1)*PageSize)
			}
			if err := verify(page, 21); err != nil {
				t.Fatal(err)
			}
			if string(raw[:8]) != "SSGOSTOR" {
				t.Fatalf("superblock magic %q", raw[:8])
			}
			if s.Reads != uint64(len(written)) {
				t.Fatalf("Reads = %d, want %d", s.Reads, len(written))
			}
		})
	}
}

func TestBuffered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s, err := Open(path, Options{Slots: 8, Create: true, NoDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := pattern(3, 3)
	if err := s.WritePage(3, p); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, PageSize)
	if err := s.ReadPage(3, got); err != nil {
		t.Fatal(err)
	}
	checkPage(t, 3, got, p)
}

func TestZeroSlot(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s, _ := create(t, e, 16, 0)
			if err := s.WritePage(4, pattern(4, 1)); err != nil {
				t.Fatal(err)
			}
			got := bytes.Repeat([]byte{0xff}, PageSize)
			if err := s.ReadPage(5, got); err != nil {
				t.Fatalf("ReadPage of a never-written slot: %v", err)
			}
			if !allZero(got) {
				t.Fatal("never-written slot did not read as zeros")
			}
		})
	}
}

func TestAsync(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			const n = 64
			s, _ := create(t, e, 1024, n)
			slots := rand.New(rand.NewPCG(7, 7)).Perm(1024)[:n]
			pages := make([][]byte, n)
			okCount := 0
			for i, slot := range slots {
				pages[i] = pattern(uint64(slot), 5)
				err := s.WriteAsync(uint64(slot), pages[i], func(err error) {
					if err != nil {
						t.Errorf("write %d: %v", slot, err)
					}
					okCount++
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := s.InFlight(); got != n {
				t.Fatalf("InFlight = %d after %d WriteAsync, want %d", got, n, n)
			}
			if okCount != 0 {
				t.Fatalf("%d callbacks ran before Poll", okCount)
			}
			got, err := s.Poll(n)
			if err != nil || got != n || okCount != n {
				t.Fatalf("Poll(%d) = %d, %v; %d callbacks", n, got, err, okCount)
			}

			bufs := make([][]byte, n)
			okCount = 0
			for i, slot := range slots {
				bufs[i] = make([]byte, PageSize)
				err := s.ReadAsync(uint64(slot), bufs[i], func(err error) {
					if err != nil {
						t.Errorf("read %d: %v", slot, err)
					}
					okCount++
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := s.InFlight(); got != n {
				t.Fatalf("InFlight = %d after %d ReadAsync, want %d", got, n, n)
			}
			total := 0
			for total < n {
				got, err := s.Poll(1)
				if err != nil {
					t.Fatal(err)
				}
				total += got
			}
			if okCount != n || s.InFlight() != 0 {
				t.Fatalf("%d callbacks, %d in flight", okCount, s.InFlight())
			}
			for i, slot := range slots {
				checkPage(t, uint64(slot), bufs[i], pages[i])
			}
		})
	}
}

// TestAsyncOverflow queues far more requests than the queue depth, with
// callbacks that queue more.
func TestAsyncOverflow(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s, _ := create(t, e, 256, 8)
			for slot := uint64(0); slot < 256; slot++ {
				if err := s.WriteAsync(slot, pattern(slot, 9), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			bufs := make([][]byte, 256)
			done := 0
			var issue func(slot uint64)
			issue = func(slot uint64) {
				bufs[slot] = make([]byte, PageSize)
				err := s.ReadAsync(slot, bufs[slot], func(err error) {
					if err != nil {
						t.Errorf("read %d: %v", slot, err)
					}
					done++
					if slot+128 < 256 {
						issue(slot + 128) // chained from the callback
					}
				})
				if err != nil {
					t.Errorf("ReadAsync(%d): %v", slot, err)
				}
			}
			for slot := uint64(0); slot < 128; slot++ {
				issue(slot)
			}
			for s.InFlight() > 0 {
				if _, err := s.Poll(1); err != nil {
					t.Fatal(err)
				}
			}
			if done != 256 {
				t.Fatalf("%d reads completed", done)
			}
			for slot := uint64(0); slot < 256; slot++ {
				checkPage(t, slot, bufs[slot], pattern(slot, 9))
			}
		})
	}
}

func TestReopen(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s, path := create(t, e, 64, 0)
			if !s.WasClean() {
				t.Fatal("new store not clean")
			}
			for slot := uint64(0); slot < 64; slot += 5 {
				if err := s.WritePage(slot, pattern(slot, 11)); err != nil {
					t.Fatal(err)
				}
			}
			meta := []byte("catalog=0:17 next=42")
			if err := s.SetMeta(meta); err != nil {
				t.Fatal(err)
			}
			meta[0] = 'X' // SetMeta copied it
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.ReadPage(0, make([]byte, PageSize)); !errors.Is(err, ErrClosed) {
				t.Fatalf("ReadPage after Close: %v", err)
			}

			s2 := reopen(t, e, path)
			if !s2.WasClean() {
				t.Fatal("cleanly closed store reports unclean")
			}
			if s2.Slots() != 64 {
				t.Fatalf("Slots = %d", s2.Slots())
			}
			if got := string(s2.Meta()); got != "catalog=0:17 next=42" {
				t.Fatalf("Meta = %q", got)
			}
			got := make([]byte, PageSize)
			for slot := uint64(0); slot < 64; slot += 5 {
				if err := s2.ReadPage(slot, got); err != nil {
					t.Fatal(err)
				}
				checkPage(t, slot, got, pattern(slot, 11))
			}
			// Sync persists the metadata; then "crash" (release without
			// Close).
			big := bytes.Repeat([]byte{7}, MaxMeta)
			if err := s2.SetMeta(big); err != nil {
				t.Fatal(err)
			}
			if err := s2.WritePage(1, pattern(1, 12)); err != nil {
				t.Fatal(err)
			}
			if err := s2.Sync(); err != nil {
				t.Fatal(err)
			}
			s2.release(true)

			s3 := reopen(t, e, path)
			if s3.WasClean() {
				t.Fatal("store not closed reports clean")
			}
			if !bytes.Equal(s3.Meta(), big) {
				t.Fatal("Meta after Sync and crash differs")
			}
			if err := s3.ReadPage(1, got); err != nil {
				t.Fatal(err)
			}
			checkPage(t, 1, got, pattern(1, 12))
			// Abandon (a caller whose flush failed): the pages it wrote
			// stay, the metadata it set does not, and the store reads as
			// unclean until a Close.
			if err := s3.WritePage(2, pattern(2, 13)); err != nil {
				t.Fatal(err)
			}
			if err := s3.SetMeta([]byte("abandoned")); err != nil {
				t.Fatal(err)
			}
			if err := s3.Abandon(); err != nil {
				t.Fatal(err)
			}
			if err := s3.Abandon(); err != nil {
				t.Fatalf("second Abandon: %v", err)
			}
			s4 := reopen(t, e, path)
			if s4.WasClean() || !bytes.Equal(s4.Meta(), big) {
				t.Fatalf("after Abandon: clean %v, meta of %d bytes", s4.WasClean(), len(s4.Meta()))
			}
			if err := s4.ReadPage(2, got); err != nil {
				t.Fatal(err)
			}
			checkPage(t, 2, got, pattern(2, 13))
			if err := s4.Close(); err != nil {
				t.Fatal(err)
			}
			if s5 := reopen(t, e, path); !s5.WasClean() {
				t.Fatal("closed after an abandoned use: not clean")
			} else if err := s5.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(path, Options{Slots: 65, NoIOUring: e.noIOUring}); err == nil {
				t.Fatal("Open with a different Slots succeeded")
			}
		})
	}
}

func TestFallback(t *testing.T) {
	defer func(f func(uint32) (*ring, error)) { setupRing = f }(setupRing)
	setupRing = func(uint32) (*ring, error) { return nil, fmt.Errorf("io_uring_setup: %w", unix.ENOSYS) }
	s, _ := create(t, engine{"pread", false}, 8, 0)
	if !errors.Is(s.ringErr, unix.ENOSYS) {
		t.Fatalf("ringErr = %v", s.ringErr)
	}
	p := pattern(2, 2)
	called := false
	if err := s.WriteAsync(2, p, func(err error) { called = err == nil }); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Poll(0); n != 1 || err != nil || !called {
		t.Fatalf("Poll(0) = %d, %v; called %v", n, err, called)
	}
	got := make([]byte, PageSize)
	if err := s.ReadPage(2, got); err != nil {
		t.Fatal(err)
	}
	checkPage(t, 2, got, p)
}

func TestWrapIO(t *testing.T) {
	for _, tc := range []struct {
		errno     unix.Errno
		want      string
		transient bool
	}{
		{unix.ENOSPC, "no space left", false},
		{unix.EIO, "device I/O error", false},
		{unix.EAGAIN, "transient", true},
		{unix.EBADF, "bad file", false},
	} {
		err := wrapIO("nvme: write slot 4 of f", tc.errno)
		if !errors.Is(err, tc.errno) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "slot 4") || errors.Is(err, storage.ErrTransient) != tc.transient {
			t.Errorf("wrapIO(%v) = %v", tc.errno, err)
		}
	}
}

func TestLocked(t *testing.T) {
	s, path := create(t, engines[0], 4, 0)
	_ = s
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: %v", err)
	}
}

// corrupt writes b at off through a plain (buffered) file.
func corrupt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readRaw(t *testing.T, path string, off int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, PageSize)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCorruptPage(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s, path := create(t, e, 16, 0)
			for _, slot := range []uint64{3, 5, 7, 9} {
				if err := s.WritePage(slot, pattern(slot, 1)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Flip a byte of slot 7's data, one of slot 9's trailer
			// checksum; copy slot 3 over slot 5 (misdirected write).
			off7 := offsetOf(7) + 100
			corrupt(t, path, off7, []byte{readRaw(t, path, off7)[0] ^ 0x01})
			off9 := offsetOf(9) + DataSize
			corrupt(t, path, off9, []byte{readRaw(t, path, off9)[0] ^ 0x80})
			corrupt(t, path, offsetOf(5), readRaw(t, path, offsetOf(3)))

			s = reopen(t, e, path)
			// A buffer off a page boundary is filled through the store's
			// own buffer and left as it was on failure; an aligned one is
			// read into directly and holds zeros after a failure. Neither
			// ever holds the corrupt bytes.
			unaligned := make([]byte, PageSize+1)[1:]
			for _, b := range []struct {
				name      string
				buf       []byte
				afterFail byte
			}{{"unaligned", unaligned, 0xee}, {"aligned", alignedPage(t), 0}} {
				for _, tc := range []struct {
					slot uint64
					want string
				}{{7, "slot 7: page checksum mismatch"}, {9, "slot 9: page checksum mismatch"}, {5, "slot 5: page trailer names slot 3"}} {
					buf := b.buf
					want := bytes.Repeat([]byte{b.afterFail}, PageSize)
					fill(buf, 0xee)
					err := s.ReadPage(tc.slot, buf)
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("%s: ReadPage(%d) = %v, want ErrCorrupt", b.name, tc.slot, err)
					}
					if !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("%s: ReadPage(%d) = %q, want it to say %q", b.name, tc.slot, err, tc.want)
					}
					if !bytes.Equal(buf, want) {
						t.Fatalf("%s: ReadPage(%d) left %x..., want %#x bytes", b.name, tc.slot, buf[:16], b.afterFail)
					}
					// The async path reports it too.
					var aerr error
					fill(buf, 0xee)
					if err := s.ReadAsync(tc.slot, buf, func(err error) { aerr = err }); err != nil {
						t.Fatal(err)
					}
					if _, err := s.Poll(1); err != nil {
						t.Fatal(err)
					}
					if !errors.Is(aerr, ErrCorrupt) {
						t.Fatalf("%s: ReadAsync(%d) done(%v), want ErrCorrupt", b.name, tc.slot, aerr)
					}
					if !bytes.Equal(buf, want) {
						t.Fatalf("%s: ReadAsync(%d) left %x..., want %#x bytes", b.name, tc.slot, buf[:16], b.afterFail)
					}
				}
			}
			buf := unaligned
			// A torn write: second half of slot 3 zeroed.
			corrupt(t, path, offsetOf(3)+PageSize/2, make([]byte, PageSize/2))
			if err := s.ReadPage(3, buf); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "slot 3") {
				t.Fatalf("torn slot 3: %v", err)
			}
			// Rewriting repairs.
			if err := s.WritePage(7, pattern(7, 2)); err != nil {
				t.Fatal(err)
			}
			if err := s.ReadPage(7, buf); err != nil {
				t.Fatal(err)
			}
			checkPage(t, 7, buf, pattern(7, 2))
		})
	}
}

// alignedPage is a page-aligned page outside the Go heap, unmapped when
// the test ends.
func alignedPage(t testing.TB) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

// TestDirectRead: a page-aligned buffer is read into in place, and the
// store's own buffers are not touched; any other buffer goes through them.
// Both get the same page, trailer zeroed.
func TestDirectRead(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s, _ := create(t, e, 8, 4)
			for slot := range uint64(8) {
				if err := s.WritePage(slot, pattern(slot, 3)); err != nil {
					t.Fatal(err)
				}
			}
			fill(s.pool, 0x5a)
			direct := alignedPage(t)
			for slot := range uint64(8) {
				fill(direct, 0xee)
				if slot%2 == 0 {
					if err := s.ReadPage(slot, direct); err != nil {
						t.Fatal(err)
					}
				} else {
					var derr error
					if err := s.ReadAsync(slot, direct, func(err error) { derr = err }); err != nil {
						t.Fatal(err)
					}
					if _, err := s.Poll(1); err != nil || derr != nil {
						t.Fatalf("Poll: %v, read: %v", err, derr)
					}
				}
				checkPage(t, slot, direct, pattern(slot, 3))
			}
			if !bytes.Equal(s.pool, bytes.Repeat([]byte{0x5a}, len(s.pool))) {
				t.Fatal("a read into an aligned buffer went through the store's pool")
			}
			if s.Reads != 8 {
				t.Fatalf("Reads = %d, want 8", s.Reads)
			}
			// An unaligned buffer is filled from the pool.
			unaligned := make([]byte, PageSize+1)[1:]
			if err := s.ReadPage(5, unaligned); err != nil {
				t.Fatal(err)
			}
			checkPage(t, 5, unaligned, pattern(5, 3))
			if bytes.Equal(s.pool, bytes.Repeat([]byte{0x5a}, len(s.pool))) {
				t.Fatal("a read into an unaligned buffer did not use the pool")
			}
		})
	}
}

func TestCorruptSuperblock(t *testing.T) {
	mk := func(t *testing.T) string {
		s, path := create(t, engines[1], 8, 0)
		if err := s.SetMeta([]byte("meta")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	resum := func(t *testing.T, path string) {
		sb := readRaw(t, path, 0)
		le.PutUint32(sb[sbCRCOff:], crcOf(sb[:sbCRCOff]))
		corrupt(t, path, 0, sb)
	}
	for _, tc := range []struct {
		name, want string
		damage     func(t *testing.T, path string)
	}{
		{"magic", "bad superblock magic", func(t *testing.T, path string) { corrupt(t, path, 0, []byte("XX")) }},
		{"checksum", "superblock checksum", func(t *testing.T, path string) { corrupt(t, path, sbMetaOff+1, []byte{'X'}) }},
		{"version", "format version 9", func(t *testing.T, path string) {
			corrupt(t, path, sbVersionOff, []byte{9, 0, 0, 0})
			resum(t, path)
		}},
		{"pagesize", "page size 512", func(t *testing.T, path string) {
			corrupt(t, path, sbPageSizeOff, []byte{0, 2, 0, 0})
			resum(t, path)
		}},
		{"metalen", "metadata length", func(t *testing.T, path string) {
			corrupt(t, path, sbMetaLenOff, []byte{0xff, 0xff, 0, 0})
			resum(t, path)
		}},
		{"truncated", "truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, 4*PageSize); err != nil {
				t.Fatal(err)
			}
		}},
		{"zeros", "all zeros", func(t *testing.T, path string) { corrupt(t, path, 0, make([]byte, PageSize)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := mk(t)
			tc.damage(t, path)
			_, err := Open(path, Options{})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want ErrCorrupt saying %q", err, tc.want)
			}
		})
	}
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func TestErrors(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s, _ := create(t, e, 8, 0)
			page := make([]byte, PageSize)
			if err := s.ReadPage(8, page); !errors.Is(err, storage.ErrOutOfRange) {
				t.Fatalf("ReadPage(8) = %v", err)
			}
			if err := s.WritePage(1<<40, page); !errors.Is(err, storage.ErrOutOfRange) {
				t.Fatalf("WritePage(1<<40) = %v", err)
			}
			if err := s.ReadAsync(8, page, nil); !errors.Is(err, storage.ErrOutOfRange) {
				t.Fatalf("ReadAsync(8) = %v", err)
			}
			if err := s.WriteAsync(9, page, nil); !errors.Is(err, storage.ErrOutOfRange) {
				t.Fatalf("WriteAsync(9) = %v", err)
			}
			for _, n := range []int{0, 100, PageSize - 1, PageSize + 1} {
				b := make([]byte, n)
				if err := s.ReadPage(0, b); err == nil || !strings.Contains(err.Error(), "buffer of") {
					t.Fatalf("ReadPage with %d bytes: %v", n, err)
				}
				if err := s.WritePage(0, b); err == nil || !strings.Contains(err.Error(), "buffer of") {
					t.Fatalf("WritePage with %d bytes: %v", n, err)
				}
			}
			if s.InFlight() != 0 {
				t.Fatal("rejected requests are in flight")
			}
			if err := s.SetMeta(make([]byte, MaxMeta+1)); err == nil {
				t.Fatal("SetMeta accepted too much")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := s.Poll(0); !errors.Is(err, ErrClosed) {
				t.Fatalf("Poll after Close: %v", err)
			}
		})
	}
	dir := testDir(t)
	if _, err := Open(filepath.Join(dir, "missing"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open of a missing file: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "nocap"), Options{Create: true}); err == nil {
		t.Fatal("Create without Slots succeeded")
	}
	if _, err := Open(filepath.Join(dir, "q"), Options{Create: true, Slots: 1, QueueDepth: -1}); err == nil {
		t.Fatal("negative queue depth accepted")
	}
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("Open of a directory succeeded")
	}
}

// BenchmarkRandomRead reads random 4 KiB pages at queue depth 32 through the
// asynchronous API (O_DIRECT, io_uring unless unavailable).
func BenchmarkRandomRead(b *testing.B) {
	const slots = 1 << 15 // 128 MiB
	const depth = 32
	path := filepath.Join(testDir(b), "store")
	s, err := Open(path, Options{Slots: slots, Create: true, QueueDepth: depth})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	page := make([]byte, PageSize)
	for slot := uint64(0); slot < slots; slot++ {
		le.PutUint64(page, slot)
		if err := s.WriteAsync(slot, page, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		b.Fatal(err)
	}
	bufs := make([][]byte, depth)
	for i := range bufs {
		bufs[i] = make([]byte, PageSize)
	}
	freeBufs := make([]int, 0, depth)
	for i := range depth {
		freeBufs = append(freeBufs, i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var failed error
	b.SetBytes(PageSize)
	ops := 0
	for b.Loop() {
		for len(freeBufs) == 0 {
			if _, err := s.Poll(1); err != nil {
				b.Fatal(err)
			}
		}
		i := freeBufs[len(freeBufs)-1]
		freeBufs = freeBufs[:len(freeBufs)-1]
		slot := r.Uint64N(slots)
		err := s.ReadAsync(slot, bufs[i], func(err error) {
			if err == nil && le.Uint64(bufs[i]) != slot {
				err = fmt.Errorf("slot %d read wrong content", slot)
			}
			if err != nil && failed == nil {
				failed = err
			}
			freeBufs = append(freeBufs, i)
		})
		if err != nil {
			b.Fatal(err)
		}
		ops++
	}
	elapsed := b.Elapsed()
	for s.InFlight() > 0 {
		if _, err := s.Poll(s.InFlight()); err != nil {
			b.Fatal(err)
		}
	}
	if failed != nil {
		b.Fatal(failed)
	}
	b.ReportMetric(float64(ops)/elapsed.Seconds(), "ops/s")
	b.Logf("engine %s, %d reads", s.Engine(), ops)
}

// TestSubmitAndWaitCompletions: Submit hands requests over without
// reporting them; WaitCompletions, on another goroutine, returns once Poll
// has something to report; on the pread engine it returns at once.
func TestSubmitAndWaitCompletions(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s, _ := create(t, e, 8, 0)
			if err := s.WritePage(5, pattern(5, 3)); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, PageSize)
			called := false
			if err := s.ReadAsync(5, buf, func(err error) { called = err == nil }); err != nil {
				t.Fatal(err)
			}
			if err := s.Submit(); err != nil {
				t.Fatal(err)
			}
			if called {
				t.Fatal("Submit reported a completion")
			}
			waited := make(chan error, 1)
			go func() { waited <- s.WaitCompletions() }()
			select {
			case err := <-waited:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("WaitCompletions did not return with a read in flight")
			}
			if n, err := s.Poll(0); n != 1 || err != nil || !called {
				t.Fatalf("Poll(0) after the wait = %d, %v; called %v", n, err, called)
			}
			checkPage(t, 5, buf, pattern(5, 3))
		})
	}
}

// allocatedBytes is how much disk the file at path takes.
func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestReserve: Reserve gives the sparse store file blocks for the slots up
// to the one asked and a chunk ahead, once; past the capacity it refuses.
// On a filesystem that is full it reserves only what is asked for when a
// chunk does not fit, and reports ENOSPC when that does not fit either
// (that part needs root, to mount a small tmpfs, and is skipped without).
func TestReserve(t *testing.T) {
	s, path := create(t, engines[1], 3*ReserveChunk, 0)
	before := allocatedBytes(t, path)
	if err := s.Reserve(10); err != nil {
		t.Fatal(err)
	}
	if s.noReserve {
		t.Skip("the test directory's filesystem cannot preallocate")
	}
	after := allocatedBytes(t, path)
	if want := int64(10+1+ReserveChunk) * PageSize; after-before < want {
		t.Fatalf("Reserve(10) took %d bytes of disk, want at least %d", after-before, want)
	}
	if err := s.Reserve(ReserveChunk); err != nil || allocatedBytes(t, path) != after {
		t.Fatalf("Reserve within the reserved chunk: %v, or it took more disk", err)
	}
	if err := s.Reserve(3 * ReserveChunk); !errors.Is(err, storage.ErrOutOfRange) {
		t.Fatalf("Reserve past the capacity: %v", err)
	}

	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("no small tmpfs for the full-disk case (needs root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	small, err := Open(filepath.Join(dir, "store"), Options{Slots: 1024, Create: true, NoDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if err := small.Reserve(0); err != nil { // a chunk (4 MiB) does not fit, slot 0 does
		t.Fatalf("Reserve(0) on a 1 MiB filesystem: %v", err)
	}
	if small.reserved != 1 {
		t.Fatalf("reserved %d slots, want 1", small.reserved)
	}
	if err := small.Reserve(600); !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Reserve(600) on a 1 MiB filesystem: %v, want ENOSPC", err)
	}
	if err := small.WritePage(0, pattern(0, 1)); err != nil {
		t.Fatalf("write of the reserved slot on a full filesystem: %v", err)
	}
}

// TestNewStoreIsCleanUntilItsFirstWrite: a store just formatted holds
// nothing, so one killed before its first data write (or Sync) reopens
// clean; the first write marks it in use first, so one killed after it
// reopens unclean. Creation leaves no temporary file behind, and one left
// by a creation that was killed does not get in the way.
func TestNewStoreIsCleanUntilItsFirstWrite(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s, path := create(t, e, 32, 0)
			s.release(true) // killed before any write
			if _, err := os.Stat(path + creatingSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("temporary file after creation: %v", err)
			}
			s2 := reopen(t, e, path)
			if !s2.WasClean() || len(s2.Meta()) != 0 {
				t.Fatalf("store killed before its first write: clean %v, meta of %d bytes", s2.WasClean(), len(s2.Meta()))
			}
			s2.Close()

			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+creatingSuffix, []byte("left by a killed creation"), 0o644); err != nil {
				t.Fatal(err)
			}
			s3, err := Open(path, Options{Slots: 32, Create: true, NoIOUring: e.noIOUring})
			if err != nil {
				t.Fatalf("create over a leftover temporary file: %v", err)
			}
			if err := s3.WritePage(3, pattern(3, 1)); err != nil {
				t.Fatal(err)
			}
			s3.release(true) // killed after a write
			if _, err := os.Stat(path + creatingSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("temporary file after creation: %v", err)
			}
			s4 := reopen(t, e, path)
			if s4.WasClean() {
				t.Fatal("store killed after a write reopens clean")
			}
			got := make([]byte, PageSize)
			if err := s4.ReadPage(3, got); err != nil {
				t.Fatal(err)
			}
			checkPage(t, 3, got, pattern(3, 1))
		})
	}
}

// TestWrittenSlots: the bound covers every slot written and, where the
// filesystem keeps holes (as ext4, xfs and tmpfs do), ends at the last one;
// preallocation (Reserve) does not count.
func TestWrittenSlots(t *testing.T) {
	s, _ := create(t, engines[0], 1<<16, 0)
	if n, err := s.WrittenSlots(); err != nil || (n != 0 && n != s.Slots()) {
		t.Fatalf("new store: WrittenSlots %d, %v", n, err)
	}
	if err := s.Reserve(100); err != nil {
		t.Fatal(err)
	}
	for _, slot := range []uint64{0, 7, 1000} {
		if err := s.WritePage(slot, pattern(slot, 2)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.WrittenSlots()
	if err != nil || n < 1001 {
		t.Fatalf("WrittenSlots %d, %v; want at least 1001", n, err)
	}
	if n != 1001 && n != s.Slots() {
		t.Fatalf("WrittenSlots %d: neither the last written slot + 1 nor the capacity", n)
	}
	s.Close()
	if _, err := s.WrittenSlots(); !errors.Is(err, ErrClosed) {
		t.Fatalf("WrittenSlots after Close: %v", err)
	}
}
