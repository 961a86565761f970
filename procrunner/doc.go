// Package procrunner runs any protocol built on protocolapi on real
// processes: it is protocolapi.Env over a transport.Transport, the one
// adapter between the API and a process. simrunner runs a protocol's roles
// in the simulator; procrunner runs the same roles, unchanged, one node a
// process (or a goroutine group in tests), and `scalestore cluster
// --protocol P` drives it through the cluster package's control channel.
//
// A Node deploys the protocol (every node deploys the same Config, so every
// node builds the same Cluster and Layout), starts its transport, allocates
// and registers its Layout.Memory off the Go heap (the transport's
// Allocator where it has one: shm maps it into the peers), and once every
// node's region is known (Connect) builds the roles and starts its loop.
// It calls Cluster.Role for every node in order, as the API promises (GAM
// keeps its roles in a slice by node), its own on its Env and the others
// on shadow envs (their memory mapped but never touched, every action a
// violation) that are never stepped; it never calls Cluster.Check, the
// simulator's global view.
//
// # One loop a node
//
// A role is not goroutine safe, so every Step runs on the node's one loop
// goroutine, fed by:
//
//   - the transport's handler: a frame is decoded (protocolapi.DecodeFrame,
//     its header checked against the link) and queued on the inbox, a
//     bounded channel (Inbox): a full inbox blocks the transport's reader,
//     which is the backpressure a peer sees;
//   - the workers: Access queues an EventAccess on the inbox and waits for
//     Env.Complete (or for a violation, or for Config.Watchdog);
//   - timers: Env.After is a time.AfterFunc that queues EventTimer;
//   - verbs and SSD I/O: see below; their completions come back on a
//     channel of their own (done);
//   - messages a node sends itself: encoded and decoded like any other
//     (the codec is exercised), and handled before the next input.
//
// Env never blocks the loop except in Send, where the transport's queue to
// the peer may be full (every transport's queue is bounded).
//
// # Verb order
//
// transport.OneSided's verbs are blocking calls, and the transports
// promise an order only for a Write behind a Write or Send of the same
// caller; shm and tcp serve a peer's verbs in the order they reach it,
// and verbs issued by different goroutines reach it in any order. A
// protocol may rely on the verbs it posts to one peer acting there in the
// order posted, as on an RDMA RC queue pair (sel does: the READ behind the
// latch's CAS or FAA, the release behind the WRITEs). So procrunner posts
// every verb to a peer through one poster goroutine per (node, peer),
// which runs them one at a time in the order the role posted them: a verb
// starts only when the one before it completed, which keeps the queue
// pair's order (and more: the round trip that a batch of verbs saves on a
// NIC is paid here). Verbs to different peers run in parallel. The SSD
// has a poster of its own (storage.PageStore is called from one goroutine
// at a time). A node has at most MaxVerbs verbs and page I/Os in flight: a
// role that posts more is a violation, and the bound is what keeps a
// poster from ever waiting for the loop.
//
// A verb on a node's own region goes through the transport like any
// other, and real transports refuse it (transport.ErrUnknownPeer in the
// verb's EventVerb): a role reads its own registered memory through
// Env.Memory.
//
// # Violations and faults
//
// A role's Step error, a panic in the role, a frame that does not decode
// or lies about its link, a completion of an access not in flight, an
// access's Result.Err (other than protocolapi.ErrUnavailable) and an
// access not answered within Config.Watchdog (reported with the role's
// Describe) are violations; a message that does not encode or a transport
// that fails to send are faults of the environment. Either fails every
// access waiting and every later one (ErrFailed): a role that broke a rule
// is not run on.
//
// What procrunner does not do: the simulator's invariant checks
// (Cluster.Check needs every node's state), fault plans, crashes and
// elastic membership, traces. The history check belongs to its caller,
// which has every node's history (cmd/scalestore: porcupine per key, or
// Protocol.CheckHistory).
//
// It imports protocolapi, protocol, transport, storage, storage/memfile and
// checker (its ViolationLog, the one violation collector of every runner);
// never the simulator, a concrete transport, a protocol's package, or the
// cluster package (which imports it).
package procrunner
