//go:build linux

package nvme

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/scalestore-go/scalestore/protocol"
)

const (
	// PageSize is the unit of I/O, protocol.PageSize.
	PageSize = protocol.PageSize
	// TrailerSize is the size of the trailer the store keeps at the end of
	// every data page (checksum, slot number, trailer magic).
	TrailerSize = 16
	// DataSize is how many bytes of a page carry the caller's data.
	DataSize = PageSize - TrailerSize
	// MaxMeta is the largest metadata blob SetMeta accepts.
	MaxMeta = 3072
	// FormatVersion is the on-disk format this package writes and reads
	// (2: B-tree slots gained key heads; a version-1 store is refused).
	FormatVersion = 2

	superMagic   = "SSGOSTOR"
	trailerMagic = 0x31505353 // "SSP1" in little endian: trailer format 1

	// Superblock field offsets.
	sbMagicOff    = 0  // [8]byte
	sbVersionOff  = 8  // uint32
	sbPageSizeOff = 12 // uint32
	sbSlotsOff    = 16 // uint64
	sbCleanOff    = 24 // uint32: 1 closed cleanly, 0 in use
	sbMetaLenOff  = 28 // uint32
	sbGenOff      = 32 // uint64: superblock writes so far
	sbEpochOff    = 40 // uint64: the undo journal's epoch (0: never journaled)
	sbMetaOff     = 64 // MaxMeta bytes
	sbCRCOff      = PageSize - 4

	// maxSlots keeps (slots+1)*PageSize within an int64 file offset and slots
	// within what a PID can name.
	maxSlots = min(1<<63/PageSize-1, protocol.MaxSlot+1)
)

// ErrCorrupt marks on-disk content that fails validation: a data page whose
// trailer does not match (torn, corrupted or misdirected write) or a
// superblock with a bad magic, version, page size or checksum.
var ErrCorrupt = errors.New("nvme: corrupt")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var le = binary.LittleEndian

// stamp writes page's trailer for slot.
func stamp(page []byte, slot uint64) {
	le.PutUint32(page[DataSize:], crc32.Checksum(page[:DataSize], castagnoli))
	le.PutUint64(page[DataSize+4:], slot)
	le.PutUint32(page[DataSize+12:], trailerMagic)
}

// verify checks the page read from slot. An all-zero page (never written)
// is valid.
func verify(page []byte, slot uint64) error {
	if le.Uint32(page[DataSize+12:]) != trailerMagic {
		if allZero(page) {
			return nil
		}
		return fmt.Errorf("%w: slot %d: bad page trailer magic %#08x (torn or foreign page)",
			ErrCorrupt, slot, le.Uint32(page[DataSize+12:]))
	}
	if got, want := le.Uint32(page[DataSize:]), crc32.Checksum(page[:DataSize], castagnoli); got != want {
		return fmt.Errorf("%w: slot %d: page checksum mismatch (stored %#08x, computed %#08x)",
			ErrCorrupt, slot, got, want)
	}
	if got := le.Uint64(page[DataSize+4:]); got != slot {
		return fmt.Errorf("%w: slot %d: page trailer names slot %d (misdirected write)",
			ErrCorrupt, slot, got)
	}
	return nil
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if le.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// super is the decoded superblock.
type super struct {
	slots uint64
	clean bool
	gen   uint64
	epoch uint64
	meta  []byte
}

// encode fills page with the superblock.
func (sb *super) encode(page []byte) {
	clear(page)
	copy(page[sbMagicOff:], superMagic)
	le.PutUint32(page[sbVersionOff:], FormatVersion)
	le.PutUint32(page[sbPageSizeOff:], PageSize)
	le.PutUint64(page[sbSlotsOff:], sb.slots)
	if sb.clean {
		le.PutUint32(page[sbCleanOff:], 1)
	}
	le.PutUint32(page[sbMetaLenOff:], uint32(len(sb.meta)))
	le.PutUint64(page[sbGenOff:], sb.gen)
	le.PutUint64(page[sbEpochOff:], sb.epoch)
	copy(page[sbMetaOff:sbMetaOff+MaxMeta], sb.meta)
	le.PutUint32(page[sbCRCOff:], crc32.Checksum(page[:sbCRCOff], castagnoli))
}

// decodeSuper validates and decodes a superblock page; every failure wraps
// ErrCorrupt.
func decodeSuper(page []byte) (*super, error) {
	if len(page) != PageSize {
		return nil, fmt.Errorf("%w: superblock of %d bytes", ErrCorrupt, len(page))
	}
	if string(page[sbMagicOff:sbMagicOff+len(superMagic)]) != superMagic {
		if allZero(page) {
			return nil, fmt.Errorf("%w: superblock is all zeros (not a formatted store; open with Create)", ErrCorrupt)
		}
		return nil, fmt.Errorf("%w: bad superblock magic %q, want %q (not a scalestore page store)",
			ErrCorrupt, page[sbMagicOff:sbMagicOff+len(superMagic)], superMagic)
	}
	if got, want := le.Uint32(page[sbCRCOff:]), crc32.Checksum(page[:sbCRCOff], castagnoli); got != want {
		return nil, fmt.Errorf("%w: superblock checksum mismatch (stored %#08x, computed %#08x)", ErrCorrupt, got, want)
	}
	if v := le.Uint32(page[sbVersionOff:]); v != FormatVersion {
		return nil, fmt.Errorf("%w: superblock format version %d, this build reads version %d", ErrCorrupt, v, FormatVersion)
	}
	if ps := le.Uint32(page[sbPageSizeOff:]); ps != PageSize {
		return nil, fmt.Errorf("%w: superblock page size %d, this build uses %d", ErrCorrupt, ps, PageSize)
	}
	sb := &super{slots: le.Uint64(page[sbSlotsOff:]), gen: le.Uint64(page[sbGenOff:]), epoch: le.Uint64(page[sbEpochOff:])}
	if sb.slots == 0 || sb.slots > maxSlots {
		return nil, fmt.Errorf("%w: superblock capacity of %d slots is out of range", ErrCorrupt, sb.slots)
	}
	switch c := le.Uint32(page[sbCleanOff:]); c {
	case 0:
	case 1:
		sb.clean = true
	default:
		return nil, fmt.Errorf("%w: superblock clean flag %d", ErrCorrupt, c)
	}
	n := le.Uint32(page[sbMetaLenOff:])
	if n > MaxMeta {
		return nil, fmt.Errorf("%w: superblock metadata length %d exceeds %d", ErrCorrupt, n, MaxMeta)
	}
	sb.meta = append([]byte(nil), page[sbMetaOff:sbMetaOff+int(n)]...)
	return sb, nil
}
