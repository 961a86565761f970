//go:build linux

package nvme

import (
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The undo journal (Options.Journal) keeps the store's pages recoverable to
// a rollback point: the state they had at the last Open or Sync. Before a
// slot is overwritten for the first time since that point, its old content
// is appended to the journal (path + JournalSuffix), and the journal is made
// durable before the write reaches the device. After a crash, Open writes
// every journaled image back (Recovered reports it did), which puts the
// pages exactly where the superblock's metadata last described them; a
// caller with a redo log (the embedded DB) replays it from there.
//
// Each record names the epoch it belongs to: the superblock counts epochs,
// every Open and Sync starts a new one (persisting the superblock before the
// first record of the epoch can be written), and the journal is rewritten
// from its start in each. Rollback reads records from the start while they
// verify and belong to the superblock's epoch, so records of an older epoch
// left past the end of a shorter new one are never applied, and a torn last
// record ends the journal (its slot was not yet overwritten: the write waits
// for the journal's sync).

// JournalSuffix is appended to the store's path to name its undo journal.
const JournalSuffix = ".undo"

const (
	// jHeader is a journal record's header: CRC32C of the rest of the
	// record [0,4), flags [4,8), epoch [8,16), slot [16,24). The page
	// image follows unless the flags say the page was all zeros.
	jHeader   = 24
	jZeroPage = 1 // the old page was all zeros: no image follows
)

type journal struct {
	fd    int
	path  string
	epoch uint64
	off   int64 // where the next record goes
	// saved: slots whose rollback image this epoch's journal holds.
	saved []uint64
	// unsynced: records were written since the journal's last fdatasync;
	// data writes wait (deferred) until it is synced.
	unsynced bool
	deferred []uint32 // pool indices of writes waiting for the sync
	rec      []byte   // one record's bytes
	records  int      // this epoch's records
	// size is off, published for JournalBytes, which runs without the
	// caller's serialisation.
	size atomic.Int64
}

func (j *journal) isSaved(slot uint64) bool {
	w := slot / 64
	return w < uint64(len(j.saved)) && j.saved[w]&(1<<(slot%64)) != 0
}

func (j *journal) markSaved(slot uint64) {
	w := slot / 64
	for uint64(len(j.saved)) <= w {
		j.saved = append(j.saved, 0)
	}
	j.saved[w] |= 1 << (slot % 64)
}

// openJournal opens (creating it if needed) the journal of the store at
// path. A new store (create) starts with an empty journal: a file left
// from an older store at that path must not be read as this one's.
func openJournal(path string, create bool) (*journal, error) {
	flags := unix.O_RDWR | unix.O_CLOEXEC | unix.O_CREAT
	if create {
		flags |= unix.O_TRUNC
	}
	fd, err := openRetry(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("nvme: open journal %s: %w", path, err)
	}
	return &journal{fd: fd, path: path, rec: make([]byte, jHeader+PageSize)}, nil
}

func (j *journal) close() {
	if j.fd >= 0 {
		_ = unix.Close(j.fd)
		j.fd = -1
	}
}

// reset starts epoch: the journal is empty from here on (its old records
// are of older epochs and are overwritten as new ones come).
func (j *journal) reset(epoch uint64) {
	j.epoch, j.off, j.records, j.unsynced = epoch, 0, 0, false
	j.size.Store(0)
	clear(j.saved)
}

// append writes the rollback image of slot (old, the page as it is on
// disk) as the next record; the caller syncs before overwriting the slot.
func (j *journal) append(slot uint64, old []byte) error {
	rec := j.rec[:jHeader]
	flags := uint32(jZeroPage)
	if !allZero(old) {
		flags = 0
		rec = append(rec, old...)
	}
	le.PutUint32(rec[4:], flags)
	le.PutUint64(rec[8:], j.epoch)
	le.PutUint64(rec[16:], slot)
	le.PutUint32(rec[0:], crc32.Checksum(rec[4:], castagnoli))
	for done := 0; done < len(rec); {
		n, err := unix.Pwrite(j.fd, rec[done:], j.off+int64(done))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return wrapIO(fmt.Sprintf("nvme: journal slot %d in %s", slot, j.path), err)
		case n == 0:
			return fmt.Errorf("nvme: journal %s: %w", j.path, io.ErrShortWrite)
		}
		done += n
	}
	j.off += int64(len(rec))
	j.size.Store(j.off)
	j.records++
	j.unsynced = true
	j.markSaved(slot)
	return nil
}

func (j *journal) sync() error {
	if !j.unsynced {
		return nil
	}
	if err := unix.Fdatasync(j.fd); err != nil {
		return wrapIO("nvme: sync journal "+j.path, err)
	}
	j.unsynced = false
	return nil
}

// rollback writes every image of epoch back to its slot, through page (an
// aligned buffer), and returns how many it wrote. It stops at the first
// record that does not verify or belongs to another epoch: the end of what
// this epoch journaled.
func (s *Store) rollback(j *journal, epoch uint64, page []byte) (int, error) {
	hdr := make([]byte, jHeader)
	n := 0
	for off := int64(0); ; {
		if ok, err := preadFull(j.fd, hdr, off); err != nil {
			return n, wrapIO("nvme: read journal "+j.path, err)
		} else if !ok {
			break
		}
		if le.Uint64(hdr[8:]) != epoch {
			break
		}
		flags, slot := le.Uint32(hdr[4:]), le.Uint64(hdr[16:])
		if flags&^jZeroPage != 0 || slot >= s.slots {
			break
		}
		crc := crc32.Checksum(hdr[4:], castagnoli)
		size := int64(jHeader)
		if flags&jZeroPage != 0 {
			clear(page)
		} else {
			if ok, err := preadFull(j.fd, page, off+jHeader); err != nil {
				return n, wrapIO("nvme: read journal "+j.path, err)
			} else if !ok {
				break
			}
			crc = crc32.Update(crc, castagnoli, page)
			size += PageSize
		}
		if crc != le.Uint32(hdr) {
			break // a torn record: its slot was never overwritten
		}
		if err := s.pwrite(page, offsetOf(slot)); err != nil {
			return n, s.ioErr("roll back", slot, err)
		}
		n++
		off += size
	}
	if n > 0 {
		if err := unix.Fdatasync(s.fd); err != nil {
			return n, s.fileErr("sync", err)
		}
	}
	return n, nil
}

