package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// FrameSize is the size of every protocol message on the wire (one cache line,
// paper §3.5).
const FrameSize = 64

const frameMagic = 0xA5

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed frame")

// Frame layout (little endian):
//
//	0 magic  1 type  2 from  3 to  4 mode  5 flags  6-7 count
//	8-15 pid  16-19 epoch  20-23 k  24 target  25-27 zero  28-31 pred
//	32-63 node set
//
// Encode writes m into b, which must be at least FrameSize long.
func Encode(b []byte, m *Message) {
	_ = b[FrameSize-1]
	b[0] = frameMagic
	b[1] = byte(m.Type)
	b[2] = byte(m.From)
	b[3] = byte(m.To)
	b[4] = byte(m.Mode)
	b[5] = byte(m.Flags)
	binary.LittleEndian.PutUint16(b[6:], m.Count)
	binary.LittleEndian.PutUint64(b[8:], uint64(m.PID))
	binary.LittleEndian.PutUint32(b[16:], m.Epoch)
	binary.LittleEndian.PutUint32(b[20:], m.K)
	b[24] = byte(m.Target)
	b[25], b[26], b[27] = byte(m.View), byte(m.View>>8), byte(m.View>>16)
	binary.LittleEndian.PutUint32(b[28:], m.Pred)
	for i, w := range m.Set {
		binary.LittleEndian.PutUint64(b[32+8*i:], w)
	}
}

// Decode parses and validates one frame. Every field is checked against the
// message type; nothing in b can make it panic.
func Decode(b []byte) (Message, error) {
	var m Message
	if len(b) != FrameSize {
		return m, fmt.Errorf("%w: %d bytes, want %d", ErrMalformed, len(b), FrameSize)
	}
	if b[0] != frameMagic {
		return m, fmt.Errorf("%w: bad magic %#x", ErrMalformed, b[0])
	}
	m.Type = Type(b[1])
	m.From = NodeID(b[2])
	m.To = NodeID(b[3])
	m.Mode = Mode(b[4])
	m.Flags = Flags(b[5])
	m.Count = binary.LittleEndian.Uint16(b[6:])
	m.PID = PID(binary.LittleEndian.Uint64(b[8:]))
	m.Epoch = binary.LittleEndian.Uint32(b[16:])
	m.K = binary.LittleEndian.Uint32(b[20:])
	m.Target = NodeID(b[24])
	m.Pred = binary.LittleEndian.Uint32(b[28:])
	for i := range m.Set {
		m.Set[i] = binary.LittleEndian.Uint64(b[32+8*i:])
	}
	m.View = uint32(b[25]) | uint32(b[26])<<8 | uint32(b[27])<<16
	if err := m.Validate(); err != nil {
		return m, err
	}
	return m, nil
}

// Validate checks that the fields of m are consistent with its type. Encode
// does not call it (our own messages are built right); Decode always does.
// The common messages pass a table's few comparisons (plain); anything
// else, and anything wrong, goes through explain, which says what is wrong.
func (m *Message) Validate() error {
	if m.plain() {
		return nil
	}
	return m.explain()
}

// typeRule is what a message of one type may carry, for plain.
type typeRule struct {
	mode   bool  // a mode is required (and none allowed without)
	fields uint8 // fieldTarget | fieldSet | fieldK | fieldPred allowed
	flags  Flags // flags allowed (FlagUnreadable never: explain checks it)
}

const (
	fieldTarget = 1 << iota
	fieldSet
	fieldK
	fieldPred
)

