// Package sel is SEL, the one-sided shared-exclusive latch protocol of
// Ziegler et al. ("Design Guidelines for Correct, Efficient, and Scalable
// Synchronization using One-Sided RDMA", SIGMOD 2023) that SELCC's evaluation uses as its baseline
// (../shared/papers/selcc-cache-coherence-disaggregated-memory.txt §7,
// Fig. 3a and 12-16), plugged into the framework through protocolapi
// alone.
//
// Compute nodes (0..Config.Nodes-1) run the workers; memory nodes above
// them hold every line and a latch word per line in registered memory and
// do nothing else: no CPU, no messages, no cache anywhere. Every access
// pays its verbs:
//
//   - a read posts FAA(+1) on the line's latch word and a READ of the line
//     in one round trip; if the FAA's old word names an exclusive holder,
//     it undoes its +1 with FAA(-1), backs off and retries; otherwise the
//     READ's copy is the value, and it releases with FAA(-1);
//   - a write or read-modify-write posts CAS(0 -> its tag) and a READ in
//     one round trip; a CAS that finds any holder or reader backs off and
//     retries; one that succeeds writes the line (one version higher) and
//     releases with FAA(-tag) posted behind the WRITEs on the same queue
//     pair, so the release lands after the data; the access completes when
//     the WRITEs complete.
//
// It relies on the verbs a role posts to one memory node acting there in
// the order posted, as on an RDMA RC queue pair (with a fence for a READ
// behind an atomic): the READ behind the acquire, the release behind the
// WRITEs. The simulator keeps that order (per-link FIFO); protocolapi.Env
// does not promise it, and transport.OneSided promises it only for a
// Write after a Write or Send, so a process runner must keep it.
//
// What an access costs, as SELCC's Fig. 12-16 compare it: no cache, so
// every access pays its round trips, locality or not. Without a conflict
// a read is one atomic round trip (2*Verb + Atomic of
// sim.DefaultLatency: 2.5 us) and a write two (4.85 us: the WRITEs carry
// the line, as SELCC's one WRITE of a line does); the release is not waited for. Under skew a CAS meets
// readers or a writer and the access backs off exponentially (Options),
// so write-heavy skew costs retries and back-off time, and readers starve
// writers of a hot line. The simulator does not serialize atomics at the
// memory node's NIC, so the NIC's own contention, which SELCC blames for
// SEL's decline with threads in Fig. 14, is not modelled.
//
// The latch word (Word) keeps the number of readers in its low 32 bits and
// the exclusive holder's tag (node and worker) in its high 32. A line
// carries a version at its head and again at its tail, and a WRITE of a
// line is posted as two verbs (its first cache line, then the rest): the
// simulator's WRITE is atomic, a NIC's is atomic only per cache line,
// and this is how a READ
// that the latch does not exclude can see a torn line, which every READ
// under a latch checks for. The versions also let Cluster.Check see which
// WRITEs have landed, since it sees memory and the roles but not the
// verbs in flight.
//
// Cluster.Check holds the invariants after every step: the word's holder
// is a writer in flight, the reader count lies between the readers that
// surely hold the latch and those that may, one writer alone, no reader
// holds the latch while a writer does, a WRITE that has not landed is
// still under its writer's latch, and an unlatched line is whole. At rest
// every word is 0 and every line whole. Its mutants (Protocol.Mutants)
// each break one of these rules.
//
// It sends no messages, so it has no codec; its chart (the scenario
// sel-conflict) is its verbs on the watched line (Cluster.KeyAt) with the
// line's word, versions and attempts after each (Cluster.KeyState).
//
// It imports protocolapi, protocol (node ids, the page size) and transport
// (regions) only; never the simulator, a concrete transport, another
// protocol, or the runner.
package sel
