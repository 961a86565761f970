//go:build linux

package nvme

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore/storage"
)

// DefaultQueueDepth is the queue depth when Options.QueueDepth is zero.
const DefaultQueueDepth = 32

// MaxQueueDepth is the largest Options.QueueDepth.
const MaxQueueDepth = 4096

// Options configure Open.
type Options struct {
	// Slots is the capacity in pages when creating. Zero on a block device
	// means the whole device. When opening an existing store it may be
	// zero; otherwise it must equal the stored capacity.
	Slots uint64
	// Create formats a new store: the file is created if missing (its
	// parent directory must exist) and sized to hold Slots pages; whatever
	// it held is discarded. On a block device the old pages are not
	// zeroed: do not read a slot of a reformatted device before writing it.
	Create bool
	// NoIOUring uses pread/pwrite even where io_uring is available.
	NoIOUring bool
	// QueueDepth bounds the requests in flight (default DefaultQueueDepth).
	QueueDepth int
	// NoDirect opens without O_DIRECT, going through the page cache: for
	// filesystems that reject O_DIRECT such as some tmpfs. (A plain
	// "Direct bool, default true" cannot be expressed by a zero value.)
	NoDirect bool
	// Journal keeps an undo journal beside the store (path +
	// JournalSuffix): every slot's content as of the last Open or Sync is
	// saved there, durably, before the slot is first overwritten, and Open
	// of a store that was not closed cleanly writes those images back
	// (Recovered), so its pages are again what its metadata describes.
	Journal bool
	// WriteLog acknowledges writes once their page images are in a redo
	// log beside the store (path + WriteLogSuffix), many writes in one
	// sequential log write, and writes each slot in place later, once
	// however often it changed (wlog.go). Open of a store that was not
	// closed cleanly writes the log's pages back first. Not with Journal.
	WriteLog bool
	// WriteLogBytes is the write log's size (default
	// DefaultWriteLogBytes): a checkpoint starts when half of it is used.
	WriteLogBytes int
	// WriteLogCached writes the log through the page cache: a write is
	// acknowledged once the kernel holds it, which a killed process cannot
	// undo but a power failure can (until DataSync). Without it the log is
	// written with O_DIRECT, like the pages, and a DataSync after it only
	// flushes the device's cache: cheaper where every group is synced.
	WriteLogCached bool
}

// ErrDirectUnsupported is returned by Open when the filesystem rejects
// O_DIRECT; open with Options.NoDirect there.
var ErrDirectUnsupported = errors.New("nvme: filesystem does not support O_DIRECT (use Options.NoDirect)")

// setupRing makes the io_uring; tests replace it to exercise the fallback.
var setupRing = newRing

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("nvme: store closed")

// request is one read or write in flight, indexed like its pool buffer.
type request struct {
	slot   uint64
	user   []byte // the caller's buffer (reads only)
	done   func(error)
	write  bool
	direct bool // a read into user itself, not into the pool buffer
}

// completion is a finished request of the pread engine awaiting Poll.
type completion struct {
	done func(error)
	err  error
}

// Store is a storage.PageStore over a file or block device. Use it from one
// goroutine at a time.
type Store struct {
	fd      int
	path    string
	slots   uint64
	depth   int
	direct  bool
	regular bool

	ring      *ring // nil: the pread/pwrite engine
	ringErr   error // why io_uring is not used, if it was wanted
	pool      []byte
	reqs      []request
	free      []uint32 // free pool buffers / request indices
	inflight  int
	completed []completion // pread engine: finished, not yet reported
	compHead  int

	meta     []byte
	wasClean bool
	gen      uint64
	closed   bool
	// inUse: the superblock on disk says the store is in use (not clean).
	// A store just formatted is clean until its first data write or Sync,
	// which mark it in use first: a formatted store killed before either
	// holds nothing and opens as new.
	inUse bool

	// reserved: slots below it have disk blocks (Reserve); noReserve: the
	// filesystem cannot preallocate, or the store is a block device.
	reserved  uint64
	noReserve bool

	// journal is the undo journal (Options.Journal), nil without one;
	// epoch is the superblock's rollback epoch.
	journal    *journal
	epoch      uint64
	recovered  bool
	rolledBack int

	// wlog is the write log (Options.WriteLog), nil without one.
	wlog *writeLog

	// Reads and Writes count successful page reads and writes.
	Reads, Writes uint64
}

var _ storage.PageStore = (*Store)(nil)

