package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/scalestore-go/scalestore/protocol"
)

// Errors a caller tells apart with errors.Is.
var (
	// ErrNodeIDTaken: another live process holds this node id.
	ErrNodeIDTaken = errors.New("another process has this id")
	// ErrUnreachable: etcd did not answer within Config.DialTimeout.
	ErrUnreachable = errors.New("unreachable")
	// ErrLeaseLost: the lease is gone or could not be renewed in time (Err
	// after Lost closed).
	ErrLeaseLost = errors.New("membership: lease lost")
	// ErrClosed: Leave or Close was called (Err after Lost closed).
	ErrClosed = errors.New("membership: member closed")
)

// Defaults for the zero values of Config.
const (
	DefaultLeaseTTL    = 2 * time.Second
	DefaultDialTimeout = 5 * time.Second
)

// viewsBuffer is the capacity of the Views channel.
const viewsBuffer = 16

// Config says which cluster to join, as which node, and how fast to detect
// failures.
type Config struct {
	Endpoints   []string        // etcd client URLs, e.g. "http://127.0.0.1:2379"
	Cluster     string          // cluster id (the key prefix is /scalestore/<Cluster>/)
	Node        protocol.NodeID // this node's id
	Addr        string          // what this node advertises (host:port), named to a second process that tries the same id
	LeaseTTL    time.Duration   // default 2s; etcd TTLs are whole seconds: rounded up, minimum 1s (the server may grant more; the granted TTL is used)
	DialTimeout time.Duration   // default 5s: how long Join tries to reach etcd before failing
	// Replicas is how many nodes keep each directory's pages (1 or 2;
	// 0 is 1): with 2, the views this member proposes carry the record of
	// current copies (View.Current). Every member of a cluster must have
	// the same.
	Replicas int
	Logger   *slog.Logger // nil: discard
}

// nodeInfo is the value of a node key: who holds the id, for the error
// that a second process with the same id gets.
type nodeInfo struct {
	Addr     string    `json:"addr"`
	PID      int       `json:"pid"`
	Hostname string    `json:"hostname"`
	Start    time.Time `json:"start"`
}

// Member is this process's membership of the cluster: its lease, its node
// key and the views it has seen. Its methods are safe for concurrent use.
type Member struct {
	node    protocol.NodeID
	log     *slog.Logger
	cli     *clientv3.Client
	lease   clientv3.LeaseID
	ttl     time.Duration // granted by the server
	margin  time.Duration
	prefix  string
	nodeKey string
	viewKey string
	regRev  int64 // revision at which this process created its node key
	// replicas: Config.Replicas (1 or 2).
	replicas int

	ctx    context.Context // canceled by Leave and Close: stops both goroutines
	cancel context.CancelFunc
	wg     sync.WaitGroup

	views  chan View
	joined chan struct{} // closed when a view that includes this registration is agreed
	lost   chan struct{}

	mu         sync.Mutex
	view       View
	validUntil time.Time
	err        error
	joinedDone bool

	lostOnce  sync.Once
	closeOnce sync.Once
	closeErr  error

	// pauseRenewals (a test hook, and Partition): while set, the renewal goroutine sends
	// no keepalives (as if this process were stopped or partitioned).
	pauseRenewals atomic.Bool
}

