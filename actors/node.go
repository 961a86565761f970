package actors

import (
	"errors"
	"fmt"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage"
)

// maxQueue bounds the transfers queued on one frame.
const maxQueue = 2 * protocol.MaxNodes

// ErrProtocol is wrapped by every violation the node detects in what it
// receives or in its own state.
var ErrProtocol = errors.New("protocol violation")

// ErrStorage is wrapped by a read or write of the node's store that failed
// for good (after the retries of a transient error), together with the
// store's own error: a full disk, an I/O error, a corrupt page. A failed
// write fails the node (the page it held would be lost); a failed read fails
// only the operations on that page (bufmgr.PageError).
var ErrStorage = errors.New("storage failure")

// lostRecords bounds the read errors a node remembers for the workers
// that ask why a page is unreadable (Unreadable); older ones are reported
// without the store's error.
const lostRecords = 64

type lostRecord struct {
	pid protocol.PID
	err error
}

// Stats counts what a node did.
type Stats struct {
	Requests, RemoteFetches, Invalidations, Evictions, EvictDeclined, Pulls, IORetries uint64
	// UnreadableReads counts pages this node could not read from its SSD.
	UnreadableReads uint64
}

// Node is one ScaleStore node.
type Node struct {
	// flush, when set, delays write-through acknowledgements until the
	// device's cache is flushed (SetFlush).
	flush func(fn func())
	cfg   Config
	id    protocol.NodeID
	env   Env
	obs   Observer
	dir   *protocol.Directory
	cache *bufmgr.Cache

	// holdOwnRoll, when set (replicated directories), holds a roll of a
	// page of a directory this node serves until the directory is caught
	// up (Local.holdRoll); it reports whether it did.
	holdOwnRoll func(pid protocol.PID, data []byte, seq uint32) bool

	local    []protocol.Message // messages to itself, handled after the current step
	draining bool

	batches    [protocol.MaxNodes][]protocol.EvictEntry // eviction batches per directory
	batchDirs  []protocol.NodeID                        // directories with a batch being filled
	candidates []*bufmgr.Frame
	entries    []protocol.EvictEntry
	ioBufs     [][]byte
	allocWait  [protocol.MaxNodes][]*allocWaiter
	tickArmed  bool
	// the periodic ticks as func values, made once: a method value passed
	// to Env.After is a heap allocation at every tick otherwise
	providerTickFn, epochTickFn func()
	evicting                    int // frames with an eviction under way
	lastProgressCheck           int64
	stopped                     bool
	lost                        [lostRecords]lostRecord // the latest failed reads, a ring
	lostNext                    int
	// gen counts the view changes this node went through (Fence): a
	// storage completion or timer of an older view does nothing.
	gen uint64
	// dead: the node crashed (Crash); it sends and does nothing more.
	dead bool
	// persists are the workers waiting for a write-through (Persist);
	// voids the frames a view change took away while a worker latched
	// them, dropped at their release.
	persists []*persistWait
	// forwards are write-throughs this node, a primary, copies to the
	// directory's backup (docs/replication.md).
	forwards   []*forwardWait
	persistSeq uint32
	voids      []*bufmgr.Frame
	// gated: a view change is under way on a real process (Local's
	// ChangeView): the node handles none of its own messages and evicts
	// nothing until every directory of the view has rebuilt.
	gated bool
	// outside are the nodes out of the membership view: their pages are
	// unreachable (Reachable; with replicas, lostDirs says it instead);
	// members are the view's members (a transaction record's buddy and
	// rolls go only to them); view is the view's number.
	outside, members protocol.NodeSet
	view             uint32
	// route maps a page's directory (its page id's top bits) to the node
	// that serves it in the current view, backups to the node that keeps
	// its second copy (hasBackup: it has one); identity and none with one
	// replica (docs/replication.md). hosted are the directories this node
	// serves (its own, and those it took over as a promoted backup), pageIO
	// the stores of directories other than its own that it keeps (nil: its
	// own, through env).
	route     [protocol.MaxNodes]protocol.NodeID
	backups   [protocol.MaxNodes]protocol.NodeID
	hasBackup protocol.NodeSet
	hosted    [protocol.MaxNodes]*protocol.Directory
	pageIO    [protocol.MaxNodes]PageIO
	// lostDirs: directories whose every replica is out of the view, with the
	// error that names their nodes (SetLost).
	lostDirs [protocol.MaxNodes]error
	// writeSeq numbers the node's page writes, lastWrite the newest of
	// each page (storageOpSeq; nodes that see view changes).
	writeSeq  uint64
	lastWrite map[protocol.PID]uint64
	// txr are the records of cluster transactions (txrecord.go).
	txr   txRecords
	Stats Stats
}

