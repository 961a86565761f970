package protocol

import (
	"errors"
	"fmt"
)

// Variant selects how the directory orders conflicting requests (paper §3.4).
type Variant uint8

const (
	// Chaining is the paper's anticipatory chaining with immediate metadata
	// updates (§3.4.3): the directory updates its metadata the moment it
	// accepts a request and sends the next requester to its predecessor.
	Chaining Variant = iota
	// FIFO queues requests at the directory and serves one at a time per page;
	// the requester confirms with TDone (§3.4.2). The directory node's own
	// requests jump the queue, as the paper's local workers bypass it.
	FIFO
	// Polling answers TBusy while a page is in a transition and the requester
	// asks again after a back-off (§3.4.1). See docs/protocol.md for how this
	// differs from the paper's figure.
	Polling
)

// ParseVariant reads a variant name as given on the command line.
func ParseVariant(s string) (Variant, error) {
	switch s {
	case "chaining":
		return Chaining, nil
	case "fifo":
		return FIFO, nil
	case "polling":
		return Polling, nil
	}
	return 0, fmt.Errorf("unknown protocol %q (want chaining, fifo or polling)", s)
}

func (v Variant) String() string {
	switch v {
	case Chaining:
		return "chaining"
	case FIFO:
		return "fifo"
	case Polling:
		return "polling"
	}
	return fmt.Sprintf("variant(%d)", uint8(v))
}

// Action is what the directory decided for a request.
type Action uint8

const (
	_ Action = iota // the zero Action is invalid
	// ActGrantFromSSD: read the page from the directory's SSD and send it with
	// a TGrant (the directory node holds no copy of it).
	ActGrantFromSSD
	// ActGrantNoData: the requester keeps its copy (upgrade); TGrant without
	// page, invalidate Set first.
	ActGrantNoData
	// ActForward: send TForward naming Target.
	ActForward
	// ActServeLocal: the directory node's own cache is the holder the page
	// comes from: queue the transfer on its frame, which answers with a TGrant
	// carrying the page once its own access is done.
	ActServeLocal
	// ActBusy: answer TBusy (polling).
	ActBusy
	// ActParked: the request waits at the directory; Resume returns it later.
	ActParked
)