// Join connects to etcd, takes a lease, registers this node's key under it
// (failing with ErrNodeIDTaken if the key exists) and returns once a view
// containing this node is agreed. ctx bounds the whole join; DialTimeout
// bounds only the first contact with etcd.
func Join(ctx context.Context, cfg Config) (*Member, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("membership: no etcd endpoints")
	}
	if cfg.Cluster == "" || strings.ContainsAny(cfg.Cluster, "/ \t\n") {
		return nil, fmt.Errorf("membership: cluster id %q: must be non-empty, without '/' or spaces", cfg.Cluster)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Replicas < 0 || cfg.Replicas > 2 {
		return nil, fmt.Errorf("membership: %d replicas: want 1 or 2", cfg.Replicas)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("cluster", cfg.Cluster, "node", int(cfg.Node))

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("membership: etcd client for %v: %w", cfg.Endpoints, err)
	}
	m, err := register(ctx, cfg, log, cli)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(2)
	go m.renewLoop()
	go m.watchLoop()

	select {
	case <-m.joined:
		log.Info("joined", "view", m.View().String(), "ttl", m.ttl)
		return m, nil
	case <-m.lost:
		err = m.Err()
	case <-ctx.Done():
		err = ctx.Err()
	}
	// Give the id back at once rather than after the lease's TTL.
	rctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
	defer cancel()
	_ = m.Leave(rctx)
	return nil, fmt.Errorf("membership: node %d joined cluster %s but no view with it was agreed: %w", cfg.Node, cfg.Cluster, err)
}

// register checks that etcd answers, takes the lease and creates the node
// key. On error it has revoked any lease it took.
func register(ctx context.Context, cfg Config, log *slog.Logger, cli *clientv3.Client) (*Member, error) {
	prefix := "/scalestore/" + cfg.Cluster + "/"
	m := &Member{
		node:     cfg.Node,
		log:      log,
		cli:      cli,
		prefix:   prefix,
		nodeKey:  prefix + "nodes/" + strconv.Itoa(int(cfg.Node)),
		viewKey:  prefix + "view",
		views:    make(chan View, viewsBuffer),
		joined:   make(chan struct{}),
		lost:     make(chan struct{}),
		replicas: max(cfg.Replicas, 1),
	}

	// clientv3.New does not dial eagerly: a linearizable read is the first
	// moment we know a server (with a leader) answers.
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	_, err := cli.Get(dctx, m.viewKey)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			// The caller's deadline came first: etcd did not answer
			// within it either.
			return nil, fmt.Errorf("membership: etcd at %v %w within the join's deadline: %w", cfg.Endpoints, ErrUnreachable, ctx.Err())
		}
		if derr := probe(cfg.Endpoints); derr != nil {
			// The client only says its deadline passed; a refused
			// connection tells the operator that no etcd runs there.
			err = fmt.Errorf("%w (%v)", err, derr)
		}
		return nil, fmt.Errorf("membership: etcd at %v %w after %v: %w", cfg.Endpoints, ErrUnreachable, cfg.DialTimeout, err)
	}

	// etcd TTLs are whole seconds; round up so that the lease is never
	// shorter than asked for.
	ttlSec := max(int64(math.Ceil(cfg.LeaseTTL.Seconds())), 1)
	t0 := time.Now()
	grant, err := cli.Grant(ctx, ttlSec)
	if err != nil {
		return nil, fmt.Errorf("membership: granting a %ds lease: %w", ttlSec, err)
	}
	if grant.TTL <= 0 {
		return nil, fmt.Errorf("membership: etcd granted lease %x with TTL %d", grant.ID, grant.TTL)
	}
	m.lease = grant.ID
	// The server may grant more than asked (its minimum TTL follows its
	// election timeout): what it granted is what it enforces.
	m.ttl = time.Duration(grant.TTL) * time.Second
	m.margin = m.ttl / 10
	m.validUntil = t0.Add(m.ttl - m.margin)
	revoke := func() {
		rctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
		defer cancel()
		if _, err := cli.Revoke(rctx, m.lease); err != nil {
			log.Warn("revoking lease after failed join", "lease", fmt.Sprintf("%x", int64(m.lease)), "err", err)
		}
	}

	host, _ := os.Hostname()
	info, err := json.Marshal(nodeInfo{Addr: cfg.Addr, PID: os.Getpid(), Hostname: host, Start: time.Now().UTC()})
	if err != nil {
		revoke()
		return nil, fmt.Errorf("membership: encoding node info: %w", err)
	}
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(m.nodeKey), "=", 0)).
		Then(clientv3.OpPut(m.nodeKey, string(info), clientv3.WithLease(m.lease))).
		Else(clientv3.OpGet(m.nodeKey)).
		Commit()
	if err != nil {
		revoke()
		return nil, fmt.Errorf("membership: registering node %d at %s: %w", cfg.Node, m.nodeKey, err)
	}
	if !resp.Succeeded {
		revoke()
		return nil, takenError(cfg.Node, resp)
	}
	m.regRev = resp.Header.Revision
	log.Debug("registered", "key", m.nodeKey, "revision", m.regRev, "lease", fmt.Sprintf("%x", int64(m.lease)), "ttl", m.ttl)
	return m, nil
}

