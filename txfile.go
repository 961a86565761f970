package scalestore

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
)

// A node's file of transaction records, in a cluster that writes through
// (docs/transactions.md, "Durability"). Without membership it is what
// keeps a commit whole; with membership the record goes to a buddy's
// memory too, and the file is read at a restart only when every process
// of the node's last view died (membership.Restart: otherwise the buddy
// rolled it, and the file is reset unread).
//
// A commit that changed several leaves writes them through to their
// directories one by one. Before the first, its committer appends the
// commit's record (every changed leaf's id and new image, checksummed as
// a whole) to this file: written to the page cache under durability
// process (it survives the process's death), and fdatasync'ed too under
// sync. Once every write-through is acknowledged, and before the leaves'
// latches are released, the record is marked done in place (8 bytes;
// fdatasync'ed under sync): a roll at the next start never lands over a
// later write of those pages by another node, since at most one record
// that is not done names a page at any time.
//
// Layout: a file header (magic, a random nonce made when the file is
// reset), then records, each a header
//
//	0 magic "TXR1"  4 generation  8 pages  12 crc32c  16 nonce  24 done
//
// and its pages (8-byte page id, then the page). The crc covers the
// header but its crc and done fields, and the pages. Appends are written
// one at a time (reserve and pwrite under one lock), so a record that
// was cut (a torn one) is the last one the file holds; when no record is
// open the next one goes at the start again, with the next generation.
// At start the file is read from its start while records are of the
// first record's generation and nonce: a record not marked done is rolled
// forward (actors/txstart.go), a torn one is dropped (its commit wrote
// nothing through: the record is complete before the first
// write-through), and once every roll is acknowledged the file is reset.

// NodeTxFile is node id's file of transaction records in its data
// directory, beside its store (NodeStoreFile).
func NodeTxFile(id int) string { return fmt.Sprintf("node-%d.db.tx", id) }

const (
	txFileMagic  = 0x474C58544F475353 // "SSGOTXLG"
	txFileHeader = 16
	txRecMagic   = 0x31525854 // "TXR1"
	txRecHeader  = 32
	txRecDone    = 0x454E4F4458544753 // "SGTXDONE"
	txRecPage    = 8 + protocol.PageSize
)

// txFileMax bounds a node's file of transaction records (a var: tests
// make it small). A commit whose record alone does not fit fails with
// ErrTxTooLarge; one that does not fit beside the open ones waits for
// them.
var txFileMax int64 = 64 << 20

// txRecordBytes is the size of a record of pages pages.
func txRecordBytes(pages int) int64 { return txRecHeader + int64(pages)*txRecPage }

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// txFile is a node's open file of transaction records.
type txFile struct {
	path string
	sync bool // durability sync: fdatasync each record and done mark

	mu     sync.Mutex
	room   *sync.Cond // an append waits for the open records to end
	f      *os.File
	nonce  uint64
	gen    uint32
	off    int64 // where the next record goes
	open   int   // records appended and not ended
	stuck  bool  // a record whose write-through failed stays to roll at the next start: never reset
	closed bool
}

// txPending is a record found open at start: its pages to roll forward.
type txPending struct {
	off   int64
	pages []actors.TxRollPage
}

// openTxFile opens (creating it if needed) the file at path and returns
// the records it holds that are not done. valid checks each page id a
// record names. A torn record is dropped and logged.
func openTxFile(path string, syncWrites bool, log *slog.Logger, valid func(protocol.PID) error) (*txFile, []txPending, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("scalestore: transaction records: %w", err)
	}
	t := &txFile{path: path, sync: syncWrites, f: f}
	t.room = sync.NewCond(&t.mu)
	pending, err := t.read(log, valid)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if len(pending) == 0 {
		if err := t.reset(); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return t, pending, nil
}

// read parses the file (see above).
func (t *txFile) read(log *slog.Logger, valid func(protocol.PID) error) ([]txPending, error) {
	st, err := t.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("scalestore: %s: %w", t.path, err)
	}
	if st.Size() == 0 {
		return nil, nil
	}
	if st.Size() > txFileMax+txRecordBytes(1) {
		return nil, fmt.Errorf("scalestore: %s: %d bytes, more than a file of transaction records holds (%d)", t.path, st.Size(), txFileMax)
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(io.NewSectionReader(t.f, 0, st.Size()), b); err != nil {
		return nil, fmt.Errorf("scalestore: %s: reading: %w", t.path, err)
	}
	if len(b) < txFileHeader || binary.LittleEndian.Uint64(b) != txFileMagic {
		return nil, fmt.Errorf("scalestore: %s: not a file of transaction records (its header is not one); "+
			"if its node never ran this version, remove it", t.path)
	}
	nonce := binary.LittleEndian.Uint64(b[8:])
	var pending []txPending
	var gen uint32
	for off := int64(txFileHeader); off+txRecHeader <= int64(len(b)); {
		h := b[off : off+txRecHeader]
		if binary.LittleEndian.Uint32(h) != txRecMagic || binary.LittleEndian.Uint64(h[16:]) != nonce {
			break // the end of the records
		}
		g := binary.LittleEndian.Uint32(h[4:])
		if off == txFileHeader {
			gen = g
		} else if g != gen {
			break // an older generation's records, done before a reset
		}
		n := int64(binary.LittleEndian.Uint32(h[8:]))
		size := txRecHeader + n*txRecPage
		if n < 1 || off+size > int64(len(b)) || txRecCRC(b[off:off+size]) != binary.LittleEndian.Uint32(h[12:]) {
			// Cut while it was written: its commit wrote nothing
			// through yet, and no record follows it.
			log.Warn("dropped a torn transaction record: its commit had written nothing through",
				"file", t.path, "offset", off, "pages", n)
			break
		}
		if binary.LittleEndian.Uint64(h[24:]) != txRecDone {
			p := txPending{off: off}
			for i := range n {
				o := off + txRecHeader + i*txRecPage
				pid := protocol.PID(binary.LittleEndian.Uint64(b[o:]))
				if err := valid(pid); err != nil {
					return nil, fmt.Errorf("scalestore: %s: the record at offset %d names page %v: %w", t.path, off, pid, err)
				}
				p.pages = append(p.pages, actors.TxRollPage{PID: pid, Data: b[o+8 : o+txRecPage : o+txRecPage]})
			}
			pending = append(pending, p)
		}
		off += size
	}
	return pending, nil
}

