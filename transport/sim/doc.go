// Package sim is the deterministic world the protocol runs in for testing:
// a single-threaded scheduler over virtual time, a network with a latency
// model (paper Table 1), per-link FIFO delivery with reordering across
// links, one-sided verbs (READ, WRITE, CAS, FAA) on registered memory,
// simulated SSD latency, a fault plan (delays, slow links, stalled
// nodes, storage latency spikes and transient errors, guard-operation
// yields), coroutines for workers, and a running hash of every event.
//
// A run is a pure function of the seed and the configuration: nothing here
// reads the wall clock, the global math/rand or iterates a map, and every
// goroutine (the coroutines of iter.Pull) runs only when the scheduler
// resumes it, one at a time.
//
// It imports protocol, transport (the verbs' Region and errors) and
// storage/memfile only.
package sim
