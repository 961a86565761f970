// Package selcc is SELCC's shared-exclusive latch cache coherence
// (../shared/papers/selcc-cache-coherence-disaggregated-memory.txt) as pure
// state: so far the global latch word of a cache line (paper §4.3.1), the
// words its one-sided verbs compare against and the deltas they add. The
// compute nodes' state machine, its simulation and its checks build on it
// (issue 23; docs/protocol.md says what is decided).
//
// It imports nothing but the standard library: the simulator, the
// transports and the runtime drive it, never the other way round.
package selcc

// Name is SELCC's registered protocol name (package protocols): code
// outside SELCC's packages refers to it by this constant or through the
// registry, never by spelling it.
const Name = "selcc"
