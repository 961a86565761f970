package ibverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// The fake is an in-process RDMA fabric with RC semantics, so that the
// mailbox, transfer, recovery and one-sided logic above the Device interface
// runs in `go test` on machines without an RDMA NIC. What it models, and why:
//
//   - Per queue pair ordering: each QP's work requests execute one at a
//     time, in post order, on one goroutine, and complete in that order.
//   - Placement order within a write: placeBytes stores aligned words
//     front to back with atomic stores, so a reader that sees the last
//     word of a write sees the whole write (the L5 assumption the mailbox
//     relies on; real NICs place a write in order too).
//   - Remote access checks: rkey, bounds and access rights of the target
//     region, 8-byte alignment of atomics. A failure completes the request
//     with StatusRemoteAccess (or StatusRemoteInvalid) and moves BOTH ends
//     of the connection to the error state, as RC does (class C errors).
//   - Local checks: lkey, bounds and local-write rights, StatusLocalProtection.
//   - 8-byte atomics by sync/atomic on the target word, atomic with respect
//     to every other atomic on it and to the owner's own sync/atomic use.
//   - Completion queues: wr_id, status, opcode and QP number; selective
//     signaling (an unsignaled request that succeeds produces no completion,
//     one that fails or is flushed does); send-queue slots are released only
//     when a later completion is polled, so a caller that never signals runs
//     out of send queue (ErrQueueFull) exactly as it would on hardware.
//   - Queue pair states: posting is refused before RTS; in the error state
//     every queued and newly posted request completes with StatusFlushed;
//     RESET drops queued requests without completions.
//   - Connection checks: a request goes nowhere (StatusRetryExceeded, after
//     which the QP is in error) unless the responder QP exists, is at RTR or
//     RTS, is connected back to the requester, and the LID, GID and PSN the
//     requester was given match the responder's. This catches a wrong
//     out-of-band exchange or a peer that closed.
//
// Not modelled: timing and retransmission (failures are immediate), packet
// loss, MTU segmentation, memory windows, receive queues (the transport
// posts none), and the big-endian atomic replies of some NICs unless
// FakeOptions.AtomicReplyBigEndian asks for them.

// Fabric connects fake devices. The zero value is not usable; NewFabric.
type Fabric struct {
	mu      sync.Mutex
	devs    map[uint16]*FakeDevice // by LID
	nextLID uint16
	nextKey uint32
}

// NewFabric returns an empty fabric.
func NewFabric() *Fabric {
	return &Fabric{devs: make(map[uint16]*FakeDevice), nextLID: 1}
}

// FakeOptions tune a fake device.
type FakeOptions struct {
	// MaxInline is the most inline data a QP may get (0: 220, negative:
	// no inline support at all).
	MaxInline int
	// AtomicReplyBigEndian returns the previous value of an atomic in big
	// endian, as some Mellanox NICs do on little-endian hosts.
	AtomicReplyBigEndian bool
	// Ethernet makes the port a RoCE port (GID addressing).
	Ethernet bool
}

// NewDevice adds a device (one HCA port with its protection domain) to the
// fabric.
func (f *Fabric) NewDevice(name string, opt FakeOptions) *FakeDevice {
	f.mu.Lock()
	defer f.mu.Unlock()
	lid := f.nextLID
	f.nextLID++
	d := &FakeDevice{
		fab:     f,
		name:    name,
		opt:     opt,
		mrs:     make(map[uint32]*fakeMR),
		rkeys:   make(map[uint32]*fakeMR),
		qps:     make(map[uint32]*fakeQP),
		nextQPN: 0x100 + uint32(lid)*7,
	}
	d.port = PortInfo{LID: lid, LinkLayer: LinkInfiniBand, MTU: 4096}
	// fe80::<lid>: a link-local GID, as an IB port's GID 0 looks.
	d.port.GID[0], d.port.GID[1] = 0xfe, 0x80
	binary.BigEndian.PutUint16(d.port.GID[14:], lid)
	if opt.Ethernet {
		d.port.LinkLayer = LinkEthernet
		d.port.LID = 0 // RoCE ports have no LID; the GID addresses them
		d.port.GID = [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: byte(lid >> 8), 15: byte(lid)}
	}
	f.devs[lid] = d
	return d
}

// key returns a fresh, fabric-unique, unpredictable-looking memory key: a
// multiplicative permutation of a counter, so keys never repeat and a wrong
// key is not a neighbour of a right one.
func (f *Fabric) key() uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextKey++
	return f.nextKey*0x9E3779B1 ^ 0x2545F491
}

