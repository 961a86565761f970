package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/scalestore-go/scalestore/protocol"
)

// Transaction records at a node's restart (docs/transactions.md,
// "Durability").
//
// A commit of several leaves keeps its record on its committer's disk
// and in a buddy's memory until every leaf is written through. After the
// death of one process, the view change without it rolls the buddy's
// copy forward (actors/txrecord.go): the committer's disk record must
// then never roll (the pages may have been written again since). After
// the death of every process of a view nobody rolled anything: each
// member's disk records must roll before any node's workers run. The
// view record tells the two apart: Restart, run by every node before it
// registers, marks the members of a view whose processes all died as
// Rolling (one etcd transaction, conditioned on the view unchanged and
// none of its members registered), and a node rolls its disk records iff
// it is listed there.

// errNoView: the view record is missing (Rolled).
var errNoView = errors.New("membership: no view record")

// ErrRollingTimeout: the nodes listed as rolling did not all roll their
// records within the wait.
var ErrRollingTimeout = errors.New("membership: nodes that must roll their transaction records did not")

// Restart decides, before node cfg.Node registers, what its transaction
// records on disk are worth: roll reports whether they must roll forward
// (the node is in the view record's Rolling). It first waits for the
// previous process's node key to expire; then, if no member of the
// latest view is registered (every process of it died), it adds the
// view's members to Rolling. A node that is not listed and not a member
// of the latest view discards its records (a view without it was agreed
// by nodes that were alive: its buddy rolled them), once the registered
// members are known to run (their leases renewed) rather than dead
// processes whose leases did not expire yet. A node that is a member of
// a view whose other members are still registered waits for a view
// without it or for their keys to expire, until ctx ends.
func Restart(ctx context.Context, cfg Config) (roll bool, err error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: max(cfg.DialTimeout, time.Second), Logger: zap.NewNop()})
	if err != nil {
		return false, fmt.Errorf("membership: etcd client for %v: %w", cfg.Endpoints, err)
	}
	defer cli.Close()
	prefix := "/scalestore/" + cfg.Cluster + "/"
	viewKey, nodes := prefix+"view", prefix+"nodes/"
	ttl := cfg.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	// The previous process's key lives at most a lease (rounded up to a
	// second) past its death; a key that outlives that belongs to another
	// live process.
	taken := time.Now().Add(2*ttl + time.Second)
	// A registered member of the view may be a dead process whose lease
	// has not expired yet: it counts as running once its lease was seen
	// renewed since it was first seen (leaseWatch.running). The clock
	// starts at the first read, so that it runs while this node waits for
	// its own previous key.
	leases := leaseWatch{first: map[clientv3.LeaseID]time.Time{}, granted: map[clientv3.LeaseID]time.Duration{}}
	outlived := time.Now().Add(2*ttl + time.Second)
	for {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return false, fmt.Errorf("membership: etcd at %v %w: reading cluster %s for node %d's restart: %w", cfg.Endpoints, unreachable(ctx), cfg.Cluster, cfg.Node, err)
		}
		var live protocol.NodeSet
		var leaseOf [protocol.MaxNodes]clientv3.LeaseID
		var v View
		var viewRev int64
		var own []byte // this node's key: who holds the id
		found := false
		for _, kv := range resp.Kvs {
			key := string(kv.Key)
			if key == viewKey {
				if dv, err := decodeView(kv.Value); err == nil {
					v, viewRev, found = dv, kv.ModRevision, true
				}
				continue
			}
			if name, ok := strings.CutPrefix(key, nodes); ok {
				if id, err := strconv.ParseUint(name, 10, 8); err == nil {
					live.Add(protocol.NodeID(id))
					leaseOf[id] = clientv3.LeaseID(kv.Lease)
					if protocol.NodeID(id) == cfg.Node {
						own = kv.Value
					}
				}
			}
		}
		if found {
			for _, id := range v.Members {
				if live.Has(id) && id != cfg.Node {
					leases.see(ctx, cli, leaseOf[id], ttl)
				}
			}
		}
		switch {
		case live.Has(cfg.Node):
			if time.Now().After(taken) {
				var info nodeInfo
				if err := json.Unmarshal(own, &info); err != nil {
					return false, fmt.Errorf("membership: node %d is still registered %v after its restart began (unreadable registration %q): %w", cfg.Node, 2*ttl+time.Second, own, ErrNodeIDTaken)
				}
				return false, fmt.Errorf("membership: node %d is still registered %v after its restart began: it is already a member (addr %s, pid %d on host %s): %w",
					cfg.Node, 2*ttl+time.Second, info.Addr, info.PID, info.Hostname, ErrNodeIDTaken)
			}
		case !found:
			return false, nil // a new cluster (or a record that is not a view): nobody has records of it
		case v.Rolling.Has(cfg.Node):
			return true, nil
		case len(v.Members) == 0:
			return false, nil // its last member stopped cleanly (Retire)
		default:
			alive := false
			for _, id := range v.Members {
				alive = alive || live.Has(id)
			}
			if !alive {
				ok, err := markRolling(ctx, cli, viewKey, nodes, v, viewRev)
				if err != nil {
					return false, fmt.Errorf("membership: node %d: %w", cfg.Node, err)
				}
				if ok {
					return v.Has(cfg.Node), nil
				}
				continue // the view or a key changed: read again
			}
			if !v.Has(cfg.Node) {
				// Not a member: wait until the registered members are
				// known to run (then a view without this node was agreed
				// by live nodes, or they will agree one) or expire.
				if time.Now().After(outlived) {
					return false, nil
				}
				running := true
				for _, id := range v.Members {
					if live.Has(id) && !leases.running(ctx, cli, leaseOf[id]) {
						running = false
					}
				}
				if running {
					return false, nil
				}
			}
		}
		if !sleep(ctx, min(ttl/8, 250*time.Millisecond)) {
			return false, fmt.Errorf("membership: node %d: %w: waiting for %v's other members to drop it from the view or to expire", cfg.Node, ctx.Err(), v)
		}
	}
}

