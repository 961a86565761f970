// Package simrunner runs any protocol registered through protocolapi in
// the deterministic simulator (transport/sim): one run loop for every
// plug-in protocol. It owns the fault plan (sim.Plan), the workers and
// their workloads (register, rmw, and btree for a protocol whose blocking
// workers are a protocolapi.Tree), the invariant checks after every step
// and at rest, the watchdog and its deadlock report, a final read of
// every key, the history check (checker: porcupine per key, or the
// protocol's own CheckHistory), mutants by name, runs of many seeds, the
// message trace and the trace viewer's steps, and scripted scenarios. It
// refuses, with the reason, what a protocol's Supports does not list.
// For a cluster with the hooks (protocolapi.Crashable, Leaver) it crashes
// and restarts nodes (Crashes) and runs elastic membership (Elastic).
//
// A registered protocol whose nodes own their simulated world (ScaleStore,
// SELCC, the index designs: no Deploy) gives a World in its registration;
// RunWorld runs it after the same checks of what its Supports lists, its
// mutant and its options, and its result is this package's Result (what
// only it measures as Counters), so `scalestore sim` runs every protocol
// through this package (Runner picks the way).
//
// Workers is the one worker loop of every simulated run: the generic
// runner's, and ScaleStore's, SELCC's and the index designs' runs in
// package scenarios, which build their own worlds and hand their workers
// to it. It runs the register and rmw workloads (Spawn) and the tree
// workloads (SpawnTree: the B-tree's mix, or the index designs' with
// scans in the history), with hooks for a crash due before an access,
// elastic windows and partitioned keys. A worker's access goes
// through a protocolapi.Accessor: a cluster's blocking entry
// (protocolapi.Blocking, on the worker's coroutine) or, for an
// event-driven role, the runner's adapter that steps the role with
// EventAccess and parks the worker until Complete.
//
// It imports protocolapi, protocol (node ids), transport (regions),
// transport/sim, storage/memfile, checker, internal/traceview and
// internal/zipf; never a protocol's package (the caller hands it a
// protocolapi.Protocol) and never a real transport.
package simrunner