// lookup finds the responder QP a requester was connected to.
func (f *Fabric) lookup(remote QPInfo) *fakeQP {
	f.mu.Lock()
	var d *FakeDevice
	for _, dev := range f.devs {
		if dev.port.GID == remote.GID && (dev.port.LinkLayer == LinkEthernet || dev.port.LID == remote.LID) {
			d = dev
			break
		}
	}
	f.mu.Unlock()
	if d == nil {
		return nil
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return nil
	}
	return d.qps[remote.QPN]
}

// FakeDevice is a fake RDMA device: one port and one protection domain.
type FakeDevice struct {
	fab  *Fabric
	name string
	opt  FakeOptions
	port PortInfo

	mu      sync.RWMutex
	closed  bool
	mrs     map[uint32]*fakeMR // by lkey
	rkeys   map[uint32]*fakeMR // by rkey
	qps     map[uint32]*fakeQP
	cqs     []*fakeCQ
	nextQPN uint32
}

type fakeMR struct {
	mem    []byte
	iova   uint64
	base   uint64 // host address of mem[0], for inline data
	access Access
	lkey   uint32
	rkey   uint32
}

var errFakeClosed = errors.New("ibverbs fake: device closed")

// Name is the device name.
func (d *FakeDevice) Name() string { return d.name }

// Port describes the device's port.
func (d *FakeDevice) Port() PortInfo { return d.port }

// Register registers mem at iova.
func (d *FakeDevice) Register(mem []byte, iova uint64, access Access) (MR, error) {
	if len(mem) == 0 {
		return MR{}, errors.New("ibverbs fake: register an empty buffer")
	}
	if iova+uint64(len(mem)) < iova {
		return MR{}, errors.New("ibverbs fake: region wraps the address space")
	}
	m := &fakeMR{mem: mem, iova: iova, base: addrOf(mem), access: access, lkey: d.fab.key(), rkey: d.fab.key()}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return MR{}, errFakeClosed
	}
	d.mrs[m.lkey] = m
	d.rkeys[m.rkey] = m
	return MR{Addr: iova, Len: uint64(len(mem)), LKey: m.lkey, RKey: m.rkey}, nil
}

// Deregister removes a registration.
func (d *FakeDevice) Deregister(mr MR) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.mrs[mr.LKey]
	if !ok {
		return fmt.Errorf("ibverbs fake: deregister unknown lkey %#x", mr.LKey)
	}
	delete(d.mrs, m.lkey)
	delete(d.rkeys, m.rkey)
	return nil
}

// bytesAt resolves [addr, addr+n) of the region m or reports false.
func (m *fakeMR) bytesAt(addr uint64, n uint32) ([]byte, bool) {
	if addr < m.iova {
		return nil, false
	}
	off := addr - m.iova
	end := off + uint64(n)
	if end < off || end > uint64(len(m.mem)) {
		return nil, false
	}
	return m.mem[off:end], true
}

// local resolves a request's local buffer; the caller holds d.mu (read).
func (d *FakeDevice) local(lkey uint32, addr uint64, n uint32, write bool) ([]byte, bool) {
	m, ok := d.mrs[lkey]
	if !ok || (write && m.access&AccessLocalWrite == 0) {
		return nil, false
	}
	return m.bytesAt(addr, n)
}

// remote resolves a request's target; the caller holds d.mu (read).
func (d *FakeDevice) remote(rkey uint32, addr uint64, n uint32, need Access) ([]byte, bool) {
	if d.closed {
		return nil, false
	}
	m, ok := d.rkeys[rkey]
	if !ok || m.access&need != need {
		return nil, false
	}
	return m.bytesAt(addr, n)
}

// host resolves host virtual addresses, as an inline post reads them: the
// fake can only see memory that is registered somewhere on this device.
func (d *FakeDevice) host(addr uint64, n uint32) ([]byte, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, m := range d.mrs {
		if addr >= m.base && addr-m.base+uint64(n) <= uint64(len(m.mem)) {
			off := addr - m.base
			return m.mem[off : off+uint64(n)], true
		}
	}
	return nil, false
}

// CreateCQ creates a completion queue of the given capacity.
func (d *FakeDevice) CreateCQ(entries int) (CQ, error) {
	if entries <= 0 {
		return nil, fmt.Errorf("ibverbs fake: completion queue of %d entries", entries)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errFakeClosed
	}
	c := &fakeCQ{dev: d, capacity: entries}
	d.cqs = append(d.cqs, c)
	return c, nil
}

