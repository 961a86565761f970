package scenarios

import (
	"github.com/scalestore-go/scalestore/internal/traceview"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
)

// The worlds of the protocols whose nodes own their simulated world
// (simrunner.World): ScaleStore's actors, SELCC's line caches, and the
// index designs' clients and servers, each a run loop of this package
// (RunSim) that builds its own world and hands its workers, crashes and
// elastic membership to simrunner's pieces. Their registrations (package
// protocols) give them, so that `scalestore sim` runs every protocol
// through the registry and simrunner.
//
// A world's result is simrunner.Result, one type for every protocol's
// run; SimResult stays this package's own, because the figures and the
// comparisons read what only these run loops measure (latencies per
// node, SELCC's lease counters, the index's scans) without going through
// names, and RunWorld hands those to the runner's result as counters.

// ScaleStoreWorld is ScaleStore's world (the directories, with its
// conflict handling the option OptionConflict).
func ScaleStoreWorld() simrunner.World { return world{} }

// SELCCWorld is SELCC's world: compute nodes with line caches and
// passive memory nodes.
func SELCCWorld() simrunner.World { return world{system: SystemSELCC} }

// IndexWorld is the world of the index design registered as name (a
// NAM-tree design or Cell): compute nodes and memory servers. Its runs
// are of the workload of that name.
func IndexWorld(name string) simrunner.World { return world{index: name} }

type world struct {
	system string // SimConfig.System
	index  string // the index design's name, or ""
}

// RunWorld maps the runner's configuration onto SimConfig (the keys are
// the register workload's pages or the tree's keys; the protocol's
// options set the rest: applyOptions), runs one seed and reports it as
// the runner's result.
func (w world) RunWorld(cfg simrunner.Config) (simrunner.Result, error) {
	c := DefaultSimConfig()
	c.Seed, c.Nodes, c.Workers, c.CachePages, c.Ops = cfg.Seed, cfg.Nodes, cfg.Workers, cfg.CacheLines, cfg.Ops
	c.ReadRatio, c.Zipf, c.Faults, c.Mutate, c.Workload = cfg.ReadRatio, cfg.Zipf, cfg.Faults, cfg.Mutant, cfg.Workload
	c.Locality, c.OpNanos, c.WriteNanos = cfg.Locality, cfg.OpNanos, cfg.WriteNanos
	c.Crashes, c.Elastic, c.Options, c.System = cfg.Crashes, cfg.Elastic, cfg.Options, w.system
	c.Trace, c.WatchPage, c.CheckTimeout, c.PorcupineOnly, c.Progress = cfg.Trace, cfg.Watch, cfg.CheckTimeout, cfg.PorcupineOnly, cfg.Progress
	if w.index != "" {
		c.Workload = w.index
	}
	if c.Workload == protocolapi.WorkloadRegister || c.Workload == protocolapi.WorkloadRMW {
		c.Pages = cfg.Keys
	} else {
		// The B-tree's or the index's keys; its pages are its own, so any
		// page index may be watched.
		c.Keys, c.Pages = cfg.Keys, max(c.Pages, cfg.Watch+1)
	}
	var steps []Step
	if cfg.Steps != nil {
		c.Steps = &steps
	}
	res, err := RunSim(c)
	if err != nil {
		return simrunner.Result{Seed: cfg.Seed}, err
	}
	if cfg.Steps != nil {
		*cfg.Steps = append(*cfg.Steps, ViewSteps(steps)...)
	}
	return res.runnerResult(c), nil
}

// ViewSteps are a run's chart steps as the trace viewer's.
func ViewSteps(steps []Step) []traceview.Step {
	out := make([]traceview.Step, len(steps))
	for i, s := range steps {
		out[i] = traceview.Step{At: s.At, From: s.From, To: s.To, Label: s.Message, Page: s.PageSent, State: s.Dir}
	}
	return out
}

// The counters a world puts into the runner's result (Result.Counters).
const (
	CounterCacheHits          = "cache-hits"
	CounterCacheMisses        = "cache-misses"
	CounterRemoteFetches      = "remote-page-fetches"
	CounterEvictions          = "evictions"
	CounterEvictionsDeclined  = "evictions-declined"
	CounterDirtyPulls         = "dirty-pulls"
	CounterIORetries          = "io-retries"
	CounterOptimisticRestarts = "optimistic-restarts"
	CounterDirectoryMessages  = "directory-messages"
	CounterUnreadableReads    = "unreadable-reads"
	CounterFailedOps          = "failed-ops"
	CounterRereplications     = "rereplications"
	CounterCrashesWhileDown   = "crashes-while-down"
	CounterLostOps            = "lost-ops"
	CounterVerbBytes          = "verb-bytes"
	CounterMemoryHandlerCalls = "memory-handler-calls"
	CounterInvalidations      = "invalidations"
	CounterHandOvers          = "handovers"
	CounterSharedReleases     = "shared-releases"
	CounterDropped            = "dropped"
	CounterUpgradeFallbacks   = "upgrade-fallbacks"
	CounterLeaseReleases      = "lease-releases"
	CounterIndexScans         = "index-scans"
	CounterScanRoundTrips     = "scan-round-trips"
	CounterMegaSplits         = "cell-meganode-splits"
	CounterMegaMoved          = "cell-meganodes-moved"
	CounterCellRestarts       = "cell-restarts"
)