// probe dials the endpoints' hosts briefly and returns the first dial
// error, or nil if one of them accepts a TCP connection.
func probe(endpoints []string) error {
	var first error
	for _, ep := range endpoints {
		host := ep
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			host = u.Host
		}
		c, err := net.DialTimeout("tcp", host, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// takenError names the process that holds the id, from the Else branch of
// the registration transaction.
func takenError(node protocol.NodeID, resp *clientv3.TxnResponse) error {
	var info nodeInfo
	if len(resp.Responses) == 1 {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
			if err := json.Unmarshal(kvs[0].Value, &info); err != nil {
				return fmt.Errorf("node %d is already a member (unreadable registration %q): %w", node, kvs[0].Value, ErrNodeIDTaken)
			}
		}
	}
	return fmt.Errorf("node %d is already a member (addr %s, pid %d on host %s): %w",
		node, info.Addr, info.PID, info.Hostname, ErrNodeIDTaken)
}

// View returns the latest agreed view this member has seen.
func (m *Member) View() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneView(m.view)
}

// Views delivers every new view in order of number. The channel is buffered;
// if the consumer falls behind, the oldest undelivered views are dropped, so
// intermediate views may be skipped, but the latest view is always
// delivered eventually and numbers strictly increase. Closed by Leave and
// Close.
func (m *Member) Views() <-chan View { return m.views }

// ValidUntil is the instant (by this process's monotonic clock) until which
// this member's lease is certainly still valid at the server: the time
// before sending the last successful keepalive, plus the granted TTL, minus
// a margin of TTL/10. Serve only while time.Now() is before it.
func (m *Member) ValidUntil() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.validUntil
}

// Lost is closed when this member may no longer serve: the server said the
// lease is gone, this node's key was deleted or taken over, ValidUntil
// passed without a successful renewal, or Leave or Close was called. Err
// says which.
func (m *Member) Lost() <-chan struct{} { return m.lost }

// Err returns why Lost closed, nil while it is open.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Leave revokes the lease, so that the others see this node leave at once,
// and stops. The member cannot be used afterwards.
func (m *Member) Leave(ctx context.Context) error { return m.leave(ctx, false) }

// Retire is Leave on a clean stop (no commit under way): a view whose
// only member is this node is first replaced by a view of no member
// (retire), so that the restart decision lists nobody as rolling.
func (m *Member) Retire(ctx context.Context) error { return m.leave(ctx, true) }

func (m *Member) leave(ctx context.Context, clean bool) error {
	m.lose(ErrClosed)
	var revokeErr error
	if m.ctx != nil && m.ctx.Err() == nil {
		// Stop renewing before revoking, so no keepalive races the revoke.
		m.stop()
		if clean {
			// After stop: no proposal of this member's brings it back.
			if err := m.retire(ctx); err != nil {
				m.log.Warn("recording a clean stop", "err", err)
			}
		}
		_, err := m.cli.Revoke(ctx, m.lease)
		// An expired lease is as good as a revoked one here.
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			revokeErr = fmt.Errorf("membership: node %d leaving: revoking lease %x: %w", m.node, int64(m.lease), err)
		}
	}
	// After stop no renewal can move it again.
	m.mu.Lock()
	m.validUntil = time.Time{}
	m.mu.Unlock()
	return errors.Join(revokeErr, m.Close())
}

