package ibverbs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// Transport is the RDMA transport of one node, built on a Device (the
// libibverbs shim or the fake). It implements transport.Transport.
type Transport struct {
	cfg     Config
	self    protocol.NodeID
	dev     Device
	port    PortInfo
	mtu     uint16
	handler transport.Handler
	slots   int
	// creditEvery: the receiver returns slots after consuming this many.
	creditEvery uint64

	cq CQ
	// recvMem holds, per peer, its mailbox ring, the credit word it writes
	// and its probe word; sendMem the staging rings, the credit staging
	// words and the one-sided bounce buffers.
	recvMem, sendMem []byte
	recvMR, sendMR   MR
	haveRecvMR       bool
	haveSendMR       bool
	chunkOff         int
	chunks           chan int

	peers [256]*peer
	order []*peer // by node id

	pmu     sync.Mutex
	pending map[uint64]*osOp
	nextOp  uint64

	rmu     sync.Mutex
	regions []MR

	closing chan struct{}
	closed  atomic.Bool
	active  atomic.Int64 // API calls in progress (Close waits for them)
	once    sync.Once
	wg      sync.WaitGroup
}

// peer is everything about one other node.
type peer struct {
	t   *Transport
	id  protocol.NodeID
	idx int

	msg    *msgLink
	os     *osLink
	osIn   QP // responder end of the peer's one-sided queue pair
	osInMu sync.Mutex
	psn    struct{ msg, out, in uint32 }
	remote Record // the peer's setup record

	// The out-of-band control connection, kept after setup.
	ctlMu    sync.Mutex
	ctl      net.Conn
	ctlWmu   sync.Mutex
	ctlReqMu sync.Mutex  // one request of ours at a time
	ctlReply chan Record // answers to our requests

	// up is set once setup is complete: the poller reads remote only then.
	up       atomic.Bool
	down     atomic.Pointer[error]
	downOnce sync.Once
	downCh   chan struct{}

	// Sending side (under sendMu).
	sendMu    sync.Mutex
	sent      uint64
	slotWR    []uint64 // per staging slot: the work request to complete before reuse
	stage     []byte
	stageAddr uint64
	credit    []byte // written by the peer: how many of our messages it consumed

	// Receiving side (the mailbox poller only).
	ring            []byte
	consumed        uint64
	published       uint64
	creditStage     []byte
	creditStageAddr uint64
	probe           []byte
}

func (p *peer) err() error {
	if e := p.down.Load(); e != nil {
		return *e
	}
	return nil
}

// fail marks the peer down (the first error sticks) and closes the control
// connection, which tells the peer too.
func (p *peer) fail(err error) {
	p.downOnce.Do(func() {
		if !errors.Is(err, transport.ErrPeerDown) && !errors.Is(err, transport.ErrClosed) {
			err = fmt.Errorf("%w: node %d: %v", transport.ErrPeerDown, p.id, err)
		}
		p.down.Store(&err)
		close(p.downCh)
		if c := p.conn(); c != nil {
			_ = c.Close()
		}
	})
}

func (p *peer) conn() net.Conn {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	return p.ctl
}

func (p *peer) writeControl(r Record) error {
	p.ctlWmu.Lock()
	defer p.ctlWmu.Unlock()
	c := p.conn()
	_ = c.SetWriteDeadline(time.Now().Add(p.t.cfg.PeerTimeout))
	return WriteRecord(c, r)
}

// call sends a request on the control connection and waits for its answer.
func (p *peer) call(req Record) (Record, error) {
	p.ctlReqMu.Lock()
	defer p.ctlReqMu.Unlock()
	select {
	case <-p.ctlReply: // a stale answer to a request that timed out
	default:
	}
	if err := p.writeControl(req); err != nil {
		err = fmt.Errorf("%w: control connection to node %d: %v", transport.ErrPeerDown, p.id, err)
		p.fail(err)
		return Record{}, err
	}
	timer := time.NewTimer(p.t.cfg.PeerTimeout)
	defer timer.Stop()
	select {
	case r := <-p.ctlReply:
		return r, nil
	case <-p.t.closing:
		return Record{}, fmt.Errorf("%w: waiting for node %d", transport.ErrClosed, p.id)
	case <-p.downCh:
		return Record{}, p.err()
	case <-timer.C:
		err := fmt.Errorf("%w: node %d did not answer a %v request within %v", transport.ErrPeerDown, p.id, req.Kind, p.t.cfg.PeerTimeout)
		p.fail(err)
		return Record{}, err
	}
}

