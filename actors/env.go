package actors

import (
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
)

// Env is the world a node acts through.
type Env interface {
	// Now is the current time in nanoseconds (simulated or real).
	Now() int64
	// Rand draws a random number (the simulator's seeded PRNG).
	Rand() uint64
	// Send sends m (m.From is this node) with payload, which the transport
	// copies before Send returns.
	Send(m protocol.Message, payload []byte)
	// ReadPage reads SSD slot into buf and calls done when finished.
	ReadPage(slot uint64, buf []byte, done func(error))
	// WritePage writes buf to SSD slot and calls done when finished.
	WritePage(slot uint64, buf []byte, done func(error))
	// After calls fn after delay nanoseconds.
	After(delay int64, fn func())
}

// Observer is told what the node does, for invariant checks and traces. All
// methods may be no-ops.
type Observer interface {
	// Violation reports a broken protocol rule or invariant.
	Violation(node protocol.NodeID, err error)
	// CopyChanged reports that node's valid copy of pid changed mode; data is
	// the page (valid when now is not ModeNone).
	CopyChanged(node protocol.NodeID, pid protocol.PID, old, now protocol.Mode, data []byte)
	// Accepted reports a directory decision.
	Accepted(dir protocol.NodeID, d protocol.Decision)
	// Obtained reports that node's request for pid in mode completed.
	Obtained(node protocol.NodeID, pid protocol.PID, mode protocol.Mode, waited int64)
	// Unreadable reports that node, pid's directory, could not read pid
	// from its SSD (err wraps ErrStorage and the store's error): the page
	// goes out as unreadable (protocol.FlagUnreadable) and the operations
	// that wanted it fail; the node goes on.
	Unreadable(node protocol.NodeID, pid protocol.PID, err error)
}

// Mutations break one protocol rule each, on purpose, so the simulator can
// show its checks catch them. Nil means never.
type Mutations struct {
	SkipInvalidation  func() bool // an exclusive acquisition leaves a sharer's copy valid
	DropDirty         func() bool // a pulled dirty page is not written to the SSD
	NoWriteThrough    func() bool // Persist acknowledges without writing through
	KeepDeadPages     func() bool // Fence keeps a copy of a crashed directory's page
	ResurrectEvicting func() bool // Fence keeps a copy whose eviction was under way
	// AckBeforeBackup: a write-through is acknowledged once the primary
	// has it, before its backup does (docs/replication.md)
	AckBeforeBackup func() bool
}

// Config sizes a node.
type Config struct {
	ID          protocol.NodeID
	Variant     protocol.Variant
	CacheFrames int
	SSDPages    uint64
	// FreeTarget is the number of frames the page provider keeps free.
	FreeTarget int
	// SampleSize and Percentile drive candidate selection (paper §4.2).
	SampleSize, Percentile int
	// EvictRounds bounds the samples the page provider draws per tick
	// (each yields about SampleSize*Percentile/100 victims), so a tick
	// every ProviderInterval evicts at most about that many pages.
	EvictRounds int
	// EpochInterval is how often the global LRU epoch moves on, and
	// ProviderInterval how often the page provider looks at the free frames.
	EpochInterval, ProviderInterval int64
	// RetryDelay is the back-off after TBusy (polling) and after a transient
	// storage error.
	RetryDelay int64
	// MaxIORetries bounds retries of a failing storage operation before the
	// error is reported.
	MaxIORetries int
	// NoProgressCheck turns off the periodic scan for requests outstanding
	// too long (a simulator check; on a large real cache the scan costs
	// more than it tells).
	NoProgressCheck bool
	// UnallocatedUnreadable makes this node's own request for a page of
	// its own directory that the directory never allocated an unreadable
	// page (the guard fails with bufmgr.ErrUnreadable, the node goes on)
	// instead of a protocol violation. A store that was not closed cleanly
	// can hold pages written after its catalog, which point past the
	// pages the catalog allocated: the embedded store (NewLocal) reads
	// them as damaged pages. The simulator and the cluster keep it off, so
	// that a request for a page nobody allocated stays a protocol bug.
	UnallocatedUnreadable bool
	// ViewChanges: the node may go through view changes (Fence), after
	// which a storage read issued before must not land in a frame that
	// may hold another page by then: the directory's own misses read
	// into a buffer and copy it into the frame on completion.
	ViewChanges bool
	Mutations   Mutations
	// AdviseMemory, when set, sees the cache's large metadata arrays before
	// their first use (the real world asks for huge pages; the simulator
	// leaves it nil).
	AdviseMemory func(mem []byte)
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.FreeTarget == 0 {
		c.FreeTarget = max(1, c.CacheFrames/10)
	}
	if c.SampleSize == 0 {
		c.SampleSize = 16
	}
	if c.Percentile == 0 {
		c.Percentile = 25
	}
	if c.EvictRounds == 0 {
		c.EvictRounds = 4
	}
	if c.EpochInterval == 0 {
		c.EpochInterval = 100_000
	}
	if c.ProviderInterval == 0 {
		c.ProviderInterval = 20_000
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = 10_000
	}
	if c.MaxIORetries == 0 {
		c.MaxIORetries = 1000
	}
}

type nopObserver struct{}

func (nopObserver) Violation(protocol.NodeID, error)                                                {}
func (nopObserver) CopyChanged(protocol.NodeID, protocol.PID, protocol.Mode, protocol.Mode, []byte) {}
func (nopObserver) Accepted(protocol.NodeID, protocol.Decision)                                     {}
func (nopObserver) Obtained(protocol.NodeID, protocol.PID, protocol.Mode, int64)                    {}
func (nopObserver) Unreadable(protocol.NodeID, protocol.PID, error)                                 {}

var _ bufmgr.Remote = (*Node)(nil)
