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

// SELCC's options (protocolapi.Option, `sim --opt name=value`): its
// registration declares them and its simulated run reads them.
const (
	// OptionMemoryNodes is the passive memory nodes holding the lines
	// (DefaultMemoryNodes).
	OptionMemoryNodes = "memory-nodes"
	// OptionGamma is the local-handover threshold of the lease (§5.3.1;
	// DefaultGamma, 0 or below: off).
	OptionGamma = "gamma"
	// OptionPriority turns the starved-writer priority (§5.3.2) on or
	// off.
	OptionPriority = "priority"
)

// The options' defaults.
const (
	DefaultMemoryNodes = 2
	DefaultGamma       = 4
)