// sealTxRecord fills in the header of the record b, whose pages are in
// place: its generation gen, the file's nonce and the checksum.
func sealTxRecord(b []byte, gen uint32, nonce uint64) {
	binary.LittleEndian.PutUint32(b, txRecMagic)
	binary.LittleEndian.PutUint32(b[4:], gen)
	binary.LittleEndian.PutUint32(b[8:], uint32((len(b)-txRecHeader)/txRecPage))
	binary.LittleEndian.PutUint64(b[16:], nonce)
	binary.LittleEndian.PutUint32(b[12:], txRecCRC(b))
}

// txRecCRC is the checksum of the record r (header and pages).
func txRecCRC(r []byte) uint32 {
	c := crc32.Update(0, crc32c, r[:12])
	c = crc32.Update(c, crc32c, r[16:24])
	return crc32.Update(c, crc32c, r[txRecHeader:])
}

// reset empties the file (every record in it is done, or rolled) and
// gives it a new nonce, so that nothing of the old records is read again.
func (t *txFile) reset() error {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var h [txFileHeader]byte
	binary.LittleEndian.PutUint64(h[:], txFileMagic)
	copy(h[8:], nonce[:])
	err := t.f.Truncate(0)
	if err == nil {
		_, err = t.f.WriteAt(h[:], 0)
	}
	if err == nil && t.sync {
		err = t.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("scalestore: %s: resetting: %w", t.path, err)
	}
	t.nonce = binary.LittleEndian.Uint64(nonce[:])
	t.gen, t.off, t.open, t.stuck = 0, txFileHeader, 0, false
	return nil
}

// errTxFileClosed: the node was stopped (or killed) under the commit.
var errTxFileClosed = errors.New("the file of transaction records is closed")

// txImage is a page of a record: its id and new image (a latched leaf's
// guard).
type txImage interface {
	PID() protocol.PID
	Data() []byte
}

var _ txImage = (*bufmgr.ExclusiveGuard)(nil)

// begin appends the record of pages (their new images) and returns where
// it is; under sync it is on the device when begin returns.
func txBegin[P txImage](t *txFile, pages []P) (int64, error) {
	size := txRecordBytes(len(pages))
	if size > txFileMax-txFileHeader {
		return 0, fmt.Errorf("a record of %d leaves (%d bytes) does not fit %s (%d bytes): %w", len(pages), size, t.path, txFileMax, ErrTxTooLarge)
	}
	b := make([]byte, size)
	for i, p := range pages {
		o := txRecHeader + int64(i)*txRecPage
		binary.LittleEndian.PutUint64(b[o:], uint64(p.PID()))
		copy(b[o+8:o+txRecPage], p.Data())
	}
	t.mu.Lock()
	for {
		if t.closed {
			t.mu.Unlock()
			return 0, fmt.Errorf("scalestore: %s: %w", t.path, errTxFileClosed)
		}
		if t.open == 0 && !t.stuck && t.off > txFileHeader {
			t.off = txFileHeader
			t.gen++
		}
		if t.off+size <= txFileMax {
			break
		}
		if t.stuck {
			t.mu.Unlock()
			return 0, fmt.Errorf("scalestore: %s is full: a record whose write-through failed waits in it for the node's next start", t.path)
		}
		t.room.Wait()
	}
	sealTxRecord(b, t.gen, t.nonce)
	off := t.off
	_, err := t.f.WriteAt(b, off)
	if err == nil {
		t.off += size
		t.open++
	}
	t.mu.Unlock()
	if err == nil && t.sync {
		err = unix.Fdatasync(int(t.f.Fd()))
		if err != nil {
			t.end(false)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("scalestore: %s: writing a transaction record: %w", t.path, err)
	}
	return off, nil
}

// done marks the record at off done, once every page of it is on its
// directory's store (before the pages' latches are released).
func (t *txFile) done(off int64) error {
	var d [8]byte
	binary.LittleEndian.PutUint64(d[:], txRecDone)
	_, err := t.f.WriteAt(d[:], off+24)
	if err == nil && t.sync {
		err = unix.Fdatasync(int(t.f.Fd()))
	}
	t.end(err == nil)
	if err != nil {
		return fmt.Errorf("scalestore: %s: marking a transaction record done: %w", t.path, err)
	}
	return nil
}

// end closes an appended record: done, or left to roll at the next start
// (its write-through failed), which keeps the file from being reset.
func (t *txFile) end(done bool) {
	t.mu.Lock()
	t.open--
	if !done {
		t.stuck = true
	}
	if t.open == 0 {
		t.room.Broadcast()
	}
	t.mu.Unlock()
}

// close closes the file; appends after it fail, as after the process's
// death.
func (t *txFile) close() {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		t.f.Close()
	}
	t.room.Broadcast()
	t.mu.Unlock()
}
