// Package scenarios assembles simulated clusters and runs workloads on them:
// the page-register swarm that fuzzes the protocol under faults and checks
// it (RunSim), and the named scenarios from the paper's figures that print
// their message sequence for teaching and as golden test files (Scenario).
//
// Its runs build their own worlds (ScaleStore's nodes, SELCC's line
// caches and memory nodes, the index designs' servers) and hand the rest
// to the generic runner's pieces: their workers to simrunner.Workers
// through each system's blocking access entry (protocolapi.Blocking),
// ScaleStore's crashes and elastic membership to simrunner.Crashes and
// Elastic through its hooks (protocolapi.Crashable, Leaver), and every run
// to sim.Drive. Each run loop is the simulated world of a registered
// protocol (ScaleStoreWorld, SELCCWorld, IndexWorld: simrunner.World),
// which its registration in package protocols gives, so `scalestore sim`
// runs it through simrunner.RunWorld: RunWorld maps the runner's Config
// and the protocol's options (SimConfig.Options, applyOptions) onto
// SimConfig and reports the runner's Result, with what only the loop
// measures as counters. SimConfig.loop is the one place that tells the
// loops apart.
//
// It imports the roles (actors), the simulator (transport/sim), the
// generic runner (simrunner), the checker and storage/memfile; protocol
// code never imports it.
package scenarios
