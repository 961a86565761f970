// Package nam is the NAM-tree of Ziegler et al., "Designing Distributed
// Tree-based Index Structures for Fast RDMA-capable Networks" (SIGMOD '19,
// ../shared/papers/nam-tree-distributed-index-rdma.txt): three ways to spread
// one B-link tree over the memory servers of a network-attached-memory
// cluster, which compute nodes use.
//
//   - Coarse-grained (CG, §3): the key space is range-partitioned over the
//     memory servers, each with its own tree; every operation is a remote
//     procedure call to the owner (two-sided).
//   - Fine-grained (FG, §4): one B-link tree whose nodes are spread over
//     all servers; compute nodes traverse it with one-sided READs and
//     modify it under node locks taken with one-sided compare-and-swap
//     (a version word per node: lock bit and version, unlocked by
//     fetch-and-add, which clears the bit and bumps the version).
//   - Hybrid (§5): the inner levels as in CG (each server an ordered map of
//     its range's leaf separators, reached by RPC), the leaves as in FG.
//
// Head nodes (§4.3, heads.go) list groups of FG and hybrid leaves, so
// scans prefetch them in batches; a background pass (RefreshHeads)
// installs and refreshes them, and scans never trust them further than a
// sibling pointer confirms.
//
// The node format and its pure functions are node.go; the servers' state
// machine is Server (Handle: a request in, a reply out); the compute side
// is Client, which runs an operation as a sequence of verbs and calls on a
// Fabric, the same in the simulator (coroutines) and on real transports.
//
// It imports protocol and transport only of this module; never the
// simulator, the ScaleStore runtime or a concrete transport.
package nam
