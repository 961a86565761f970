//go:build !invariants

package scenarios

// crossCheckEvery: the full cross-check runs every 4096 steps (build with
// -tags invariants to run it after every step).
const crossCheckEvery = 4096