// readControl serves the control connection until it closes.
func (t *Transport) readControl(p *peer, conn net.Conn) {
	defer t.wg.Done()
	for {
		r, err := ReadRecord(conn)
		if err == nil && (r.From != p.id || r.To != t.self) {
			err = fmt.Errorf("%w: %v record from node %d to node %d on the connection of node %d", ErrRecord, r.Kind, r.From, r.To, p.id)
		}
		if err == nil {
			switch r.Kind {
			case KindReset:
				err = t.handleReset(p, r)
			case KindResetDone:
				select {
				case p.ctlReply <- r:
				default:
				}
			default:
				err = fmt.Errorf("%w: unexpected %v record from node %d", ErrRecord, r.Kind, p.id)
			}
		}
		if err != nil {
			if !t.closed.Load() {
				p.fail(fmt.Errorf("%w: control connection to node %d: %v", transport.ErrPeerDown, p.id, err))
			}
			return
		}
	}
}

func newPSN() uint32 { return rand.Uint32() & 0xFFFFFF }

// New builds the transport of cfg.Self on dev and connects it to every
// other node of cfg.Addrs; it returns when all are connected. It takes
// ownership of dev: Close (or a failed New) closes it.
func New(dev Device, cfg Config) (*Transport, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	t := &Transport{
		cfg:     c,
		self:    c.Self,
		dev:     dev,
		port:    dev.Port(),
		handler: c.Handler,
		slots:   c.Mailboxes,
		pending: make(map[uint64]*osOp),
		closing: make(chan struct{}),
	}
	t.creditEvery = uint64(max(1, t.slots/2))
	t.mtu = uint16(t.port.MTU)
	if c.MTU != 0 && uint16(c.MTU) < t.mtu {
		t.mtu = uint16(c.MTU)
	}
	if !validMTU(t.mtu) {
		t.mtu = 1024
	}
	if err := t.init(); err != nil {
		t.teardown()
		return nil, err
	}
	if err := t.connectAll(); err != nil {
		_ = t.Close()
		return nil, err
	}
	return t, nil
}

// Queue depths. The message queue pair holds unsignaled writes until a
// signaled one completes; the one-sided pair at most one request per
// bounce buffer; the responder end never posts.
func (t *Transport) msgDepth() int { return min(4096, max(64, 4*t.slots+32)) }
func (t *Transport) osDepth() int  { return t.cfg.OneSidedBuffers + 2 }

