//go:build invariants

package scenarios

// crossCheckEvery is 1 with -tags invariants: after every step.
const crossCheckEvery = 1