// Open opens, or with opts.Create formats, the store at path: a regular file
// or a block device.
func Open(path string, opts Options) (*Store, error) {
	depth := opts.QueueDepth
	if depth == 0 {
		depth = DefaultQueueDepth
	}
	if depth < 0 || depth > MaxQueueDepth {
		return nil, fmt.Errorf("nvme: queue depth %d out of range [1, %d]", depth, MaxQueueDepth)
	}
	if opts.Slots > maxSlots {
		return nil, fmt.Errorf("nvme: capacity of %d slots exceeds %d", opts.Slots, uint64(maxSlots))
	}
	flags := unix.O_RDWR | unix.O_CLOEXEC
	if !opts.NoDirect {
		flags |= unix.O_DIRECT
	}
	// A new file is formatted under a temporary name and renamed into
	// place once its superblock is durable, so that a process killed while
	// creating it leaves no half-formatted store at path.
	final := ""
	if opts.Create {
		flags |= unix.O_CREAT
		var st unix.Stat_t
		if err := unix.Stat(path, &st); errors.Is(err, unix.ENOENT) {
			final, path = path, path+creatingSuffix
		}
	}
	fd, err := openRetry(path, flags, 0o644)
	if err != nil {
		if errors.Is(err, unix.EINVAL) && !opts.NoDirect {
			return nil, fmt.Errorf("nvme: open %s: %w: %w", path, ErrDirectUnsupported, err)
		}
		return nil, fmt.Errorf("nvme: open %s: %w", path, err)
	}
	s := &Store{fd: fd, path: path, depth: depth, direct: !opts.NoDirect}
	if err := s.open(opts, cmp.Or(final, path)); err != nil {
		s.release(true)
		if final != "" {
			_ = unix.Unlink(path)
		}
		return nil, err
	}
	if final != "" {
		if err := unix.Rename(path, final); err != nil {
			s.release(true)
			_ = unix.Unlink(path)
			return nil, fmt.Errorf("nvme: create %s: %w", final, err)
		}
		s.path = final
		syncDir(filepath.Dir(final))
	}
	return s, nil
}

// creatingSuffix names the file a new store is formatted in before it is
// renamed into place.
const creatingSuffix = ".creating"

