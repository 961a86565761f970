// Package msi is a textbook MSI directory protocol, the example that
// docs/new-protocol.md builds step by step on protocolapi: every key has a
// home node (key mod nodes) whose directory entry says who holds it (I:
// no one, S: a set of sharers, M: one owner) and keeps its memory copy;
// every node caches keys in M, S or I. The directory is blocking: it
// serves one request per key at a time and queues the rest. A write
// (GetM) makes the home invalidate the sharers and collect their acks, or
// fetch the line from its owner, before it grants M; a read (GetS) of a
// line in M makes the owner write it back and keep a shared copy; an
// owner that evicts a line writes it back (PutM) and keeps it until the
// home's PutAck.
//
// It has two mutants that the generic runner's checks catch:
// grant-m-without-invalidation and forget-writeback (see Protocol).
//
// It imports protocolapi and protocol (node ids and sets) only: never the
// simulator or a transport, which it reaches through its protocolapi.Env.
package msi
