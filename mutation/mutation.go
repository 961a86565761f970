// Package mutation names the mutation points: places in the protocol where
// a rule can be broken on purpose, so the simulator's checks are shown to
// catch each break. They are pingcap/failpoint failpoints, enabled with the
// runtime API; whether an enabled point fires at a given moment is decided by
// the simulator's seeded PRNG, never by failpoint's own random terms, so a
// mutated run is as reproducible as any other.
//
// It imports failpoint, and index/indexdesign for the index designs'
// names, only.
package mutation

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/failpoint"

	"github.com/scalestore-go/scalestore/index/indexdesign"
)

// The mutation points.
const (
	// SkipInvalidation: an exclusive acquisition leaves other sharers' copies valid.
	SkipInvalidation = "skip-invalidation"
	// NoOwnerStability: the directory accepts evictions whatever the epoch.
	NoOwnerStability = "no-owner-stability"
	// DropDirty: a dirty page's eviction does not reach the directory's SSD.
	DropDirty = "drop-dirty"
	// StaleGrant: the directory answers from its own stale copy instead of
	// sending the requester to the holder.
	StaleGrant = "stale-grant"
	// SkipVersionCheck: an optimistic read is not validated.
	SkipVersionCheck = "skip-version-check"
	// UpgradeIgnoresVersion: an upgrade (shared or optimistic to exclusive)
	// that had to give its latch up proceeds although the page changed
	// meanwhile, so a read-then-write loses the update it did not see.
	UpgradeIgnoresVersion = "upgrade-ignores-version"
	// EntitleFewer: a grant entitles only waiters that wanted less than it
	// gave, so a waiter whose wish the grant met can lose its turn to a
	// queued transfer and ask again (safe, but chattier).
	EntitleFewer = "entitle-fewer"
	// ForgetOwnerSharer: on an exclusive-to-shared conflict the directory
	// leaves the old owner out of the sharers, though it keeps a copy.
	ForgetOwnerSharer = "forget-owner-sharer"
	// ConflictKeepsEpoch: a shared conflict gives the new owner the
	// epoch the sharers had (the one epoch bump of the directory's
	// accept; docs/protocol.md, "Epoch bumps").
	ConflictKeepsEpoch = "conflict-keeps-epoch"
	// EncodeDropsPred: the codec does not put Pred on the wire.
	EncodeDropsPred = "encode-drops-pred"

	// Node crashes' mutation points (runs with --crashes; see
	// actors/crash.go and scenarios/crash.go).

	// CrashNoWriteThrough: a write is acknowledged without being written
	// through to its directory's SSD.
	CrashNoWriteThrough = "crash-no-write-through"
	// CrashKeepDeadPages: a view change leaves survivors their copies of
	// the crashed directory's pages.
	CrashKeepDeadPages = "crash-keep-dead-pages"
	// CrashResurrectEvicting: a view change keeps copies whose eviction was
	// under way, though the directory may have accepted it already.
	CrashResurrectEvicting = "crash-resurrect-evicting"
	// CrashKeepMessages: a view change does not drop the messages in
	// flight, so grants and transfers of the old view arrive in the new.
	CrashKeepMessages = "crash-keep-messages"

	// BTreeSplitNodeFirst: a split writes the split node through before
	// its parent, so a crash between the two hides the moved entries
	// (btree.Session.Persist; runs with --crashes and --workload btree).
	BTreeSplitNodeFirst = "crash-btree-split-node-first"

	// Replicated directories' mutation points (runs with --crashes and
	// --replicas 2; docs/replication.md).

	// ReplicaAckBeforeBackup: a write-through is acknowledged once the
	// primary has it, before the backup does.
	ReplicaAckBeforeBackup = "replica-ack-before-backup"
	// ReplicaPromoteUnfenced: a promoted backup serves the failed
	// directory's pages as its store has them, without the survivors'
	// holdings of the old view (their copies stay valid beside its grants).
	ReplicaPromoteUnfenced = "replica-promote-unfenced"
	// ReplicaCopyUnlatched: re-replication reads a page from the primary's
	// store without holding it, so a copy older than the page's last
	// acknowledged write can land on the new backup after it.
	ReplicaCopyUnlatched = "replica-copy-unlatched"
	// ReplicaReturnStale: a node that returns serves its directory from
	// its own store, older than the copies kept while it was down, without
	// catching up first.
	ReplicaReturnStale = "replica-return-stale"

	// SELCC's mutation points (linecache.Mutations).

	// SELCCSkipUndo: a reader whose FAA met a holder leaves its bit set.
	SELCCSkipUndo = "selcc-skip-undo"
	// SELCCHandOverWithoutFAA: a holder forwards its Modified line to a
	// writer without moving the latch word's holder field.
	SELCCHandOverWithoutFAA = "selcc-handover-without-faa"
	// SELCCShareWithoutFlush: a Modified line turned into shared copies is
	// not written back, so later readers read memory's stale copy.
	SELCCShareWithoutFlush = "selcc-share-without-flush"
	// SELCCReleaseKeepsCopy: a reader that releases its bit for a writer
	// keeps reading its copy.
	SELCCReleaseKeepsCopy = "selcc-release-keeps-copy"
	// SELCCEvictWithoutFlush: evicting a dirty Modified line releases the
	// latch without writing the line back.
	SELCCEvictWithoutFlush = "selcc-evict-without-flush"
	// SELCCRoundRestarts: an access restarts its reply slot's invalidation
	// rounds, so a status word of an older round passes for its reply
	// (issue 36: the final read's new thread on slot 0 did this).
	SELCCRoundRestarts = "selcc-round-restarts"
	// WALLogAfterUnlock: the embedded store appends a write's redo record
	// after it released the key's lock, so two writes of one key may be
	// logged in the other order than they were applied (crashtest's
	// shared-key rounds must catch it: crashtest --mutant).
	WALLogAfterUnlock = "wal-log-after-unlock"
	// The NAM-tree's mutation points (index/nam's Mutations and
	// ServerMutations).
	// NAMUnlockedWrite: a compute node writes a leaf back without its lock.
	NAMUnlockedWrite = "nam-unlocked-write"
	// NAMNoMoveRight: a traversal trusts a node for a key beyond its high key.
	NAMNoMoveRight = "nam-no-move-right"
	// NAMReplyBeforeApply: a CG server acknowledges a put before applying it.
	NAMReplyBeforeApply = "nam-reply-before-apply"
	// NAMScanSkipsNext: a CG scan that stops at its limit resumes a key late.
	NAMScanSkipsNext = "nam-scan-skips-next"
	// NAMLocateNextLeaf: a hybrid server locates the leaf after the right one.
	NAMLocateNextLeaf = "nam-locate-next-leaf"
	// NAMTrustHead: a scan takes the next leaf its head node listed
	// instead of the one the sibling pointer names (an outdated head node
	// then skips the leaves split off since the head pass).
	NAMTrustHead = "nam-trust-head"
	// Cell's mutation points (index/cell's Mutations and ServerMutations).
	// CellNoMoveRight: a client-side search trusts a node reached through
	// a cached parent for a key beyond its high key.
	CellNoMoveRight = "cell-no-move-right"
	// CellCacheLeaves: a client caches leaves and answers gets from them.
	CellCacheLeaves = "cell-cache-leaves"
	// CellStaleHint: a server writes into the leaf the client named though
	// a split moved the key to the right.
	CellStaleHint = "cell-stale-hint"
	// CellSplitWritesRight: a meganode split lets writes into the half
	// it is copying go on, into the old copy.
	CellSplitWritesRight = "cell-split-writes-right"
	// CellSplitEarlyUnlock: a meganode split lets writes into the new
	// meganode go on before the old copies are invalidated.
	CellSplitEarlyUnlock = "cell-split-early-unlock"
	// CellSplitNoInvalidate: a meganode split frees the old copies for
	// reuse without marking them invalid.
	CellSplitNoInvalidate = "cell-split-no-invalidate"
	// CellNoLowCheck: a client-side search trusts a node whose keys start
	// above the key (a reused slot reached by a stale pointer).
	CellNoLowCheck = "cell-no-low-check"
)