// PageIO reads and writes the slots of one directory's pages on a node's
// storage (Env does it for the node's own directory).
type PageIO interface {
	ReadPage(slot uint64, buf []byte, done func(error))
	WritePage(slot uint64, buf []byte, done func(error))
}

type allocWaiter struct {
	w    *bufmgr.Worker
	f    *bufmgr.Frame
	pid  protocol.PID
	done bool
	full bool
	cut  bool // a view change cut it short (Fence)
}

// New makes a node. pages is its page memory (cfg.CacheFrames pages).
func New(cfg Config, env Env, obs Observer, pages []byte) *Node {
	cfg.Defaults()
	if obs == nil {
		obs = nopObserver{}
	}
	n := &Node{cfg: cfg, id: cfg.ID, env: env, obs: obs}
	n.dir = protocol.NewDirectory(cfg.ID, cfg.Variant, cfg.SSDPages)
	for i := range n.route {
		n.route[i] = protocol.NodeID(i)
	}
	n.hosted[n.id] = n.dir
	n.cache = bufmgr.NewCache(cfg.CacheFrames, pages, n, cfg.AdviseMemory)
	n.providerTickFn, n.epochTickFn = n.providerTick, n.epochTick
	return n
}

// ID is the node's id.
func (n *Node) ID() protocol.NodeID { return n.id }

// Cache is the node's page cache (workers take guards from it).
func (n *Node) Cache() *bufmgr.Cache { return n.cache }

// Directory is the node's directory.
func (n *Node) Directory() *protocol.Directory { return n.dir }

// Start arms the page provider's timer.
func (n *Node) Start() {
	n.armTick()
	n.env.After(n.cfg.EpochInterval, n.epochTickFn)
}

// Stop lets the periodic timers lapse (the simulator stops when nothing is
// scheduled).
func (n *Node) Stop() { n.stopped = true }

func (n *Node) epochTick() {
	if n.stopped || n.dead {
		return
	}
	n.cache.AdvanceEpoch()
	n.env.After(n.cfg.EpochInterval, n.epochTickFn)
}

func (n *Node) violation(format string, args ...any) {
	n.obs.Violation(n.id, fmt.Errorf("node %d: %w: %s", n.id, ErrProtocol, fmt.Sprintf(format, args...)))
}

// send hands m to the transport, or queues it for this node itself.
func (n *Node) send(m protocol.Message, payload []byte) {
	if n.dead {
		return
	}
	m.From = n.id
	if m.To == n.id {
		if payload != nil {
			panic("actors: local message with a payload")
		}
		n.local = append(n.local, m)
		return
	}
	n.sendRemote(m, payload)
}

// sendRemote hands m to the environment. It is apart from send so that only
// a message that leaves the node is copied to the heap (Env.Send is an
// interface call, and its argument escapes): a node of one never does.
func (n *Node) sendRemote(m protocol.Message, payload []byte) {
	n.env.Send(m, payload)
}

// drain handles the messages a step sent to this node itself.
func (n *Node) drain() {
	if n.draining || n.gated {
		return
	}
	n.draining = true
	// By index, not by reslicing the front off: the queue's array is reused
	// from step to step instead of shrinking until append reallocates it.
	for i := 0; i < len(n.local); i++ {
		m := n.local[i]
		n.handle(&m, nil)
	}
	n.local = n.local[:0] // a Message holds no pointers: nothing to clear for the GC
	n.draining = false
}

// Deliver handles one message from the network. payload is only valid
// during the call.
func (n *Node) Deliver(m *protocol.Message, payload []byte) {
	if n.dead {
		return
	}
	if m.To != n.id {
		n.violation("message for node %d delivered to node %d: %v", m.To, n.id, *m)
		return
	}
	if len(payload) != m.PayloadLen() {
		n.violation("%v with a payload of %d bytes", *m, len(payload))
		return
	}
	n.handle(m, payload)
	n.drain()
}