// Close stops renewing and watching without revoking the lease (the others
// see this node leave when the lease expires, as after a crash) and closes
// the etcd client.
func (m *Member) Close() error {
	m.lose(ErrClosed)
	m.closeOnce.Do(func() {
		m.stop()
		if err := m.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			m.closeErr = fmt.Errorf("membership: closing etcd client: %w", err)
		}
	})
	return m.closeErr
}

// stop ends both goroutines and waits for them.
func (m *Member) stop() {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
}

// lose closes Lost once, recording why.
func (m *Member) lose(err error) {
	m.lostOnce.Do(func() {
		m.mu.Lock()
		m.err = err
		m.mu.Unlock()
		if !errors.Is(err, ErrClosed) {
			m.log.Warn("membership lost", "err", err)
		}
		close(m.lost)
	})
}

// renewLoop renews the lease every TTL/3 with one keepalive at a time,
// rather than clientv3's KeepAlive, because ValidUntil needs the time each
// successful keepalive was sent. Failed renewals are retried until
// ValidUntil passes; then Lost closes.
func (m *Member) renewLoop() {
	defer m.wg.Done()
	interval := m.ttl / 3
	retry := max(m.ttl/20, 10*time.Millisecond)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-timer.C:
		}
		validUntil := m.ValidUntil()
		if !time.Now().Before(validUntil) {
			m.lose(fmt.Errorf("%w: no renewal succeeded before its validity ended (%v TTL)", ErrLeaseLost, m.ttl))
			return
		}
		if m.pauseRenewals.Load() {
			timer.Reset(min(interval, time.Until(validUntil)))
			continue
		}
		// Bound the call by ValidUntil: KeepAliveOnce retries internally,
		// and past ValidUntil a late success no longer matters.
		t0 := time.Now()
		ctx, cancel := context.WithDeadline(m.ctx, validUntil)
		resp, err := m.cli.KeepAliveOnce(ctx, m.lease)
		cancel()
		switch {
		case err == nil:
			m.mu.Lock()
			if v := t0.Add(time.Duration(resp.TTL)*time.Second - m.margin); v.After(m.validUntil) {
				m.validUntil = v
			}
			m.mu.Unlock()
			timer.Reset(interval)
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound):
			m.lose(fmt.Errorf("%w: etcd says lease %x is gone: %w", ErrLeaseLost, int64(m.lease), err))
			return
		case m.ctx.Err() != nil:
			return
		default:
			m.log.Warn("lease renewal failed; retrying", "err", err, "valid_for", time.Until(validUntil))
			timer.Reset(min(retry, max(time.Until(validUntil), 0)))
		}
	}
}

// watchState is what the watch goroutine knows of the prefix, as of the
// last event it applied. Only that goroutine touches it.
type watchState struct {
	live       map[protocol.NodeID]int64 // node id -> create revision of its key
	viewRev    int64                     // mod revision of the view key, 0 if absent
	viewOK     bool                      // the view key holds a valid view newer than any seen
	view       View                      // the latest valid view
	viewAt     int64                     // its mod revision
	agreedAt   int64                     // the revision at which its number was agreed (a Current update keeps it)
	highest    uint64                    // highest view number seen, valid or not
	proposedAt int64                     // viewRev of the last proposal sent, -1 none
	proposal   string                    // its encoded view
}