func openRetry(path string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// lockWait is how long Open waits for the lock of a store that another
// open file holds. A process killed with io_uring requests in flight keeps
// its file open until the kernel has torn its ring down, which it does
// asynchronously after the process is gone: a store reopened at once after
// its process was killed finds it locked for a few milliseconds.
const lockWait = 2 * time.Second

func (s *Store) open(opts Options, base string) error {
	journalPath := base + JournalSuffix
	if opts.Journal && opts.WriteLog {
		return errors.New("nvme: Options.Journal and Options.WriteLog exclude each other")
	}
	for deadline := time.Now().Add(lockWait); ; {
		err := unix.Flock(s.fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("nvme: lock %s: %w", s.path, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nvme: %s is in use by another store (still locked after %v)", s.path, lockWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return fmt.Errorf("nvme: stat %s: %w", s.path, err)
	}
	var size uint64
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		s.regular = true
		size = uint64(st.Size)
	case unix.S_IFBLK:
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); errno != 0 {
			return fmt.Errorf("nvme: size of block device %s: %w", s.path, errno)
		}
	default:
		return fmt.Errorf("nvme: %s is neither a regular file nor a block device", s.path)
	}

	// The aligned pool: one page per request in flight plus one for the
	// superblock and one for the journal's reads.
	pool, err := unix.Mmap(-1, 0, (s.depth+2)*PageSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("nvme: mmap buffer pool: %w", err)
	}
	s.pool = pool
	s.reqs = make([]request, s.depth)
	s.free = make([]uint32, s.depth)
	for i := range s.free {
		s.free[i] = uint32(s.depth - 1 - i)
	}

	if opts.Create {
		if err := s.format(opts.Slots, size); err != nil {
			return err
		}
		if opts.Journal {
			if s.journal, err = openJournal(journalPath, true); err != nil {
				return err
			}
			s.epoch = 1
			s.journal.reset(s.epoch)
		}
		if opts.WriteLog {
			if err := s.openWriteLog(base+WriteLogSuffix, opts.WriteLogBytes, true, opts.WriteLogCached); err != nil {
				return err
			}
		}
	} else {
		if err := s.load(opts.Slots, size); err != nil {
			return err
		}
		if opts.Journal {
			if err := s.recover(journalPath); err != nil {
				return err
			}
		}
		if opts.WriteLog {
			// A clean store's log is empty (Close wrote it back).
			if err := s.openWriteLog(base+WriteLogSuffix, opts.WriteLogBytes, false, opts.WriteLogCached); err != nil {
				return err
			}
		}
		// Mark the store in use, in a new epoch: a crash from here on
		// reads as unclean, and rolls back to here.
		if err := s.startEpoch(); err != nil {
			return err
		}
		if err := unix.Fdatasync(s.fd); err != nil {
			return s.fileErr("sync", err)
		}
	}

	if !opts.NoIOUring {
		s.ring, s.ringErr = setupRing(uint32(s.depth))
	}
	return nil
}

// format writes a fresh superblock for a store of slots pages.
func (s *Store) format(slots, size uint64) error {
	if s.regular {
		if slots == 0 {
			return errors.New("nvme: creating a store file needs Options.Slots > 0")
		}
		end := int64(slots+1) * PageSize
		if err := unix.Ftruncate(s.fd, 0); err != nil {
			return fmt.Errorf("nvme: truncate %s: %w", s.path, err)
		}
		if err := unix.Ftruncate(s.fd, end); err != nil {
			return wrapIO(fmt.Sprintf("nvme: extend %s to %d bytes", s.path, end), err)
		}
	} else {
		if slots == 0 {
			if size < 2*PageSize {
				return fmt.Errorf("nvme: block device %s of %d bytes is too small", s.path, size)
			}
			slots = min(size/PageSize-1, maxSlots)
		}
		if need := (slots + 1) * PageSize; size < need {
			return fmt.Errorf("nvme: block device %s has %d bytes, %d slots need %d", s.path, size, slots, need)
		}
	}
	s.slots = slots
	s.wasClean = true
	s.meta = nil
	// Clean: the store holds nothing yet. Its first data write or Sync
	// marks it in use (markInUse).
	if err := s.writeSuper(true); err != nil {
		return err
	}
	if err := unix.Fsync(s.fd); err != nil {
		return s.fileErr("sync", err)
	}
	return nil
}

// markInUse persists the superblock marked in use, once, before the first
// data write of a store formatted clean: from then on a crash reads as
// unclean.
func (s *Store) markInUse() error {
	if s.inUse {
		return nil
	}
	if err := s.writeSuper(false); err != nil {
		return err
	}
	if err := unix.Fdatasync(s.fd); err != nil {
		return s.fileErr("sync", err)
	}
	return nil
}

// syncDir makes a newly created file's directory entry durable; failure is
// not fatal (some filesystems refuse to fsync directories).
func syncDir(dir string) {
	fd, err := openRetry(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_ = unix.Fsync(fd)
	_ = unix.Close(fd)
}

// load reads and validates the superblock of an existing store.
func (s *Store) load(slots, size uint64) error {
	if size < PageSize {
		return fmt.Errorf("%w: %s: %d bytes, too short for a superblock (create it with Options.Create)", ErrCorrupt, s.path, size)
	}
	page := s.superBuf()
	if err := s.pread(page, 0); err != nil {
		return s.fileErr("read superblock of", err)
	}
	sb, err := decodeSuper(page)
	if err != nil {
		return fmt.Errorf("nvme: %s: %w", s.path, err)
	}
	if need := (sb.slots + 1) * PageSize; size < need {
		return fmt.Errorf("%w: %s: %d bytes, but the superblock's %d slots need %d (truncated?)",
			ErrCorrupt, s.path, size, sb.slots, need)
	}
	if slots != 0 && slots != sb.slots {
		return fmt.Errorf("nvme: %s holds %d slots, Options.Slots asks for %d", s.path, sb.slots, slots)
	}
	s.slots, s.wasClean, s.gen, s.meta, s.epoch = sb.slots, sb.clean, sb.gen, sb.meta, sb.epoch
	return nil
}

// recover opens the journal of a loaded store and, if the store was not
// closed cleanly, rolls its pages back to the epoch's start. A store that
// was journaled (its epoch is not zero) but whose journal is gone cannot be
// put back: it is left as it is, WasClean false and Recovered false.
func (s *Store) recover(path string) error {
	var st unix.Stat_t
	missing := errors.Is(unix.Stat(path, &st), unix.ENOENT)
	j, err := openJournal(path, false)
	if err != nil {
		return err
	}
	s.journal = j
	if s.wasClean || s.epoch == 0 || missing {
		return nil
	}
	n, err := s.rollback(j, s.epoch, s.journalBuf())
	if err != nil {
		return fmt.Errorf("nvme: %s: rolling back from %s: %w", s.path, path, err)
	}
	s.recovered, s.rolledBack = true, n
	return nil
}

// writeSuper persists the superblock (not flushed: callers fdatasync).
func (s *Store) writeSuper(clean bool) error {
	s.gen++
	sb := super{slots: s.slots, clean: clean, gen: s.gen, meta: s.meta, epoch: s.epoch}
	page := s.superBuf()
	sb.encode(page)
	if err := s.pwrite(page, 0); err != nil {
		return s.fileErr("write superblock of", err)
	}
	s.inUse = !clean
	return nil
}

// buf is pool page i.
func (s *Store) buf(i uint32) []byte {
	return s.pool[int(i)*PageSize : (int(i)+1)*PageSize : (int(i)+1)*PageSize]
}

func (s *Store) superBuf() []byte { return s.buf(uint32(s.depth)) }

// journalBuf is the aligned page the journal reads old images into.
func (s *Store) journalBuf() []byte { return s.buf(uint32(s.depth + 1)) }

// pread reads one page at byte offset off into the aligned page.
func (s *Store) pread(page []byte, off int64) error { return s.pio(false, page, off) }

// pwrite writes one aligned page at byte offset off.
func (s *Store) pwrite(page []byte, off int64) error { return s.pio(true, page, off) }

// pio moves a whole page, resuming after short transfers and EINTR.
func (s *Store) pio(write bool, page []byte, off int64) error {
	op, short := unix.Pread, io.ErrUnexpectedEOF
	if write {
		op, short = unix.Pwrite, io.ErrShortWrite
	}
	for done := 0; done < len(page); {
		n, err := op(s.fd, page[done:], off+int64(done))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return s.directErr(err)
		case n == 0:
			return fmt.Errorf("short transfer at offset %d: %w", off+int64(done), short)
		}
		done += n
	}
	return nil
}

// directErr explains EINVAL from O_DIRECT I/O.
func (s *Store) directErr(err error) error {
	if s.direct && errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w: %w", ErrDirectUnsupported, err)
	}
	return err
}