// leaseWatch times the leases of registered members (Restart).
type leaseWatch struct {
	first   map[clientv3.LeaseID]time.Time
	granted map[clientv3.LeaseID]time.Duration
}

// see notes lease as registered now (the first time: its granted TTL).
func (w leaseWatch) see(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID, ttl time.Duration) {
	if _, ok := w.first[lease]; ok || lease == 0 {
		return
	}
	w.first[lease] = time.Now()
	w.granted[lease] = ttl
	if resp, err := cli.TimeToLive(ctx, lease); err == nil && resp.GrantedTTL > 0 {
		w.granted[lease] = time.Duration(resp.GrantedTTL) * time.Second
	}
}

// running reports whether lease (still registered) was renewed since it
// was first seen, by a running process: it would expire, unrenewed, by
// its first sight plus its granted TTL, and its time to live now reaches
// past that; or it outlived that by a second (etcd revokes expired
// leases in a loop, every 500 ms).
func (w leaseWatch) running(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) bool {
	if lease == 0 {
		return true // a key without a lease never expires
	}
	first, ok := w.first[lease]
	if !ok {
		return false
	}
	unrenewed := first.Add(w.granted[lease])
	if time.Now().After(unrenewed.Add(time.Second)) {
		return true
	}
	resp, err := cli.TimeToLive(ctx, lease)
	// Whole seconds, rounded down: the lease lives at least that long.
	return err == nil && resp.TTL > 0 && time.Now().Add(time.Duration(resp.TTL)*time.Second).After(unrenewed.Add(250*time.Millisecond))
}

// markRolling adds v's members to its Rolling, if v is still the view
// (at revision rev) and none of its members is registered.
func markRolling(ctx context.Context, cli *clientv3.Client, viewKey, nodes string, v View, rev int64) (bool, error) {
	for _, id := range v.Members {
		v.Rolling.Add(id)
	}
	val, err := encodeView(v)
	if err != nil {
		return false, err
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(viewKey), "=", rev)}
	for _, id := range v.Members {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(nodes+strconv.Itoa(int(id))), "=", 0))
	}
	tr, err := cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(viewKey, val)).Commit()
	if err != nil {
		return false, fmt.Errorf("marking %v's members as rolling: %w", v, err)
	}
	return tr.Succeeded, nil
}

// Rolled takes this node out of the view record's Rolling: its
// transaction records are rolled forward (acknowledged) and reset.
func (m *Member) Rolled(ctx context.Context) error {
	return m.rewriteView(ctx, "record its rolls", errNoView, func(v *View) (bool, error) {
		if !v.Rolling.Has(m.node) {
			return false, nil
		}
		v.Rolling.Remove(m.node)
		return true, nil
	})
}

// WaitRolled returns once the view record lists no node as rolling, or
// fails with ErrRollingTimeout, naming the nodes, after timeout.
func (m *Member) WaitRolled(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		v := m.View()
		if v.Rolling.Empty() {
			return nil
		}
		select {
		case <-m.lost:
			return fmt.Errorf("membership: node %d waiting for nodes %v to roll their transaction records: %w", m.node, v.Rolling, m.Err())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %v: nodes %v (in %v)", ErrRollingTimeout, timeout, v.Rolling, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ForgetRolling takes node out of cluster cfg.Cluster's Rolling: an
// operator's way to let the others start without a node that will not
// come back (its transaction records, if it had any, are lost).
func ForgetRolling(ctx context.Context, cfg Config, node protocol.NodeID) (bool, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: max(cfg.DialTimeout, time.Second), Logger: zap.NewNop()})
	if err != nil {
		return false, fmt.Errorf("membership: etcd client for %v: %w", cfg.Endpoints, err)
	}
	defer cli.Close()
	m := &Member{node: node, cli: cli, viewKey: "/scalestore/" + cfg.Cluster + "/view"}
	resp, err := cli.Get(ctx, m.viewKey)
	if err != nil {
		return false, fmt.Errorf("membership: reading cluster %s's view: %w", cfg.Cluster, err)
	}
	if len(resp.Kvs) != 1 {
		return false, nil
	}
	v, err := decodeView(resp.Kvs[0].Value)
	if err != nil || !v.Rolling.Has(node) {
		return false, err
	}
	return true, m.Rolled(ctx)
}

// retire replaces a view whose only member is this node by a view of
// no member: the restart decision then lists nobody as rolling, and the
// cluster restarts with any of its nodes. A view with other members is
// left as it is (they agree the next one, as survivors).
func (m *Member) retire(ctx context.Context) error {
	resp, err := m.cli.Get(ctx, m.viewKey)
	if err != nil {
		return fmt.Errorf("membership: node %d: reading the view to retire: %w", m.node, err)
	}
	if len(resp.Kvs) != 1 {
		return nil
	}
	kv := resp.Kvs[0]
	v, err := decodeView(kv.Value)
	if err != nil || len(v.Members) != 1 || v.Members[0] != m.node {
		return nil
	}
	v.Number++
	v.Members = nil
	val, err := encodeView(v)
	if err != nil {
		return err
	}
	if _, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(m.viewKey), "=", kv.ModRevision)).
		Then(clientv3.OpPut(m.viewKey, val)).Commit(); err != nil {
		return fmt.Errorf("membership: node %d: retiring view %d: %w", m.node, v.Number-1, err)
	}
	return nil
}
