package protocol

import "fmt"

// Mode is an ownership mode: what a node may do with its copy of a page.
type Mode uint8

const (
	// ModeNone: the node holds no valid copy.
	ModeNone Mode = iota
	// ModeShared: node-shared; the node may read, others may hold copies too.
	ModeShared
	// ModeExclusive: node-exclusive; the only valid copy, writable.
	ModeExclusive
)

func (m Mode) String() string {
	switch m {
	case ModeNone:
		return "-"
	case ModeShared:
		return "S"
	case ModeExclusive:
		return "X"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Type is a message type. The comment of each names sender -> receiver.
type Type uint8

const (
	typeInvalid Type = iota
	// TRequest: requester -> directory. Asks for Mode on PID (paper Fig. 3 ①).
	TRequest
	// TGrant: directory (or the directory node's own cache) -> requester.
	// Ownership is granted at Epoch; the page travels as payload unless
	// FlagNoData (an upgrade of a copy the requester already has). Set lists
	// the sharers the requester must invalidate before it holds the page
	// exclusively.
	TGrant
	// TForward: directory -> requester. The page must be fetched from Target
	// (exclusive conflict, shared conflict, copy from a sharer). Set lists the
	// sharers to invalidate, K how many copies Target must serve before it
	// hands the page on (see Directory).
	TForward
	// TBusy: directory -> requester. Polling baseline only: the page is in a
	// transition; ask again later.
	TBusy
	// TTransfer: requester -> holder. Ownership transfer request for Mode,
	// accepted by the directory at Epoch; the holder serves K copies first.
	TTransfer
	// TTransferReply: holder -> requester, with the page as payload.
	TTransferReply
	// TInvalidate: requester -> sharer. Drop your copy; the requester was
	// accepted at Epoch; if you are the copy source, serve K copies first.
	TInvalidate
	// TInvalidateAck: sharer -> requester.
	TInvalidateAck
	// TDone: requester -> directory. FIFO and polling baselines only: the
	// transfer has completed and the directory may update its metadata.
	TDone
	// TEvict: page provider -> directory page provider. Count entries of
	// (PID, epoch, served) as payload (paper §4.3: batched eviction).
	TEvict
	// TEvictReply: directory -> evicting node. Count entries of (PID,
	// decision) as payload.
	TEvictReply
	// TEvictData: evicting node -> directory, the dirty page the directory
	// pulled, as payload.
	TEvictData
	// TAlloc: node -> directory: allocate a page on your SSD for me.
	TAlloc
	// TAllocReply: directory -> node: PID is yours, exclusive; FlagFull when
	// the directory's SSD has no free slot.
	TAllocReply
	// TLineInvalidate: SELCC, compute node -> compute node (protocol/selcc).
	// Give up, or hand over, your copy of the global cache line PID (its
	// memory node and index) for Mode (shared: a reader, exclusive: a
	// writer). The answer is not a message: the receiver writes it by RDMA
	// WRITE into the sender's reply slot K, tagged with the sender's round
	// Pred. Epoch is the sender's priority, its retries so far (§5.3.2).
	TLineInvalidate
	// TIndexCall: NAM-tree, compute node -> memory server (index/nam). A
	// remote procedure call of Count bytes of payload, the index's own
	// encoding (index/nam checks it); PID is the call's id, echoed back.
	TIndexCall
	// TIndexReply: memory server -> compute node, the answer to the call
	// PID, Count bytes of payload.
	TIndexReply
	// TPersist: exclusive holder -> directory, the page as payload, written
	// through before the write it carries is acknowledged (durable mode, see
	// docs/protocol.md, "Node crashes"). Epoch is the writer's sequence
	// number, echoed in the acknowledgement.
	TPersist
	// TPersistAck: directory -> writer: the page of TPersist Epoch is on the
	// directory's SSD.
	TPersistAck
	// THoldings: node -> directory, during a view change on real processes
	// (docs/durability.md, "View changes"): Count entries (ViewEntry: PID,
	// Mode) naming the valid copies of the directory's pages the node still
	// holds after its Fence. FlagLast ends the node's report (it may carry
	// no entries).
	THoldings
	// TRebuilt: directory -> node, after the directory rebuilt its metadata
	// from every member's holdings: Count entries (ViewEntry: PID, Epoch)
	// giving the conflict epoch from which each of the node's copies counts.
	// FlagLast ends the directory's answer: the directory serves the view.
	TRebuilt
	// TTxRecord: a cluster transaction's committer -> its buddy, one page
	// of the commit's record (docs/transactions.md, "Durability"): PID and
	// the page's new image as payload, Epoch the record's id on the
	// committer. FlagLast ends the record; the buddy acknowledges it whole
	// (TTxAck).
	TTxRecord
	// TTxDrop: committer -> buddy: the record Epoch is done (every page of
	// it is on its directory's store), forget it; acknowledged (TTxAck).
	TTxDrop
	// TTxRoll: a record's holder -> a page's directory, during a view
	// change: write the page of the payload (the record's image) to the
	// store before the page is served again. Epoch numbers the roll,
	// echoed in the TTxAck.
	TTxRoll
	// TTxAck: the acknowledgement of a TTxRecord (its last page), a
	// TTxDrop or a TTxRoll (once the page is durable), Epoch echoed.
	TTxAck
	// TTxGate: the start gate of a cluster without membership
	// (docs/transactions.md, "Durability"): node -> node, no payload.
	// Epoch 0 asks whether the receiver has rolled forward the
	// transaction records it found on its disk at start; the answer is
	// another TTxGate, Epoch TxGateRolling (up, rolls not all
	// acknowledged yet) or TxGateRolled (every roll acknowledged).
	TTxGate
	typeCount
)

// The answers a TTxGate's Epoch carries (0: the question).
const (
	TxGateRolling uint32 = 1
	TxGateRolled  uint32 = 2
)

var typeNames = [...]string{"invalid", "Request", "Grant", "Forward", "Busy", "Transfer", "TransferReply",
	"Invalidate", "InvalidateAck", "Done", "Evict", "EvictReply", "EvictData", "Alloc", "AllocReply",
	"LineInvalidate", "IndexCall", "IndexReply", "Persist", "PersistAck", "Holdings", "Rebuilt",
	"TxRecord", "TxDrop", "TxRoll", "TxAck", "TxGate"}

func (t Type) String() string {
	if t < typeCount {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Flags modify a message.
type Flags uint8

const (
	// FlagNoData: a grant without a page (the requester keeps its copy).
	FlagNoData Flags = 1 << iota
	// FlagFull: an allocation failed because the directory's SSD is full.
	FlagFull
	// FlagDirty: the page travelling with a transfer reply differs from the
	// directory's SSD copy.
	FlagDirty
	// FlagUnreadable: the page travelling with a grant, a transfer reply or
	// pulled eviction data could not be read from its directory's SSD (a
	// corrupt page, an I/O error that did not go away). Its bytes mean
	// nothing: the receiver holds the page in the granted mode, as the
	// protocol says, but no worker may read it, and it is never written
	// back over the SSD copy. See docs/protocol.md, "Unreadable pages".
	FlagUnreadable
	// FlagAnyCopy: a forward or transfer of a shared copy from a sharer
	// that serves copies of a page whose SSD copy is the latest
	// (Meta.Sourced): the target serves it from whatever shared copy it
	// holds, or once the one it waits for has come, whatever it has asked
	// for since (the directory accepted this transfer while the target was
	// a sharer, before any upgrade of the target's). Pred is then unused.
	FlagAnyCopy
	// FlagLast: the last message of a node's holdings or of a directory's
	// rebuild answer in a view change.
	FlagLast
	// FlagCatchUp: a TPersist (or its TPersistAck) of a view change's
	// catch-up (docs/replication.md, decision 5): the node that holds a
	// directory's current copies sends each page to the directory's new
	// primary, which takes it even before it is active in the view.
	FlagCatchUp
	// FlagOwnCopy: a TPersist that the backup of the page's directory
	// sends to its primary as the page's writer: the backup writes its own
	// copy, so the primary writes its store only and forwards nothing
	// (docs/replication.md, decision 2).
	FlagOwnCopy
	flagsMask = FlagNoData | FlagFull | FlagDirty | FlagUnreadable | FlagAnyCopy | FlagLast | FlagCatchUp | FlagOwnCopy
)

// MaxEvictBatch bounds an eviction batch (paper §4.3: up to 100 pages).
const MaxEvictBatch = 100

// EvictEntrySize is the wire size of one eviction request or reply entry.
const EvictEntrySize = 16

// Message is a decoded 64-byte protocol frame. Fields a type does not use
// are zero, and the codec rejects frames where they are not.
type Message struct {
	Type   Type
	From   NodeID
	To     NodeID
	Mode   Mode
	Flags  Flags
	Count  uint16 // entries in an eviction batch payload
	PID    PID
	Epoch  uint32 // conflict epoch (paper §3.4.3)
	K      uint32 // copies the target must serve first
	Target NodeID // node to fetch the page from (TForward)
	// Pred names the acquisition of Target the transfer refers to: the
	// conflict epoch at which the directory accepted the request that gives
	// Target its copy (TForward, TTransfer). A holder that has its own
	// request outstanding uses it to tell whether the transfer comes before
	// or after its own turn.
	Pred uint32
	Set  NodeSet
	// View is the membership view the sender was in (real processes with
	// membership; 0 in a static cluster and in the simulator, whose
	// coordinator drops the messages of an old view itself). A receiver
	// drops a message of an older view and holds one of a newer view until
	// it has installed that view. 24 bits on the wire (MaxView).
	View uint32
}

// MaxView is the largest view number a frame carries.
const MaxView = 1<<24 - 1

// MaxViewBatch bounds the entries of a THoldings or TRebuilt message.
const MaxViewBatch = PageSize / ViewEntrySize

// ViewEntrySize is the wire size of one THoldings or TRebuilt entry.
const ViewEntrySize = 16

// ViewEntry is one page of a view change's holdings (Mode) or rebuild
// answer (Epoch).
type ViewEntry struct {
	PID   PID
	Epoch uint32
	Mode  Mode
}

// PayloadLen is the exact payload length the message must travel with.
func (m *Message) PayloadLen() int {
	switch m.Type {
	case TGrant:
		if m.Flags&FlagNoData != 0 {
			return 0
		}
		return PageSize
	case TTransferReply, TEvictData, TPersist, TTxRecord, TTxRoll:
		return PageSize
	case TEvict, TEvictReply:
		return int(m.Count) * EvictEntrySize
	case THoldings, TRebuilt:
		return int(m.Count) * ViewEntrySize
	case TIndexCall, TIndexReply:
		return int(m.Count)
	case TAllocReply:
		if m.Flags&FlagFull != 0 {
			return 0
		}
		return 0
	}
	return 0
}

func (m Message) String() string {
	s := fmt.Sprintf("%v %d->%d pid=%v", m.Type, m.From, m.To, m.PID)
	if m.Mode != ModeNone {
		s += " mode=" + m.Mode.String()
	}
	if m.Epoch != 0 {
		s += fmt.Sprintf(" epoch=%d", m.Epoch)
	}
	if m.Type == TForward {
		s += fmt.Sprintf(" from=%d", m.Target)
	}
	if m.Pred != 0 {
		s += fmt.Sprintf(" pred=%d", m.Pred)
	}
	if m.K != 0 {
		s += fmt.Sprintf(" k=%d", m.K)
	}
	if !m.Set.Empty() {
		s += " inval=" + m.Set.String()
	}
	if m.Count != 0 {
		s += fmt.Sprintf(" n=%d", m.Count)
	}
	if m.Flags&FlagNoData != 0 {
		s += " nodata"
	}
	if m.Flags&FlagFull != 0 {
		s += " full"
	}
	if m.Flags&FlagAnyCopy != 0 {
		s += " anycopy"
	}
	if m.Flags&FlagLast != 0 {
		s += " last"
	}
	if m.View != 0 {
		s += fmt.Sprintf(" view=%d", m.View)
	}
	return s
}

// EvictDecision is the directory's answer to one eviction request entry.
type EvictDecision uint8

const (
	evictDecisionInvalid EvictDecision = iota
	// EvictDeclined: keep the page; a successor is chained behind you (owner
	// stability) or the page is in a transition.
	EvictDeclined
	// EvictAccepted: drop the page, the directory's SSD is up to date.
	EvictAccepted
	// EvictPull: send the page with TEvictData, then drop it: it is dirty.
	EvictPull
	evictDecisionCount
)

func (d EvictDecision) String() string {
	switch d {
	case EvictDeclined:
		return "declined"
	case EvictAccepted:
		return "accepted"
	case EvictPull:
		return "pull"
	}
	return fmt.Sprintf("decision(%d)", uint8(d))
}

// EvictEntry is one page of an eviction batch.
type EvictEntry struct {
	PID      PID
	Epoch    uint32 // the conflict epoch at which the node obtained the page
	Served   uint32 // copies the node has served from this copy
	Decision EvictDecision
}
