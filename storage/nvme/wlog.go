//go:build linux

package nvme

import (
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The write log (Options.WriteLog) is a redo log of whole page images
// beside the store (path + WriteLogSuffix). A write is acknowledged once its
// image is in the log: every write queued while the previous log write was
// in flight goes in the next one, as one sequential write of up to
// wlogMaxBatch pages behind a header block (group commit). This is why it
// exists: this VM's device takes about 45,000 random 4 KiB writes a second
// at any queue depth, but a 64 KiB sequential write as fast as a 4 KiB one.
//
// The newest image of every slot written since the last checkpoint is kept
// in memory (reads of the slot are served from it) and written in place by
// a checkpoint, one write per slot however often it changed. A checkpoint
// starts when the log is half full; it writes the images of the slots dirty
// at its start, flushes the store (fdatasync), and then persists the log's
// new head (the log position at its start) and flushes the log: the space
// before that is free. Writes go on meanwhile; a write finds the log full
// only if a whole half fills before the checkpoint is done.
//
// # Layout
//
// Block 0 is the log header: "SSWLOG01", the head's byte offset in the ring
// (after block 0), the sequence number of the batch at the head, the ring's
// length, and a CRC32C of the block in its last four bytes. A batch is a
// header block ("SSWLBAT1", its sequence number, the count of pages, their
// slots, a CRC32C) followed by the pages as the store writes them (with
// their trailers, so each page verifies on its own). A batch never wraps:
// one that does not fit before the ring's end starts at its beginning.
//
// # Recovery
//
// Open reads the batches from the head on, each with the next sequence
// number (a batch where the previous one ended, or at the ring's start), and
// writes each page that verifies in place, stopping at the first header or
// page that does not: a batch torn by a crash was never acknowledged. Batch
// numbers only grow, so a batch left from an earlier lap of the ring never
// has the number looked for. The store is then flushed, and the log starts
// empty at its beginning with the next number.

// WriteLogSuffix is appended to the store's path to name its write log.
const WriteLogSuffix = ".wlog"

// DefaultWriteLogBytes is the write log's size when Options.WriteLogBytes
// is zero.
const DefaultWriteLogBytes = 256 << 20

const (
	wlogMagic      = "SSWLOG01"
	wlogBatchMagic = "SSWLBAT1"
	// wlogMaxBatch is the most pages one log write carries (512 KiB).
	wlogMaxBatch = 128
	// wlogMinBytes is the smallest ring: a few full batches.
	wlogMinBytes = 4 * (wlogMaxBatch + 1) * PageSize
)

// wlogEntry is the newest image of a slot not yet written in place, and
// the newest one whose log write completed: a checkpoint writes only that
// one in place. A write queued with others (a B-tree split's pages) must
// never reach its slot before the writes queued ahead of it are durable.
type wlogEntry struct {
	seq       uint64 // the newest write of the slot (writeLog.writes then)
	logged    []byte // PageSize bytes: the image of write loggedSeq
	loggedSeq uint64 // 0: none logged yet
	// While seq > loggedSeq, write seq's image is page index of batch.
	batch, index int
}

// wlogBatch is a log write being filled or in flight.
type wlogBatch struct {
	buf   []byte // aligned: the header block and wlogMaxBatch pages
	slots []uint64
	seqs  []uint64 // each page's write (wlogEntry.seq)
	dones []func(error)
}

// writeLog is the store's write log; the store's goroutine owns it.
type writeLog struct {
	fd      int
	path    string
	dataLen uint64 // bytes of the ring after the header block
	mem     []byte // mmap: the two batches' buffers, then the header block

	batches  [2]wlogBatch
	fill     int  // the batch being filled
	inflight bool // the other one is being written

	// head and tail are byte offsets into the ring counted from its
	// start without wrapping: the ring holds [head, tail).
	head, tail uint64
	nextSeq    uint64 // the next batch's number
	writes     uint64 // page images logged so far
	dirty      map[uint64]*wlogEntry
	spare      [][]byte // free entry buffers
	// cached: the log goes through the page cache (Options.WriteLogCached),
	// whose promise is the process's death only: a checkpoint flushes
	// neither the store nor the log (a flush of the log would write back
	// up to half of it at once, stalling every write).
	cached bool

	// The checkpoint under way, if ck.
	ck          bool
	ckTail      uint64   // the head once it is done
	ckSeq       uint64   // the number of the batch at ckTail
	ckQueue     []uint64 // slots still to write in place
	ckPending   int      // in-place writes in flight
	ckWaitBatch bool     // a batch written before it started is in flight
	err         error    // a failed log or checkpoint write: the log stops

	// Batches and Checkpoints count log writes and finished checkpoints;
	// Replayed counts the pages Open wrote back from the log.
	Batches, Checkpoints, Replayed uint64
}

// openWriteLog opens (or creates) the write log at path and, for an
// existing store, replays it into s. fresh discards what the log held.
func (s *Store) openWriteLog(path string, size int, fresh, cached bool) error {
	if size == 0 {
		size = DefaultWriteLogBytes
	}
	dataLen := uint64(size) / PageSize * PageSize
	if dataLen < wlogMinBytes {
		return fmt.Errorf("nvme: write log of %d bytes: want at least %d", size, wlogMinBytes)
	}
	flags := unix.O_RDWR | unix.O_CLOEXEC | unix.O_CREAT
	if s.direct && !cached {
		flags |= unix.O_DIRECT
	}
	fd, err := openRetry(path, flags, 0o644)
	if err != nil {
		return fmt.Errorf("nvme: open write log %s: %w", path, err)
	}
	w := &writeLog{fd: fd, path: path, dirty: map[uint64]*wlogEntry{}, nextSeq: 1, cached: cached}
	s.wlog = w
	batchBytes := (wlogMaxBatch + 1) * PageSize
	w.mem, err = unix.Mmap(-1, 0, 2*batchBytes+PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("nvme: mmap write log buffers: %w", err)
	}
	for i := range w.batches {
		w.batches[i].buf = w.mem[i*batchBytes : (i+1)*batchBytes : (i+1)*batchBytes]
	}
	if !fresh {
		if err := s.replayWriteLog(); err != nil {
			return err
		}
	}
	// Start empty at the ring's start, numbered past everything in it.
	w.dataLen = dataLen
	if err := unix.Ftruncate(fd, int64(PageSize+dataLen)); err != nil {
		return wrapIO("nvme: size write log "+path, err)
	}
	if err := unix.Fallocate(fd, 0, 0, int64(PageSize+dataLen)); err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return wrapIO("nvme: allocate write log "+path, err)
	}
	if err := s.writeLogHeader(0, w.nextSeq); err != nil {
		return err
	}
	syncDir(dirOf(path))
	return nil
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:max(i, 1)]
		}
	}
	return "."
}