// ioErr wraps an I/O error on slot with context.
func (s *Store) ioErr(op string, slot uint64, err error) error {
	return wrapIO(fmt.Sprintf("nvme: %s slot %d of %s", op, slot, s.path), err)
}

// fileErr wraps an error of a whole-file operation with context.
func (s *Store) fileErr(op string, err error) error {
	return wrapIO(fmt.Sprintf("nvme: %s %s", op, s.path), err)
}

// wrapIO prefixes err with context; ENOSPC and EIO are spelled out and
// retryable errnos also wrap storage.ErrTransient.
func wrapIO(context string, err error) error {
	switch {
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR), errors.Is(err, unix.EBUSY):
		return fmt.Errorf("%s: %w: %w", context, storage.ErrTransient, err)
	case errors.Is(err, unix.ENOSPC):
		return fmt.Errorf("%s: no space left on the device: %w", context, err)
	case errors.Is(err, unix.EIO):
		return fmt.Errorf("%s: device I/O error: %w", context, err)
	}
	return fmt.Errorf("%s: %w", context, err)
}

func (s *Store) check(slot uint64, buf []byte) error {
	if s.closed {
		return ErrClosed
	}
	if slot >= s.slots {
		return fmt.Errorf("nvme: slot %d of %d: %w", slot, s.slots, storage.ErrOutOfRange)
	}
	if len(buf) != PageSize {
		return fmt.Errorf("nvme: buffer of %d bytes, want %d", len(buf), PageSize)
	}
	return nil
}

func offsetOf(slot uint64) int64 { return int64(slot+1) * PageSize }

// ReadAsync queues a read of slot into buf and returns. done (which may be
// nil) is called exactly once, from a later Poll, ReadPage, WritePage, Sync
// or Close, or from ReadAsync/WriteAsync when they wait for room, with nil
// or the read's error; buf must stay untouched until then. If ReadAsync
// itself returns an error the request was not queued and done is never
// called.
//
// A buf that starts on a 4096-byte boundary (a frame of the engine's
// page-aligned pool) is read into directly, with no copy; after a failed
// read it holds zeros. Any other buf is filled from the store's own aligned
// buffer, and only on success. Either way a page that does not verify is
// never served.
//
// At most Options.QueueDepth requests are in flight: when all are, ReadAsync
// first waits for one to complete (running its callback). Queued requests
// reach the kernel at the next Poll (Poll(0) submits without waiting).
// Callbacks may queue new requests and may call Poll.
//
// With the pread/pwrite engine the read happens inside ReadAsync and done is
// called from the next Poll.
func (s *Store) ReadAsync(slot uint64, buf []byte, done func(error)) error {
	if err := s.check(slot, buf); err != nil {
		return err
	}
	return s.queue(slot, buf, done, false)
}