// watchLoop reads the prefix, then follows it with one watch, proposing
// views as the rule in the package comment says. When the watch fails
// (compaction, lost leader, closed stream) it reads the prefix again.
func (m *Member) watchLoop() {
	defer m.wg.Done()
	defer close(m.views)
	st := &watchState{live: map[protocol.NodeID]int64{}, proposedAt: -1}
	backoff := 50 * time.Millisecond
	for m.ctx.Err() == nil {
		rev, err := m.load(st)
		if err != nil {
			m.log.Warn("reading membership; retrying", "err", err, "in", backoff)
			if !sleep(m.ctx, backoff) {
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		// WithRequireLeader: a server cut off from its cluster cancels the
		// watch instead of leaving us on a stale stream.
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(m.ctx))
		wch := m.cli.Watch(wctx, m.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		m.follow(st, wch)
		wcancel()
	}
}

// load reads the whole prefix into st and returns the revision read at.
func (m *Member) load(st *watchState) (int64, error) {
	ctx, cancel := context.WithTimeout(m.ctx, m.ttl)
	defer cancel()
	resp, err := m.cli.Get(ctx, m.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("membership: reading %s: %w", m.prefix, err)
	}
	clear(st.live)
	st.viewRev, st.viewOK = 0, false
	for _, kv := range resp.Kvs {
		m.apply(st, mvccpb.PUT, kv)
	}
	return resp.Header.Revision, nil
}

// follow applies the watch's events and proposes views until the watch ends
// or the member stops.
func (m *Member) follow(st *watchState, wch clientv3.WatchChan) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	m.decide(st, retry)
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-retry.C:
			st.proposedAt = -1
			m.decide(st, retry)
		case resp, ok := <-wch:
			if !ok {
				return
			}
			if err := resp.Err(); err != nil || resp.Canceled {
				m.log.Info("watch ended; reading again", "err", err)
				return
			}
			for _, ev := range resp.Events {
				m.apply(st, ev.Type, ev.Kv)
			}
			m.decide(st, retry)
		}
	}
}

// apply records one key's new state.
func (m *Member) apply(st *watchState, typ mvccpb.Event_EventType, kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	if key == m.viewKey {
		if typ == mvccpb.DELETE {
			st.viewRev, st.viewOK = 0, false
			return
		}
		st.viewRev = kv.ModRevision
		v, err := decodeView(kv.Value)
		if err != nil {
			// Someone wrote garbage: not a view; the next proposal
			// replaces it.
			m.log.Warn("ignoring invalid view", "err", err)
			st.viewOK = false
			return
		}
		if kv.ModRevision == st.viewAt {
			st.viewOK = true // read again after the watch was restarted
			return
		}
		if st.viewOK && v.Number == st.view.Number && slices.Equal(v.Members, st.view.Members) {
			// A node recorded a copy it finished (UpdateCurrent), or
			// rolled its records (Rolled): the same view, updated.
			st.view, st.viewAt = v, kv.ModRevision
			m.publish(v, st.agreedAt)
			return
		}
		if v.Number <= st.highest {
			// Numbers only increase: a lower one was written by hand
			// (or the key was deleted and recreated); replace it.
			st.viewOK = false
			return
		}
		st.highest = v.Number
		st.view, st.viewAt, st.agreedAt, st.viewOK = v, kv.ModRevision, kv.ModRevision, true
		m.publish(v, kv.ModRevision)
		return
	}
	name, ok := strings.CutPrefix(key, m.prefix+"nodes/")
	if !ok {
		return
	}
	id, err := strconv.ParseUint(name, 10, 8)
	if err != nil {
		m.log.Warn("ignoring node key with an invalid id", "key", key)
		return
	}
	if typ == mvccpb.DELETE {
		delete(st.live, protocol.NodeID(id))
	} else {
		st.live[protocol.NodeID(id)] = kv.CreateRevision
	}
}