func (t *Transport) init() error {
	ids := make([]protocol.NodeID, 0, len(t.cfg.Addrs))
	for id := range t.cfg.Addrs {
		if id != t.self {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	n := len(ids)
	s := t.slots
	ringBytes := s * slotSize

	// Receive area: rings, then credit words, then probe words.
	recvCredit := n * ringBytes
	recvProbe := recvCredit + n*8
	var err error
	if t.recvMem, err = mapMemory(max(recvProbe+n*8, 64)); err != nil {
		return err
	}
	// Send area: staging rings, credit staging words, bounce buffers.
	sendCredit := n * ringBytes
	t.chunkOff = (sendCredit + n*8 + 63) / 64 * 64
	if t.sendMem, err = mapMemory(t.chunkOff + t.cfg.OneSidedBuffers*OneSidedChunk); err != nil {
		return err
	}
	if t.recvMR, err = t.dev.Register(t.recvMem, addrOf(t.recvMem),
		AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic); err != nil {
		return fmt.Errorf("ibverbs: registering %d bytes of mailboxes: %w", len(t.recvMem), err)
	}
	t.haveRecvMR = true
	// Local write: reads and atomics land in the bounce buffers.
	if t.sendMR, err = t.dev.Register(t.sendMem, addrOf(t.sendMem), AccessLocalWrite); err != nil {
		return fmt.Errorf("ibverbs: registering %d bytes of staging memory: %w", len(t.sendMem), err)
	}
	t.haveSendMR = true
	t.chunks = make(chan int, t.cfg.OneSidedBuffers)
	for i := range t.cfg.OneSidedBuffers {
		t.chunks <- i
	}
	if t.cq, err = t.dev.CreateCQ(n*(t.msgDepth()+t.osDepth()+2) + 64); err != nil {
		return fmt.Errorf("ibverbs: creating the completion queue: %w", err)
	}
	for i, id := range ids {
		p := &peer{t: t, id: id, idx: i, downCh: make(chan struct{}), ctlReply: make(chan Record, 1), slotWR: make([]uint64, s)}
		p.ring = t.recvMem[i*ringBytes : (i+1)*ringBytes]
		p.credit = t.recvMem[recvCredit+i*8 : recvCredit+i*8+8]
		p.probe = t.recvMem[recvProbe+i*8 : recvProbe+i*8+8]
		storeLE(p.probe, probeInit)
		p.stage = t.sendMem[i*ringBytes : (i+1)*ringBytes]
		p.stageAddr = t.sendMR.Addr + uint64(i*ringBytes)
		p.creditStage = t.sendMem[sendCredit+i*8 : sendCredit+i*8+8]
		p.creditStageAddr = t.sendMR.Addr + uint64(sendCredit+i*8)
		t.peers[id] = p
		t.order = append(t.order, p)
		mq, err := t.dev.CreateQP(t.cq, QPCap{MaxSendWR: t.msgDepth(), MaxInline: 256})
		if err != nil {
			return fmt.Errorf("ibverbs: creating the message queue pair for node %d: %w", id, err)
		}
		p.msg = &msgLink{p: p, qp: mq, depth: uint64(t.msgDepth()), inline: mq.MaxInline()}
		oq, err := t.dev.CreateQP(t.cq, QPCap{MaxSendWR: t.osDepth()})
		if err != nil {
			return fmt.Errorf("ibverbs: creating the one-sided queue pair for node %d: %w", id, err)
		}
		p.os = &osLink{p: p, qp: oq}
		if p.osIn, err = t.dev.CreateQP(t.cq, QPCap{MaxSendWR: 1}); err != nil {
			return fmt.Errorf("ibverbs: creating the responder queue pair for node %d: %w", id, err)
		}
	}
	t.wg.Add(2)
	go t.pollCQ()
	go t.pollMailboxes()
	return nil
}

// pollCQ is the completion poller: it polls in batches and hands each
// completion to the message link or the one-sided request it belongs to.
func (t *Transport) pollCQ() {
	defer t.wg.Done()
	var buf [32]Completion
	b := backoff{busy: t.cfg.BusyPoll}
	for !t.closed.Load() {
		n, err := t.cq.Poll(buf[:])
		for _, c := range buf[:n] {
			switch c.ID >> idKindShift {
			case idMsg:
				t.msgComplete(c)
			case idOS:
				t.finishOp(c.ID&(1<<idKindShift-1), c.Status, false)
			}
		}
		if err != nil {
			if !t.closed.Load() {
				err = fmt.Errorf("%w: completion queue: %v", transport.ErrPeerDown, err)
				for _, p := range t.order {
					p.fail(err)
				}
			}
			return
		}
		if n == 0 {
			b.wait()
		} else {
			b.reset()
		}
	}
}

// connectAll dials the lower nodes and accepts the higher ones.
func (t *Transport) connectAll() error {
	deadline := time.Now().Add(t.cfg.ConnectTimeout)
	var lower, higher []*peer
	for _, p := range t.order {
		if p.id < t.self {
			lower = append(lower, p)
		} else {
			higher = append(higher, p)
		}
	}
	ln := t.cfg.Listener
	if len(higher) > 0 && ln == nil {
		var err error
		if ln, err = net.Listen("tcp", t.cfg.Addrs[t.self]); err != nil {
			return fmt.Errorf("ibverbs: listening for peers on %s: %w", t.cfg.Addrs[t.self], err)
		}
	}
	if ln != nil {
		defer ln.Close()
	}
	stop := make(chan struct{})
	errs := make(chan error, len(t.order))
	for _, p := range lower {
		go func() { errs <- t.dial(p, deadline, stop) }()
	}
	if len(higher) > 0 {
		go func() { errs <- t.acceptAll(ln, len(higher), deadline, stop) }()
	}
	want := len(lower)
	if len(higher) > 0 {
		want++
	}
	var first error
	for range want {
		if err := <-errs; err != nil && first == nil {
			first = err
			close(stop) // the others give up too
		}
	}
	return first
}

func (t *Transport) dial(p *peer, deadline time.Time, stop <-chan struct{}) error {
	addr := t.cfg.Addrs[p.id]
	wait := 20 * time.Millisecond
	for {
		conn, err := net.DialTimeout("tcp", addr, max(time.Until(deadline), time.Millisecond))
		if err == nil {
			_ = conn.SetDeadline(deadline)
			if err = WriteRecord(conn, Record{Kind: KindHello, From: t.self, To: p.id}); err == nil {
				var r Record
				if r, err = ReadRecord(conn); err == nil && (r.Kind != KindHello || r.From != p.id || r.To != t.self) {
					err = fmt.Errorf("%w: %v record from node %d to node %d, want a hello from node %d", ErrRecord, r.Kind, r.From, r.To, p.id)
				}
			}
			if err == nil {
				return t.setup(p, conn, deadline)
			}
			conn.Close()
			return fmt.Errorf("ibverbs: connecting to node %d at %s: %w", p.id, addr, err)
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w: connecting to node %d at %s: %v", transport.ErrPeerDown, p.id, addr, err)
		}
		select {
		case <-stop:
			return fmt.Errorf("ibverbs: connecting to node %d: given up", p.id)
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// helloTimeout bounds how long an accepted connection may take to say who
// it is.
const helloTimeout = 5 * time.Second

// acceptAll accepts connections until every higher node has connected. Each
// connection is served on its own goroutine, and one that does not open
// with a valid hello from an expected, not yet connected node is dropped
// without counting: stray or silent connections cannot stop a cluster from
// forming. It returns only when no setup it started is still running.
func (t *Transport) acceptAll(ln net.Listener, want int, deadline time.Time, stop <-chan struct{}) error {
	var (
		mu      sync.Mutex
		claimed = make(map[protocol.NodeID]bool)
		over    bool // no more claims: acceptAll is returning
		setups  sync.WaitGroup
	)
	done := make(chan error, want)
	claim := func(id protocol.NodeID) *peer {
		mu.Lock()
		defer mu.Unlock()
		p := t.peers[id]
		if over || id <= t.self || p == nil || claimed[id] {
			return nil
		}
		claimed[id] = true
		setups.Add(1)
		return p
	}
	serve := func(conn net.Conn) {
		hello := time.Now().Add(helloTimeout)
		if deadline.Before(hello) {
			hello = deadline
		}
		_ = conn.SetDeadline(hello)
		r, err := ReadRecord(conn)
		var p *peer
		if err == nil && r.Kind == KindHello && r.To == t.self {
			p = claim(r.From)
		}
		if p == nil {
			conn.Close()
			return
		}
		defer setups.Done()
		_ = conn.SetDeadline(deadline)
		if err := WriteRecord(conn, Record{Kind: KindHello, From: t.self, To: p.id}); err != nil {
			conn.Close()
			done <- fmt.Errorf("ibverbs: accepting node %d: %w", p.id, err)
			return
		}
		done <- t.setup(p, conn, deadline)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // the listener is closed when connectAll returns
			}
			go serve(conn)
		}
	}()
	finish := func(err error) error {
		mu.Lock()
		over = true
		mu.Unlock()
		setups.Wait()
		return err
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for connected := 0; connected < want; connected++ {
		select {
		case err := <-done:
			if err != nil {
				return finish(err)
			}
		case <-timer.C:
			return finish(fmt.Errorf("%w: %d of %d higher nodes connected within %v", transport.ErrPeerDown, connected, want, t.cfg.ConnectTimeout))
		case <-stop:
			return finish(errors.New("ibverbs: accepting peers: given up"))
		}
	}
	return finish(nil)
}

// setup exchanges queue pair and mailbox details with p over conn, brings
// the three queue pairs to RTS, and keeps conn as the control channel.
func (t *Transport) setup(p *peer, conn net.Conn, deadline time.Time) error {
	fail := func(err error) error {
		conn.Close()
		return fmt.Errorf("ibverbs: setting up node %d: %w", p.id, err)
	}
	_ = conn.SetDeadline(deadline)
	p.psn.msg, p.psn.out, p.psn.in = newPSN(), newPSN(), newPSN()
	local := Record{Kind: KindSetup, From: t.self, To: p.id, LID: t.port.LID, GID: t.port.GID, MTU: t.mtu,
		Msg:      QPNum{QPN: p.msg.qp.Num(), PSN: p.psn.msg},
		OSOut:    QPNum{QPN: p.os.qp.Num(), PSN: p.psn.out},
		OSIn:     QPNum{QPN: p.osIn.Num(), PSN: p.psn.in},
		RingAddr: t.recvMR.Addr + uint64(p.idx*t.slots*slotSize), RingKey: t.recvMR.RKey,
		Slots: uint32(t.slots), SlotSize: slotSize,
		CreditAddr: addrOf(p.credit), ProbeAddr: addrOf(p.probe)}
	remote, err := Bootstrap(conn, local)
	if err != nil {
		return fail(err)
	}
	if remote.Slots != uint32(t.slots) {
		return fail(fmt.Errorf("node %d has %d mailboxes per peer, this node %d (Config.Mailboxes must agree)", p.id, remote.Slots, t.slots))
	}
	p.remote = remote
	info := func(n QPNum) QPInfo {
		return QPInfo{LID: remote.LID, GID: remote.GID, QPN: n.QPN, PSN: n.PSN, MTU: int(min(t.mtu, remote.MTU))}
	}
	if err := p.msg.qp.Connect(p.psn.msg, info(remote.Msg)); err != nil {
		return fail(fmt.Errorf("message queue pair: %w", err))
	}
	if err := p.os.qp.Connect(p.psn.out, info(remote.OSIn)); err != nil {
		return fail(fmt.Errorf("one-sided queue pair: %w", err))
	}
	if err := p.osIn.Connect(p.psn.in, info(remote.OSOut)); err != nil {
		return fail(fmt.Errorf("responder queue pair: %w", err))
	}
	// Nobody posts before both ends are at RTS: a request to a QP that is
	// not yet at RTR would only be retried into an error.
	if _, err := Bootstrap(conn, Record{Kind: KindReady, From: t.self, To: p.id}); err != nil {
		return fail(err)
	}
	_ = conn.SetDeadline(time.Time{})
	p.ctlMu.Lock()
	p.ctl = conn
	p.ctlMu.Unlock()
	if p.err() != nil {
		// Failed while setting up (fail found no connection to close).
		conn.Close()
		return fmt.Errorf("ibverbs: setting up node %d: %w", p.id, p.err())
	}
	p.up.Store(true)
	t.wg.Add(1)
	go t.readControl(p, conn)
	if err := t.probe(p); err != nil {
		return fmt.Errorf("ibverbs: setting up node %d: %w", p.id, err)
	}
	return nil
}

func (t *Transport) peerFor(id protocol.NodeID) (*peer, error) {
	if p := t.peers[id]; p != nil {
		return p, nil
	}
	if id == t.self {
		return nil, fmt.Errorf("%w: node %d is this node", transport.ErrUnknownPeer, id)
	}
	return nil, fmt.Errorf("%w: node %d", transport.ErrUnknownPeer, id)
}

// enter admits an API call unless the transport is closed; leave ends it.
// Close waits for admitted calls before unmapping memory they may touch.
func (t *Transport) enter() bool {
	t.active.Add(1)
	if t.closed.Load() {
		t.active.Add(-1)
		return false
	}
	return true
}

func (t *Transport) leave() { t.active.Add(-1) }

// Self implements transport.Messenger.
func (t *Transport) Self() protocol.NodeID { return t.self }

// Register implements transport.OneSided: mem (off-heap, 8-byte aligned so
// that atomics at aligned offsets are aligned in memory) is registered at
// IOVA 0, so peers address it by offset, for remote read, write and
// atomics.
func (t *Transport) Register(mem []byte) (transport.Region, error) {
	if len(mem) == 0 {
		return transport.Region{}, errors.New("ibverbs: register an empty buffer")
	}
	if addrOf(mem)%8 != 0 {
		return transport.Region{}, fmt.Errorf("ibverbs: register memory at %#x: not 8-byte aligned", addrOf(mem))
	}
	if !t.enter() {
		return transport.Region{}, fmt.Errorf("%w: register", transport.ErrClosed)
	}
	defer t.leave()
	mr, err := t.dev.Register(mem, 0, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
	if err != nil {
		return transport.Region{}, fmt.Errorf("ibverbs: register %d bytes: %w", len(mem), err)
	}
	t.rmu.Lock()
	t.regions = append(t.regions, mr)
	t.rmu.Unlock()
	return transport.Region{Node: t.self, Key: mr.RKey, Len: mr.Len}, nil
}

// Close implements transport.Transport. It must not be called from the
// handler (it waits for the handler's goroutine).
func (t *Transport) Close() error {
	var err error
	t.once.Do(func() {
		t.flushSends()
		t.closed.Store(true)
		close(t.closing)
		for _, p := range t.order {
			if c := p.conn(); c != nil {
				_ = c.Close()
			}
		}
		// Calls in progress see closing and return promptly.
		for t.active.Load() > 0 {
			time.Sleep(100 * time.Microsecond)
		}
		t.wg.Wait()
		err = t.teardown()
	})
	return err
}

// flushSends waits until the messages already posted to every live peer
// have completed: destroying a queue pair drops the requests it still
// holds, and a node that leaves sends its last messages (the pages it
// hands back) just before it closes, which over tcp the kernel delivers
// after the close. A dead peer fails its fence at once or after the
// transport's PeerTimeout; the peers are flushed side by side.
func (t *Transport) flushSends() {
	var wg sync.WaitGroup
	for _, p := range t.order {
		if p.msg == nil || p.err() != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Not under sendMu: a Send waiting for a mailbox slot holds
			// it, and returns only once the transport is closed.
			_ = p.msg.fence() // a failed peer has nothing left to deliver
		}()
	}
	wg.Wait()
}

// teardown releases the device resources, then the memory: queue pairs
// first, so that no NIC writes into memory about to be unmapped.
func (t *Transport) teardown() error {
	var errs []error
	for _, p := range t.order {
		for _, qp := range []QP{p.msg.qpOrNil(), p.os.qpOrNil(), p.osIn} {
			if qp != nil {
				errs = append(errs, qp.Close())
			}
		}
	}
	if t.cq != nil {
		errs = append(errs, t.cq.Close())
	}
	t.rmu.Lock()
	for _, mr := range t.regions {
		errs = append(errs, t.dev.Deregister(mr))
	}
	t.regions = nil
	t.rmu.Unlock()
	if t.haveRecvMR {
		errs = append(errs, t.dev.Deregister(t.recvMR))
	}
	if t.haveSendMR {
		errs = append(errs, t.dev.Deregister(t.sendMR))
	}
	errs = append(errs, t.dev.Close())
	unmapMemory(t.recvMem)
	unmapMemory(t.sendMem)
	t.recvMem, t.sendMem = nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ibverbs: close: %w", err)
	}
	return nil
}

func (l *msgLink) qpOrNil() QP {
	if l == nil {
		return nil
	}
	return l.qp
}

func (l *osLink) qpOrNil() QP {
	if l == nil {
		return nil
	}
	return l.qp
}

var _ transport.Transport = (*Transport)(nil)
