package ibverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"

	"github.com/scalestore-go/scalestore/protocol"
)

// The out-of-band channel: before any RDMA traffic two nodes exchange, over
// a TCP connection, everything needed to connect their queue pairs (LID,
// GID, QP numbers, PSNs, MTU) and to address each other's mailboxes (address
// and rkey). The connection then stays open as the control channel that
// re-connects a one-sided queue pair after a remote access error (RC moves
// both ends to the error state) and whose loss tells a node its peer is gone.
//
// Every message on it is one fixed-size Record, checksummed, versioned and
// validated field by field: the bytes come from the network, so a malformed
// record is an error, never a panic or an absurd allocation.

// RecordSize is the size of a Record on the wire.
const RecordSize = 128

const (
	recordMagic   = "SSIB"
	recordVersion = 1
)

// RecordKind says what a Record is for.
type RecordKind uint8

// Record kinds.
const (
	// KindHello opens a connection: From and To name the two nodes.
	KindHello RecordKind = iota + 1
	// KindSetup carries the queue pairs and the mailbox of one node for
	// the other.
	KindSetup
	// KindReady says the sender's queue pairs are at RTS.
	KindReady
	// KindReset asks the peer to re-connect its end of the sender's
	// one-sided queue pair (OSOut carries the sender's new PSN).
	KindReset
	// KindResetDone answers KindReset (OSIn carries the peer's new PSN).
	KindResetDone
)