// headerBlock is the aligned block the log header is built and read in.
func (w *writeLog) headerBlock() []byte {
	n := len(w.mem)
	return w.mem[n-PageSize : n : n]
}

// writeLogHeader persists the log's head (a ring offset) and the number of
// the batch there, and flushes the log.
func (s *Store) writeLogHeader(head, seq uint64) error {
	w := s.wlog
	b := w.headerBlock()
	clear(b)
	copy(b, wlogMagic)
	le.PutUint64(b[8:], head)
	le.PutUint64(b[16:], seq)
	le.PutUint64(b[24:], w.dataLen)
	le.PutUint32(b[PageSize-4:], crc32.Checksum(b[:PageSize-4], castagnoli))
	if err := pioFD(w.fd, true, b, 0); err != nil {
		return wrapIO("nvme: write log header of "+w.path, s.directErr(err))
	}
	if w.cached {
		return nil
	}
	if err := unix.Fdatasync(w.fd); err != nil {
		return wrapIO("nvme: sync write log "+w.path, err)
	}
	return nil
}

// errShortTransfer: the file ended before the buffer was filled.
var errShortTransfer = errors.New("short transfer")

// pioFD moves all of buf at off, resuming after short transfers and EINTR.
func pioFD(fd int, write bool, buf []byte, off int64) error {
	for done := 0; done < len(buf); {
		var n int
		var err error
		if write {
			n, err = unix.Pwrite(fd, buf[done:], off+int64(done))
		} else {
			n, err = unix.Pread(fd, buf[done:], off+int64(done))
		}
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return fmt.Errorf("offset %d: %w", off+int64(done), errShortTransfer)
		}
		done += n
	}
	return nil
}

