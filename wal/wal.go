package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Op is what a record does.
type Op uint8

const (
	// Put sets a key to a value.
	Put Op = 1
	// Delete removes a key.
	Delete Op = 2
	// Batch is a transaction's writes in one record (AppendBatch): replay
	// applies all of them or, torn, none.
	Batch Op = 3
)

const (
	// header: CRC32C of the rest of the record [0,4), body length [4,8),
	// epoch [8,16); the body is the op, the key's length as a uvarint, the
	// key and the value.
	header = 16
	// MaxRecord bounds a record's body, so that a damaged length is never
	// read as an allocation of gigabytes.
	MaxRecord = 16 << 20
	// growChunk is how far ahead of the writes the file is zero-filled.
	growChunk = 4 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var le = binary.LittleEndian

// Options configure Open.
type Options struct {
	// NoSync hands each commit to the operating system without waiting
	// for the device: a commit survives the process being killed, not a
	// power failure or a kernel crash.
	NoSync bool
}

// Log is an open redo log. Its methods are safe for concurrent use, but
// Start and Replay must not run concurrently with Append or Commit.
type Log struct {
	f      *os.File
	path   string
	noSync atomic.Bool

	mu   sync.Mutex
	cond sync.Cond
	// LSNs count bytes appended over the log's life; the current epoch's
	// records start at base (file offset 0).
	base, next, durable uint64
	// nextNow, durableNow and baseNow mirror next, durable and base for
	// readers without the lock (Appended, Commit's fast path, Size).
	nextNow, durableNow, baseNow atomic.Uint64
	epoch                        uint64
	buf, spare                   []byte // appended, not yet written; the other buffer
	writing                      bool   // a committer is writing and syncing
	err                          error  // a failed write or sync: the log is unusable
	size                         int64  // the file's size (zero-filled ahead)
	// mapped is the file mapped shared (mapSize bytes of address space,
	// touched only below size): a NoSync commit copies its records there,
	// which the kernel keeps when the process is killed, with no system
	// call. Nil where the mapping failed (then it writes with pwrite).
	mapped []byte
}

// mapSize is how much of the log a NoSync commit reaches through the
// mapping; past it, commits write with pwrite.
const mapSize = 1 << 32

// Open opens the log at path, creating it if it does not exist.
func Open(path string, opts Options) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: %w", err)
	}
	l := &Log{f: f, path: path, size: st.Size()}
	l.noSync.Store(opts.NoSync)
	if m, err := unix.Mmap(int(f.Fd()), 0, mapSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		l.mapped = m
	}
	l.cond.L = &l.mu
	return l, nil
}

// Replayed is what Replay found.
type Replayed struct {
	Records int
	Bytes   int64
	// Stop says why the epoch's records end there: "end of file", "a torn
	// or damaged record at offset N", "a record of epoch E at offset N".
	Stop string
}

// Replay calls fn with every record of epoch in order, from the start of
// the file, until one does not verify or belongs to another epoch. key and
// val are valid only during the call. An error of fn stops it and is
// returned.
func (l *Log) Replay(epoch uint64, fn func(op Op, key, val []byte) error) (Replayed, error) {
	var r Replayed
	rd := bufio.NewReaderSize(io.NewSectionReader(l.f, 0, 1<<62), 1<<20)
	hdr := make([]byte, header)
	var body []byte
	for {
		if _, err := io.ReadFull(rd, hdr); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				r.Stop = "end of file"
				return r, nil
			}
			return r, fmt.Errorf("wal: reading %s: %w", l.path, err)
		}
		n := le.Uint32(hdr[4:])
		if e := le.Uint64(hdr[8:]); e != epoch {
			if n == 0 && e == 0 && le.Uint32(hdr) == 0 {
				r.Stop = "end of the records (zeros)"
			} else {
				r.Stop = fmt.Sprintf("a record of epoch %d at offset %d", e, r.Bytes)
			}
			return r, nil
		}
		if n < 2 || n > MaxRecord {
			r.Stop = fmt.Sprintf("a torn or damaged record at offset %d (length %d)", r.Bytes, n)
			return r, nil
		}
		body = append(body[:0], make([]byte, n)...)
		if _, err := io.ReadFull(rd, body); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				r.Stop = fmt.Sprintf("a torn record at offset %d (the file ends inside it)", r.Bytes)
				return r, nil
			}
			return r, fmt.Errorf("wal: reading %s: %w", l.path, err)
		}
		crc := crc32.Update(crc32.Checksum(hdr[4:], castagnoli), castagnoli, body)
		op, key, val, ok := decodeBody(body)
		if op == Batch && ok {
			ok = validBatch(val)
		}
		if crc != le.Uint32(hdr) || !ok {
			r.Stop = fmt.Sprintf("a torn or damaged record at offset %d", r.Bytes)
			return r, nil
		}
		var err error
		if op == Batch {
			err = replayBatch(val, fn)
		} else {
			err = fn(op, key, val)
		}
		if err != nil {
			return r, err
		}
		r.Records++
		r.Bytes += int64(header) + int64(n)
	}
}

