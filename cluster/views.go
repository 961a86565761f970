package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/membership"
	"github.com/scalestore-go/scalestore/protocol"
)

// ErrNoView: the node never became active in a membership view (etcd
// unreachable, its id taken, the view not agreed in time). It served
// nothing to its peers, so its store is as it was before the start.
var ErrNoView = errors.New("cluster: the node joined no membership view")

// viewFollower joins the node to the cluster's views on etcd and installs
// each view the members agree on in the runtime (actors.Local.ChangeView).
type viewFollower struct {
	n      *Node
	mu     sync.Mutex
	member *membership.Member
	prev   membership.View
	// activeIn is signalled each time the node becomes active in a view.
	activeIn chan uint32
	done     chan struct{}
	left     sync.Once
	// replicas: 2 with replicated directories (the views carry their
	// record of current copies).
	replicas int
}

func newViewFollower(n *Node) *viewFollower {
	return &viewFollower{n: n, activeIn: make(chan uint32, 16), done: make(chan struct{})}
}

// validUntil is the runtime's lease: until the node has joined, it does
// local work only, which needs none.
func (f *viewFollower) validUntil() time.Time {
	f.mu.Lock()
	m := f.member
	f.mu.Unlock()
	if m == nil {
		return time.Now().Add(time.Hour)
	}
	return m.ValidUntil()
}

// active runs under the runtime's lock: it must not block.
func (f *viewFollower) active(view uint32, took time.Duration) {
	f.n.log.Info("view active", "node", f.n.ID, "view", view, "took", took)
	select {
	case f.activeIn <- view:
	default:
	}
}

// join registers the node, installs its first view and waits until the
// node is active in it, then follows the views in the background.
func (f *viewFollower) join(cfg membership.Config, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = f.n.log
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// A node restarted right after it was killed finds its previous
	// process's key until that lease expires: it tries again for two lease
	// periods before it believes another live process has its id.
	ttl := cfg.LeaseTTL
	if ttl <= 0 {
		ttl = membership.DefaultLeaseTTL
	}
	taken := time.Now().Add(2*ttl + time.Second)
	var m *membership.Member
	for {
		var err error
		m, err = membership.Join(ctx, cfg)
		if err == nil {
			break
		}
		if !errors.Is(err, membership.ErrNodeIDTaken) || time.Now().After(taken) {
			return fmt.Errorf("%w: node %d: joining the membership: %w", ErrNoView, f.n.ID, err)
		}
		f.n.log.Info("node id still registered: waiting for its lease to expire", "node", f.n.ID, "err", err)
		time.Sleep(ttl / 4)
	}
	f.mu.Lock()
	f.member = m
	f.mu.Unlock()
	f.n.Member = m
	v := m.View()
	if err := f.install(v); err != nil {
		m.Leave(context.Background())
		return err
	}
	go f.follow()
	for {
		select {
		case got := <-f.activeIn:
			if uint64(got) >= v.Number {
				return nil
			}
		case <-ctx.Done():
			number, _ := f.n.RT.View()
			return fmt.Errorf("%w: node %d: not active in a view after %v (installed view %d: waiting for every member's holdings; is a member of %v down?)", ErrNoView, f.n.ID, timeout, number, m.View())
		}
	}
}

// install hands view v to the runtime. down are the nodes whose copies the
// node gives up: those that left since the previous view, or, if views
// were skipped (one of them may have been a node's death and restart),
// every other node.
func (f *viewFollower) install(v membership.View) error {
	if v.Number <= f.prev.Number {
		// Installed already (the first view comes on Views too), or the
		// same view with a copy recorded (UpdateCurrent): the runtime
		// needs only each view's record as it began.
		return nil
	}
	if want := max(f.replicas, 1); max(v.Replicas, 1) != want {
		err := fmt.Errorf("cluster: node %d: %v keeps %d replicas of each directory, this node was started with %d: every node needs the same --replicas", f.n.ID, v, max(v.Replicas, 1), want)
		f.n.RT.Expel(err)
		return err
	}
	var members, down protocol.NodeSet
	for _, id := range v.Members {
		members.Add(id)
	}
	switch {
	case f.prev.Number == 0:
	case v.Number == f.prev.Number+1:
		for _, id := range f.prev.Members {
			if !members.Has(id) {
				down.Add(id)
			}
		}
	default:
		for _, id := range f.prev.Members {
			if id != f.n.ID {
				down.Add(id)
			}
		}
	}
	f.n.log.Info("view installed", "node", f.n.ID, "view", v.Number, "members", fmt.Sprint(v.Members), "down", down.String())
	f.prev = v
	if f.replicas > 1 {
		return f.n.RT.ChangeViewCurrent(v.Number, members, down, v.Current)
	}
	return f.n.RT.ChangeView(v.Number, members, down)
}