// replayWriteLog writes back every page of the log's batches from its head
// on (see Recovery above) and flushes the store.
func (s *Store) replayWriteLog() error {
	w := s.wlog
	hb := w.headerBlock()
	if err := pioFD(w.fd, false, hb, 0); err != nil {
		if errors.Is(err, errShortTransfer) {
			return nil // a log never written: nothing to replay
		}
		return wrapIO("nvme: read write log header of "+w.path, s.directErr(err))
	}
	if string(hb[:8]) != wlogMagic {
		if allZero(hb) {
			return nil
		}
		return fmt.Errorf("%w: write log %s: bad header magic", ErrCorrupt, w.path)
	}
	if le.Uint32(hb[PageSize-4:]) != crc32.Checksum(hb[:PageSize-4], castagnoli) {
		return fmt.Errorf("%w: write log %s: header checksum mismatch", ErrCorrupt, w.path)
	}
	pos, seq, dataLen := le.Uint64(hb[8:]), le.Uint64(hb[16:]), le.Uint64(hb[24:])
	if dataLen < wlogMinBytes || dataLen%PageSize != 0 || pos >= dataLen || pos%PageSize != 0 {
		return fmt.Errorf("%w: write log %s: header names head %d of a ring of %d bytes", ErrCorrupt, w.path, pos, dataLen)
	}
	batch := w.batches[0].buf
	page := batch[PageSize : 2*PageSize]
	for {
		n, ok, err := s.readBatchHeader(batch[:PageSize], pos, seq, dataLen)
		if err != nil {
			return err
		}
		if !ok && pos != 0 {
			pos = 0 // the batch may have started the ring over
			n, ok, err = s.readBatchHeader(batch[:PageSize], pos, seq, dataLen)
			if err != nil {
				return err
			}
		}
		if !ok {
			break
		}
		whole := true
		for i := range n {
			slot := le.Uint64(batch[24+8*i:])
			if err := pioFD(w.fd, false, page, int64(PageSize+pos+PageSize*(1+uint64(i)))); err != nil {
				return wrapIO("nvme: read write log "+w.path, s.directErr(err))
			}
			if slot >= s.slots || verify(page, slot) != nil || allZero(page) {
				whole = false // torn: never acknowledged
				break
			}
			if err := s.pwrite(page, offsetOf(slot)); err != nil {
				return s.ioErr("replay write of", slot, err)
			}
			w.Replayed++
		}
		seq++
		pos += PageSize * (1 + uint64(n))
		if !whole {
			break
		}
		if pos >= dataLen {
			pos = 0
		}
	}
	w.nextSeq = seq
	if w.Replayed > 0 {
		if err := unix.Fdatasync(s.fd); err != nil {
			return s.fileErr("sync", err)
		}
	}
	return nil
}

// readBatchHeader reads the batch header at ring offset pos and reports its
// page count if it is the batch numbered seq and fits the ring.
func (s *Store) readBatchHeader(b []byte, pos, seq, dataLen uint64) (int, bool, error) {
	w := s.wlog
	if pos+PageSize > dataLen {
		return 0, false, nil
	}
	if err := pioFD(w.fd, false, b, int64(PageSize+pos)); err != nil {
		if errors.Is(err, errShortTransfer) {
			return 0, false, nil
		}
		return 0, false, wrapIO("nvme: read write log "+w.path, s.directErr(err))
	}
	n := int(le.Uint32(b[16:]))
	switch {
	case string(b[:8]) != wlogBatchMagic, le.Uint64(b[8:]) != seq, n < 1 || n > wlogMaxBatch,
		le.Uint32(b[PageSize-4:]) != crc32.Checksum(b[:PageSize-4], castagnoli),
		pos+PageSize*(1+uint64(n)) > dataLen:
		return 0, false, nil
	}
	return n, true, nil
}