func decodeBody(b []byte) (op Op, key, val []byte, ok bool) {
	op = Op(b[0])
	if op != Put && op != Delete && op != Batch {
		return 0, nil, nil, false
	}
	k, n := binary.Uvarint(b[1:])
	if n <= 0 || k > uint64(len(b)-1-n) {
		return 0, nil, nil, false
	}
	key = b[1+n : 1+n+int(k)]
	val = b[1+n+int(k):]
	if op == Delete && len(val) != 0 {
		return 0, nil, nil, false
	}
	return op, key, val, true
}

// Start begins epoch: records are appended from the start of the file, and
// everything appended before counts as durable (the caller's checkpoint
// made it so). The caller has stopped appending and committed everything.
func (l *Log) Start(epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch = epoch
	l.buf = l.buf[:0]
	l.base, l.durable = l.next, l.next
	l.durableNow.Store(l.durable)
	l.baseNow.Store(l.base)
}

// Append adds a record to the log and returns its LSN: Commit(lsn) waits
// until it is durable. It fails only for a record over MaxRecord.
func (l *Log) Append(op Op, key, val []byte) (uint64, error) {
	return l.AppendPrefixed(op, nil, key, val)
}

// AppendPrefixed is Append of the key prefix+key, without the caller
// joining them (a cluster node's log tags each key with its table).
func (l *Log) AppendPrefixed(op Op, prefix, key, val []byte) (uint64, error) {
	var kl [binary.MaxVarintLen64]byte
	kn := binary.PutUvarint(kl[:], uint64(len(prefix)+len(key)))
	body := 1 + kn + len(prefix) + len(key) + len(val)
	if body > MaxRecord {
		return 0, fmt.Errorf("wal: a record of %d bytes exceeds %d", body, MaxRecord)
	}
	l.mu.Lock()
	start := len(l.buf)
	l.buf = append(l.buf, make([]byte, header)...)
	l.buf = append(l.buf, byte(op))
	l.buf = append(l.buf, kl[:kn]...)
	l.buf = append(l.buf, prefix...)
	l.buf = append(l.buf, key...)
	l.buf = append(l.buf, val...)
	rec := l.buf[start:]
	le.PutUint32(rec[4:], uint32(body))
	le.PutUint64(rec[8:], l.epoch)
	le.PutUint32(rec, crc32.Checksum(rec[4:], castagnoli))
	l.next += uint64(len(rec))
	lsn := l.next
	l.nextNow.Store(lsn)
	l.mu.Unlock()
	return lsn, nil
}