func (n *Node) handle(m *protocol.Message, payload []byte) {
	switch m.Type {
	case protocol.TRequest:
		n.onRequest(m.From, m.PID, m.Mode)
	case protocol.TGrant:
		n.onGrant(m, payload)
	case protocol.TForward:
		n.onForward(m)
	case protocol.TBusy:
		n.onBusy(m)
	case protocol.TTransfer:
		n.enqueue(m.PID, bufmgr.Transfer{From: m.From, Mode: m.Mode, Epoch: m.Epoch, K: m.K, Pred: m.Pred,
			AnyCopy: m.Flags&protocol.FlagAnyCopy != 0}, m)
	case protocol.TInvalidate:
		n.enqueue(m.PID, bufmgr.Transfer{From: m.From, Epoch: m.Epoch, K: m.K, Invalidate: true}, m)
	case protocol.TTransferReply:
		n.onTransferReply(m, payload)
	case protocol.TInvalidateAck:
		n.onInvalidateAck(m)
	case protocol.TDone:
		if err := n.dirOf(m.PID).Done(m.From, m.PID); err != nil {
			n.violation("%v", err)
			return
		}
		n.resumeParked(m.PID)
	case protocol.TEvict:
		n.onEvict(m, payload)
	case protocol.TEvictReply:
		n.onEvictReply(m, payload)
	case protocol.TEvictData:
		n.onEvictData(m, payload)
	case protocol.TAlloc:
		n.onAlloc(m)
	case protocol.TAllocReply:
		n.onAllocReply(m)
	case protocol.TPersist:
		n.onPersist(m, payload)
	case protocol.TPersistAck:
		n.persistDone(m.PID, m.Epoch, m.From)
	case protocol.TTxRecord:
		n.onTxRecord(m, payload)
	case protocol.TTxDrop:
		n.onTxDrop(m)
	case protocol.TTxRoll:
		n.onTxRoll(m, payload)
	case protocol.TTxAck:
		n.onTxAck(m)
	default:
		n.violation("unexpected %v", *m)
	}
}

// ---- directory side ----

func (n *Node) onRequest(from protocol.NodeID, pid protocol.PID, mode protocol.Mode) {
	f := n.cache.Lookup(pid)
	// An unreadable copy does not count: the SSD may read this time.
	localCopy := f != nil && f.Mode != protocol.ModeNone && f.Pending == protocol.ModeNone && !f.Evicting && !f.Unreadable
	dec, err := n.dirOf(pid).Request(from, pid, mode, localCopy)
	if err != nil {
		if from == n.id && n.cfg.UnallocatedUnreadable && errors.Is(err, protocol.ErrNotOurs) {
			n.grantUnallocated(pid, mode)
			return
		}
		n.violation("%v", err)
		return
	}
	n.execute(dec)
}

// ErrUnallocated is wrapped by the error of a guard on a page past those
// its directory allocated (Config.UnallocatedUnreadable).
var ErrUnallocated = errors.New("not an allocated page")

// grantUnallocated answers this node's own request for a page its
// directory never allocated (Config.UnallocatedUnreadable) as an
// unreadable page, without the directory: the guard fails with an error
// that says why, and the frame is dropped again (startEvict) without
// being written.
func (n *Node) grantUnallocated(pid protocol.PID, mode protocol.Mode) {
	err := fmt.Errorf("%w: slot %d lies past the %d pages the store's catalog allocated "+
		"(a page that points to it was written after the last clean close, or is damaged)",
		ErrUnallocated, pid.Slot(), n.dirOf(pid).Allocated())
	n.Stats.UnreadableReads++
	n.lost[n.lostNext] = lostRecord{pid, err}
	n.lostNext = (n.lostNext + 1) % lostRecords
	n.obs.Unreadable(n.id, pid, err)
	n.onGrant(&protocol.Message{Type: protocol.TGrant, From: n.id, To: n.id, Mode: mode, PID: pid,
		Flags: protocol.FlagNoData | protocol.FlagUnreadable}, nil)
}