// decide proposes the next view if the current one does not match the live
// node keys, once per (view revision, proposal); a failed request is retried
// from the retry timer.
func (m *Member) decide(st *watchState, retry *time.Timer) {
	if rev, ok := st.live[m.node]; !ok || rev != m.regRev {
		// Our key expired, was deleted, or belongs to a newer process now:
		// our lease is certainly gone.
		m.lose(fmt.Errorf("%w: node key %s was deleted or replaced", ErrLeaseLost, m.nodeKey))
	}
	members := make([]protocol.NodeID, 0, len(st.live))
	stale := !st.viewOK
	for id, created := range st.live {
		members = append(members, id)
		if created > st.agreedAt {
			stale = true // registered after the view was agreed
		}
	}
	slices.Sort(members)
	if !stale && slices.Equal(members, st.view.Members) {
		return
	}
	next := View{Number: st.highest + 1, Members: members}
	if st.viewOK {
		// Nodes that still must roll their records stay listed until
		// they did (Restart, Rolled).
		next.Rolling = st.view.Rolling
	}
	// The cluster's replica count is the record's: a member started with
	// another count proposes the cluster's, and refuses the view itself
	// (cluster's viewFollower), so it cannot change it for the others.
	replicas := m.replicas
	if st.viewOK {
		replicas = max(st.view.Replicas, 1)
	}
	if replicas > 1 {
		var prev map[protocol.NodeID]protocol.NodeSet
		if st.viewOK {
			prev = st.view.Current
		}
		next.Replicas = replicas
		next.Current = NextCurrent(prev, next.Live())
	}
	val, err := encodeView(next)
	if err != nil {
		m.log.Error("cannot propose", "err", err)
		return
	}
	if st.proposedAt == st.viewRev && st.proposal == val {
		return // already proposed; the watch will show what won
	}
	cmp := clientv3.Compare(clientv3.ModRevision(m.viewKey), "=", st.viewRev)
	if st.viewRev == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(m.viewKey), "=", 0)
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.ttl)
	resp, err := m.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(m.viewKey, val)).Commit()
	cancel()
	if err != nil {
		if m.ctx.Err() == nil {
			m.log.Warn("proposing view failed; retrying", "view", next.String(), "err", err)
			retry.Reset(m.ttl / 10)
		}
		return
	}
	st.proposedAt, st.proposal = st.viewRev, val
	m.log.Debug("proposed view", "view", next.String(), "won", resp.Succeeded)
}

// publish makes v the member's view and hands it to Views. rev is the
// revision at which v was agreed.
func (m *Member) publish(v View, rev int64) {
	m.mu.Lock()
	m.view = v
	if !m.joinedDone && rev > m.regRev && v.Has(m.node) {
		m.joinedDone = true
		close(m.joined)
	}
	m.mu.Unlock()
	m.log.Debug("new view", "view", v.String())
	// Only this goroutine sends, so after one receive from a full channel
	// the send cannot block: drop the oldest view, never the newest.
	for {
		select {
		case m.views <- cloneView(v):
			return
		default:
		}
		select {
		case <-m.views:
		default:
		}
	}
}

func cloneView(v View) View {
	return View{Number: v.Number, Members: slices.Clone(v.Members), Replicas: v.Replicas, Current: maps.Clone(v.Current), Rolling: v.Rolling}
}

// ForgetCopies removes node cfg.Node from every directory's current
// copies in the cluster's view record, before it joins (it registers
// nothing): its stores were made afresh (a new disk, --reformat), so
// whatever the record counted it as holding it no longer holds. A
// directory it was the last holder of is then lost, as its pages are. No
// record, or one with one replica: nothing to do.
func ForgetCopies(ctx context.Context, cfg Config) (forgot int, err error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: max(cfg.DialTimeout, time.Second), Logger: zap.NewNop()})
	if err != nil {
		return 0, fmt.Errorf("membership: etcd client for %v: %w", cfg.Endpoints, err)
	}
	defer cli.Close()
	key := "/scalestore/" + cfg.Cluster + "/view"
	for {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("membership: etcd at %v %w: reading the view to forget node %d's copies: %w", cfg.Endpoints, unreachable(ctx), cfg.Node, err)
		}
		if len(resp.Kvs) != 1 {
			return 0, nil
		}
		kv := resp.Kvs[0]
		v, err := decodeView(kv.Value)
		if err != nil || v.Replicas <= 1 {
			return 0, nil // not a view (the next proposal replaces it), or nothing recorded
		}
		forgot = 0
		for d, cur := range v.Current {
			if cur.Has(cfg.Node) {
				cur.Remove(cfg.Node)
				v.Current[d] = cur
				forgot++
			}
		}
		if forgot == 0 {
			return 0, nil
		}
		val, err := encodeView(v)
		if err != nil {
			return 0, err
		}
		tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).Then(clientv3.OpPut(key, val)).Commit()
		if err != nil {
			return 0, fmt.Errorf("membership: forgetting node %d's copies: %w", cfg.Node, err)
		}
		if tr.Succeeded {
			return forgot, nil
		}
	}
}

