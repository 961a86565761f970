// Package btree is the B-tree of the ScaleStore paper (§5.2), written as
// ordinary code over the buffer manager's guards: optimistic lock coupling
// on the way down, a catalog page that holds the root, eager splits of full
// nodes on the way down (so a parent always has room for a separator), and
// variable-length byte keys and values.
//
// Because it only calls guards, the same code runs on one node, across the
// nodes of a real cluster, and inside the simulator, where its history is
// checked with porcupine.
//
// GetBatch looks up several keys together. A lookup is a chain of cache
// misses that cannot overlap (each address comes out of the line before);
// a batch walks its lookups level by level and prefetches every lookup's
// next lines before it reads any of them, so that one thread waits for the
// misses of many lookups at once. Its answers are those of a Get per key
// (each read is validated the same way), and the simulator checks that.
//
// A key of at most 8 bytes is kept whole in its slot's key head (with its
// length) and not again in the page's heap: a leaf of YCSB entries (8-byte
// keys, 128-byte values) holds 28 of them. The catalog's magic names the
// format, so that a binary from before this refuses the tree instead of
// misreading it; an older tree is read as it is, its catalog upgraded when
// it is opened, and each node converted when next compacted.
//
// A node's keys often share more than their first 8 bytes (Redis's
// "counter:000000012345", a table's key prefix): with heads of the first 8
// bytes every head of such a node ties, and a search compares whole keys
// at every step. A node therefore keeps the length p of the prefix its
// keys share (header byte 7, flagPrefix) and builds its heads from the
// bytes after it; a search compares the searched key with the prefix once
// and the heads decide again. p is the longest prefix of the node's keys,
// chosen at a split, a compaction or the node's second key, and lowered by
// an insert that does not share it (node.go, flagPrefix, says why not from
// fences). A node with p = 0 is the format before, byte for byte; the
// catalog's magic names this format too, and an older binary refuses a
// node with a prefix by its unknown flag as well.
//
// Limits: a key is 1 to MaxKey bytes, a value 0 to MaxValue bytes, and a
// key and value together at most MaxEntry bytes. Deleted entries free their
// space in the leaf, but leaves are never merged (the tree does not shrink).
// The last PageTrailer bytes of every page are left to the storage layer.
//
// It imports bufmgr, protocol and internal/prefetch only.
package btree
