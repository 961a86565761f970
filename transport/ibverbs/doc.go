// Package ibverbs is the RDMA transport (paper §3.5, §4.3): RC queue pairs
// over libibverbs, two-sided messages as RDMA writes into per-peer
// mailboxes polled by the message handler (L5 §IV), pages written straight
// into the requester's registered frame ahead of the response (WriteSend),
// and the one-sided verbs (read, write, compare-and-swap, fetch-and-add) on
// registered memory that SELCC, the NAM-tree and Cell build on.
//
// The package has three layers:
//
//   - Device, CQ and QP (verbs.go): the verbs the transport uses, as a Go
//     interface. Two implementations: the cgo shim over Debian's
//     libibverbs (shim_ibverbs.go, shim.c; build tag ibverbs), and an
//     in-process fake with RC semantics (fake.go; every build), on which
//     the tests run: there is no RDMA hardware where this is developed.
//   - The out-of-band channel (record.go): a fixed-size, checksummed
//     record exchanged over TCP to connect the queue pairs (LID, GID, QP
//     numbers, PSNs, MTU) and address the mailboxes (address, rkey), kept
//     open to re-connect a one-sided queue pair after a remote access
//     error and to notice a peer's death.
//   - Transport (transport.go, mailbox.go, onesided.go): transport.Transport
//     on any Device. New builds it on a given Device (tests: a FakeDevice);
//     Open opens the real device named by Config (tagged builds only; the
//     default build returns ErrNotBuilt).
//
// docs/rdma.md explains deployment on an RDMA cluster and lists what was
// and was not verified without hardware.
//
// It may import transport, protocol and golang.org/x/sys, never bufmgr or
// actors.
package ibverbs