// unreachable is ErrUnreachable when ctx's deadline passed (etcd did not
// answer in time), else an error that says only that the read failed.
func unreachable(ctx context.Context) error {
	if ctx.Err() != nil {
		return ErrUnreachable
	}
	return errReadFailed
}

var errReadFailed = errors.New("failed")

// Recorded reports whether cluster cfg.Cluster's view record on etcd
// has replicated directories and a record of directory cfg.Node's
// copies: the node was a member before, so a node whose store was made
// afresh joins the cluster rather than creating it.
func Recorded(ctx context.Context, cfg Config) (bool, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: max(cfg.DialTimeout, time.Second), Logger: zap.NewNop()})
	if err != nil {
		return false, fmt.Errorf("membership: etcd client for %v: %w", cfg.Endpoints, err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/scalestore/"+cfg.Cluster+"/view")
	if err != nil {
		return false, fmt.Errorf("membership: etcd at %v %w: reading cluster %s's view: %w", cfg.Endpoints, unreachable(ctx), cfg.Cluster, err)
	}
	if len(resp.Kvs) != 1 {
		return false, nil
	}
	v, err := decodeView(resp.Kvs[0].Value)
	if err != nil || v.Replicas <= 1 {
		return false, nil
	}
	_, ok := v.Current[cfg.Node]
	return ok, nil
}

// ErrViewChanged: UpdateCurrent found a newer view than the one its copy
// was made in; the copy does not count.
var ErrViewChanged = errors.New("membership: the view changed")

// UpdateCurrent records in view number, if it is still the agreed view,
// what update does to its current copies (v.Current; the rest of v must
// stay as it is) (a node adds itself to a
// directory it finished copying: docs/replication.md). It fails with
// ErrViewChanged when the view changed first: what was copied in an older
// view does not count. Concurrent updates of one view are retried.
func (m *Member) UpdateCurrent(ctx context.Context, number uint64, update func(v View)) error {
	return m.rewriteView(ctx, "record a copy", ErrViewChanged, func(v *View) (bool, error) {
		if v.Number != number {
			return false, fmt.Errorf("%w: view %d, not %d", ErrViewChanged, v.Number, number)
		}
		if v.Replicas <= 1 {
			return false, fmt.Errorf("membership: view %d has one replica: no copies to record", number)
		}
		update(*v)
		return true, nil
	})
}

// rewriteView changes the view record with change, in a compare-and-swap
// on its revision, read again and retried while concurrent writers win.
// change says whether there is anything to write; its error ends the
// call. why names the change in errors; gone is the error for a view
// key that does not exist.
func (m *Member) rewriteView(ctx context.Context, why string, gone error, change func(v *View) (bool, error)) error {
	for {
		resp, err := m.cli.Get(ctx, m.viewKey)
		if err != nil {
			return fmt.Errorf("membership: node %d: reading the view to %s: %w", m.node, why, err)
		}
		if len(resp.Kvs) != 1 {
			return fmt.Errorf("%w: node %d: the view key is gone", gone, m.node)
		}
		kv := resp.Kvs[0]
		v, err := decodeView(kv.Value)
		if err != nil {
			return err
		}
		if write, err := change(&v); err != nil || !write {
			return err
		}
		val, err := encodeView(v)
		if err != nil {
			return err
		}
		tr, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(m.viewKey), "=", kv.ModRevision)).
			Then(clientv3.OpPut(m.viewKey, val)).Commit()
		if err != nil {
			return fmt.Errorf("membership: node %d: writing the view to %s: %w", m.node, why, err)
		}
		if tr.Succeeded {
			return nil
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Partition stops (on) or resumes the lease's renewals, as a network
// partition between this process and etcd would: fault injection for
// crashtest --cluster (node --fault-signals). Once ValidUntil passes
// without a renewal, Lost closes.
func (m *Member) Partition(on bool) { m.pauseRenewals.Store(on) }