// NAMNames lists the index workloads' mutation points (the NAM-tree's and
// Cell's), with the workloads whose checks must catch each.
var NAMNames = map[string][]string{
	NAMUnlockedWrite:      {indexdesign.NAMFine, indexdesign.NAMHybrid},
	NAMNoMoveRight:        {indexdesign.NAMFine, indexdesign.NAMHybrid},
	NAMReplyBeforeApply:   {indexdesign.NAMCoarse},
	NAMScanSkipsNext:      {indexdesign.NAMCoarse},
	NAMLocateNextLeaf:     {indexdesign.NAMHybrid},
	NAMTrustHead:          {indexdesign.NAMFine, indexdesign.NAMHybrid},
	CellNoMoveRight:       {indexdesign.Cell},
	CellCacheLeaves:       {indexdesign.Cell},
	CellStaleHint:         {indexdesign.Cell},
	CellSplitWritesRight:  {indexdesign.Cell},
	CellSplitEarlyUnlock:  {indexdesign.Cell},
	CellSplitNoInvalidate: {indexdesign.Cell},
	CellNoLowCheck:        {indexdesign.Cell},
}

// NAM reports whether the named mutation breaks an index workload (the
// NAM-tree or Cell).
func NAM(name string) bool { _, ok := NAMNames[name]; return ok }

