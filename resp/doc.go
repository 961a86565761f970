// Package resp serves the Redis protocol (RESP2) in front of a key-value
// engine, so that redis-cli, redis-benchmark and ordinary Redis client
// libraries can talk to scalestore.
//
// The engine is anything that satisfies [Engine]: the single-node
// *scalestore.DB and a cluster node's handle both do. [Listen] binds a TCP
// (optionally TLS) listener and serves in the background; [Server.Close]
// stops it and waits for every connection handler to return.
//
// # Commands
//
// PING, ECHO, GET, SET (NX, XX, GET; no expiry options), SETNX, DEL,
// EXISTS, MGET, MSET, SCAN (MATCH, COUNT, TYPE), DBSIZE, INFO, SELECT 0,
// AUTH, HELLO (protocol 2 only), QUIT, and enough of COMMAND, CONFIG GET
// and CLIENT for redis-cli and redis-benchmark. Command names are
// case-insensitive. Commands that name several keys (DEL, EXISTS, MSET,
// MGET) apply to each key in turn: they are not atomic across keys. SET
// with NX, XX or GET, and SETNX, are atomic for their one key, through
// [Engine.PutIf].
//
// With Config.Password set, every command but AUTH, HELLO and QUIT answers
// "-NOAUTH Authentication required." until AUTH [default] password (or
// HELLO 2 AUTH default password) succeeds; passwords are compared in
// constant time. HELLO itself needs authentication unless it carries
// AUTH, as in Redis, except that HELLO 3 answers NOPROTO first: clients
// such as go-redis then fall back to RESP2 and AUTH.
//
// SCAN walks the engine in key order. Its cursors are decimal integers,
// as Redis clients require; the server keeps a bounded table (4096
// entries, the oldest dropped first) from cursor to the key to resume
// after, shared by all connections. A cursor that fell out of the table
// answers "ERR invalid cursor". DBSIZE counts the keys with a full Scan.
//
// # Protocol handling
//
// Requests are parsed by github.com/tidwall/redcon (its ReadNextCommand
// and Append* functions); this package never parses RESP itself. It runs
// its own per-connection loop rather than redcon's Server, because
// redcon v1.6.4's Server buffers an incomplete command without bound and
// its parsers panic (in a goroutine that does not recover, taking the
// whole process down) on bulk lengths near the int64 limit. Here a single
// command may not exceed 4 MiB pending (64 KiB for an inline command),
// after which the connection gets "-ERR Protocol error: ..." and is
// closed, and a parser panic becomes a protocol error on that connection
// only.
//
// Arguments passed to the [Engine] alias the connection's read buffer:
// an engine must copy key and val in Put and PutIf if it keeps them.
//
// # Imports
//
// This package must never import the root package
// github.com/scalestore-go/scalestore (nor anything that imports it): the
// root package imports resp, and a cycle would not build. It depends only
// on the standard library (log/slog included) and redcon.
package resp