// typeRules holds a rule for each type that carries no count; a zero rule
// (mode false, nothing allowed) for the others sends them to explain.
var typeRules = [typeCount]typeRule{
	TRequest:        {mode: true},
	TGrant:          {mode: true, fields: fieldTarget | fieldSet | fieldK, flags: FlagNoData | FlagDirty},
	TForward:        {mode: true, fields: fieldTarget | fieldSet | fieldK | fieldPred, flags: FlagAnyCopy},
	TBusy:           {},
	TTransfer:       {mode: true, fields: fieldK | fieldPred, flags: FlagAnyCopy},
	TTransferReply:  {mode: true, flags: FlagDirty},
	TInvalidate:     {fields: fieldK},
	TInvalidateAck:  {},
	TDone:           {mode: true},
	TEvictData:      {},
	TAlloc:          {},
	TLineInvalidate: {mode: true, fields: fieldK | fieldPred},
	TPersist:        {flags: FlagCatchUp | FlagOwnCopy},
	TPersistAck:     {flags: FlagCatchUp},
	TTxRecord:       {flags: FlagLast},
	TTxDrop:         {},
	TTxRoll:         {},
	TTxAck:          {},
	TTxGate:         {},
}

// plain reports whether m is one of the common well-formed messages: no
// count, no unreadable flag, not an allocation reply. It never accepts a
// message explain refuses (TestValidatePlainIsSound); a false only means
// that explain decides.
func (m *Message) plain() bool {
	if m.Type >= typeCount || m.Count != 0 || m.Mode > ModeExclusive || m.From == m.To {
		return false
	}
	switch m.Type {
	case typeInvalid, TEvict, TEvictReply, THoldings, TRebuilt, TIndexCall, TIndexReply, TAllocReply:
		return false
	}
	r := &typeRules[m.Type]
	if r.mode != (m.Mode != ModeNone) || m.Flags&^r.flags != 0 {
		return false
	}
	var fields uint8
	if m.Target != 0 {
		fields |= fieldTarget
	}
	if !m.Set.Empty() {
		fields |= fieldSet
	}
	if m.K != 0 {
		fields |= fieldK
	}
	if m.Pred != 0 {
		fields |= fieldPred
	}
	if fields&^r.fields != 0 {
		return false
	}
	if m.Type == TForward && m.Target == m.To {
		return false
	}
	if m.Type == TTxGate && m.Epoch > TxGateRolled {
		return false
	}
	return fields&fieldSet == 0 || !m.Set.Has(m.To)
}

