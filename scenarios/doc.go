// Package scenarios assembles simulated clusters and runs workloads on them:
// the page-register swarm that fuzzes the protocol under faults and checks
// it (RunSim), and the named scenarios from the paper's figures that print
// their message sequence for teaching and as golden test files (Scenario).
//
// It imports the roles (actors), the simulator (transport/sim), the checker
// and storage/memfile; protocol code never imports it.
package scenarios