// queue is ReadAsync or WriteAsync once the arguments are checked: through
// the write log if there is one, else straight to the device.
func (s *Store) queue(slot uint64, buf []byte, done func(error), write bool) error {
	if s.wlog != nil {
		if write {
			return s.logWrite(slot, buf, done)
		}
		if ok, err := s.logRead(slot, buf, done); ok || err != nil {
			return err
		}
	}
	return s.submit(slot, buf, done, write)
}

// WriteAsync queues a write of buf to slot, like ReadAsync. buf is copied
// before WriteAsync returns, so the caller may reuse it at once; its last
// TrailerSize bytes are ignored (the store writes its trailer there).
func (s *Store) WriteAsync(slot uint64, buf []byte, done func(error)) error {
	if err := s.check(slot, buf); err != nil {
		return err
	}
	return s.queue(slot, buf, done, true)
}

func (s *Store) submit(slot uint64, buf []byte, done func(error), write bool) error {
	if write && !s.inUse {
		if err := s.markInUse(); err != nil {
			return err
		}
	}
	wait := false
	if write {
		var err error
		if wait, err = s.protect(slot); err != nil {
			return err
		}
	}
	if s.ring == nil {
		err := s.syncIO(slot, buf, write)
		s.completed = append(s.completed, completion{done: done, err: err})
		return nil
	}
	for len(s.free) == 0 {
		if _, err := s.Poll(1); err != nil {
			return err
		}
		if s.closed {
			return ErrClosed // a callback closed the store
		}
	}
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	page := s.buf(i)
	op := uint8(ioringOpRead)
	direct := false
	if write {
		op = ioringOpWrite
		copy(page[:DataSize], buf)
		stamp(page, slot)
		buf = nil
	} else if aligned(buf) {
		page, direct = buf, true
	}
	s.reqs[i] = request{slot: slot, user: buf, done: done, write: write, direct: direct}
	s.inflight++
	if wait {
		// The slot's rollback image (or an earlier one) is not durable
		// yet: the write goes after the journal's sync.
		s.journal.deferred = append(s.journal.deferred, i)
		return nil
	}
	if err := s.push(i, op, page); err != nil {
		s.reqs[i] = request{}
		s.free = append(s.free, i)
		s.inflight--
		return s.ioErr(opName(write), slot, err)
	}
	return nil
}

// push hands request i (its page, its operation) to the submission ring.
func (s *Store) push(i uint32, op uint8, page []byte) error {
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(page))))
	for !s.ring.push(op, s.fd, uint64(offsetOf(s.reqs[i].slot)), addr, PageSize, uint64(i)) {
		// The submission ring is full of queued entries: hand them over.
		if err := s.ring.enter(0); err != nil {
			return err
		}
	}
	return nil
}

func opName(write bool) string {
	if write {
		return "write"
	}
	return "read"
}

// syncIO is the pread/pwrite engine's read or write of one page.
func (s *Store) syncIO(slot uint64, buf []byte, write bool) error {
	page := s.buf(0)
	if write {
		if s.journal != nil {
			if err := s.journal.sync(); err != nil {
				return err
			}
		}
		copy(page[:DataSize], buf)
		stamp(page, slot)
		if err := s.pwrite(page, offsetOf(slot)); err != nil {
			return s.ioErr("write", slot, err)
		}
		s.Writes++
		return nil
	}
	direct := aligned(buf)
	if direct {
		page = buf
	}
	err := s.pread(page, offsetOf(slot))
	if err != nil {
		err = s.ioErr("read", slot, err)
	} else if err = verify(page, slot); err != nil {
		err = fmt.Errorf("nvme: %s: %w", s.path, err)
	}
	s.finishRead(buf, page, direct, err)
	return err
}

// aligned reports whether buf may be the target of an O_DIRECT read: it
// starts on a page boundary (so any logical block size up to 4096 is met)
// and is one page long, as check has made sure.
func aligned(buf []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%PageSize == 0
}

