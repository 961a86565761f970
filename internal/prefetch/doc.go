// Package prefetch asks the CPU to bring memory into its caches without
// waiting for it: a load that is not needed yet, so that several misses
// overlap instead of following one another. It is a hint only; it changes
// no value and never faults, so a stale or wild address is harmless.
//
// amd64 and arm64 issue the instruction (PREFETCHT0, PRFM PLDL1KEEP); other
// architectures get a no-op.
//
// It imports nothing but unsafe; it must never import the engine's packages.
package prefetch