// explain is Validate's full check, with the reason for a refusal.
func (m *Message) explain() error {
	bad := func(why string) error {
		return fmt.Errorf("%w: %v: %s", ErrMalformed, m.Type, why)
	}
	if m.Type == typeInvalid || m.Type >= typeCount {
		return fmt.Errorf("%w: unknown type %d", ErrMalformed, uint8(m.Type))
	}
	if m.Flags&^flagsMask != 0 {
		return bad(fmt.Sprintf("unknown flags %#x", uint8(m.Flags)))
	}
	if m.Mode > ModeExclusive {
		return bad(fmt.Sprintf("unknown mode %d", uint8(m.Mode)))
	}
	if m.From == m.To {
		return bad("sent to itself")
	}
	needsMode := m.Type == TRequest || m.Type == TGrant || m.Type == TForward ||
		m.Type == TTransfer || m.Type == TTransferReply || m.Type == TDone || m.Type == TLineInvalidate
	if needsMode != (m.Mode != ModeNone) {
		return bad("mode does not fit the type")
	}
	batch := m.Type == TEvict || m.Type == TEvictReply
	if batch {
		if m.Count == 0 || m.Count > MaxEvictBatch {
			return bad(fmt.Sprintf("batch of %d entries (1..%d)", m.Count, MaxEvictBatch))
		}
		if m.PID != 0 {
			return bad("batch carries a pid")
		}
	} else if m.Type == THoldings || m.Type == TRebuilt {
		if m.Count > MaxViewBatch {
			return bad(fmt.Sprintf("batch of %d entries (0..%d)", m.Count, MaxViewBatch))
		}
		if m.PID != 0 {
			return bad("batch carries a pid")
		}
	} else if m.Type == TIndexCall || m.Type == TIndexReply {
		if m.Count == 0 || m.Count > PageSize {
			return bad(fmt.Sprintf("index call of %d bytes (1..%d)", m.Count, PageSize))
		}
	} else if m.Count != 0 {
		return bad("count on a non-batch message")
	}
	if m.Type != TForward && m.Type != TGrant && m.Target != 0 {
		return bad("target on a message that names none")
	}
	if !m.Set.Empty() && m.Type != TGrant && m.Type != TForward {
		return bad("node set on a message that carries none")
	}
	if m.K != 0 && m.Type != TForward && m.Type != TGrant && m.Type != TTransfer && m.Type != TInvalidate && m.Type != TLineInvalidate {
		return bad("copy count on a message that carries none")
	}
	if m.Pred != 0 && m.Type != TForward && m.Type != TTransfer && m.Type != TLineInvalidate {
		return bad("predecessor epoch on a message that carries none")
	}
	if m.Flags&FlagAnyCopy != 0 && m.Type != TForward && m.Type != TTransfer {
		return bad("any-copy flag outside a forward or transfer")
	}
	if m.Flags&FlagLast != 0 && m.Type != THoldings && m.Type != TRebuilt && m.Type != TTxRecord {
		return bad("last flag outside a view change's batch or a transaction's record")
	}
	if m.Flags&FlagCatchUp != 0 && m.Type != TPersist && m.Type != TPersistAck {
		return bad("catch-up flag outside a write-through")
	}
	if m.Flags&FlagOwnCopy != 0 && (m.Type != TPersist || m.Flags&FlagCatchUp != 0) {
		return bad("own-copy flag outside a writer's write-through")
	}
	if m.Flags&FlagNoData != 0 && m.Type != TGrant {
		return bad("nodata flag outside a grant")
	}
	if m.Flags&FlagFull != 0 && m.Type != TAllocReply {
		return bad("full flag outside an allocation reply")
	}
	if m.Flags&FlagDirty != 0 && m.Type != TTransferReply && m.Type != TGrant {
		return bad("dirty flag on a message without a page")
	}
	if m.Flags&FlagUnreadable != 0 && m.PayloadLen() != PageSize {
		return bad("unreadable flag on a message without a page")
	}
	if m.Type == TForward && (m.Target == m.To) {
		return bad("forwarded to the requester itself")
	}
	if m.Set.Has(m.To) && (m.Type == TGrant || m.Type == TForward) {
		return bad("requester asked to invalidate itself")
	}
	if m.Type == TAllocReply && m.Flags&FlagFull == 0 && m.PID.Dir() != m.From {
		return bad("allocated a page of another directory")
	}
	if m.Type == TTxGate && m.Epoch > TxGateRolled {
		return bad(fmt.Sprintf("start gate answer %d (0..%d)", m.Epoch, TxGateRolled))
	}
	return nil
}

// EncodeEvictEntries writes entries into b (len(entries)*EvictEntrySize bytes).
func EncodeEvictEntries(b []byte, entries []EvictEntry) {
	for i, e := range entries {
		o := b[i*EvictEntrySize : (i+1)*EvictEntrySize]
		binary.LittleEndian.PutUint64(o, uint64(e.PID))
		binary.LittleEndian.PutUint32(o[8:], e.Epoch)
		binary.LittleEndian.PutUint16(o[12:], uint16(min(e.Served, 0xFFFF)))
		o[14] = byte(e.Decision)
		o[15] = 0
	}
}

