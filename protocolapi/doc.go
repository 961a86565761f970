// Package protocolapi is the API a coherence protocol implements to plug
// into ScaleStore-Go: its messages and their codec, its roles, the
// worker's access entry, its invariants, named mutants and scenarios, and
// what it supports. A protocol is a package of its own that returns a
// Protocol; one list of registrations (package protocols) puts every
// protocol into a Registry, where the CLI finds it by name, and the
// generic runner (package simrunner) runs any registered protocol in the
// deterministic simulator with the fault plans, the workloads, the
// watchdog, porcupine, mutants and traces. examples/msi is a textbook MSI
// directory protocol built on it, and docs/new-protocol.md builds it step
// by step.
//
// # The pieces
//
//   - Protocol: the descriptor registered by name (Summary, Supports,
//     Codec, Deploy, Mutants, Scenarios, Options for its own parameters,
//     set by `sim --opt name=value`, and CheckHistory for a protocol that
//     is not linearizable).
//   - Message and Codec: a protocol's messages are its own Go types; the
//     codec writes one into the 60-byte body of a 64-byte frame (whose
//     4-byte header, FrameMagic, type, sender and receiver, is the
//     framework's) and a payload of at most a page. EncodeFrame and
//     DecodeFrame are the only way frames are made and read, so the
//     simulator and a transport carry the same bytes, and traces name a
//     message by its type's name.
//   - Config, Deploy, Cluster, Layout: Deploy(Config) builds one instance;
//     its Layout says how many nodes the world has and which memory and SSD
//     each needs; Cluster.Role builds each node's Role on its Env;
//     Cluster.Check holds the invariants, called after every simulated step
//     and once at rest. KeyStater and MemoryKeyer, when a Cluster has them,
//     let charts show one key's state and the verbs on its memory;
//     Counterer puts the protocol's own counters into the run's result.
//   - Role, Event, Env: a role is a state machine in the shape of
//     etcd-io/raft's Step: Step(Event) takes one input (a message, a timer,
//     a verb's or an SSD I/O's completion, a worker's access) and acts only
//     through its Env (Send, After, Read/Write/CompareAndSwap/FetchAndAdd
//     on registered memory, ReadPage/WritePage on its SSD, Now, Rand, Busy
//     for CPU time the simulator should charge, and Complete for an
//     access). Nothing in Env blocks or calls Step back,
//     and a role starts no goroutine: the simulator schedules everything,
//     so a seed reproduces a run bit for bit.
//   - Op and Result: the worker's access entry. Workers belong to the
//     runner, not to the protocol: a worker hands its role an Op (read,
//     write, or read-modify-write of a key, with a unique value to write)
//     and waits for Complete. A role serializes its node's workers itself.
//   - Blocking, Accessor, Waiter: the optional blocking access entry, for
//     a protocol whose workers block in a cache's latches and guards
//     (ScaleStore's buffer manager, SELCC's line cache). The runner's
//     worker calls Accessor.Access on its own thread, which parks through
//     its Waiter until a role's Step wakes it.
//   - Crashable and Leaver: the optional hooks for node crashes and
//     elastic membership (Supports.Crashes, Supports.Elastic). The runner
//     decides when a node crashes, stops its workers and restarts it, and
//     keeps a node that leaves to its schedule; the cluster does what that
//     means for the protocol's state.
//
// # What a runner does with it
//
// The generic runner (simrunner) makes a world of Layout.Nodes nodes,
// registers Layout.Memory, gives every node an Env, builds the roles, runs
// Config.Workers workers on nodes 0..Config.Nodes-1 under a fault plan,
// calls Check after every step, stops at the first violation or when no
// access completed for two simulated seconds (with every role's Describe
// in the report), checks at rest, reads every key once more, and checks
// the history (porcupine, or CheckHistory). It refuses with a reason what
// Supports does not list (a workload, crashes, elastic membership).
//
// The process runner (procrunner) runs any protocol with Deploy on real
// processes: it implements Env over transport.Transport (Send through
// EncodeFrame and Messenger.Send, the verbs through transport.OneSided in
// the order posted to each peer, After on the node's clock, the SSD over a
// storage.PageStore), with one goroutine per node feeding Step from the
// transport's handler, timers and verb completions. Each process deploys
// the same Config and builds every node's role in order, but steps only
// its own (the others are inert shadows); it never calls Cluster.Check. `scalestore cluster --protocol NAME --check` runs it over
// shm or tcp and checks the nodes' histories. Nothing in this API needs
// the simulator.
//
// # How the seeds' baselines map onto it
//
// GAM (Cai et al., VLDB 2018; an RPC directory protocol, a cache on every
// node). Config.Nodes nodes, each both a home (keys hashed to homes) and a
// cache; no Layout.Memory. Messages: read and write requests to the home,
// forwards to an owner, invalidations and their acks, data replies, write
// backs. The role keeps the home's directory entries and the node's cache;
// a worker's Op is a request on the node's serial queue. SEQ completes an
// Op when the home's answer arrives; TSO completes a write at once, puts
// it in the node's write buffer and drains the buffer in order, and a
// read first looks in the buffer (a thread reads its own writes). Two
// registrations from one package, gam-seq and gam-tso; gam-tso sets
// CheckHistory to a TSO checker (reads return written values, one
// thread's reads never go back, a thread sees its own writes).
//
// SEL (Ziegler et al. 2023; SELCC's baseline). Config.Nodes compute nodes
// and M memory nodes above them (Layout.Nodes = Nodes+M), each memory node
// with Layout.Memory holding a shared-exclusive latch word and the data of
// every line it homes; no cache, no messages, so no Codec (the memory
// nodes' roles are never stepped). An Op is a sequence of verbs: CAS (or
// FAA for a shared latch) on the line's word until granted, READ (and
// WRITE) of the line, a release FAA or CAS; each verb's EventVerb
// advances the Op, and EventTimer paces a back-off. Check reads the
// memory node's Env.Memory and compares the latch words with the Ops in
// flight (a writer alone; readers counted right); MemoryKeyer maps a
// verb's offset to its line, so a chart that watches a line shows its
// verbs. simrunner's TestVerbsProtocol runs a small protocol of this shape.
//
// It imports protocol (node ids, the frame size), transport (Region) and
// checker (the history's Op for CheckHistory) only. It must never import
// the simulator, a concrete transport, storage, or any protocol.
package protocolapi
