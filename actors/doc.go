// Package actors composes the roles of a ScaleStore node (paper §2.2): the
// message handler, which serves both the directory side and the holder side
// of the protocol; the requester side, driven by workers through the cache;
// and the page provider, which keeps frames free (paper §4.2).
//
// A Node is a state machine driven from outside: messages go in through
// Deliver, timers and I/O completions through the callbacks it registered
// with its Env, and everything it does goes out through the Env. The
// simulator drives it with its event queue (one event at a time); the real
// world drives the same code with goroutines: Local (a node of one, the
// embedded API) and NewClusterNode (a node with a transport, whose message
// handler is supervised by a hollywood actor, Host).
//
// In the real world the Node's state is guarded by one lock, a combining
// lock (nodelock.go): workers take it on the slow path only, and the I/O
// goroutine, which submits storage requests and reaps their completions on
// io_uring, never waits for it. It posts completions, and whoever holds the
// lock runs them before releasing it.
//
// It imports protocol, bufmgr and the storage interface (for its error
// kinds); never a concrete transport, storage engine or the simulator.
package actors