// execute carries out a directory decision.
func (n *Node) execute(dec protocol.Decision) {
	if dec.Action != protocol.ActParked && dec.Action != protocol.ActBusy {
		n.obs.Accepted(n.id, dec)
	}
	switch dec.Action {
	case protocol.ActGrantFromSSD:
		n.grantFromSSD(dec)
	case protocol.ActGrantNoData:
		n.send(protocol.Message{Type: protocol.TGrant, To: dec.Requester, Mode: dec.Mode, PID: dec.PID,
			Epoch: dec.Epoch, Flags: protocol.FlagNoData, Set: dec.Set, Target: dec.Target, K: dec.K}, nil)
	case protocol.ActForward:
		var flags protocol.Flags
		if dec.AnyCopy {
			flags = protocol.FlagAnyCopy
		}
		n.send(protocol.Message{Type: protocol.TForward, To: dec.Requester, Mode: dec.Mode, PID: dec.PID,
			Epoch: dec.Epoch, Target: dec.Target, K: dec.K, Set: dec.Set, Pred: dec.Pred, Flags: flags}, nil)
	case protocol.ActServeLocal:
		f := n.cache.Lookup(dec.PID)
		if f == nil || (f.Mode == protocol.ModeNone && f.Pending == protocol.ModeNone) {
			n.violation("directory serves %v from its own cache, which holds no copy", dec.PID)
			return
		}
		pred := dec.Pred
		if dec.LocalCopy {
			pred = f.Epoch // the copy held now, even if a request of our own follows
		}
		f.Slow() // before the transfer is queued: hot-path latch holders must back off
		q := n.cache.Queue(f)
		*q = append(*q, bufmgr.Transfer{From: dec.Requester, Mode: dec.Mode, Epoch: dec.Epoch, K: dec.K,
			Pred: pred, AsGrant: true, GrantSet: dec.Set, AnyCopy: dec.AnyCopy && !dec.LocalCopy})
		n.serve(f)
	case protocol.ActBusy:
		n.send(protocol.Message{Type: protocol.TBusy, To: dec.Requester, PID: dec.PID}, nil)
	case protocol.ActParked:
	}
}

func (n *Node) grantFromSSD(dec protocol.Decision) {
	if dec.Requester == n.id {
		f := n.cache.Lookup(dec.PID)
		if f == nil || f.Pending == protocol.ModeNone {
			n.violation("local grant of %v without an outstanding request", dec.PID)
			return
		}
		if n.cfg.ViewChanges {
			buf := n.getBuf()
			n.readSSD(dec.PID, buf, 0, func(unreadable bool) {
				var flags protocol.Flags
				if unreadable {
					flags |= protocol.FlagUnreadable
				}
				n.onGrant(&protocol.Message{Type: protocol.TGrant, From: n.id, To: n.id, Mode: dec.Mode, PID: dec.PID,
					Epoch: dec.Epoch, Flags: flags, Set: dec.Set}, buf)
				n.putBuf(buf)
			})
			return
		}
		n.readSSD(dec.PID, n.cache.Page(f), 0, func(unreadable bool) {
			flags := protocol.FlagNoData // read straight into the frame
			if unreadable {
				flags |= protocol.FlagUnreadable
			}
			n.onGrant(&protocol.Message{Type: protocol.TGrant, From: n.id, To: n.id, Mode: dec.Mode, PID: dec.PID,
				Epoch: dec.Epoch, Flags: flags, Set: dec.Set}, nil)
		})
		return
	}
	buf := n.getBuf()
	n.readSSD(dec.PID, buf, 0, func(unreadable bool) {
		var flags protocol.Flags
		if unreadable {
			flags = protocol.FlagUnreadable
		}
		n.send(protocol.Message{Type: protocol.TGrant, To: dec.Requester, Mode: dec.Mode, PID: dec.PID, Epoch: dec.Epoch,
			Flags: flags, Set: dec.Set}, buf)
		n.putBuf(buf)
	})
}

// readSSD reads pid into buf. A read that fails for good does not fail the
// node: done learns that the page is unreadable, and the directory grants
// it as such (protocol.FlagUnreadable). The directory's metadata already
// moved on when it accepted the request (chaining), so the grant must go
// out either way; what travels is the news that the page means nothing.
func (n *Node) readSSD(pid protocol.PID, buf []byte, attempt int, done func(unreadable bool)) {
	n.storageOp(false, pid, buf, attempt, func(err error) {
		if err != nil {
			n.Stats.UnreadableReads++
			n.lost[n.lostNext] = lostRecord{pid, err}
			n.lostNext = (n.lostNext + 1) % lostRecords
			n.obs.Unreadable(n.id, pid, err)
		}
		done(err != nil)
	})
}

