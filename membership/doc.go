// Package membership gives the node processes of a cluster an agreed
// membership (numbered views) and failure detection, kept in etcd.
//
// Why etcd and not a coordinator of our own: agreeing on who is in the
// cluster is consensus, and a home-made coordinator is either a single point
// of failure or a second consensus implementation to get right. etcd already
// offers what the rule below needs: leases that the server expires, keys
// attached to them, transactions that compare a key's revision, and a watch
// that delivers every change in revision order.
//
// # Keys
//
// Under /scalestore/<cluster>/:
//
//	nodes/<id>  one key per live node, attached to the node's lease; the value
//	            names the process holding it (addr, pid, hostname, start time).
//	            Created with a transaction that fails if the key exists, so two
//	            processes can never hold the same id at once.
//	view        the agreed view: JSON {"number": n, "members": [ids]}.
//
// Never delete the view key by hand: the number would start again at 1.
//
// # The view rule
//
// A view is current when its members are exactly the live node keys and it
// was agreed after every one of those keys was created (so a node that died
// and came back under the same id between two views still causes a new
// view). Every member watches the prefix and, whenever the current view is
// not current by that rule, proposes view{number+1, live set} with a
// transaction that succeeds only if the view key has not changed since the
// revision it read. Exactly one proposal wins per number; the others see the
// winner on the watch and decide again. No single process drives changes, so
// none can stop the cluster from changing views: any live member can do it.
// View numbers only increase.
//
// # The lease-validity rule
//
// A member serves only while time.Now() < ValidUntil(). The others can remove
// a member from the view only after its node key is gone, which happens only
// after its lease expired at the server; the server computes that expiry from
// the moment it received the last keepalive, which is after the member sent
// it. So ValidUntil = (time before sending the last successful keepalive) +
// granted TTL - margin is earlier than any removal. The margin (TTL/10)
// covers clock-rate drift between this process and the server and
// scheduling delays. Lost is closed when ValidUntil passes without a
// renewal, or when the server says the lease is gone.
//
// This package must never import actors, cluster, or anything of the data
// path (bufmgr, btree, transport, storage): it only tells who is in the
// cluster. It may import protocol, for NodeID.
package membership