// finishRead hands a read's result to the caller's buf: a verified page
// with its trailer zeroed, copied out of the pool unless it was read in
// place. A failed direct read leaves zeros, never the bytes that failed.
func (s *Store) finishRead(buf, page []byte, direct bool, err error) {
	switch {
	case err != nil && direct:
		clear(buf)
	case err != nil:
	case direct:
		clear(buf[DataSize:])
		s.Reads++
	default:
		copy(buf[:DataSize], page)
		clear(buf[DataSize:])
		s.Reads++
	}
}

// Submit hands queued requests to the kernel without reporting completions
// (Poll reports them). The pread engine has nothing to submit.
func (s *Store) Submit() error {
	if s.closed {
		return ErrClosed
	}
	if err := s.releaseDeferred(); err != nil {
		return err
	}
	if err := s.logPump(); err != nil {
		return err
	}
	if s.ring != nil && s.ring.unsubmitted() > 0 {
		if err := s.ring.enter(0); err != nil {
			return fmt.Errorf("nvme: %s: %w", s.path, err)
		}
	}
	return nil
}

// WaitCompletions blocks until a completion is ready to be reported by
// Poll. Unlike every other method it may run concurrently with the others
// (the caller still serialises those): one goroutine can sleep here while
// others submit. It returns at once on the pread engine, whose requests
// complete as they are made, and after Close.
func (s *Store) WaitCompletions() error {
	r := s.ring
	if r == nil || s.closed {
		return nil
	}
	if err := r.waitCQ(); err != nil {
		return fmt.Errorf("nvme: %s: %w", s.path, err)
	}
	return nil
}

// Poll submits queued requests and reports completions, calling their done
// callbacks, until at least min have been reported or nothing is left in
// flight; Poll(0) submits and reports what has already completed without
// waiting. It returns how many completions it reported.
func (s *Store) Poll(min int) (int, error) {
	if s.closed {
		return 0, ErrClosed
	}
	n := 0
	if err := s.releaseDeferred(); err != nil {
		return 0, err
	}
	if err := s.logPump(); err != nil {
		return 0, err
	}
	if s.ring == nil || len(s.completed) > s.compHead {
		n += s.drainCompleted()
		if s.ring == nil {
			return n, nil
		}
	}
	n += s.reap()
	for n < min && s.inflight > 0 && !s.closed {
		want := min - n
		if want > s.inflight {
			want = s.inflight
		}
		if err := s.ring.enter(uint32(want)); err != nil {
			return n, fmt.Errorf("nvme: %s: %w", s.path, err)
		}
		n += s.reap()
	}
	if !s.closed && s.ring.unsubmitted() > 0 {
		if err := s.ring.enter(0); err != nil {
			return n, fmt.Errorf("nvme: %s: %w", s.path, err)
		}
	}
	return n, nil
}

// drainCompleted reports the completions decided without the ring (the
// pread engine's, and writes that could not be submitted).
func (s *Store) drainCompleted() int {
	n := 0
	for s.compHead < len(s.completed) && !s.closed {
		c := s.completed[s.compHead]
		s.completed[s.compHead] = completion{}
		s.compHead++
		if s.compHead == len(s.completed) {
			s.completed, s.compHead = s.completed[:0], 0
		}
		n++
		if c.done != nil {
			c.done(c.err)
		}
	}
	return n
}

// reap reports every completion in the completion ring.
func (s *Store) reap() int {
	n := 0
	for s.ring != nil {
		ud, res, ok := s.ring.peek()
		if !ok {
			break
		}
		if ud >= uint64(len(s.reqs)) {
			if s.logReap(ud, res) {
				n++
			}
			continue
		}
		i := uint32(ud)
		r := s.reqs[i]
		page := s.buf(i)
		if r.direct {
			page = r.user
		}
		var err error
		switch {
		case res < 0:
			err = s.ioErr(opName(r.write), r.slot, s.directErr(unix.Errno(-res)))
		case res != PageSize:
			e := io.ErrUnexpectedEOF
			if r.write {
				e = io.ErrShortWrite
			}
			err = s.ioErr(opName(r.write), r.slot, fmt.Errorf("%d of %d bytes: %w", res, PageSize, e))
		case r.write:
			s.Writes++
		default:
			if err = verify(page, r.slot); err != nil {
				err = fmt.Errorf("nvme: %s: %w", s.path, err)
			}
		}
		if !r.write {
			s.finishRead(r.user, page, r.direct, err)
		}
		s.reqs[i] = request{}
		s.free = append(s.free, i)
		s.inflight--
		n++
		if r.done != nil {
			r.done(err)
		}
	}
	return n
}