// preadFull fills b from off; ok is false at the end of the file.
func preadFull(fd int, b []byte, off int64) (ok bool, err error) {
	for done := 0; done < len(b); {
		n, err := unix.Pread(fd, b[done:], off+int64(done))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return false, err
		case n == 0:
			return false, nil
		}
		done += n
	}
	return true, nil
}

// protect journals slot's current content before its first overwrite of
// the epoch. It reports whether the write must wait for the journal's
// sync (a record was written and is not durable yet).
func (s *Store) protect(slot uint64) (wait bool, err error) {
	j := s.journal
	if j == nil {
		return false, nil
	}
	if !j.isSaved(slot) {
		old := s.journalBuf()
		if err := s.pread(old, offsetOf(slot)); err != nil {
			return false, s.ioErr("read for the journal", slot, err)
		}
		if err := j.append(slot, old); err != nil {
			return false, err
		}
	}
	return j.unsynced, nil
}

// releaseDeferred syncs the journal and hands the writes that waited for it
// to the ring.
func (s *Store) releaseDeferred() error {
	j := s.journal
	if j == nil || len(j.deferred) == 0 {
		return nil
	}
	if err := j.sync(); err != nil {
		// The writes cannot go: their slots' images may not be durable.
		for _, i := range j.deferred {
			r := s.reqs[i]
			s.reqs[i] = request{}
			s.free = append(s.free, i)
			s.inflight--
			s.completed = append(s.completed, completion{done: r.done, err: err})
		}
		j.deferred = j.deferred[:0]
		return nil
	}
	for _, i := range j.deferred {
		r := s.reqs[i]
		if err := s.push(i, ioringOpWrite, s.buf(i)); err != nil {
			s.reqs[i] = request{}
			s.free = append(s.free, i)
			s.inflight--
			s.completed = append(s.completed, completion{done: r.done, err: s.ioErr("write", r.slot, err)})
		}
	}
	j.deferred = j.deferred[:0]
	return nil
}

// startEpoch begins a new rollback point: the superblock (in use, with the
// current metadata) records the next epoch, and the journal starts over.
// The caller has made every page write durable and fdatasyncs after.
func (s *Store) startEpoch() error {
	if s.journal == nil {
		return s.writeSuper(false)
	}
	s.epoch++
	if err := s.writeSuper(false); err != nil {
		s.epoch--
		return err
	}
	s.journal.reset(s.epoch)
	return nil
}

// Recovered reports whether Open found the store not closed cleanly and put
// every page back as it was at its last Open or Sync from the journal, so
// that the pages match the metadata persisted then. False for a store that
// was clean (nothing to do) or that keeps no journal.
func (s *Store) Recovered() bool { return s.recovered }

// RolledBack is how many pages that rollback wrote back.
func (s *Store) RolledBack() int { return s.rolledBack }

// JournalBytes is the size of the current epoch's journal: what a Sync
// would let go of. Unlike the other methods it may run concurrently with
// them.
func (s *Store) JournalBytes() int64 {
	if s.journal == nil {
		return 0
	}
	return s.journal.size.Load()
}

// protectBatch and protectReaders shape Protect: the old images it holds
// at once (a mapping of that many pages) and the reads it keeps in flight.
const (
	protectBatch   = 256
	protectReaders = 16
)

// Protect journals the current image of every slot in slots that has none
// in the journal this epoch yet, reading them protectReaders at a time. A
// checkpoint about to write many changed pages back calls it first: each
// write would otherwise read its slot's old image alone, synchronously,
// just before it is submitted (protect), one device round trip per page.
// The records are synced with the next batch of writes, as protect's are.
// The caller keeps every other use of the store out meanwhile, as for any
// write: a write to a slot between its read here and its record would leave
// the new image in the journal as the old one.
func (s *Store) Protect(slots []uint64) error {
	j := s.journal
	if j == nil || s.closed {
		return nil
	}
	var todo []uint64
	for _, slot := range slots {
		if slot < s.slots && !j.isSaved(slot) {
			todo = append(todo, slot)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if !s.inUse {
		if err := s.markInUse(); err != nil {
			return err
		}
	}
	pool, err := unix.Mmap(-1, 0, protectBatch*PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("nvme: buffers for the journal: %w", err)
	}
	defer unix.Munmap(pool)
	errs := make([]error, protectBatch)
	for start := 0; start < len(todo); start += protectBatch {
		part := todo[start:min(start+protectBatch, len(todo))]
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(protectReaders, len(part)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= len(part) {
						return
					}
					errs[i] = s.pread(pool[i*PageSize:(i+1)*PageSize], offsetOf(part[i]))
				}
			}()
		}
		wg.Wait()
		for i, slot := range part {
			if errs[i] != nil {
				return s.ioErr("read for the journal", slot, errs[i])
			}
			if err := j.append(slot, pool[i*PageSize:(i+1)*PageSize]); err != nil {
				return err
			}
		}
	}
	return nil
}