// writeSSD writes buf as pid. A write that fails for good fails the node:
// the page it carries would be lost.
func (n *Node) writeSSD(pid protocol.PID, buf []byte, attempt int, done func()) {
	n.storageOp(true, pid, buf, attempt, func(err error) {
		if err != nil {
			n.obs.Violation(n.id, err)
			return
		}
		done()
	})
}

// storageOp reads or writes pid's slot, retrying transient errors after a
// back-off (up to cfg.MaxIORetries); any other error, or one that does not
// go away, is passed to done, wrapped with ErrStorage.
func (n *Node) storageOp(write bool, pid protocol.PID, buf []byte, attempt int, done func(error)) {
	n.storageOpSeq(write, pid, buf, attempt, 0, done)
}

// storageOpSeq is storageOp; wseq numbers a write among this node's
// writes of pid (0: a new write), so that a retry of a write that a newer
// write of the same page overtook is dropped instead of landing over it
// (nodes that see view changes: a primary's forward that a view change
// cut and re-sent, docs/replication.md, may retry while the page's next
// write is already on its way).
func (n *Node) storageOpSeq(write bool, pid protocol.PID, buf []byte, attempt int, wseq uint64, done func(error)) {
	if write && n.cfg.ViewChanges {
		if wseq == 0 {
			if n.lastWrite == nil {
				n.lastWrite = map[protocol.PID]uint64{}
			}
			n.writeSeq++
			wseq = n.writeSeq
			n.lastWrite[pid] = wseq
		} else if n.lastWrite[pid] != wseq {
			done(nil) // superseded: the newer write carries a newer page
			n.drain()
			return
		}
	}
	op, verb := n.env.ReadPage, "reading"
	if write {
		op, verb = n.env.WritePage, "writing"
	}
	if io := n.pageIO[pid.Dir()]; io != nil && pid.Dir() != n.id {
		op = io.ReadPage
		if write {
			op = io.WritePage
		}
	}
	gen := n.gen
	op(pid.Slot(), buf, func(err error) {
		if n.dead || n.gen != gen {
			return // a view change (Fence) came between: the write landed, nobody waits for it
		}
		if err != nil {
			if !errors.Is(err, storage.ErrTransient) || attempt >= n.cfg.MaxIORetries {
				done(fmt.Errorf("node %d: %w: %s %v on the SSD failed (attempt %d): %w",
					n.id, ErrStorage, verb, pid, attempt+1, err))
				n.drain()
				return
			}
			n.Stats.IORetries++
			n.env.After(n.cfg.RetryDelay, func() {
				if n.gen == gen && !n.dead {
					n.storageOpSeq(write, pid, buf, attempt+1, wseq, done)
				}
			})
			return
		}
		done(nil)
		n.drain()
	})
}

// Unreadable implements bufmgr.Remote: why a guard on pid failed. It also
// drops the unreadable copy soon (an eviction, which never writes it back),
// so that the next operation on the page reads it again instead of failing
// on the cached failure: a read error that went away heals, a corrupt page
// fails each operation afresh. A frame others still wait for or owe a
// transfer from is not evictable yet; the last of them to fail drops it.
func (n *Node) Unreadable(pid protocol.PID) error {
	n.env.After(n.cfg.RetryDelay, func() {
		if f := n.cache.Lookup(pid); f != nil && f.Unreadable {
			n.EvictPage(pid)
		}
	})
	for i := range lostRecords {
		r := &n.lost[(n.lostNext-1-i+2*lostRecords)%lostRecords]
		if r.err != nil && r.pid == pid {
			return fmt.Errorf("%w: %w", bufmgr.ErrUnreadable, r.err)
		}
	}
	return fmt.Errorf("%w: its directory, node %d, could not read it from its SSD", bufmgr.ErrUnreadable, pid.Dir())
}

// copyData is the page of f as the observer should see it: nil when the
// copy is unreadable (there is no value to check).
func (n *Node) copyData(f *bufmgr.Frame) []byte {
	if f.Unreadable {
		return nil
	}
	return n.cache.Page(f)
}

// pageFlags are the flags of a message that carries f's page.
func pageFlags(f *bufmgr.Frame) protocol.Flags {
	if f.Unreadable {
		return protocol.FlagUnreadable
	}
	return 0
}