// InFlight counts requests queued or in flight whose completion has not been
// reported yet.
func (s *Store) InFlight() int {
	return s.inflight + len(s.completed) - s.compHead + s.logQueued()
}

// wait runs one request to completion.
func (s *Store) wait(slot uint64, buf []byte, write bool) error {
	if err := s.check(slot, buf); err != nil {
		return err
	}
	var (
		res      error
		finished bool
	)
	if err := s.queue(slot, buf, func(err error) { res, finished = err, true }, write); err != nil {
		return err
	}
	for !finished {
		if _, err := s.Poll(1); err != nil {
			return err
		}
	}
	return res
}

// ReadPage implements storage.PageStore: it fills buf with slot's DataSize
// data bytes and TrailerSize zeros. It fails with an error wrapping
// ErrCorrupt when the page on disk does not verify, and reads a slot never
// written as zeros. Completions of pending asynchronous requests may be
// reported (their callbacks run) while it waits.
func (s *Store) ReadPage(slot uint64, buf []byte) error { return s.wait(slot, buf, false) }

// WritePage implements storage.PageStore: it stores buf's first DataSize
// bytes as slot's content; the trailer bytes of buf are ignored and buf is
// not modified.
func (s *Store) WritePage(slot uint64, buf []byte) error { return s.wait(slot, buf, true) }

// Slots implements storage.PageStore.
func (s *Store) Slots() uint64 { return s.slots }

// Engine names the I/O engine in use: "io_uring" or "pread".
func (s *Store) Engine() string {
	if s.ring != nil {
		return "io_uring"
	}
	return "pread"
}

// WasClean reports whether the store had been closed cleanly before this
// Open (true for a store just created).
func (s *Store) WasClean() bool { return s.wasClean }

// WrittenSlots is an upper bound of the slots that hold data: one past the
// last slot the file has data for, found with SEEK_DATA and SEEK_HOLE (a
// slot never written, or only preallocated by Reserve, is a hole on the
// filesystems that track holes, ext4 and xfs among them). On a block device,
// or where the filesystem cannot tell, it is Slots. A store that was not
// closed cleanly can hold pages written after its metadata, past the pages
// that metadata counts: a reader of such a store looks this far.
func (s *Store) WrittenSlots() (uint64, error) {
	if s.closed {
		return 0, ErrClosed
	}
	if !s.regular {
		return s.slots, nil
	}
	end := int64(-1) // byte offset one past the last data seen
	for off := int64(PageSize); off < offsetOf(s.slots); {
		data, err := unix.Seek(s.fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data from off on
		}
		if err != nil {
			return s.slots, nil // the filesystem cannot tell: everything may hold data
		}
		hole, err := unix.Seek(s.fd, data, unix.SEEK_HOLE)
		if err != nil {
			return s.slots, nil
		}
		end, off = hole, hole
	}
	if end <= PageSize {
		return 0, nil
	}
	return min(uint64((end+PageSize-1)/PageSize-1), s.slots), nil
}

// Meta returns a copy of the metadata blob.
func (s *Store) Meta() []byte { return append([]byte(nil), s.meta...) }

// SetMeta replaces the metadata blob (at most MaxMeta bytes); it is
// persisted by the next Sync or Close.
func (s *Store) SetMeta(b []byte) error {
	if s.closed {
		return ErrClosed
	}
	if len(b) > MaxMeta {
		return fmt.Errorf("nvme: metadata of %d bytes exceeds %d", len(b), MaxMeta)
	}
	s.meta = append([]byte(nil), b...)
	return nil
}

// drain waits for every request in flight and reports it.
func (s *Store) drain() error {
	for s.InFlight() > 0 {
		if _, err := s.Poll(s.InFlight()); err != nil {
			return err
		}
		if s.closed {
			return ErrClosed
		}
	}
	return nil
}

// DataSync flushes the device's write cache for the writes that completed
// before it (fdatasync), nothing else: the group commit of a cluster node's
// write-throughs (durability sync). Safe beside requests in flight.
func (s *Store) DataSync() error {
	if s.closed {
		return ErrClosed
	}
	fd := s.fd
	if w := s.wlog; w != nil {
		fd = w.fd // the acknowledged writes are in the log
	}
	if err := unix.Fdatasync(fd); err != nil {
		return s.fileErr("sync", err)
	}
	return nil
}