// CreateQP creates an RC queue pair in RESET.
func (d *FakeDevice) CreateQP(cq CQ, c QPCap) (QP, error) {
	fc, ok := cq.(*fakeCQ)
	if !ok || fc.dev != d {
		return nil, errors.New("ibverbs fake: completion queue of another device")
	}
	if c.MaxSendWR <= 0 || c.MaxSendWR > 1<<14 {
		return nil, fmt.Errorf("ibverbs fake: send queue of %d entries", c.MaxSendWR)
	}
	inline := d.opt.MaxInline
	if inline == 0 {
		inline = 220
	}
	inline = max(0, min(inline, c.MaxInline))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errFakeClosed
	}
	d.nextQPN++
	q := &fakeQP{dev: d, cq: fc, num: d.nextQPN & 0xFFFFFF, maxSend: c.MaxSendWR, maxInline: inline}
	q.cond = sync.NewCond(&q.mu)
	d.qps[q.num] = q
	go q.run()
	return q, nil
}

// Close destroys every QP, CQ and registration of the device.
func (d *FakeDevice) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	qps := make([]*fakeQP, 0, len(d.qps))
	for _, q := range d.qps {
		qps = append(qps, q)
	}
	cqs := d.cqs
	d.mrs, d.rkeys = map[uint32]*fakeMR{}, map[uint32]*fakeMR{}
	d.mu.Unlock()
	for _, q := range qps {
		_ = q.Close()
	}
	for _, c := range cqs {
		_ = c.Close()
	}
	d.fab.mu.Lock()
	delete(d.fab.devs, d.port.LID)
	d.fab.mu.Unlock()
	return nil
}

type fakeCQE struct {
	c   Completion
	qp  *fakeQP
	seq uint64
	gen uint64
}

type fakeCQ struct {
	dev      *FakeDevice
	mu       sync.Mutex
	entries  []fakeCQE
	capacity int
	overrun  bool
	closed   bool
}

// push adds a completion; a full queue is an overrun, which on hardware is
// a fatal asynchronous error, here an error from every later Poll.
func (c *fakeCQ) push(e fakeCQE) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if len(c.entries) >= c.capacity {
		c.overrun = true
		return
	}
	c.entries = append(c.entries, e)
}

// Poll moves completions out; polling a completion releases the send queue
// entries up to its work request, as the providers do.
func (c *fakeCQ) Poll(out []Completion) (int, error) {
	var buf [64]fakeCQE
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, errFakeClosed
	}
	n := min(len(out), len(c.entries), len(buf))
	copy(buf[:n], c.entries[:n])
	rest := copy(c.entries, c.entries[n:])
	clear(c.entries[rest:])
	c.entries = c.entries[:rest]
	overrun := c.overrun
	c.mu.Unlock()
	for i := range n {
		out[i] = buf[i].c
		buf[i].qp.release(buf[i].seq, buf[i].gen)
	}
	if overrun {
		return n, errors.New("ibverbs fake: completion queue overrun")
	}
	return n, nil
}

func (c *fakeCQ) Close() error {
	c.mu.Lock()
	c.closed = true
	c.entries = nil
	c.mu.Unlock()
	return nil
}

type fakeWR struct {
	wr     WorkRequest
	seq    uint64
	gen    uint64
	inline []byte
}

type fakeQP struct {
	dev       *FakeDevice
	cq        *fakeCQ
	num       uint32
	maxSend   int
	maxInline int

	mu     sync.Mutex
	cond   *sync.Cond
	state  QPState
	remote QPInfo // the responder as given to Connect
	sqPSN  uint32
	queue  []fakeWR
	posted uint64 // sequence number of the last posted request
	freed  uint64 // send queue entries up to here are released
	gen    uint64 // bumped by Reset: requests of older generations vanish
	closed bool

	scratch []byte // the worker's bounce buffer for reads
}

func (q *fakeQP) Num() uint32    { return q.num }
func (q *fakeQP) MaxInline() int { return q.maxInline }

func (q *fakeQP) State() QPState {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.state
}

func validPSN(p uint32) bool { return p < 1<<24 }

