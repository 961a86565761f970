// Package shm is a transport.Transport between processes on one machine
// over shared memory, after L5 (Fent et al., "Low-Latency Communication for
// Fast DBMS Using RDMA and Shared Memory", §III): messages are copied into a
// ring buffer in a memory segment both processes map, and the receiver finds
// them by polling memory, with no system call on the fast path.
//
// # Bootstrap
//
// Every node listens at a Unix domain socket (Config.SocketPath) and knows
// its peers' socket paths (Config.Peers). For each pair, the node with the
// lower id dials, eagerly from New and again after a failure, with backoff,
// so nodes start in any order. The dialer creates the pair's segment with
// memfd_create(MFD_CLOEXEC|MFD_ALLOW_SEALING), sizes it, seals it against
// shrinking, maps it, and passes the fd over the socket (SCM_RIGHTS) with a
// hello: magic, version, cluster id, its node id and the node id it expects.
// The acceptor validates the hello (a wrong magic, version, cluster, target,
// unknown or wrong-direction sender, odd ring size, missing or extra fds are
// logged and refused, never a crash), adds F_SEAL_SHRINK itself and checks it
// with F_GET_SEALS, checks the size, maps the segment, checks that it is
// fresh, and answers with a welcome (or a reject naming the reason). Because
// the file can never shrink, no access to the mapping can raise SIGBUS
// whatever the peer does; the dialer allocates the memory, so it is charged
// to the dialer (L5's argument for client-allocated segments).
//
// The socket then stays open as the liveness channel, carrying only region
// messages (direct verbs, below): when the
// peer process exits or closes its transport, the kernel closes its end and
// we read EOF; the link fails and Send returns an error wrapping
// transport.ErrPeerDown at once instead of waiting on a ring nobody drains.
// A peer that is alive but stuck is caught by Config.PeerTimeout.
//
// # Segment layout
//
//	offset 0       control page (4 KiB)
//	  0            header: magic, version, ring size, cluster id, dialer, acceptor
//	  128 + i*640  control block of ring i: tail, head, consWaiting, prodWaiting,
//	               consCPU, each in its own 128-byte line pair (one writer per line)
//	4 KiB          ring 0: messages and verb requests, dialer -> acceptor (RingSize)
//	+RingSize      ring 1: messages and verb requests, acceptor -> dialer (RingSize)
//	+RingSize      ring 2: verb responses, dialer -> acceptor (RespRingSize)
//	+64 KiB        ring 3: verb responses, acceptor -> dialer (RespRingSize)
//
// Each ring is mapped with a wrap-around double mapping: 2×size bytes of
// address space reserved PROT_NONE, then the ring's file range mapped
// MAP_FIXED|MAP_SHARED over both halves, so a record that runs past the end
// continues, contiguous, at the ring's start.
//
// # Rings
//
// A record is [payload length, kind][64-byte frame][payload], padded to 8
// bytes. The producer checks for space against its cached copy of the
// consumer's head (refreshed only when the ring looks full: L5's
// sender_read), writes the record, and publishes it with an atomic store of
// tail; the consumer loads tail, reads every record up to it, hands each to
// the handler straight from the ring (valid during the call, as the
// transport.Handler contract says), and advances head with an atomic store.
// Every length read from shared memory is checked before use: a corrupt ring
// fails the link, never indexes outside the mapping. Rings are bounded: a
// full ring makes Send wait (poll, then park), at most Config.PeerTimeout.
// Senders to one peer serialize on a mutex; one reader goroutine per peer
// calls the handler, so a peer's messages arrive in order.
//
// Waiting is adaptive (wait.go). A waiter polls the ring word, with no
// system call, for a window that adapts between 2µs and Config.Spin: it
// grows while parks end soon after they began, so a busy pair settles into
// polling, and shrinks when the link idles. It stops polling early when the
// peer's reader shares its CPU (each side publishes its CPU in the segment
// during long waits) or when it was descheduled for another thread: polling
// then only takes the CPU from the thread it waits for. Then it parks on a
// futex word in the segment (FUTEX_WAIT on shared memory, not FUTEX_PRIVATE)
// after setting a waiting flag that the other side checks after publishing.
// The futex wait times out after 5 ms, so no lost wake-up can hang a waiter.
// wait.go documents the ordering argument.
//
// # One-sided verbs
//
// Register hands out a random non-zero key per region. Read, Write,
// CompareAndSwap and FetchAndAdd travel as request records in the message
// ring (so they are ordered after earlier Sends to that peer) and are served
// by the peer's reader against its registered memory (key, bounds and 8-byte
// alignment checked; atomics with sync/atomic on the word, so atomic with
// the owner's own atomic accesses); the handler never sees them. Answers come
// back in the response rings, drained by the waiting callers themselves, so
// a handler may issue verbs to the peer it is handling. Errors wrap
// transport.ErrAccess and transport.ErrMisaligned.
//
// Memory allocated with AllocMemory (a memfd of its own) is passed to every
// peer once registered (a region message with the memfd on the bootstrap
// socket), and the peers map it: their verbs on it are then done by the
// calling thread itself, a copy or a sync/atomic operation on the shared
// memory, as an RDMA NIC does them, whenever the ring to the owner is empty
// (so a Write stays ordered after earlier Sends). direct.go has the details.
//
// # Limits
//
// Linux only (memfd, seals, futex), little-endian machines only (the verbs'
// words are little endian). Each pair costs 2×RingSize + 128 KiB of shared
// memory (pages are allocated as the rings first pass over them) and two
// goroutines per link: the reader and the socket watcher; a parked reader
// wakes every 5 ms to re-check its link. A parked reader is a thread in a
// blocking system call: the Go runtime hands its P to other goroutines only
// when sysmon notices (tens of microseconds, up to 10 ms when sysmon is
// idle), as for any blocking system call. Delivery is in order and at most
// once: records in a ring when a link fails are lost, as with a crash.
//
// The race detector does not see atomics on memory outside the Go heap, so
// race builds add a heap-side happens-before edge per record (race.go):
// what a sender wrote before Send is visible to the handler of a transport
// in the same process, as the real ordering guarantees.
//
// It imports transport and protocol only of this module.
package shm
