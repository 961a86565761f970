// Package transport is the interface every transport implements: the
// simulated one (transport/sim), TCP (transport/tcp), L5-style shared memory
// (transport/shm) and RDMA (transport/ibverbs).
//
// A transport moves two kinds of traffic between the nodes of one cluster:
//
//   - Two-sided messages: a 64-byte protocol frame (protocol.FrameSize) with
//     an optional payload of at most MaxPayload bytes (a 4 KiB page or an
//     eviction batch). Messages between one pair of nodes arrive in the
//     order they were sent, as on an RC queue pair; there is no order across
//     pairs.
//   - One-sided verbs on registered memory: read, write, 8-byte
//     compare-and-swap and fetch-and-add, served by the remote transport
//     without involving the remote node's handler (the RDMA NIC does it in
//     hardware; TCP and shared memory emulate it in their receive loop).
//     ScaleStore's protocol does not need them; SELCC, the NAM-tree and Cell
//     do.
//
// The transport knows nothing of the protocol's meaning: it checks lengths
// and peers, never message types. Receivers decode and validate every frame
// (protocol.Decode), so a malformed frame is an error, never a panic.
//
// It may import protocol only.
package transport