// DecodeEvictEntries parses a batch payload into dst (reused), validating it.
// reply selects which kind of batch is expected: requests carry no decision,
// replies must carry one.
func DecodeEvictEntries(dst []EvictEntry, b []byte, count int, reply bool) ([]EvictEntry, error) {
	dst = dst[:0]
	if len(b) != count*EvictEntrySize {
		return dst, fmt.Errorf("%w: eviction payload of %d bytes for %d entries", ErrMalformed, len(b), count)
	}
	for i := range count {
		o := b[i*EvictEntrySize : (i+1)*EvictEntrySize]
		e := EvictEntry{
			PID:      PID(binary.LittleEndian.Uint64(o)),
			Epoch:    binary.LittleEndian.Uint32(o[8:]),
			Served:   uint32(binary.LittleEndian.Uint16(o[12:])),
			Decision: EvictDecision(o[14]),
		}
		if o[15] != 0 {
			return dst, fmt.Errorf("%w: eviction entry %d: reserved byte set", ErrMalformed, i)
		}
		if reply && (e.Decision == evictDecisionInvalid || e.Decision >= evictDecisionCount) {
			return dst, fmt.Errorf("%w: eviction entry %d: bad decision %d", ErrMalformed, i, o[14])
		}
		if !reply && e.Decision != evictDecisionInvalid {
			return dst, fmt.Errorf("%w: eviction entry %d: request carries a decision", ErrMalformed, i)
		}
		dst = append(dst, e)
	}
	return dst, nil
}

// FramePID is the PID field of an encoded frame, unvalidated: for a hint
// about which page a message is for before it is decoded, never for a
// decision (0 when b is too short).
func FramePID(b []byte) PID {
	if len(b) < 16 {
		return 0
	}
	return PID(binary.LittleEndian.Uint64(b[8:]))
}

// EncodeViewEntries writes entries into b (len(entries)*ViewEntrySize
// bytes).
func EncodeViewEntries(b []byte, entries []ViewEntry) {
	for i, e := range entries {
		o := b[i*ViewEntrySize : (i+1)*ViewEntrySize]
		binary.LittleEndian.PutUint64(o, uint64(e.PID))
		binary.LittleEndian.PutUint32(o[8:], e.Epoch)
		o[12] = byte(e.Mode)
		clear(o[13:16])
	}
}

// DecodeViewEntries parses a THoldings or TRebuilt payload into dst
// (reused), validating it: every entry names a page of dir (holdings go to
// the pages' directory, rebuild answers come from it) and holdings name a
// mode.
func DecodeViewEntries(dst []ViewEntry, b []byte, count int, dir NodeID, holdings bool) ([]ViewEntry, error) {
	var dirs NodeSet
	dirs.Add(dir)
	return DecodeViewEntriesOf(dst, b, count, dirs, holdings)
}

// DecodeViewEntriesOf is DecodeViewEntries for the pages of any directory
// of dirs (a node that serves more than its own: docs/replication.md).
func DecodeViewEntriesOf(dst []ViewEntry, b []byte, count int, dirs NodeSet, holdings bool) ([]ViewEntry, error) {
	dst = dst[:0]
	if len(b) != count*ViewEntrySize {
		return dst, fmt.Errorf("%w: view payload of %d bytes for %d entries", ErrMalformed, len(b), count)
	}
	for i := range count {
		o := b[i*ViewEntrySize : (i+1)*ViewEntrySize]
		e := ViewEntry{PID: PID(binary.LittleEndian.Uint64(o)), Epoch: binary.LittleEndian.Uint32(o[8:]), Mode: Mode(o[12])}
		if o[13] != 0 || o[14] != 0 || o[15] != 0 {
			return dst, fmt.Errorf("%w: view entry %d: reserved bytes set", ErrMalformed, i)
		}
		if !dirs.Has(e.PID.Dir()) {
			return dst, fmt.Errorf("%w: view entry %d: page %v is not of directories %v", ErrMalformed, i, e.PID, dirs)
		}
		if holdings && (e.Mode == ModeNone || e.Mode > ModeExclusive || e.Epoch != 0) {
			return dst, fmt.Errorf("%w: holdings entry %d: mode %d epoch %d", ErrMalformed, i, o[12], e.Epoch)
		}
		if !holdings && e.Mode != ModeNone {
			return dst, fmt.Errorf("%w: rebuild entry %d carries a mode", ErrMalformed, i)
		}
		dst = append(dst, e)
	}
	return dst, nil
}