func (q *fakeQP) Connect(localPSN uint32, remote QPInfo) error {
	if remote.QPN == 0 || remote.QPN >= 1<<24 || !validPSN(remote.PSN) || !validPSN(localPSN) {
		return fmt.Errorf("ibverbs fake: connect QP %#x: bad QPN %#x or PSNs %#x/%#x", q.num, remote.QPN, localPSN, remote.PSN)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errFakeClosed
	}
	if q.state != StateReset && q.state != StateInit {
		return fmt.Errorf("ibverbs fake: connect QP %#x in state %v (want RESET)", q.num, q.state)
	}
	q.remote = remote
	q.sqPSN = localPSN
	q.state = StateRTS
	return nil
}

func (q *fakeQP) Reset() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.state = StateReset
	q.gen++
	clear(q.queue)
	q.queue = q.queue[:0]
	q.freed = q.posted
	q.remote = QPInfo{}
	return nil
}

func (q *fakeQP) Fail() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state != StateReset {
		q.state = StateError
		q.cond.Signal()
	}
	return nil
}

func (q *fakeQP) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.queue = nil
	q.cond.Broadcast()
	q.mu.Unlock()
	q.dev.mu.Lock()
	delete(q.dev.qps, q.num)
	q.dev.mu.Unlock()
	return nil
}

func (q *fakeQP) Post(wrs []WorkRequest) error {
	if len(wrs) == 0 || len(wrs) > MaxPostBatch {
		return fmt.Errorf("ibverbs fake: post of %d work requests", len(wrs))
	}
	// Validate and capture inline data before taking the lock: an inline
	// post reads the buffer during the call, not later.
	var inl [MaxPostBatch][]byte
	for i, w := range wrs {
		switch w.Op {
		case OpWrite, OpRead:
		case OpCompareSwap, OpFetchAdd:
			if w.Length != 8 {
				return fmt.Errorf("ibverbs fake: %v of %d bytes (want 8)", w.Op, w.Length)
			}
		default:
			return fmt.Errorf("ibverbs fake: unknown opcode %d", w.Op)
		}
		if w.Flags&FlagInline != 0 {
			if w.Op != OpWrite || int(w.Length) > q.maxInline {
				return fmt.Errorf("ibverbs fake: inline %v of %d bytes (max %d)", w.Op, w.Length, q.maxInline)
			}
			b, ok := q.dev.host(w.LocalAddr, w.Length)
			if !ok {
				return fmt.Errorf("ibverbs fake: inline data at %#x is not memory the fake can see", w.LocalAddr)
			}
			inl[i] = append([]byte{}, b...)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errFakeClosed
	}
	if q.state != StateRTS && q.state != StateError {
		return fmt.Errorf("ibverbs fake: post on QP %#x in state %v", q.num, q.state)
	}
	if int(q.posted-q.freed)+len(wrs) > q.maxSend {
		return fmt.Errorf("%w: QP %#x holds %d of %d entries, %d more posted", ErrQueueFull, q.num, q.posted-q.freed, q.maxSend, len(wrs))
	}
	for i, w := range wrs {
		q.posted++
		q.queue = append(q.queue, fakeWR{wr: w, seq: q.posted, gen: q.gen, inline: inl[i]})
	}
	q.cond.Signal()
	return nil
}

// release frees the send queue entries up to seq (a polled completion).
func (q *fakeQP) release(seq, gen uint64) {
	q.mu.Lock()
	if gen == q.gen && seq > q.freed {
		q.freed = seq
	}
	q.mu.Unlock()
}

// run executes the queue pair's requests in order: RC's per-QP ordering.
func (q *fakeQP) run() {
	for {
		q.mu.Lock()
		for len(q.queue) == 0 && !q.closed {
			q.cond.Wait()
		}
		if q.closed {
			q.mu.Unlock()
			return
		}
		w := q.queue[0]
		q.queue[0] = fakeWR{}
		q.queue = q.queue[1:]
		state, remote, psn := q.state, q.remote, q.sqPSN
		q.mu.Unlock()
		if state == StateError {
			q.complete(w, StatusFlushed)
			continue
		}
		st, responder := q.execute(w, remote, psn)
		if st != StatusSuccess {
			_ = q.Fail()
			if responder != nil && (st == StatusRemoteAccess || st == StatusRemoteInvalid) {
				// RC: a class C error at the responder moves its QP
				// to the error state too.
				_ = responder.Fail()
			}
			q.complete(w, st)
			continue
		}
		if w.wr.Flags&FlagSignaled != 0 {
			q.complete(w, StatusSuccess)
		}
	}
}

func (q *fakeQP) complete(w fakeWR, st Status) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.gen != q.gen || q.closed {
		return
	}
	q.cq.push(fakeCQE{c: Completion{ID: w.wr.ID, Status: st, Op: w.wr.Op, QPN: q.num}, qp: q, seq: w.seq, gen: w.gen})
}

