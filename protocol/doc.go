// Package protocol is ScaleStore's page coherence protocol as pure logic: page
// identifiers, the 64-byte message frame and its validating codec, the
// directory's per-page metadata and the rules it applies to ownership and
// eviction requests (paper §3 and §4.2).
//
// It has no goroutines, clocks, I/O or randomness of its own: whatever it
// needs from the world (a random choice, the identity of the local node)
// comes in as an argument, and everything it decides goes out as a return
// value. The same code therefore runs inside the deterministic simulator and
// on real transports.
//
// It must never import another package of this module, a transport, a
// storage engine, or anything that reads the wall clock.
package protocol