// logWrite queues a write of buf to slot in the log (WriteAsync with a
// write log): done runs once the log write that carries it completed.
func (s *Store) logWrite(slot uint64, buf []byte, done func(error)) error {
	w := s.wlog
	if w.err != nil {
		return w.err
	}
	if !s.inUse {
		if err := s.markInUse(); err != nil {
			return err
		}
	}
	for len(w.batches[w.fill].slots) == wlogMaxBatch {
		// Full: the one in flight must land first (or the checkpoint
		// make room).
		s.issueBatch()
		if len(w.batches[w.fill].slots) < wlogMaxBatch {
			break
		}
		if w.err != nil {
			return w.err
		}
		if s.inflight == 0 {
			return fmt.Errorf("nvme: write log %s: full, and nothing in flight to free it", w.path)
		}
		if _, err := s.Poll(1); err != nil {
			return err
		}
		if s.closed {
			return ErrClosed
		}
	}
	w.writes++
	e := w.dirty[slot]
	if e == nil {
		e = &wlogEntry{logged: w.page()}
		w.dirty[slot] = e
	}
	b := &w.batches[w.fill]
	i := len(b.slots)
	e.seq, e.batch, e.index = w.writes, w.fill, i
	page := b.buf[PageSize*(1+i) : PageSize*(2+i)]
	copy(page[:DataSize], buf)
	stamp(page, slot)
	b.slots = append(b.slots, slot)
	b.seqs = append(b.seqs, e.seq)
	b.dones = append(b.dones, done)
	return nil
}

// page is a free entry buffer.
func (w *writeLog) page() []byte {
	if n := len(w.spare); n > 0 {
		p := w.spare[n-1]
		w.spare = w.spare[:n-1]
		return p
	}
	return make([]byte, PageSize)
}

// logRead serves a read of a slot whose newest image is in the log from
// memory; it reports false if the slot has none.
func (s *Store) logRead(slot uint64, buf []byte, done func(error)) (bool, error) {
	w := s.wlog
	e := w.dirty[slot]
	if e == nil {
		return false, nil
	}
	src := e.logged
	if e.seq > e.loggedSeq {
		src = w.batches[e.batch].buf[PageSize*(1+e.index):]
	}
	copy(buf[:DataSize], src)
	clear(buf[DataSize:])
	s.Reads++
	s.completed = append(s.completed, completion{done: done})
	if s.ring != nil {
		// A completion for Poll to find, so that a goroutine waiting for
		// the ring's next one (WaitCompletions) wakes for this one.
		if err := s.pushNop(); err != nil {
			return true, err
		}
	}
	return true, nil
}

// nopUserData marks a no-op's completion.
const nopUserData = 1<<64 - 1

func (s *Store) pushNop() error {
	for !s.ring.push(ioringOpNop, -1, 0, 0, 0, nopUserData) {
		if err := s.ring.enter(0); err != nil {
			return err
		}
	}
	s.inflight++
	return nil
}

