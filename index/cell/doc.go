// Package cell is Cell of Mitchell, Ngo, Kumar and Li, "Balancing CPU and
// Network in the Cell Distributed B-Tree Store" (USENIX ATC '16,
// ../shared/papers/cell-distributed-btree.txt): a B-link tree of
// meganodes, each itself a B-link tree of small nodes, spread over memory
// servers that do every write; clients search either server-side (one
// call per meganode) or client-side (one-sided READs of the small nodes,
// checked by checksum and lock bit, retried), chosen per request by the
// locality selector.
//
// This engine's Cell, and where it departs from the paper (docs/indexes.md
// has the reasons):
//
//   - Two levels of meganodes. The root meganode, on server 0, maps the
//     low key of every leaf meganode to its root node; clients cache it
//     whole. Leaf meganodes start laid out round-robin over the servers;
//     each has a fixed root node (a root split happens in place), and
//     they are level-linked: leaves to the next meganode's first leaf,
//     roots to the next root. Within a meganode, nodes split as in
//     Sagiv's B-link tree, done by the server alone.
//   - Meganodes split (megasplit.go, the paper's §2.2-2.3) past
//     Server.MegaNodes nodes: the right half is copied under a new root,
//     on the servers in turn (reserve, adopt and unlock calls between
//     servers when it is another), relinked, and its old nodes
//     invalidated and their slots reused, while clients' READs go on; the
//     separator goes to the root meganode. A full server's write waits
//     for a split that moves a half away; only a full cluster refuses
//     (StatusFull).
//   - Values are 8 bytes, stored in the leaf entry (no extents region), so
//     a client-side get ends at the leaf READ.
//   - The selector compares estimated latencies (server-side: the measured
//     call latency; client-side: the measured READ latency times the
//     measured READs per meganode) with 1% exploration, rather than the
//     paper's queue-length form, whose round trips cancel only when a call
//     and a READ cost the same.
//
// The small nodes are the NAM-tree's node format, and the calls its codec
// (index/nam: version word with lock bit, CRC-32C, low and high keys,
// sibling, invalid flag, entries; nam.Codec). The server's state
// machine is Server.Handle (a request in, a reply out); the client is
// Client over a nam.Fabric, the same in the simulator and on real
// transports.
//
// It imports index/nam (the node format and Fabric) and transport only;
// never the simulator, the ScaleStore runtime or a concrete transport.
package cell
