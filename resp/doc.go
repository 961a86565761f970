// Package resp serves the Redis protocol (RESP2) in front of a key-value
// engine, so that redis-cli, redis-benchmark and ordinary Redis client
// libraries can talk to scalestore.
//
// The engine is anything that satisfies [Engine]: a cluster node serves
// its default table through one (the root package's respEngine, whose
// transactions are Cluster.Update and View). [Listen] binds a TCP
// (optionally TLS) listener and serves in the background; [Server.Close]
// stops it and waits for every connection handler to return.
//
// # Commands
//
// Strings and counters: GET, SET (NX, XX, GET, EX, PX, EXAT, PXAT,
// KEEPTTL), SETNX, SETEX, PSETEX, GETSET, GETDEL, GETEX, APPEND, STRLEN,
// GETRANGE (SUBSTR), SETRANGE, SETBIT, GETBIT, LCS, INCR, INCRBY, DECR,
// DECRBY, INCRBYFLOAT, MGET, MSET, MSETNX. Keyspace: DEL, UNLINK, EXISTS,
// TOUCH, KEYS, SCAN (MATCH, COUNT, TYPE), TYPE, RENAME, RENAMENX, COPY,
// RANDOMKEY, DBSIZE, FLUSHDB, FLUSHALL. Expiry: EXPIRE, PEXPIRE, EXPIREAT,
// PEXPIREAT (NX, XX, GT, LT), TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST.
// Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH. Connection and
// server: PING, ECHO, SELECT 0, AUTH, HELLO (protocol 2 only), QUIT, TIME,
// INFO (Redis's sections and Commandstats), FUNCTION FLUSH and LIST (there
// is no scripting, so no function), and enough of COMMAND, CONFIG GET and
// CLIENT for redis-cli and redis-benchmark. Every value is a string:
// TYPE answers string or none. Names are case-insensitive; a command's
// arity is checked from a table (commands.go) with Redis's numbers, and
// errors use Redis's words ("ERR wrong number of arguments for 'get'
// command", "ERR value is not an integer or out of range", ...). A result
// over the engine's limits answers "ERR string exceeds maximum allowed
// size (...)" with the limit.
//
// Atomicity. A command on one key that reads and writes it (INCR, APPEND,
// SETRANGE, SET NX/XX/GET, GETDEL, EXPIRE, ...) is one [Engine.Modify]: no
// other write of the key, on any node, comes between its read and its
// write. A command on several keys (MSET, MSETNX, MGET, DEL, EXISTS,
// RENAME, RENAMENX, COPY, LCS) is one [Engine.Atomic] transaction: a
// reader never sees part of an MSET, on any node. EXEC runs its queued
// commands in one transaction too, after checking the keys WATCH saw:
// EXEC answers a null array if a watched key was written since WATCH, as
// in Redis, even back to the same value: WATCH tags the stored value
// (below) and every write stores one without that tag, so EXEC finds the
// bytes WATCH left only if no one wrote the key (docs/transactions.md).
// A key absent at WATCH aborts if it is there at EXEC, or if the client
// read it with a value in between. KEYS, SCAN, DBSIZE, RANDOMKEY and FLUSHALL walk
// the keyspace outside any transaction, in key order; FLUSHALL deletes
// each key it finds, from any node for the whole cluster.
//
// Expiry. A value with a TTL is stored behind a 12-byte header: 0xff 'S'
// 'x', a version byte (1), and the expiry in Unix milliseconds (value.go);
// a watched value behind a 20-byte one, version 2, with a watch tag after
// the expiry. [Payload] takes either off, for Go code that reads values
// RESP clients write.
// A value without one is stored as it is, so values written before expiry
// existed read unchanged; a string that happens to start with the magic
// is stored behind a header with no expiry, so that it is never misread.
// The header lives in the value, so a TTL survives restarts and moves
// with its page between nodes. An expired key is never returned: a read
// drops it (a Modify that deletes it if still expired), and a background
// expirer walks the keyspace, 256 keys every 100 ms, from where it
// stopped, and drops the expired keys it meets. Config.Now sets the clock.
//
// Large values. A value may be up to Config.MaxValue bytes (4 MiB by
// default). The engine keeps a key and its value in one entry of at most
// Config.MaxEntry bytes (a B-tree leaf's, 1 KiB); a longer one is stored
// in chunks of that size under keys of a reserved space (0xff 'S' 'x' 3,
// then a chunk set's id and the chunk's number), behind a 24-byte
// manifest, version 3 of the header, in the key itself (big.go). The
// chunks are written, replaced and deleted with the manifest in one
// Engine.Atomic transaction, so a reader on any node sees the whole value
// or none of it, and a crash keeps it whole as it keeps any transaction.
// Values that fit an entry are stored as before: stores written before
// read unchanged. Keys in the reserved space are refused (ErrReservedKey)
// and never shown by KEYS, SCAN, DBSIZE or RANDOMKEY. A value of n bytes
// is a transaction of about n/1008 keys, twice that when it replaces
// another large value, and every read or write of it moves all its
// chunks: the engine's cache must let a commit latch that many keys
// (half the cache: 8,192 with the default 16,384 frames, enough for 4 MB
// replacing 4 MB; a 4 MB SET writes about 1,300 leaves through, about a
// second on three nodes of this host with membership). Go code
// that reads a large value RESP wrote gets its manifest from Get: read it
// through a RESP client.
//
// SCAN walks the engine in key order. Its cursors are decimal integers,
// as Redis clients require; the server keeps a bounded table (4096
// entries, the oldest dropped first) from cursor to the key to resume
// after, shared by all connections. A cursor that fell out of the table
// answers "ERR invalid cursor". DBSIZE counts the live keys with a full
// Scan.
//
// # Access
//
// With Config.Password set, every command but AUTH, HELLO and QUIT answers
// "-NOAUTH Authentication required." until AUTH [default] password (or
// HELLO 2 AUTH default password) succeeds; passwords are compared in
// constant time. HELLO itself needs authentication unless it carries
// AUTH, as in Redis, except that HELLO 3 answers NOPROTO first: clients
// such as go-redis then fall back to RESP2 and AUTH.
//
// Protected mode, as in Redis: without a password, a client that does not
// connect from the loopback interface gets Redis's -DENIED message and is
// closed, unless Config.Unprotected turns this off.
//
// # Serving connections
//
// Config.Loop chooses how. LoopEpoll, the default on Linux
// (loop_linux.go), serves them as redis-server's ae does: Config.Loops
// event loops (GOMAXPROCS by default) each wait in epoll_wait for their
// ready sockets, read each once, run the commands read in order on the
// loop's goroutine, and write the replies with one write: no goroutine
// is woken per request. The accept loop (Go's netpoller) hands each new
// connection to a loop round-robin, as a duplicate of its socket that
// the netpoller no longer watches. A socket that does not take all its
// replies is watched for writing and not read until they are out, so a
// client that does not read holds at most one batch of replies. QUIT and
// protocol errors hand the socket back to a goroutine that writes the
// last reply and closes gently (lingerClose). IdleTimeout is a sweep of
// each loop's connections, a few times per timeout.
//
// A command that blocks blocks its loop, and the loop's other
// connections wait. That is right for an in-memory node, whose calls
// return in microseconds, but not for writes that go through to a store:
// with Config.OffloadWrites, a connection that is about to run a write
// leaves its loop, with what it has buffered, for a goroutine of its own
// that serves it as LoopGoroutine does from then on (its replies stay in
// order: the loop runs none of its commands after that point). Writes
// that wait together then share the store's flush, and connections that
// only read stay on the loops.
//
// LoopGoroutine gives each connection a goroutine that blocks in read.
// TLS connections are always served so (the TLS record layer is
// crypto/tls's), and so is every connection off Linux.
//
// # Protocol handling
//
// Requests are parsed by github.com/tidwall/redcon (its ReadNextCommand
// and Append* functions); this package never parses RESP itself. It runs
// its own per-connection loop rather than redcon's Server, because
// redcon v1.6.4's Server buffers an incomplete command without bound and
// its parsers panic (in a goroutine that does not recover, taking the
// whole process down) on bulk lengths near the int64 limit. Here a single
// command may not exceed 8 MiB pending (64 KiB for an inline command),
// after which the connection gets "-ERR Protocol error: ..." and is
// closed, and a parser panic becomes a protocol error on that connection
// only.
//
// Requests that redcon refuses, waits on or panics on are read again the
// way Redis's parser reads them (reqcheck.go): a negative multibulk count
// is an empty command, a count over 2^20 or a bulk length over 512 MiB is
// refused at once instead of waited for.
//
// Arguments passed to the [Engine] alias the connection's read buffer:
// an engine must copy key and val in Put (and in a Txn's Put) if it keeps
// them.
//
// # Imports
//
// This package must never import the root package
// github.com/scalestore-go/scalestore (nor anything that imports it): the
// root package imports resp, and a cycle would not build. It depends only
// on the standard library (log/slog included), redcon and
// golang.org/x/sys/unix (epoll).
package resp