// issueBatch writes the filling batch to the log if no other is in flight
// and the ring has room (else it starts a checkpoint to make some).
func (s *Store) issueBatch() {
	w := s.wlog
	b := &w.batches[w.fill]
	if w.inflight || len(b.slots) == 0 || w.err != nil || s.closed {
		return
	}
	n := len(b.slots)
	size := uint64(PageSize * (1 + n))
	pos := w.tail
	if off := pos % w.dataLen; off+size > w.dataLen {
		pos += w.dataLen - off // start the ring over: a batch never wraps
	}
	if pos+size-w.head > w.dataLen {
		if !w.ck {
			s.startCheckpoint()
		}
		return // issued when the checkpoint is done
	}
	h := b.buf[:PageSize]
	clear(h)
	copy(h, wlogBatchMagic)
	le.PutUint64(h[8:], w.nextSeq)
	le.PutUint32(h[16:], uint32(n))
	for i, slot := range b.slots {
		le.PutUint64(h[24+8*i:], slot)
	}
	le.PutUint32(h[PageSize-4:], crc32.Checksum(h[:PageSize-4], castagnoli))
	w.nextSeq++
	w.tail = pos + size
	w.inflight = true
	k := w.fill
	w.fill ^= 1
	off := uint64(PageSize + pos%w.dataLen)
	w.Batches++
	if s.ring == nil {
		err := pioFD(w.fd, true, b.buf[:size], int64(off))
		if err != nil {
			err = wrapIO("nvme: write log "+w.path, s.directErr(err))
		}
		s.batchDone(k, err, false)
	} else {
		addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b.buf))))
		for !s.ring.push(ioringOpWrite, w.fd, off, addr, uint32(size), uint64(len(s.reqs)+k)) {
			if err := s.ring.enter(0); err != nil {
				w.inflight = false
				s.batchDone(k, fmt.Errorf("nvme: write log %s: %w", w.path, err), false)
				return
			}
		}
		s.inflight++
	}
	if !w.ck && (w.tail-w.head > w.dataLen/2 || len(w.dirty) > int(w.dataLen/PageSize/2)) {
		s.startCheckpoint()
	}
}

// batchDone reports batch k's writes (now, from the ring's completion, or
// through Poll for the pread engine) and issues the next batch.
func (s *Store) batchDone(k int, err error, now bool) {
	w := s.wlog
	b := &w.batches[k]
	if err != nil && w.err == nil {
		w.err = err
	}
	if err == nil {
		for i, slot := range b.slots {
			if e := w.dirty[slot]; e != nil && e.loggedSeq < b.seqs[i] {
				copy(e.logged[:DataSize], b.buf[PageSize*(1+i):])
				e.loggedSeq = b.seqs[i]
			}
		}
	}
	dones := b.dones
	b.slots, b.seqs, b.dones = b.slots[:0], b.seqs[:0], nil
	w.inflight = false
	if w.ckWaitBatch {
		w.ckWaitBatch = false
	}
	for _, done := range dones {
		if done == nil {
			continue
		}
		if now {
			done(err)
		} else {
			s.completed = append(s.completed, completion{done: done, err: err})
		}
	}
	s.pumpCheckpoint()
	s.issueBatch()
}

// startCheckpoint starts writing every dirty slot in place.
func (s *Store) startCheckpoint() {
	w := s.wlog
	w.ck = true
	w.ckTail, w.ckSeq = w.tail, w.nextSeq
	w.ckWaitBatch = w.inflight
	w.ckQueue = w.ckQueue[:0]
	for slot := range w.dirty {
		w.ckQueue = append(w.ckQueue, slot)
	}
	slices.Sort(w.ckQueue) // in file order, for the device
	slices.Reverse(w.ckQueue)
	s.pumpCheckpoint()
}

// pumpCheckpoint issues the checkpoint's in-place writes while the pool has
// buffers to spare (a quarter of them stay for reads and other writes).
func (s *Store) pumpCheckpoint() {
	w := s.wlog
	// Until the batch in flight at the start has landed, a slot's
	// logged image may miss a write before the checkpoint's tail.
	for w.ck && !w.ckWaitBatch && len(w.ckQueue) > 0 && w.err == nil && !s.closed && (s.ring == nil || len(s.free) > s.depth/4) {
		slot := w.ckQueue[len(w.ckQueue)-1]
		w.ckQueue = w.ckQueue[:len(w.ckQueue)-1]
		e := w.dirty[slot]
		if e == nil || e.loggedSeq == 0 {
			continue // every write of it is past the checkpoint's tail
		}
		seq := e.loggedSeq
		w.ckPending++
		err := s.submit(slot, e.logged, func(err error) { s.applied(slot, seq, err) }, true)
		if err != nil {
			w.ckPending--
			if w.err == nil {
				w.err = err
			}
		}
	}
	s.maybeFinishCheckpoint()
}