var actionNames = [...]string{"invalid", "grant-from-ssd", "grant-nodata", "forward", "serve-local", "busy", "parked"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Decision is the directory's answer to one ownership request.
type Decision struct {
	Action    Action
	Requester NodeID
	PID       PID
	Mode      Mode
	Epoch     uint32 // conflict epoch at acceptance; the requester remembers it
	Target    NodeID // where the page comes from (ActForward, ActServeLocal), and who serves K copies first
	K         uint32 // copies Target must serve before giving the page up
	Pred      uint32 // the acceptance epoch of Target's copy (see Message.Pred)
	// LocalCopy: the directory node serves from the stable copy it holds
	// now (the localCopy of Request), not from one it is still acquiring.
	LocalCopy bool
	// AnyCopy: Target serves from the shared copy it holds or awaits
	// (protocol.FlagAnyCopy); Pred is unused.
	AnyCopy bool
	Set     NodeSet // sharers the requester must invalidate
}

// Errors the directory reports for requests that break the protocol. In the
// simulator they are violations; on a real transport, a peer's bug.
var (
	ErrNotOurs       = errors.New("page is not allocated on this directory")
	ErrAlreadyHolder = errors.New("requester already holds the page in that mode")
	ErrUnexpected    = errors.New("message does not match the directory's state")
)

// Meta is the directory's view of one page, after every accepted request.
type Meta struct {
	Mode    Mode
	Owner   NodeID  // when ModeExclusive
	Sharers NodeSet // when ModeShared
	// Epoch is the conflict epoch. It rises at every shared conflict (an
	// exclusive request against sharers, upgrades included) and at a
	// Rebuild, and nowhere else: that is what tells a node's held shared
	// copy from its outstanding exclusive acquisition (Pred), the only
	// two epochs a node must tell apart (docs/protocol.md, "Epoch bumps").
	Epoch  uint32
	Stale  bool   // the SSD copy is older than the latest value
	Source NodeID // ModeShared && (Stale || Sourced): the sharer that serves copies
	Copies uint32 // copies forwarded to Source since it obtained the page
	// Sourced: the SSD copy is the latest, but a sharer (Source) serves
	// copies from its memory, which is faster than the SSD (paper §3.4.3:
	// a shared request is served by a sharer). The first node granted the
	// page shared from the SSD becomes the source.
	// When the source leaves, another sharer takes its place.
	Sourced bool
	// OwnerEpoch is the conflict epoch at which the exclusive owner (or,
	// once it served a copy, the source of a stale page) was accepted:
	// the Pred of transfers to it.
	OwnerEpoch uint32

	allocated   bool
	writingBack bool   // a pulled dirty page is on its way to the SSD
	pullFrom    NodeID // who must send the pulled page
	pulling     bool   // waiting for TEvictData
	busy        bool   // FIFO/polling: a transition is in progress
	busyNode    NodeID
	parked      []parkedRequest
}

type parkedRequest struct {
	from NodeID
	mode Mode
}

// Holds reports whether n holds (or is about to hold) a copy per the metadata.
func (m *Meta) Holds(n NodeID) bool {
	switch m.Mode {
	case ModeExclusive:
		return m.Owner == n
	case ModeShared:
		return m.Sharers.Has(n)
	}
	return false
}

// InTransition reports whether requests for the page are held back.
func (m *Meta) InTransition() bool { return m.writingBack || m.busy }

// Directory is one node's directory: the metadata of every page allocated on
// its SSD. It is a pure state machine: the caller executes its decisions.
type Directory struct {
	// self is the directory the pages belong to (their page ids' top
	// bits); host is the node that serves them: self, or with replicas
	// the node a view maps self to while self is out of it
	// (NewHostedDirectory).
	self     NodeID
	host     NodeID
	variant  Variant
	pages    []Meta // indexed by slot
	capacity uint64
	// Mutations, set by the simulator's mutation points (see package
	// mutation): each one breaks one rule on purpose.
	NoOwnerStability  func() bool
	StaleGrant        func() bool
	ForgetOwnerSharer func() bool
	// ConflictKeepsEpoch: a shared conflict (an exclusive request against
	// sharers) hands the page over without a new conflict epoch.
	ConflictKeepsEpoch func() bool
}

// NewDirectory makes the directory of node self with room for capacity pages.
func NewDirectory(self NodeID, variant Variant, capacity uint64) *Directory {
	if capacity > MaxSlot+1 {
		capacity = MaxSlot + 1
	}
	return &Directory{self: self, host: self, variant: variant, capacity: capacity}
}

// NewHostedDirectory makes the directory of node dir's pages as served by
// node host (a backup promoted after dir left the view;
// docs/replication.md): decisions name host where the directory's own
// node serves from its cache.
func NewHostedDirectory(dir, host NodeID, variant Variant, capacity uint64) *Directory {
	d := NewDirectory(dir, variant, capacity)
	d.host = host
	return d
}

// Self is the directory: the node its pages' ids name.
func (d *Directory) Self() NodeID { return d.self }

// Host is the node that serves the directory (Self unless hosted).
func (d *Directory) Host() NodeID { return d.host }

// Variant is the ordering variant in force.
func (d *Directory) Variant() Variant { return d.variant }

// Allocated is the number of pages allocated so far.
func (d *Directory) Allocated() uint64 { return uint64(len(d.pages)) }

// Allocate creates a page for node owner, who holds it exclusively from now
// on (paper §3.3: the directory is where the page was created). ok is false
// when the SSD is full.
func (d *Directory) Allocate(owner NodeID) (PID, bool) {
	slot := uint64(len(d.pages))
	if slot >= d.capacity {
		return 0, false
	}
	d.pages = append(d.pages, Meta{allocated: true, Mode: ModeExclusive, Owner: owner, Stale: true})
	return MakePID(d.self, slot), true
}

// Meta returns the metadata of pid, or nil when pid is not ours.
func (d *Directory) Meta(pid PID) *Meta {
	if pid.Dir() != d.self || pid.Slot() >= uint64(len(d.pages)) {
		return nil
	}
	return &d.pages[pid.Slot()]
}

// Request handles an ownership request of from for mode on pid. localCopy
// tells whether the directory node's own cache holds a copy of pid that is
// present and not itself waiting for a request of its own (it can serve at
// once).
func (d *Directory) Request(from NodeID, pid PID, mode Mode, localCopy bool) (Decision, error) {
	m := d.Meta(pid)
	if m == nil {
		return Decision{}, fmt.Errorf("request for %v from node %d: %w", pid, from, ErrNotOurs)
	}
	if mode != ModeShared && mode != ModeExclusive {
		return Decision{}, fmt.Errorf("request for %v from node %d: %w: mode %v", pid, from, ErrUnexpected, mode)
	}
	if len(m.parked) >= MaxNodes {
		// Each node has at most one request per page outstanding.
		return Decision{}, fmt.Errorf("request for %v from node %d: %w: %d requests already parked", pid, from, ErrUnexpected, len(m.parked))
	}
	if m.writingBack {
		m.parked = append(m.parked, parkedRequest{from, mode})
		return Decision{Action: ActParked, Requester: from, PID: pid, Mode: mode}, nil
	}
	if m.busy {
		if d.variant == Polling {
			return Decision{Action: ActBusy, Requester: from, PID: pid, Mode: mode}, nil
		}
		req := parkedRequest{from, mode}
		if from == d.host {
			// The directory's own workers bypass the queue (paper §3.4.2).
			m.parked = append([]parkedRequest{req}, m.parked...)
		} else {
			m.parked = append(m.parked, req)
		}
		return Decision{Action: ActParked, Requester: from, PID: pid, Mode: mode}, nil
	}
	dec, err := d.accept(m, from, pid, mode, localCopy)
	if err != nil {
		return dec, fmt.Errorf("request for %v %v from node %d: %w", pid, mode, from, err)
	}
	if d.variant != Chaining {
		m.busy = true
		m.busyNode = from
	}
	return dec, nil
}

// accept applies the chaining rules: the metadata is updated at once to the
// state after this request completes, and the requester learns where the
// page will be just before its turn.
func (d *Directory) accept(m *Meta, from NodeID, pid PID, mode Mode, localCopy bool) (Decision, error) {
	dec := Decision{Requester: from, PID: pid, Mode: mode}
	switch m.Mode {
	case ModeNone:
		// Base case: the SSD copy is the latest (Stale implies a holder).
		if mode == ModeShared {
			m.Mode, m.Sharers = ModeShared, NodeSet{}
			m.Sharers.Add(from)
			d.makeSource(m, from)
		} else {
			m.Mode, m.Owner, m.Stale, m.OwnerEpoch = ModeExclusive, from, true, m.Epoch
		}
		dec.Action, dec.Epoch = ActGrantFromSSD, m.Epoch
		return dec, nil

	case ModeExclusive:
		if m.Owner == from {
			return dec, ErrAlreadyHolder
		}
		// Exclusive conflict (Fig. 4): the requester fetches from the owner,
		// or from whoever is chained last before it. The conflict epoch
		// stays (see Meta.Epoch).
		owner, pred := m.Owner, m.OwnerEpoch
		if mode == ModeExclusive {
			m.Owner, m.OwnerEpoch = from, m.Epoch
		} else {
			m.Mode, m.Sharers = ModeShared, NodeSet{}
			if d.ForgetOwnerSharer == nil || !d.ForgetOwnerSharer() {
				m.Sharers.Add(owner)
			}
			m.Sharers.Add(from)
			m.Source, m.Copies = owner, 1
		}
		d.forwardTo(&dec, owner, 0, NodeSet{}, m.Epoch)
		dec.Pred = pred
		d.maybeStaleGrant(&dec)
		return dec, nil

	case ModeShared:
		if mode == ModeShared {
			if m.Sharers.Has(from) {
				return dec, ErrAlreadyHolder
			}
			m.Sharers.Add(from)
			if m.Stale || m.Sourced && !(localCopy && m.Sharers.Has(d.host)) {
				// The SSD copy is stale, or a sharer serves copies: copy
				// from the source sharer, which counts the copies it owes
				// (see ModeExclusive below): a remote cache is faster than
				// the SSD, for the directory node too. (Not when the
				// directory node has a copy of its own to serve.)
				m.Copies++
				d.forwardTo(&dec, m.Source, 0, NodeSet{}, m.Epoch)
				if m.Stale {
					dec.Pred = m.OwnerEpoch
				} else {
					dec.AnyCopy = true
				}
				d.maybeStaleGrant(&dec)
				return dec, nil
			}
			if localCopy && m.Sharers.Has(d.host) && from != d.host {
				// The directory node holds a copy: serve it from cache.
				d.forwardTo(&dec, d.host, 0, NodeSet{}, m.Epoch)
				dec.LocalCopy = true
				return dec, nil
			}
			if !m.Stale && !m.Sourced {
				d.makeSource(m, from)
			}
			dec.Action, dec.Epoch = ActGrantFromSSD, m.Epoch
			return dec, nil
		}
		// Exclusive request against sharers: shared conflict.
		sharers := m.Sharers
		// sourced: a sharer serves copies (Stale or Sourced): it owes the
		// copies forwarded to it before it gives the page up.
		sourced, anyCopy, source, copies, pred := m.Stale || m.Sourced, !m.Stale && m.Sourced, m.Source, m.Copies, m.OwnerEpoch
		if d.ConflictKeepsEpoch == nil || !d.ConflictKeepsEpoch() {
			m.Epoch++ // the one bump of accept (see Meta.Epoch)
		}
		m.Mode, m.Owner, m.Stale, m.Sharers, m.Copies, m.OwnerEpoch = ModeExclusive, from, true, NodeSet{}, 0, m.Epoch
		m.Sourced = false
		if sharers.Has(from) {
			// Upgrade: the requester keeps its copy and invalidates the rest.
			sharers.Remove(from)
			dec.Action, dec.Epoch, dec.Set = ActGrantNoData, m.Epoch, sharers
			if sourced && source != from {
				dec.Target, dec.K = source, copies
			}
			return dec, nil
		}
		switch {
		case sourced:
			// The page comes from the source sharer (the SSD copy is
			// stale, or a sharer's memory is faster), after the copies it
			// owes (the other sharers may still wait for theirs). The
			// transfer names the source's acquisition (Pred), so a source
			// in the middle of an upgrade of its own serves it from the
			// copy it holds.
			sharers.Remove(source)
			d.forwardTo(&dec, source, copies, sharers, m.Epoch)
			if anyCopy {
				dec.AnyCopy = true
			} else {
				dec.Pred = pred
			}
		case localCopy && sharers.Has(d.host):
			// The directory node's own copy serves.
			sharers.Remove(d.host)
			d.forwardTo(&dec, d.host, 0, sharers, m.Epoch)
			dec.LocalCopy = true
		default:
			// The SSD copy is the latest and no sharer is the source: the
			// directory sends it and the requester invalidates every
			// sharer. (Not a random sharer, as the paper allows: that
			// sharer may be in the middle of an upgrade of its own, and
			// only the source's acquisition is known. See
			// docs/protocol.md.)
			dec.Action, dec.Epoch, dec.Set = ActGrantFromSSD, m.Epoch, sharers
		}
		return dec, nil
	}
	return dec, fmt.Errorf("%w: page in mode %v", ErrUnexpected, m.Mode)
}

// makeSource makes from, granted the page shared from the SSD, the sharer
// that serves the next shared requests (Sourced). Transfers to it carry
// FlagAnyCopy, so no Pred names its copy.
func (d *Directory) makeSource(m *Meta, from NodeID) {
	m.Sourced, m.Source, m.Copies = true, from, 0
}

func (d *Directory) forwardTo(dec *Decision, target NodeID, k uint32, set NodeSet, epoch uint32) {
	dec.Target, dec.K, dec.Set, dec.Epoch = target, k, set, epoch
	if target == d.host {
		dec.Action = ActServeLocal
	} else {
		dec.Action = ActForward
	}
}

// maybeStaleGrant is the stale-grant mutation: the directory answers from its
// own (stale) SSD copy instead of sending the requester to the holder.
func (d *Directory) maybeStaleGrant(dec *Decision) {
	if d.StaleGrant != nil && d.StaleGrant() {
		dec.Action, dec.Target, dec.K, dec.Set, dec.Pred = ActGrantFromSSD, 0, 0, NodeSet{}, 0
	}
}

// Done handles TDone of the FIFO and polling baselines: the transition of
// from on pid has completed. It returns the requests that may now proceed (at
// most one for FIFO), in order, to be passed to Resume.
func (d *Directory) Done(from NodeID, pid PID) error {
	m := d.Meta(pid)
	if m == nil {
		return fmt.Errorf("done for %v from node %d: %w", pid, from, ErrNotOurs)
	}
	if d.variant == Chaining || !m.busy || m.busyNode != from {
		return fmt.Errorf("done for %v from node %d: %w", pid, from, ErrUnexpected)
	}
	m.busy = false
	return nil
}

// NextParked pops the next parked request of pid once the page has left its
// transition; ok is false when none may proceed now. The caller passes it to
// Request again.
func (d *Directory) NextParked(pid PID) (from NodeID, mode Mode, ok bool) {
	m := d.Meta(pid)
	if m == nil || m.InTransition() || len(m.parked) == 0 {
		return 0, 0, false
	}
	p := m.parked[0]
	m.parked = m.parked[1:]
	if len(m.parked) == 0 {
		m.parked = nil
	}
	return p.from, p.mode, true
}

// Evict decides one entry of node from's eviction batch (paper §4.2): a
// holder with a successor chained behind it keeps the page (owner
// stability); a dirty page is pulled to be persisted here.
func (d *Directory) Evict(from NodeID, e EvictEntry) (EvictDecision, error) {
	m := d.Meta(e.PID)
	if m == nil {
		return EvictDeclined, fmt.Errorf("eviction of %v from node %d: %w", e.PID, from, ErrNotOurs)
	}
	if m.InTransition() {
		return EvictDeclined, nil
	}
	switch {
	case m.Mode == ModeExclusive && m.Owner == from && m.Epoch == e.Epoch:
		m.Mode = ModeNone
		return d.persistIfStale(m, from), nil
	case m.Mode == ModeShared && m.Sharers.Has(from):
		if (m.Stale || m.Sourced) && m.Source == from {
			if e.Served < m.Copies {
				break // copies are still owed: decline below
			}
			m.Sharers.Remove(from)
			if next, ok := m.Sharers.Nth(0); ok && !m.Stale {
				// Another sharer serves in its place, from the copy it
				// holds or awaits (FlagAnyCopy).
				m.Source, m.Copies = next, 0
			} else {
				m.Sourced = false
			}
			if m.Sharers.Empty() {
				m.Mode = ModeNone
			}
			return d.persistIfStale(m, from), nil
		}
		m.Sharers.Remove(from)
		if m.Sharers.Empty() {
			m.Mode, m.Sourced = ModeNone, false
		}
		return EvictAccepted, nil
	}
	// A successor is chained behind from (from is no longer the holder of
	// record), or from is being invalidated: it keeps the page until the
	// transfer or invalidation arrives.
	if d.NoOwnerStability != nil && d.NoOwnerStability() {
		return EvictAccepted, nil // mutation: the rule is broken on purpose
	}
	return EvictDeclined, nil
}

func (d *Directory) persistIfStale(m *Meta, from NodeID) EvictDecision {
	if !m.Stale {
		return EvictAccepted
	}
	m.writingBack, m.pulling, m.pullFrom = true, true, from
	return EvictPull
}

// PulledPage records that the dirty page of pid arrived from node from (or
// from the directory node's own cache); the caller writes it to the SSD and
// then calls Persisted.
func (d *Directory) PulledPage(from NodeID, pid PID) error {
	m := d.Meta(pid)
	if m == nil {
		return fmt.Errorf("pulled page %v from node %d: %w", pid, from, ErrNotOurs)
	}
	if !m.pulling || m.pullFrom != from {
		return fmt.Errorf("pulled page %v from node %d: %w: no pull outstanding", pid, from, ErrUnexpected)
	}
	m.pulling = false
	return nil
}

// WriteBackInPlace starts writing back a page whose exclusive owner keeps
// it (a checkpoint that writes the changed pages without evicting them):
// the owner holds it shared from now on (its next write upgrades it again,
// which marks the page stale), and requests for it park until Persisted.
func (d *Directory) WriteBackInPlace(pid PID, owner NodeID) error {
	m := d.Meta(pid)
	if m == nil {
		return fmt.Errorf("write-back of %v in place: %w", pid, ErrNotOurs)
	}
	if m.Mode != ModeExclusive || m.Owner != owner || !m.Stale || m.InTransition() {
		return fmt.Errorf("write-back of %v in place by node %d: %w: mode %v owner %d stale %v", pid, owner, ErrUnexpected, m.Mode, m.Owner, m.Stale)
	}
	m.Mode, m.Sharers, m.Copies = ModeShared, NodeSet{}, 0
	m.Sharers.Add(owner)
	m.writingBack, m.pulling = true, false
	return nil
}

// Hold parks the requests for pid until Unhold: its latest value is on
// one replica only, the directory's store, until its copy reaches the
// backup (docs/replication.md: a write-through whose writer left).
func (d *Directory) Hold(pid PID) error {
	m := d.Meta(pid)
	if m == nil || m.InTransition() {
		return fmt.Errorf("hold of %v: %w", pid, ErrUnexpected)
	}
	m.writingBack, m.pulling = true, false
	return nil
}

// Unhold lets the requests Hold parked proceed (NextParked).
func (d *Directory) Unhold(pid PID) error {
	m := d.Meta(pid)
	if m == nil || !m.writingBack || m.pulling {
		return fmt.Errorf("unhold of %v: %w", pid, ErrUnexpected)
	}
	m.writingBack = false
	return nil
}

// Persisted records that the SSD copy of pid is the latest value again.
// Parked requests may now proceed (NextParked).
func (d *Directory) Persisted(pid PID) error {
	m := d.Meta(pid)
	if m == nil || !m.writingBack || m.pulling {
		return fmt.Errorf("persisted %v: %w", pid, ErrUnexpected)
	}
	m.writingBack, m.Stale, m.Copies, m.Source, m.Sourced = false, false, 0, 0, false
	if next, ok := m.Sharers.Nth(0); ok && m.Mode == ModeShared {
		// The source left (its page pulled); a sharer that stays serves
		// copies in its place (FlagAnyCopy).
		m.Sourced, m.Source = true, next
	}
	return nil
}

// Restore recreates the directory of a reopened store: slots 0..allocated-1
// exist, no node holds a copy and the SSD copies are the latest (a clean
// close flushed every page).
func (d *Directory) Restore(allocated uint64) error {
	if len(d.pages) != 0 {
		return fmt.Errorf("restore into a directory that already has %d pages: %w", len(d.pages), ErrUnexpected)
	}
	return d.Grow(allocated)
}

// Grow makes the directory's first allocated slots allocated pages, each
// at home on the SSD with no copy anywhere, as Restore does, keeping the
// pages it has: a returning node whose catch-up brought pages its own
// store did not count (docs/replication.md).
func (d *Directory) Grow(allocated uint64) error {
	if allocated > d.capacity {
		return fmt.Errorf("%d pages in a directory of %d: %w", allocated, d.capacity, ErrUnexpected)
	}
	for uint64(len(d.pages)) < allocated {
		d.pages = append(d.pages, Meta{allocated: true})
	}
	return nil
}

// Rebuild replaces the metadata of pid after a view change (a node crashed
// or came back; docs/protocol.md, "Node crashes"): holders are the nodes
// that still hold a valid copy, in mode (exclusive: one owner). Every
// request, pull and transition in progress is forgotten (the view change
// aborted them). Writes are written through (Persist) before anybody can
// read them, so the SSD copy is as new as any copy held: a shared page is
// not stale; an exclusive one is marked stale, since its owner may be
// writing it. It returns the new conflict epoch, from which the holders'
// copies count.
func (d *Directory) Rebuild(pid PID, mode Mode, holders NodeSet) (uint32, error) {
	m := d.Meta(pid)
	if m == nil {
		return 0, fmt.Errorf("rebuild of %v: %w", pid, ErrNotOurs)
	}
	epoch := m.Epoch + 1
	*m = Meta{allocated: true, Epoch: epoch, OwnerEpoch: epoch}
	switch {
	case mode == ModeExclusive && holders.Len() == 1:
		m.Mode, m.Stale = ModeExclusive, true
		holders.Each(func(n NodeID) { m.Owner = n })
	case mode == ModeShared && !holders.Empty():
		m.Mode, m.Sharers = ModeShared, holders
	case holders.Empty():
	default:
		return 0, fmt.Errorf("rebuild of %v: %w: %v held by %v", pid, ErrUnexpected, mode, holders)
	}
	return epoch, nil
}