func (n *Node) getBuf() []byte {
	if k := len(n.ioBufs); k > 0 {
		b := n.ioBufs[k-1]
		n.ioBufs = n.ioBufs[:k-1]
		return b
	}
	return make([]byte, protocol.PageSize)
}

func (n *Node) putBuf(b []byte) { n.ioBufs = append(n.ioBufs, b) }

// resumeParked lets requests parked at the directory proceed.
func (n *Node) resumeParked(pid protocol.PID) {
	for {
		from, mode, ok := n.dirOf(pid).NextParked(pid)
		if !ok {
			return
		}
		n.onRequest(from, pid, mode)
	}
}

// ---- requester side ----

// Request implements bufmgr.Remote: f.Pending was just set by a worker.
func (n *Node) Request(f *bufmgr.Frame) {
	if n.dead {
		return
	}
	n.Stats.Requests++
	f.ReqStart = n.env.Now()
	f.AwaitResp, f.AwaitData, f.AwaitAcks = true, false, 0
	n.send(protocol.Message{Type: protocol.TRequest, To: n.route[f.PID.Dir()], Mode: f.Pending, PID: f.PID}, nil)
	n.drain()
}

func (n *Node) pendingFrame(m *protocol.Message) *bufmgr.Frame {
	f := n.cache.Lookup(m.PID)
	if f == nil || f.Pending == protocol.ModeNone || !f.AwaitResp || f.Pending != m.Mode {
		n.violation("%v without a matching outstanding request", *m)
		return nil
	}
	return f
}

func (n *Node) onGrant(m *protocol.Message, payload []byte) {
	f := n.pendingFrame(m)
	if f == nil {
		return
	}
	f.AwaitResp = false
	if payload != nil {
		copy(n.cache.Page(f), payload)
		f.Unreadable = false
	}
	if m.Flags&protocol.FlagUnreadable != 0 {
		f.Unreadable = true
	}
	if m.Flags&protocol.FlagNoData != 0 && m.From != n.id && f.Mode == protocol.ModeNone {
		n.violation("%v without data to a node that holds no copy", *m)
	}
	f.ReqEpoch = m.Epoch
	if m.From != n.id || payload != nil {
		n.Stats.RemoteFetches++
	}
	n.invalidateAll(f, m)
	n.maybeComplete(f)
}

func (n *Node) onForward(m *protocol.Message) {
	f := n.pendingFrame(m)
	if f == nil {
		return
	}
	f.AwaitResp, f.AwaitData = false, true
	f.ReqEpoch = m.Epoch
	n.send(protocol.Message{Type: protocol.TTransfer, To: m.Target, Mode: f.Pending, PID: f.PID, Epoch: m.Epoch, K: m.K,
		Pred: m.Pred, Flags: m.Flags & protocol.FlagAnyCopy}, nil)
	n.invalidateAll(f, m)
}

// invalidateAll sends invalidations to the sharers the response names; the
// one named Target serves K copies first.
func (n *Node) invalidateAll(f *bufmgr.Frame, m *protocol.Message) {
	set := m.Set
	set.Each(func(s protocol.NodeID) {
		if n.cfg.Mutations.SkipInvalidation != nil && n.cfg.Mutations.SkipInvalidation() {
			return // mutation: leave this sharer's copy valid
		}
		k := uint32(0)
		if m.Type == protocol.TGrant && s == m.Target {
			k = m.K
		}
		n.Stats.Invalidations++
		f.AwaitAcks++
		n.send(protocol.Message{Type: protocol.TInvalidate, To: s, PID: f.PID, Epoch: m.Epoch, K: k}, nil)
	})
}

func (n *Node) onBusy(m *protocol.Message) {
	f := n.cache.Lookup(m.PID)
	if f == nil || f.Pending == protocol.ModeNone || !f.AwaitResp {
		n.violation("%v without an outstanding request", *m)
		return
	}
	pid := f.PID
	delay := n.cfg.RetryDelay/2 + int64(n.env.Rand()%uint64(n.cfg.RetryDelay))
	gen := n.gen
	n.env.After(delay, func() {
		if n.gen != gen || n.dead {
			return
		}
		f := n.cache.Lookup(pid)
		if f == nil || f.Pending == protocol.ModeNone || !f.AwaitResp {
			return
		}
		n.send(protocol.Message{Type: protocol.TRequest, To: n.route[pid.Dir()], Mode: f.Pending, PID: pid}, nil)
		n.drain()
	})
}