// applied is an in-place write's completion: the slot is clean if it was
// not written again meanwhile.
func (s *Store) applied(slot, seq uint64, err error) {
	w := s.wlog
	w.ckPending--
	if err != nil {
		if w.err == nil {
			w.err = err
		}
		return
	}
	if e := w.dirty[slot]; e != nil && e.seq == seq {
		delete(w.dirty, slot)
		w.spare = append(w.spare, e.logged)
	}
	s.pumpCheckpoint() // a buffer is free again
}

// maybeFinishCheckpoint ends the checkpoint once its writes and the batch
// that was in flight when it started have landed: the store is flushed,
// then the new head is persisted.
func (s *Store) maybeFinishCheckpoint() {
	w := s.wlog
	if !w.ck || len(w.ckQueue) > 0 || w.ckPending > 0 || w.ckWaitBatch || w.err != nil || s.closed {
		return // Submit and Poll pump the rest of the queue
	}
	w.ck = false
	if !w.cached {
		if err := unix.Fdatasync(s.fd); err != nil {
			w.err = s.fileErr("sync", err)
			return
		}
	}
	if err := s.writeLogHeader(w.ckTail%w.dataLen, w.ckSeq); err != nil {
		w.err = err
		return
	}
	w.head = w.ckTail
	w.Checkpoints++
	s.issueBatch()
}

// logPump issues what the log can: the filling batch, the checkpoint's
// writes. Submit and Poll call it.
func (s *Store) logPump() error {
	w := s.wlog
	if w == nil {
		return nil
	}
	s.issueBatch()
	if w.ck {
		s.pumpCheckpoint()
	}
	return w.err
}

// logQueued counts the writes waiting in the filling batch.
func (s *Store) logQueued() int {
	if s.wlog == nil {
		return 0
	}
	return len(s.wlog.batches[s.wlog.fill].slots)
}

// logReap handles a completion of the ring that is the log's (a batch, a
// no-op); it reports false for any other.
func (s *Store) logReap(ud uint64, res int32) bool {
	switch {
	case ud == nopUserData:
		s.inflight--
		return true
	case s.wlog == nil || ud < uint64(len(s.reqs)) || ud > uint64(len(s.reqs)+1):
		return false
	}
	w := s.wlog
	k := int(ud - uint64(len(s.reqs)))
	s.inflight--
	var err error
	want := PageSize * (1 + len(w.batches[k].slots))
	switch {
	case res < 0:
		err = wrapIO("nvme: write log "+w.path, s.directErr(unix.Errno(-res)))
	case int(res) != want:
		err = fmt.Errorf("nvme: write log %s: %d of %d bytes written", w.path, res, want)
	}
	s.batchDone(k, err, true)
	return true
}

// checkpointAll writes every dirty slot in place and empties the log (Sync
// and Close): the store alone then holds every write.
func (s *Store) checkpointAll() error {
	w := s.wlog
	for w.err == nil && !s.closed && (len(w.dirty) > 0 || w.head != w.tail || w.ck || s.logQueued() > 0 || w.inflight) {
		if !w.ck && !w.inflight && s.logQueued() == 0 {
			s.startCheckpoint()
		}
		if err := s.logPump(); err != nil {
			return err
		}
		if s.InFlight() == 0 {
			if w.ck || s.logQueued() > 0 || w.inflight {
				return fmt.Errorf("nvme: write log %s: checkpoint stuck", w.path)
			}
			continue
		}
		if _, err := s.Poll(1); err != nil {
			return err
		}
	}
	return w.err
}

// closeWriteLog releases the log's file and buffers.
func (w *writeLog) close(unmap bool) {
	if w.mem != nil && unmap {
		_ = unix.Munmap(w.mem)
		w.mem = nil
	}
	if w.fd >= 0 {
		_ = unix.Close(w.fd)
		w.fd = -1
	}
}

// WriteLogStats reports the write log's batches (log writes), checkpoints
// and the pages the last Open replayed; all zero without a write log.
func (s *Store) WriteLogStats() (batches, checkpoints, replayed uint64) {
	if s.wlog == nil {
		return 0, 0, 0
	}
	return s.wlog.Batches, s.wlog.Checkpoints, s.wlog.Replayed
}