// lockPair read-locks two devices' registrations, in the order of their
// LIDs so that two requests going opposite ways cannot deadlock behind a
// Deregister waiting on each, and returns the unlock.
func lockPair(a, b *FakeDevice) func() {
	if a == b {
		a.mu.RLock()
		return a.mu.RUnlock
	}
	if b.port.LID < a.port.LID {
		a, b = b, a
	}
	a.mu.RLock()
	b.mu.RLock()
	return func() {
		b.mu.RUnlock()
		a.mu.RUnlock()
	}
}

// execute performs one request against the responder's memory.
func (q *fakeQP) execute(w fakeWR, remote QPInfo, psn uint32) (Status, *fakeQP) {
	resp := q.dev.fab.lookup(remote)
	if resp == nil {
		return StatusRetryExceeded, nil
	}
	resp.mu.Lock()
	rstate, back := resp.state, resp.remote
	resp.mu.Unlock()
	if (rstate != StateRTR && rstate != StateRTS) || back.QPN != q.num || back.GID != q.dev.port.GID ||
		back.LID != q.dev.port.LID || back.PSN != psn {
		// The responder drops what it does not expect; the requester
		// retries until it gives up.
		return StatusRetryExceeded, nil
	}
	wr := w.wr
	// Both ends' registrations stay put until the request is done with
	// their memory: Deregister waits, as ibv_dereg_mr and
	// ibv_destroy_qp guarantee no access to the memory after they
	// return (the transport unmaps it next).
	defer lockPair(q.dev, resp.dev)()
	// The local buffer.
	var local []byte
	switch {
	case w.inline != nil:
		local = w.inline
	case wr.Length > 0:
		var ok bool
		local, ok = q.dev.local(wr.LKey, wr.LocalAddr, wr.Length, wr.Op != OpWrite)
		if !ok {
			return StatusLocalProtection, nil
		}
	}
	var need Access
	switch wr.Op {
	case OpWrite:
		need = AccessRemoteWrite
	case OpRead:
		need = AccessRemoteRead
	default:
		need = AccessRemoteAtomic
	}
	if wr.Length == 0 {
		// A zero-length write touches no memory and checks no key.
		return StatusSuccess, resp
	}
	target, ok := resp.dev.remote(wr.RKey, wr.RemoteAddr, wr.Length, need)
	if !ok {
		return StatusRemoteAccess, resp
	}
	switch wr.Op {
	case OpWrite:
		placeBytes(target, local)
	case OpRead:
		if cap(q.scratch) < len(target) {
			q.scratch = make([]byte, len(target))
		}
		tmp := q.scratch[:len(target)]
		fetchBytes(tmp, target)
		placeBytes(local, tmp)
	case OpCompareSwap, OpFetchAdd:
		if wr.RemoteAddr%8 != 0 || addrOf(target)%8 != 0 {
			return StatusRemoteInvalid, resp
		}
		prev := atomicRMW(word(target), wr)
		var out [8]byte
		if q.dev.opt.AtomicReplyBigEndian {
			binary.BigEndian.PutUint64(out[:], prev)
		} else {
			binary.LittleEndian.PutUint64(out[:], prev)
		}
		placeBytes(local, out[:])
	}
	return StatusSuccess, resp
}

// atomicRMW applies a compare-and-swap or fetch-and-add to the
// little-endian word at p and returns its previous value.
func atomicRMW(p *uint64, wr WorkRequest) uint64 {
	for {
		raw := atomic.LoadUint64(p)
		var b [8]byte
		binary.NativeEndian.PutUint64(b[:], raw)
		old := binary.LittleEndian.Uint64(b[:])
		var next uint64
		if wr.Op == OpCompareSwap {
			if old != wr.CompareAdd {
				return old
			}
			next = wr.Swap
		} else {
			next = old + wr.CompareAdd
		}
		binary.LittleEndian.PutUint64(b[:], next)
		if atomic.CompareAndSwapUint64(p, raw, binary.NativeEndian.Uint64(b[:])) {
			return old
		}
	}
}

var (
	_ Device = (*FakeDevice)(nil)
	_ CQ     = (*fakeCQ)(nil)
	_ QP     = (*fakeQP)(nil)
)