func (n *Node) onTransferReply(m *protocol.Message, payload []byte) {
	f := n.cache.Lookup(m.PID)
	if f == nil || f.Pending == protocol.ModeNone || !f.AwaitData {
		n.violation("%v without a transfer outstanding", *m)
		return
	}
	copy(n.cache.Page(f), payload)
	f.Unreadable = m.Flags&protocol.FlagUnreadable != 0
	f.AwaitData = false
	n.Stats.RemoteFetches++
	n.maybeComplete(f)
}

func (n *Node) onInvalidateAck(m *protocol.Message) {
	f := n.cache.Lookup(m.PID)
	if f == nil || f.Pending == protocol.ModeNone || f.AwaitAcks == 0 {
		n.violation("%v without invalidations outstanding", *m)
		return
	}
	f.AwaitAcks--
	n.maybeComplete(f)
}

func (n *Node) maybeComplete(f *bufmgr.Frame) {
	if f.AwaitResp || f.AwaitData || f.AwaitAcks > 0 {
		return
	}
	old := f.Mode
	mode := f.Pending
	f.Mode, f.Pending, f.Served, f.Epoch = mode, protocol.ModeNone, 0, f.ReqEpoch
	n.obs.CopyChanged(n.id, f.PID, old, mode, n.copyData(f))
	n.obs.Obtained(n.id, f.PID, mode, n.env.Now()-f.ReqStart)
	if n.cfg.Variant != protocol.Chaining {
		n.send(protocol.Message{Type: protocol.TDone, To: n.route[f.PID.Dir()], Mode: mode, PID: f.PID}, nil)
	}
	if old != protocol.ModeNone {
		n.cache.Upgraded(f)
	} else {
		n.cache.Granted(f)
	}
	n.serve(f)
}

// ---- holder side ----

func (n *Node) enqueue(pid protocol.PID, t bufmgr.Transfer, m *protocol.Message) {
	f := n.cache.Lookup(pid)
	if f == nil || (f.Mode == protocol.ModeNone && f.Pending == protocol.ModeNone) {
		n.violation("%v for a page this node neither holds nor awaits", *m)
		if t.Invalidate {
			// Nothing to drop: acknowledge so the requester is not stuck.
			n.send(protocol.Message{Type: protocol.TInvalidateAck, To: t.From, PID: pid}, nil)
		}
		return
	}
	q := n.cache.Queue(f)
	if len(*q) >= maxQueue {
		// A holder owes at most one copy per node and one hand-over.
		n.violation("%v dropped: %d transfers already queued for the page", *m, len(*q))
		return
	}
	f.Slow() // before the transfer is queued: hot-path latch holders must back off
	*q = append(*q, t)
	n.serve(f)
}

// Released implements bufmgr.Remote.
func (n *Node) Released(f *bufmgr.Frame) {
	if n.dead {
		// A crashed node's worker unwinding: its guards release into a
		// cache that is gone (Crash reported every copy as lost).
		return
	}
	if len(n.voids) > 0 {
		n.dropVoid(f)
	}
	n.serve(f)
	n.drain()
}

// serve answers queued transfers when the frame allows: copies whenever the
// page is here and not being written, the hand-over (or invalidation) once
// this node's own turn is over and the copies it owes are served (paper
// §3.4.3: the predecessor serves its successor after its own access).
func (n *Node) serve(f *bufmgr.Frame) {
	q := n.cache.Queue(f) // re-read at every step: serving may queue more
	for {
		progressed := false
		for i := 0; i < len(*q); {
			t := (*q)[i]
			if !t.GivesUp() && n.canCopy(f, &t) {
				*q = append((*q)[:i], (*q)[i+1:]...)
				n.serveCopy(f, &t)
				progressed = true
				continue
			}
			i++
		}
		// At most one hand-over is servable at a time: one accepted before
		// this node's outstanding request (a back-off) or, once the node has
		// had its turn, the one chained after it.
		for i := range *q {
			t := (*q)[i]
			if t.GivesUp() && n.canGiveUp(f, &t) {
				// The copy goes: the protocol side holds the latch from
				// here to the drop, so no worker latches it in between
				// (one that kept it across a remote wait of its own left
				// Invalidate spinning). A hot-path worker that holds it
				// for an instant sees it slow, releases it, and its
				// release serves the queue again (Released).
				f.Slow()
				if !f.Latch.TryLockExclusive() {
					break
				}
				*q = append((*q)[:i], (*q)[i+1:]...)
				n.giveUp(f, &t)
				progressed = true
				break
			}
		}
		if !progressed {
			break
		}
	}
	n.cache.Changed(f)
}

