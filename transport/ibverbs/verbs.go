package ibverbs

import (
	"errors"
	"fmt"
)

// This file is the seam between the transport and the verbs provider: the
// cgo shim over libibverbs (shim_ibverbs.go, build tag ibverbs) and the
// in-process fake (fake.go) both implement Device, CQ and QP, so everything
// above them (mailboxes, page transfers, one-sided verbs, recovery) is the
// same code in production and in `go test`.
//
// The model is deliberately the subset of the verbs the transport uses: one
// protection domain per Device, RC queue pairs with one send SGE, RDMA
// WRITE/READ and the two 8-byte atomics, no receive queues (messages are RDMA
// writes into mailboxes, so nothing ever posts a receive).

// Access says what a memory registration allows (ibv_access_flags).
type Access uint32

// Access flags.
const (
	AccessLocalWrite Access = 1 << iota
	AccessRemoteWrite
	AccessRemoteRead
	AccessRemoteAtomic
)

// MR is a registered memory region. Addr is the address of the first byte in
// the region's own address space (the IOVA): local SGEs and remote work
// requests name bytes of the region by Addr plus an offset. The transport
// registers its internal areas at their virtual address and the regions it
// exposes through transport.Register at IOVA 0, so a peer addresses those by
// the offset alone (transport.Region carries no address).
type MR struct {
	Addr uint64
	Len  uint64
	LKey uint32
	RKey uint32
}

// Opcode is the operation of a send work request.
type Opcode uint8

// Opcodes.
const (
	OpWrite       Opcode = iota + 1 // IBV_WR_RDMA_WRITE
	OpRead                          // IBV_WR_RDMA_READ
	OpCompareSwap                   // IBV_WR_ATOMIC_CMP_AND_SWP
	OpFetchAdd                      // IBV_WR_ATOMIC_FETCH_AND_ADD
)

func (o Opcode) String() string {
	switch o {
	case OpWrite:
		return "rdma-write"
	case OpRead:
		return "rdma-read"
	case OpCompareSwap:
		return "compare-swap"
	case OpFetchAdd:
		return "fetch-add"
	}
	return fmt.Sprintf("opcode(%d)", uint8(o))
}

// SendFlags are the ibv_send_flags the transport uses.
type SendFlags uint8

// Send flags.
const (
	// FlagSignaled asks for a completion on success (queue pairs are
	// created with sq_sig_all = 0: selective signaling). A work request
	// that fails completes with an error whether signaled or not.
	FlagSignaled SendFlags = 1 << iota
	// FlagInline copies the data into the work queue entry at post time:
	// the local buffer may be reused as soon as Post returns and needs no
	// lkey. Only for RDMA WRITE of at most QP.MaxInline bytes.
	FlagInline
)

// WorkRequest is one send work request with at most one scatter/gather
// element (Length 0 means none: a zero-length RDMA WRITE is legal and is how
// the transport fences its message queue pair).
type WorkRequest struct {
	ID    uint64
	Op    Opcode
	Flags SendFlags
	// The local buffer: the source of a write, the destination of a read
	// and of the value an atomic returns (8 bytes).
	LocalAddr uint64
	Length    uint32
	LKey      uint32
	// The remote side.
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd is the compare operand of CompareSwap or the addend of
	// FetchAdd; Swap is the new value of CompareSwap.
	CompareAdd uint64
	Swap       uint64
}

// Status is the status of a work completion (ibv_wc_status, folded to what
// the transport distinguishes).
type Status uint8

// Completion statuses.
const (
	StatusSuccess Status = iota
	// StatusFlushed: the queue pair was in the error state; the request
	// was not executed (IBV_WC_WR_FLUSH_ERR).
	StatusFlushed
	// StatusRemoteAccess: bad rkey, bounds or access rights at the
	// responder (IBV_WC_REM_ACCESS_ERR).
	StatusRemoteAccess
	// StatusRemoteInvalid: the responder refused the request itself, e.g.
	// a misaligned atomic (IBV_WC_REM_INV_REQ_ERR).
	StatusRemoteInvalid
	// StatusRemoteOp: the responder failed executing it
	// (IBV_WC_REM_OP_ERR).
	StatusRemoteOp
	// StatusRetryExceeded: the peer did not answer (IBV_WC_RETRY_EXC_ERR,
	// IBV_WC_RNR_RETRY_EXC_ERR): it is gone or the path is wrong.
	StatusRetryExceeded
	// StatusLocalProtection: a bad lkey or local bounds
	// (IBV_WC_LOC_PROT_ERR): a bug of ours.
	StatusLocalProtection
	// StatusLocalLength and StatusOther: anything else.
	StatusLocalLength
	StatusOther
)