// Names lists every mutation point.
var Names = append([]string{SkipInvalidation, NoOwnerStability, DropDirty, StaleGrant, SkipVersionCheck,
	UpgradeIgnoresVersion, EntitleFewer, ForgetOwnerSharer, ConflictKeepsEpoch, EncodeDropsPred,
	CrashNoWriteThrough, CrashKeepDeadPages, CrashResurrectEvicting, CrashKeepMessages, BTreeSplitNodeFirst,
	ReplicaAckBeforeBackup, ReplicaPromoteUnfenced, ReplicaCopyUnlatched, ReplicaReturnStale}, selccNames...)

// StoreNames lists the embedded store's mutation points, which crashtest
// (not the simulator) must catch: crashtest --mutant.
var StoreNames = []string{WALLogAfterUnlock}

// Crash reports whether the named mutation breaks the handling of node
// crashes (its runs need crashes: --crashes).
func Crash(name string) bool { return strings.HasPrefix(name, "crash-") }

// Replica reports whether the named mutation breaks replicated
// directories (its runs need --crashes and --replicas 2).
func Replica(name string) bool { return strings.HasPrefix(name, "replica-") }

// selccNames are the mutation points of SELCC.
var selccNames = []string{SELCCSkipUndo, SELCCHandOverWithoutFAA, SELCCShareWithoutFlush, SELCCReleaseKeepsCopy,
	SELCCEvictWithoutFlush, SELCCRoundRestarts}

// SELCC reports whether the named mutation breaks SELCC (its runs use
// --protocol selcc) rather than ScaleStore.
func SELCC(name string) bool { return slices.Contains(selccNames, name) }

func path(name string) string { return "github.com/scalestore-go/scalestore/mutation/" + name }

// Enable turns the named mutation on for the process.
func Enable(name string) error {
	if !slices.Contains(Names, name) && !NAM(name) && !slices.Contains(StoreNames, name) {
		return fmt.Errorf("unknown mutation %q (want one of %v, %v)", name, Names, StoreNames)
	}
	return failpoint.Enable(path(name), "return(true)")
}

// Disable turns the named mutation off.
func Disable(name string) { _ = failpoint.Disable(path(name)) }

// Point returns the decision function of the named mutation point: nil when
// the mutation is not enabled (the protocol then pays nothing), otherwise a
// function that fires when the failpoint is active and draw says so.
func Point(name string, draw func() bool) func() bool {
	if _, err := failpoint.Status(path(name)); err != nil {
		return nil
	}
	p := path(name)
	return func() bool {
		if _, err := failpoint.Eval(p); err != nil {
			return false
		}
		return draw()
	}
}
