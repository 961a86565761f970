// Package linecache is SELCC's compute-side cache
// (../shared/papers/selcc-cache-coherence-disaggregated-memory.txt §4-5):
// global cache lines fetched from passive memory nodes by one-sided verbs,
// kept coherent by the latch words of protocol/selcc, with invalidation
// messages between compute nodes answered by RDMA WRITE into the sender's
// reply slot.
//
// The decisions (what an access needs, what a verb's result means, how an
// invalidation is answered) are protocol/selcc's pure functions; this
// package runs them: it owns the frames, the local latches, the threads'
// waits and the verbs. It runs unchanged in the simulator (threads are
// coroutines, verbs the world's) and on real transports (see Poster).
//
// It imports protocol, protocol/selcc and transport only; never the
// simulator, bufmgr or the ScaleStore actors.
package linecache