// runnerResult is res as the runner's result: its own measures as
// counters (those of the run loop that ran it, in a fixed order).
func (res *SimResult) runnerResult(c SimConfig) simrunner.Result {
	out := simrunner.Result{Seed: res.Seed, Plan: res.Plan, Ops: res.Ops, Unavailable: res.FailedOps + res.LostOps,
		Messages: res.Messages, PayloadBytes: res.PageBytes, Verbs: res.Verbs, Steps: res.Steps, TraceHash: res.TraceHash,
		SimNanos: res.SimNanos, SimWall: res.SimWall, CheckWall: res.CheckWall, Violations: res.Violations,
		ViolationCount: res.ViolationCount, Linearizable: res.Linearizable, LinearUnknown: res.LinearUnknown,
		BadKeys: res.BadPages, History: res.History, Crashes: res.Crashes, UnknownOps: res.UnknownOps, Left: res.Left,
		Info: res.Info}
	out.WorkloadOps = res.Ops // the workload's accesses come first, the final reads after them
	if l, err := c.loop(); err == nil {
		out.Counters = l.counters(res)
	}
	return out
}

type counter = protocolapi.Counter

// indexCounters are what an index design's run counts.
func indexCounters(res *SimResult) []counter {
	return []counter{{Name: CounterVerbBytes, Value: res.VerbBytes}, {Name: CounterMemoryHandlerCalls, Value: res.MemoryHandlerCalls},
		{Name: CounterIndexScans, Value: uint64(res.NAMScans)}, {Name: CounterScanRoundTrips, Value: res.NAMScanWaits},
		{Name: CounterMegaSplits, Value: res.CellMegaSplits}, {Name: CounterMegaMoved, Value: res.CellMoved},
		{Name: CounterCellRestarts, Value: res.CellRestarts}}
}

// selccCounters are what SELCC's run counts (its caches' sums).
func selccCounters(res *SimResult) []counter {
	s := res.SELCC
	return []counter{{Name: CounterCacheHits, Value: res.Hits}, {Name: CounterCacheMisses, Value: res.Misses},
		{Name: CounterRemoteFetches, Value: res.RemoteFetches}, {Name: CounterEvictions, Value: res.Evictions},
		{Name: CounterVerbBytes, Value: res.VerbBytes}, {Name: CounterMemoryHandlerCalls, Value: res.MemoryHandlerCalls},
		{Name: CounterInvalidations, Value: s.Invalidations}, {Name: CounterHandOvers, Value: s.HandOvers},
		{Name: CounterSharedReleases, Value: s.Releases}, {Name: CounterDropped, Value: s.Dropped},
		{Name: CounterUpgradeFallbacks, Value: s.UpgradeFallbacks}, {Name: CounterLeaseReleases, Value: s.LeaseReleases}}
}

// scaleStoreCounters are what ScaleStore's run counts (its nodes' sums).
func scaleStoreCounters(res *SimResult) []counter {
	return []counter{{Name: CounterCacheHits, Value: res.Hits}, {Name: CounterCacheMisses, Value: res.Misses},
		{Name: CounterRemoteFetches, Value: res.RemoteFetches}, {Name: CounterEvictions, Value: res.Evictions},
		{Name: CounterEvictionsDeclined, Value: res.EvictDeclined}, {Name: CounterDirtyPulls, Value: res.Pulls},
		{Name: CounterIORetries, Value: res.IORetries}, {Name: CounterOptimisticRestarts, Value: res.OptimisticRetry},
		{Name: CounterDirectoryMessages, Value: res.DirectoryMessages}, {Name: CounterUnreadableReads, Value: uint64(res.UnreadableReads)},
		{Name: CounterFailedOps, Value: uint64(res.FailedOps)}, {Name: CounterRereplications, Value: uint64(res.Rereplications)},
		{Name: CounterCrashesWhileDown, Value: uint64(res.CrashesWhileDown)}, {Name: CounterLostOps, Value: uint64(res.LostOps)}}
}