// beforeOwnTurn decides, while this node has a request outstanding,
// whether a queued transfer is for the copy it holds now (the directory
// accepted the transfer's requester before this node's request: serve it
// from that copy, backing off an upgrade if it takes the copy away) or for
// the acquisition still outstanding (wait for this node's turn: chaining
// moves the page strictly in acceptance order). An invalidation is always for
// a held copy when there is one: nobody lists a node as a sharer because of
// an upgrade, which makes it the owner. A transfer names the acquisition by
// its acceptance epoch (Pred).
func beforeOwnTurn(f *bufmgr.Frame, t *bufmgr.Transfer) bool {
	if f.Pending == protocol.ModeNone {
		return true
	}
	if f.Mode == protocol.ModeNone {
		return false
	}
	return t.Invalidate || t.AnyCopy || t.Pred == f.Epoch
}

func (n *Node) canCopy(f *bufmgr.Frame, t *bufmgr.Transfer) bool {
	return beforeOwnTurn(f, t) && f.Mode != protocol.ModeNone && !f.Evicting && f.Entitled() == 0 && !f.Latch.HeldExclusive()
}

func (n *Node) canGiveUp(f *bufmgr.Frame, t *bufmgr.Transfer) bool {
	if !beforeOwnTurn(f, t) || f.Served < t.K || f.Evicting || f.Entitled() > 0 || !f.Latch.Free() {
		return false
	}
	if f.Pending != protocol.ModeNone && t.GivesUp() && t.Epoch <= f.Epoch {
		// An upgrade is outstanding while we hold a shared copy, and a node
		// accepted before our upgrade wants the copy gone. Deadlock avoidance
		// (§3.4.3): the lower conflict epoch backs off. Ours is the copy's,
		// which must be older than the other node's acceptance.
		n.violation("hand-over of %v at epoch %d to a copy of epoch %d", f.PID, t.Epoch, f.Epoch)
	}
	return true
}

func (n *Node) serveCopy(f *bufmgr.Frame, t *bufmgr.Transfer) {
	if t.AsGrant {
		n.send(protocol.Message{Type: protocol.TGrant, To: t.From, Mode: t.Mode, PID: f.PID, Epoch: t.Epoch,
			Flags: pageFlags(f)}, n.cache.Page(f))
	} else {
		n.send(protocol.Message{Type: protocol.TTransferReply, To: t.From, Mode: t.Mode, PID: f.PID,
			Flags: pageFlags(f)}, n.cache.Page(f))
	}
	f.Served++
	if f.Mode == protocol.ModeExclusive {
		f.Slow()
		f.Mode = protocol.ModeShared
		n.obs.CopyChanged(n.id, f.PID, protocol.ModeExclusive, protocol.ModeShared, n.copyData(f))
	}
}

// giveUp hands the copy over and drops it; the caller holds the frame's
// exclusive latch (serve), which the drop releases.
func (n *Node) giveUp(f *bufmgr.Frame, t *bufmgr.Transfer) {
	switch {
	case t.Invalidate:
		n.send(protocol.Message{Type: protocol.TInvalidateAck, To: t.From, PID: f.PID}, nil)
	case t.AsGrant:
		n.send(protocol.Message{Type: protocol.TGrant, To: t.From, Mode: t.Mode, PID: f.PID, Epoch: t.Epoch,
			Flags: pageFlags(f), Set: t.GrantSet}, n.cache.Page(f))
	default:
		n.send(protocol.Message{Type: protocol.TTransferReply, To: t.From, Mode: t.Mode, PID: f.PID,
			Flags: pageFlags(f)}, n.cache.Page(f))
	}
	old := f.Mode
	pid := f.PID
	n.cache.DropEntitlements(f)
	n.cache.InvalidateLocked(f)
	if old != protocol.ModeNone {
		n.obs.CopyChanged(n.id, pid, old, protocol.ModeNone, nil)
	}
}
