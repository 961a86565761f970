// Package gam is GAM (Cai et al., "Efficient Distributed Memory
// Management with RDMA and Caching", VLDB 2018) as SELCC's evaluation
// (§7) runs it, on protocolapi: an RPC directory protocol on home nodes
// with a cache on every node, whose requests one worker thread a node
// serves in order. It registers twice (Protocols): gam-seq and gam-tso.
//
// # The protocol
//
// Keys are striped over the homes: key k's home is node k mod nodes, every
// node a home and a cache (GAM's distributed shared memory), or, with
// Options.MemoryNodes M, memory node Nodes + k mod M above the compute
// nodes, which then only cache (GAM on disaggregated memory, as SELCC
// runs it, each memory node with its one serial worker). The home keeps the key's memory and its directory entry (unshared, shared
// by a set of sharers, or dirty at one owner) and serves one transaction
// a key at a time, queueing the rest (a blocking directory). Every other
// node caches the key: a ReadShared gets a shared copy; a ReadExclusive
// gets the writable one, for which the home first invalidates the
// sharers (Invalidate, InvalidateAck) or fetches the line from its owner
// (FetchInvalidate, WriteBack); a reader of a dirty line makes the owner
// write it back and keep a shared copy (FetchShared). A full cache drops
// a random shared line silently or sends a dirty one home (Evict,
// EvictAck). The home's own threads read and write its memory directly,
// without a cache, after the same invalidations or fetch. Where GAM's
// owner answers a forwarded request straight to the requester (three
// hops), the home here collects the write-back and grants (four hops):
// a dirty miss costs one message latency more.
//
// # The serial queue and its cost
//
// Every input of a node, a thread's access or a message from another
// node, goes through one FIFO queue that the node's worker serves one
// item at a time, each taking Cost.Service ns of simulated time (a timer,
// Env.After): GAM's single worker thread per node. A cache hit costs one
// item; a miss costs two at the requester (the access, the Grant) and one
// at the home, plus two per sharer invalidated (Invalidate at the sharer,
// its ack at the home) or two for a fetch. So a node serves at most
// 1e9/Service items a second however many threads issue them, and its
// throughput with T threads is about min(T / latency of an access,
// 1e9 / (Service * items per access)). With DefaultCost (500 ns an item),
// 4 nodes and 64 keys, TestThreadScaling measures (Mops/s at 1, 4, 16 and
// 32 threads a node) 1.33, 4.06, 4.96, 4.83 for SEQ at 95% reads and
// 0.51, 1.65, 2.31, 2.46 at 50% reads, against 1.90, 7.23, 18.93, 26.99
// for SEQ at 95% reads without a service time: the queue flattens the
// curve after a few threads, as SELCC's Fig. 13 and 14 show for GAM.
// TSO is faster than SEQ while the queue has room (0.90 against 0.51 at
// one thread and 50% reads: its writes do not wait) and meets the same
// ceiling once the queue is full, since it serves as many items. With 4
// memory nodes homing the keys of 4 compute nodes the ceilings are the
// memory nodes' workers': 5.04 (SEQ) and 5.45 (TSO) at 95% reads, 2.81
// and 2.88 at 50%, at 32 threads. A figure simulation registers its own
// cost and layout with New(Options{Cost: ..., MemoryNodes: ...}) (on the
// command line: sim --opt service-ns=N --opt memory-nodes=M, and
// write-buffer=W for gam-tso), and
// the counters (Counters: served is the items the workers served) give
// each run's work. On real processes the work costs what it costs: a
// process runner registers Cost{} (a service timer there would only add
// delay).
//
// # The modes
//
// SEQ: every access waits for its answer; porcupine checks the history's
// linearizability per key (a stricter model than GAM's SEQ needs).
//
// TSO: a write returns to its thread as soon as its node's queue took it
// (GAM's asynchronous write; a thread with Options.WriteBuffer writes
// not yet visible waits for one to drain) and goes into its thread's
// store buffer. Each thread's buffer drains its writes one at a time, in
// order, through the cache or the home like any write, beside the other
// threads' buffers. A read of a key the thread has buffered writes to
// returns the newest of them; any other read goes through the cache and
// sees only drained writes. There is no read-modify-write in TSO mode.
// CheckTSO checks its histories: every read returns 0 or a value written
// to its key, and not by a write issued after the read returned; a
// thread never reads a value it saw before the last one it saw (it sees
// its own writes, and only later ones after them); and the orders in
// which the threads saw each key's writes agree (no cycle: coherence).
// What CheckTSO cannot see:
//   - order across keys: TSO keeps a thread's writes (and reads) in
//     program order across keys (a thread that sees a flag set must see
//     the data written before it); a drain that reorders writes of
//     different keys, or a read of a stale other key, passes;
//   - multi-copy atomicity: two readers that see two writes to different
//     keys in opposite orders (IRIW) pass;
//   - that a write becomes visible at all: a write no thread read after
//     it and whose value is lost passes (the invariant on the home's
//     memory, below, catches the lost write-backs);
//   - real time between threads, which TSO does not promise;
//   - whether the history's order of each key's writes is the order the
//     caches applied them: any order the observations allow passes.
//
// # Checks
//
// Cluster.Check, after every simulated step: per key, one dirty copy and
// no shared one, or no dirty copy; every copy, shared or dirty, holds the
// last write made visible (a ghost the cluster records; the roles never
// read it); and once no cache owns the key and no write-back is due, the
// home's memory holds it. At rest: no queue, store buffer, line or
// directory entry has anything in flight, and the directory agrees with
// the caches. The mutants (constants Mutant*): grant-without-invalidation
// and lose-writeback in both modes, early-ack in SEQ, drain-out-of-order
// and read-skips-buffer in TSO; TestMutantsCaught shows which check
// catches each.
//
// # Link order
//
// The protocol needs per-link FIFO (a Grant must reach the requester
// before the fetch its home sends next), which the transports give. The
// simulator breaks it when a run's faults stop (sim.World.StopFaults
// forgets the nodes' stalls while the frames a stall held back keep
// their later times, so a frame sent afterwards overtakes them), so every
// message carries its link's sequence number and a node takes them in
// that order (node.arrive).
//
// It imports protocolapi, protocol (node ids and sets) and checker (the
// history's Op) only: never the simulator, a transport or another
// protocol, which it reaches through its protocolapi.Env.
package gam