// Commit waits until every record up to lsn is durable (with NoSync: handed
// to the operating system). One waiter writes and syncs what all have
// appended while the others wait for it: group commit.
func (l *Log) Commit(lsn uint64) error {
	if l.durableNow.Load() >= lsn {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.durable < lsn {
		if l.err != nil {
			return l.err
		}
		if l.writing {
			l.cond.Wait()
			continue
		}
		buf, end := l.buf, l.next
		off := int64(end - l.base - uint64(len(buf)))
		if stop := off + int64(len(buf)); l.noSync.Load() && stop <= l.size && stop <= int64(len(l.mapped)) {
			// NoSync into the mapping, no growth: a copy, made here under
			// the lock rather than by a writer the others wait for (a
			// wait is a wake-up of each waiter, dearer than the copy).
			copy(l.mapped[off:stop], buf)
			l.buf = buf[:0]
			l.durable = end
			l.durableNow.Store(end)
			continue
		}
		l.writing = true
		l.buf = l.spare[:0]
		l.mu.Unlock()
		err := l.write(buf, off)
		l.mu.Lock()
		l.spare = buf[:0]
		l.writing = false
		if err != nil {
			l.err = fmt.Errorf("wal: %s: %w (the log takes no more records)", l.path, err)
		} else {
			l.durable = end
			l.durableNow.Store(end)
		}
		l.cond.Broadcast()
	}
	return nil
}

// Sync commits everything appended so far.
func (l *Log) Sync() error {
	l.mu.Lock()
	lsn := l.next
	l.mu.Unlock()
	return l.Commit(lsn)
}

// write puts buf at off, growing the file ahead first, and syncs.
func (l *Log) write(buf []byte, off int64) error {
	if end := off + int64(len(buf)); end > l.size {
		grow := max(end, l.size+growChunk)
		if err := l.zeroFill(l.size, grow); err != nil {
			return err
		}
	}
	noSync := l.noSync.Load()
	if end := off + int64(len(buf)); noSync && end <= int64(len(l.mapped)) {
		copy(l.mapped[off:end], buf) // below size: the file holds these bytes
		return nil
	}
	if _, err := l.f.WriteAt(buf, off); err != nil {
		return err
	}
	if noSync {
		return nil
	}
	if err := unix.Fdatasync(int(l.f.Fd())); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return nil
}

// zeroFill writes zeros over [from, to) and makes the new size durable, so
// that commits in that range change no metadata.
func (l *Log) zeroFill(from, to int64) error {
	zeros := make([]byte, 256<<10)
	for off := from; off < to; {
		n := min(int64(len(zeros)), to-off)
		if _, err := l.f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("growing the log: %w", err)
		}
		off += n
	}
	if !l.noSync.Load() {
		if err := unix.Fdatasync(int(l.f.Fd())); err != nil {
			return fmt.Errorf("growing the log: sync: %w", err)
		}
	}
	l.size = to
	return nil
}

// SetNoSync changes Options.NoSync for the commits that follow. Turning it
// off first makes everything committed so far durable.
func (l *Log) SetNoSync(noSync bool) error {
	was := l.noSync.Swap(noSync)
	if !was || noSync {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.writing {
		l.cond.Wait()
	}
	if l.err != nil {
		return l.err
	}
	if err := unix.Fdatasync(int(l.f.Fd())); err != nil {
		l.err = fmt.Errorf("wal: %s: sync: %w (the log takes no more records)", l.path, err)
		return l.err
	}
	return nil
}

// Appended is the LSN of the last record appended so far: Commit of it
// waits for every record appended before this call.
func (l *Log) Appended() uint64 { return l.nextNow.Load() }

// Durable is the LSN up to which every record is durable.
func (l *Log) Durable() uint64 { return l.durableNow.Load() }

// Size is how many bytes the current epoch's records take.
func (l *Log) Size() int64 {
	// Each writer asks after its commit (a checkpoint due?): no lock. Read
	// base first: Start moves it up to next, never past.
	base := l.baseNow.Load()
	return int64(l.nextNow.Load() - base)
}

// Abandon closes the file without committing what was appended and not
// yet committed, as a killed process would leave it.
func (l *Log) Abandon() error {
	l.mu.Lock()
	for l.writing {
		l.cond.Wait()
	}
	l.err = errors.New("wal: abandoned")
	l.mu.Unlock()
	if l.mapped != nil {
		_ = unix.Munmap(l.mapped)
		l.mapped = nil
	}
	return l.f.Close()
}

// Close commits what was appended and closes the file.
func (l *Log) Close() error {
	err := l.Sync()
	if l.mapped != nil {
		_ = unix.Munmap(l.mapped)
		l.mapped = nil
	}
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("wal: %w", cerr)
	}
	return err
}
