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
// to sim.Drive.
//
// It imports the roles (actors), the simulator (transport/sim), the
// generic runner (simrunner), the checker and storage/memfile; protocol
// code never imports it.
package scenarios