func (k RecordKind) String() string {
	switch k {
	case KindHello:
		return "hello"
	case KindSetup:
		return "setup"
	case KindReady:
		return "ready"
	case KindReset:
		return "reset"
	case KindResetDone:
		return "reset-done"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// QPNum is a queue pair number with its first packet sequence number.
type QPNum struct {
	QPN uint32
	PSN uint32
}

// Record is one message of the out-of-band channel. Which fields matter
// depends on Kind; the others must be zero.
type Record struct {
	Kind     RecordKind
	From, To protocol.NodeID

	// The sender's port (Setup, Reset, ResetDone).
	LID uint16
	GID [16]byte
	MTU uint16 // active path MTU in bytes

	// Queue pairs. Msg carries both nodes' messages; OSOut is the
	// sender's requester for its one-sided verbs, OSIn its responder for
	// the receiver's.
	Msg, OSOut, OSIn QPNum

	// The sender's mailbox for the receiver (Setup): Slots slots of
	// SlotSize bytes at RingAddr; CreditAddr is where the receiver writes
	// how many of the sender's messages it consumed; ProbeAddr is a word
	// the receiver's byte-order probe may compare-and-swap. One rkey for
	// all three.
	RingAddr   uint64
	RingKey    uint32
	Slots      uint32
	SlotSize   uint32
	CreditAddr uint64
	ProbeAddr  uint64
}

// Wire layout (little endian):
//
//	0  magic "SSIB"   4  version u16   6  kind u8   7  from u8   8  to u8
//	9  reserved[1]   10  mtu u16      12  lid u16  14  reserved[2]
//	16 gid[16]
//	32 msg qpn, psn   40 os-out qpn, psn   48 os-in qpn, psn
//	56 ring addr u64  64 ring key u32     68 slots u32   72 slot size u32
//	76 reserved[4]    80 credit addr u64  88 probe addr u64
//	96 reserved[28]  124 crc32c of bytes 0..124
const (
	offVersion  = 4
	offKind     = 6
	offFrom     = 7
	offTo       = 8
	offMTU      = 10
	offLID      = 12
	offGID      = 16
	offMsg      = 32
	offOSOut    = 40
	offOSIn     = 48
	offRingAddr = 56
	offRingKey  = 64
	offSlots    = 68
	offSlotSize = 72
	offCredit   = 80
	offProbe    = 88
	offCRC      = RecordSize - 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrRecord: a malformed out-of-band record.
var ErrRecord = errors.New("ibverbs: malformed bootstrap record")

// Marshal encodes r.
func (r Record) Marshal() [RecordSize]byte {
	var b [RecordSize]byte
	copy(b[:4], recordMagic)
	le := binary.LittleEndian
	le.PutUint16(b[offVersion:], recordVersion)
	b[offKind] = byte(r.Kind)
	b[offFrom] = byte(r.From)
	b[offTo] = byte(r.To)
	le.PutUint16(b[offMTU:], r.MTU)
	le.PutUint16(b[offLID:], r.LID)
	copy(b[offGID:offGID+16], r.GID[:])
	for _, q := range []struct {
		off int
		n   QPNum
	}{{offMsg, r.Msg}, {offOSOut, r.OSOut}, {offOSIn, r.OSIn}} {
		le.PutUint32(b[q.off:], q.n.QPN)
		le.PutUint32(b[q.off+4:], q.n.PSN)
	}
	le.PutUint64(b[offRingAddr:], r.RingAddr)
	le.PutUint32(b[offRingKey:], r.RingKey)
	le.PutUint32(b[offSlots:], r.Slots)
	le.PutUint32(b[offSlotSize:], r.SlotSize)
	le.PutUint64(b[offCredit:], r.CreditAddr)
	le.PutUint64(b[offProbe:], r.ProbeAddr)
	le.PutUint32(b[offCRC:], crc32.Checksum(b[:offCRC], castagnoli))
	return b
}

// UnmarshalRecord decodes and validates one record.
func UnmarshalRecord(b []byte) (Record, error) {
	var r Record
	if len(b) != RecordSize {
		return r, fmt.Errorf("%w: %d bytes, want %d", ErrRecord, len(b), RecordSize)
	}
	if string(b[:4]) != recordMagic {
		return r, fmt.Errorf("%w: bad magic %q (not a scalestore ibverbs peer)", ErrRecord, b[:4])
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[offVersion:]); v != recordVersion {
		return r, fmt.Errorf("%w: version %d, want %d", ErrRecord, v, recordVersion)
	}
	if got, want := le.Uint32(b[offCRC:]), crc32.Checksum(b[:offCRC], castagnoli); got != want {
		return r, fmt.Errorf("%w: checksum %#x, want %#x", ErrRecord, got, want)
	}
	for _, span := range [][2]int{{9, 10}, {14, 16}, {76, 80}, {96, offCRC}} {
		for _, c := range b[span[0]:span[1]] {
			if c != 0 {
				return r, fmt.Errorf("%w: reserved bytes %d..%d are not zero", ErrRecord, span[0], span[1])
			}
		}
	}
	r.Kind = RecordKind(b[offKind])
	r.From = protocol.NodeID(b[offFrom])
	r.To = protocol.NodeID(b[offTo])
	r.MTU = le.Uint16(b[offMTU:])
	r.LID = le.Uint16(b[offLID:])
	copy(r.GID[:], b[offGID:offGID+16])
	r.Msg = QPNum{le.Uint32(b[offMsg:]), le.Uint32(b[offMsg+4:])}
	r.OSOut = QPNum{le.Uint32(b[offOSOut:]), le.Uint32(b[offOSOut+4:])}
	r.OSIn = QPNum{le.Uint32(b[offOSIn:]), le.Uint32(b[offOSIn+4:])}
	r.RingAddr = le.Uint64(b[offRingAddr:])
	r.RingKey = le.Uint32(b[offRingKey:])
	r.Slots = le.Uint32(b[offSlots:])
	r.SlotSize = le.Uint32(b[offSlotSize:])
	r.CreditAddr = le.Uint64(b[offCredit:])
	r.ProbeAddr = le.Uint64(b[offProbe:])
	if err := r.validate(); err != nil {
		return Record{}, err
	}
	return r, nil
}

func validQP(n QPNum) bool { return n.QPN != 0 && n.QPN < 1<<24 && validPSN(n.PSN) }

func validMTU(m uint16) bool {
	switch m {
	case 256, 512, 1024, 2048, 4096:
		return true
	}
	return false
}

// validate checks the fields Kind uses and that the others are zero.
func (r *Record) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %v record: %s", ErrRecord, r.Kind, fmt.Sprintf(format, a...))
	}
	if r.From == r.To {
		return bad("from and to are both node %d", r.From)
	}
	port := r.MTU != 0 || r.LID != 0 || r.GID != [16]byte{}
	mailbox := r.RingAddr != 0 || r.RingKey != 0 || r.Slots != 0 || r.SlotSize != 0 || r.CreditAddr != 0 || r.ProbeAddr != 0
	var zeroQP QPNum
	switch r.Kind {
	case KindHello, KindReady:
		if port || mailbox || r.Msg != zeroQP || r.OSOut != zeroQP || r.OSIn != zeroQP {
			return bad("carries fields it must not")
		}
	case KindSetup:
		if !validMTU(r.MTU) {
			return bad("MTU %d", r.MTU)
		}
		if !validQP(r.Msg) || !validQP(r.OSOut) || !validQP(r.OSIn) {
			return bad("queue pairs %+v %+v %+v (QPN and PSN are 24 bits, QPN not 0)", r.Msg, r.OSOut, r.OSIn)
		}
		if r.Slots == 0 || r.Slots > MaxMailboxes {
			return bad("%d mailbox slots (1..%d)", r.Slots, MaxMailboxes)
		}
		if r.SlotSize != slotSize {
			return bad("slot size %d, want %d (another version?)", r.SlotSize, slotSize)
		}
		end := r.RingAddr + uint64(r.Slots)*uint64(r.SlotSize)
		if r.RingAddr == 0 || r.RingAddr%8 != 0 || end < r.RingAddr {
			return bad("ring at %#x", r.RingAddr)
		}
		if r.CreditAddr == 0 || r.CreditAddr%8 != 0 || r.ProbeAddr == 0 || r.ProbeAddr%8 != 0 {
			return bad("credit word at %#x, probe word at %#x (want 8-byte aligned)", r.CreditAddr, r.ProbeAddr)
		}
	case KindReset, KindResetDone:
		if !validMTU(r.MTU) {
			return bad("MTU %d", r.MTU)
		}
		if mailbox || r.Msg != zeroQP {
			return bad("carries fields it must not")
		}
		if r.Kind == KindReset && (!validQP(r.OSOut) || r.OSIn != zeroQP) {
			return bad("queue pair %+v", r.OSOut)
		}
		if r.Kind == KindResetDone && (!validQP(r.OSIn) || r.OSOut != zeroQP) {
			return bad("queue pair %+v", r.OSIn)
		}
	default:
		return bad("unknown kind")
	}
	return nil
}

// WriteRecord writes one record.
func WriteRecord(w io.Writer, r Record) error {
	if err := r.validate(); err != nil {
		return fmt.Errorf("ibverbs: refusing to send: %w", err)
	}
	b := r.Marshal()
	if _, err := w.Write(b[:]); err != nil {
		return fmt.Errorf("ibverbs: write %v record: %w", r.Kind, err)
	}
	return nil
}

// ReadRecord reads and validates one record.
func ReadRecord(rd io.Reader) (Record, error) {
	var b [RecordSize]byte
	if _, err := io.ReadFull(rd, b[:]); err != nil {
		return Record{}, fmt.Errorf("ibverbs: read record: %w", err)
	}
	return UnmarshalRecord(b[:])
}

// Bootstrap exchanges one record with the peer at the other end of conn:
// it sends local and returns the peer's record, which must be of the same
// kind and addressed from the peer to the sender of local. Both sides call
// it; the write runs concurrently with the read so that it works on
// unbuffered connections (net.Pipe) too. The caller sets conn's deadline;
// on a read error Bootstrap closes conn (to end the write). Hello records
// are not exchanged this way: the accepting side learns who dialed from
// the dialer's hello before it can address its own.
func Bootstrap(conn net.Conn, local Record) (Record, error) {
	werr := make(chan error, 1)
	go func() { werr <- WriteRecord(conn, local) }()
	remote, rerr := ReadRecord(conn)
	if rerr != nil {
		// Unblock a write the peer will never read.
		_ = conn.Close()
		<-werr
		return Record{}, rerr
	}
	if err := <-werr; err != nil {
		return Record{}, err
	}
	if remote.Kind != local.Kind {
		return Record{}, fmt.Errorf("%w: got a %v record, want %v", ErrRecord, remote.Kind, local.Kind)
	}
	if remote.To != local.From || remote.From != local.To {
		return Record{}, fmt.Errorf("%w: %v record from node %d to node %d, want from %d to %d",
			ErrRecord, remote.Kind, remote.From, remote.To, local.To, local.From)
	}
	return remote, nil
}