func (s Status) String() string {
	switch s {
	case StatusSuccess:
		return "success"
	case StatusFlushed:
		return "flushed"
	case StatusRemoteAccess:
		return "remote access error"
	case StatusRemoteInvalid:
		return "remote invalid request"
	case StatusRemoteOp:
		return "remote operation error"
	case StatusRetryExceeded:
		return "retry exceeded"
	case StatusLocalProtection:
		return "local protection error"
	case StatusLocalLength:
		return "local length error"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Completion is one work completion.
type Completion struct {
	ID     uint64
	Status Status
	Op     Opcode
	QPN    uint32
	// Vendor is the provider's vendor error (ibv_wc.vendor_err), for
	// error messages only.
	Vendor uint32
}

// QPState is the state of a queue pair.
type QPState uint8

// Queue pair states (the ones the transport moves through).
const (
	StateReset QPState = iota
	StateInit
	StateRTR
	StateRTS
	StateError
)

func (s QPState) String() string {
	switch s {
	case StateReset:
		return "RESET"
	case StateInit:
		return "INIT"
	case StateRTR:
		return "RTR"
	case StateRTS:
		return "RTS"
	case StateError:
		return "ERR"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// LinkLayer is the link layer of a port.
type LinkLayer uint8

// Link layers.
const (
	LinkInfiniBand LinkLayer = iota + 1 // addressed by LID
	LinkEthernet                        // RoCE: addressed by GID (GRH always)
)

// PortInfo is what a device tells peers about its port.
type PortInfo struct {
	LID       uint16
	GID       [16]byte
	LinkLayer LinkLayer
	// MTU is the active path MTU in bytes (256..4096).
	MTU int
}

// QPInfo is what the out-of-band exchange carries for one queue pair: the
// peer needs the address (LID for InfiniBand, GID for RoCE), the QP number
// and the first packet sequence number to bring its own QP to RTR.
type QPInfo struct {
	LID uint16
	GID [16]byte
	QPN uint32
	PSN uint32
	MTU int
}

// QPCap sizes a queue pair.
type QPCap struct {
	MaxSendWR int
	MaxInline int
}

// Device is an opened RDMA device with its protection domain and port.
type Device interface {
	Name() string
	Port() PortInfo
	// Register registers mem (which must stay valid and not move until
	// Deregister: off-heap memory only) at the given IOVA.
	Register(mem []byte, iova uint64, access Access) (MR, error)
	Deregister(mr MR) error
	CreateCQ(entries int) (CQ, error)
	// CreateQP creates an RC queue pair in RESET whose send and receive
	// completions go to cq.
	CreateQP(cq CQ, c QPCap) (QP, error)
	// Close releases everything the device created.
	Close() error
}

// CQ is a completion queue.
type CQ interface {
	// Poll moves up to len(out) completions into out, in completion order,
	// without blocking (ibv_poll_cq).
	Poll(out []Completion) (int, error)
	Close() error
}

// QP is an RC queue pair.
type QP interface {
	Num() uint32
	// MaxInline is the inline size the device granted.
	MaxInline() int
	State() QPState
	// Connect brings the queue pair from RESET through INIT and RTR to RTS
	// towards remote, sending from localPSN.
	Connect(localPSN uint32, remote QPInfo) error
	// Reset moves the queue pair to RESET: outstanding work requests are
	// dropped without completions.
	Reset() error
	// Fail moves the queue pair to the error state: outstanding work
	// requests complete with StatusFlushed.
	Fail() error
	// Post posts wrs as one chain (ibv_post_send). At most MaxPostBatch.
	Post(wrs []WorkRequest) error
	Close() error
}

// MaxPostBatch bounds the work requests of one Post (the shim builds the
// chain on the C stack).
const MaxPostBatch = 16

// Errors of the verbs layer.
var (
	// ErrNoDevice: no RDMA device on this host (or no kernel support).
	ErrNoDevice = errors.New("ibverbs: no RDMA device found")
	// ErrNotBuilt: the binary was built without the ibverbs tag.
	ErrNotBuilt = errors.New("ibverbs: this binary was built without RDMA support: build one that has it with 'go build -tags ibverbs ./cmd/scalestore' (needs Debian's libibverbs-dev)")
	// ErrQueueFull: a Post would overflow the send queue (ENOMEM from
	// ibv_post_send): a bug in the caller's accounting, never load.
	ErrQueueFull = errors.New("ibverbs: send queue full")
)