// Sync waits for the requests in flight, flushes the device's write cache and
// persists the superblock with the current metadata. After Sync returns,
// every write completed before it and the metadata survive a crash.
func (s *Store) Sync() error {
	if s.closed {
		return ErrClosed
	}
	if err := s.drain(); err != nil {
		return err
	}
	if s.wlog != nil {
		if err := s.checkpointAll(); err != nil {
			return err
		}
	}
	return s.persist(false)
}

func (s *Store) persist(clean bool) error {
	if err := unix.Fdatasync(s.fd); err != nil {
		return s.fileErr("sync", err)
	}
	write := s.startEpoch // Sync: a new rollback point
	if clean {
		write = func() error {
			if s.journal == nil {
				return s.writeSuper(true)
			}
			// A clean close ends the epoch too: its journal records must
			// never be applied to what later opens change.
			s.epoch++
			if err := s.writeSuper(true); err != nil {
				s.epoch--
				return err
			}
			s.journal.reset(s.epoch)
			return nil
		}
	}
	if err := write(); err != nil {
		return err
	}
	if err := unix.Fdatasync(s.fd); err != nil {
		return s.fileErr("sync", err)
	}
	return nil
}

// Close implements storage.PageStore: it waits for the requests in flight
// (running their callbacks), flushes, persists the metadata, marks the store
// clean and releases everything. Closing a closed store does nothing.
func (s *Store) Close() error { return s.finish(true) }

// ReserveChunk is how many slots Reserve preallocates past the one asked
// for (16 MiB), so that it runs once per that many new pages.
const ReserveChunk = 4096

// Reserve makes sure that the file has disk blocks for slots 0 to slot, so
// that no later write to them fails for want of space: on a full disk the
// caller learns it when it allocates a page, not when it flushes a page it
// already took writes for. It preallocates (fallocate) up to ReserveChunk
// slots ahead, and only up to slot when the disk cannot take that much. A
// block device, or a filesystem that cannot preallocate, has nothing to
// reserve. Reserve does not touch the ring: it may run while another
// goroutine submits or reaps, but not concurrently with itself or Close.
func (s *Store) Reserve(slot uint64) error {
	if s.closed {
		return ErrClosed
	}
	if slot >= s.slots {
		return fmt.Errorf("nvme: reserve slot %d of %d: %w", slot, s.slots, storage.ErrOutOfRange)
	}
	if slot < s.reserved || s.noReserve || !s.regular {
		return nil
	}
	end := min(slot+1+ReserveChunk, s.slots)
	for {
		from := offsetOf(s.reserved)
		err := unix.Fallocate(s.fd, 0, from, offsetOf(end)-from)
		switch {
		case err == nil:
			s.reserved = end
			return nil
		case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
			s.noReserve = true
			return nil
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.ENOSPC) && end > slot+1:
			end = slot + 1 // no room for a chunk ahead: only what is needed
		default:
			return wrapIO(fmt.Sprintf("nvme: reserve slots %d to %d of %s", s.reserved, end-1, s.path), err)
		}
	}
}

// Abandon releases the store like Close but leaves its superblock marked in
// use, with the metadata it had: for a caller whose own state did not reach
// the store (a flush that failed half-way, on a full disk say), so that the
// next Open reports WasClean false instead of trusting pages that may not
// match the metadata. Requests in flight are waited for; their errors are
// returned. Abandoning a closed store does nothing.
func (s *Store) Abandon() error { return s.finish(false) }

// finish is Close (clean) or Abandon: it waits for the requests in flight,
// persists the superblock marked clean if clean, and releases everything.
func (s *Store) finish(clean bool) error {
	if s.closed {
		return nil
	}
	err := s.drain()
	if s.closed {
		return nil // a callback closed the store
	}
	if err == nil && clean && s.wlog != nil {
		err = s.checkpointAll()
	}
	if err == nil && clean {
		err = s.persist(true)
	}
	s.release(s.inflight == 0)
	return err
}

// release frees the ring, the pool and the file without touching the
// superblock. The pool is unmapped only if no request is in flight (the
// kernel could still write into it otherwise).
func (s *Store) release(unmapPool bool) {
	s.closed = true
	if s.journal != nil {
		s.journal.close()
	}
	if s.wlog != nil {
		s.wlog.close(unmapPool)
	}
	if s.ring != nil {
		s.ring.close()
		s.ring = nil
	}
	if s.pool != nil && unmapPool {
		_ = unix.Munmap(s.pool)
	}
	s.pool = nil
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
}