// record adds holder to directory dir's current copies in view number
// (actors.ReplicaConfig.Record): a backup that re-replication completed,
// or (primary) a primary that caught up, kept with its backup if that was
// current.
func (f *viewFollower) record(view uint64, dir, holder protocol.NodeID, primary bool) error {
	f.mu.Lock()
	m := f.member
	f.mu.Unlock()
	if m == nil {
		return fmt.Errorf("cluster: node %d: no membership to record a copy in", f.n.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.UpdateCurrent(ctx, view, func(v membership.View) {
		cur := v.Current[dir]
		if primary {
			_, b, hb, _ := protocol.Placement(dir, v.Live(), 2)
			var keep protocol.NodeSet
			keep.Add(holder)
			if hb && cur.Has(b) {
				keep.Add(b)
			}
			cur = keep
		} else {
			cur.Add(holder)
		}
		v.Current[dir] = cur
	})
	if errors.Is(err, membership.ErrViewChanged) {
		return fmt.Errorf("%w: %w", actors.ErrViewChanged, err)
	}
	if err != nil {
		select {
		case <-m.Lost():
			// The node left, or lost its lease: its views are over, and
			// what it copied counts in none of them.
			return fmt.Errorf("%w: the node's membership ended: %w", actors.ErrViewChanged, err)
		default:
		}
	}
	if err == nil {
		f.n.log.Info("copy recorded", "node", f.n.ID, "view", view, "directory", dir, "holder", holder, "primary", primary)
	}
	return err
}

// follow installs every view the members agree on, and stops the node
// when its lease is lost (the others may have changed the view without
// it: it must serve nothing more).
func (f *viewFollower) follow() {
	m := f.member
	for {
		select {
		case v, ok := <-m.Views():
			if !ok {
				return
			}
			if err := f.install(v); err != nil {
				if !errors.Is(err, actors.ErrNotInView) {
					f.n.log.Error("installing a view", "node", f.n.ID, "view", v.String(), "err", err)
				}
				return
			}
		case <-m.Lost():
			select {
			case <-f.done:
				return // leave: not a failure
			default:
			}
			f.n.RT.Expel(fmt.Errorf("cluster: node %d: %w: %v", f.n.ID, actors.ErrLeaseLapsed, m.Err()))
			return
		case <-f.done:
			return
		}
	}
}

// leave ends the node's membership: the others see it leave at once.
// clean: a clean stop (Shutdown), with no commit under way: the last
// member records that nobody must roll transaction records for its view
// (membership.Member.Retire).
func (f *viewFollower) leave(clean bool) {
	f.left.Do(func() {
		close(f.done)
		f.mu.Lock()
		m := f.member
		f.mu.Unlock()
		if m != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			leave := m.Leave
			if clean {
				leave = m.Retire
			}
			if err := leave(ctx); err != nil {
				f.n.log.Warn("leaving the membership", "node", f.n.ID, "err", err)
			}
		}
	})
}

// kill stops following views without leaving: the lease is not revoked,
// and the others see the node leave only when it expires, as after a
// killed process.
func (f *viewFollower) kill() {
	f.left.Do(func() {
		close(f.done)
		f.mu.Lock()
		m := f.member
		f.mu.Unlock()
		if m != nil {
			m.Close()
		}
	})
}

// Partition cuts the node off its peers and etcd (on), or reconnects it:
// fault injection (node --fault-signals). Cut off longer than its lease,
// the node loses its membership and stops.
func (n *Node) Partition(on bool) {
	n.RT.Partition(on)
	if n.views != nil {
		n.views.mu.Lock()
		m := n.views.member
		n.views.mu.Unlock()
		if m != nil {
			m.Partition(on)
		}
	}
}
