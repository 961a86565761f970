package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
)

// ttl is the lease TTL of the tests: the shortest etcd grants with the
// embedded server's timings.
const ttl = time.Second

func startEtcd(t *testing.T) *Embedded {
	t.Helper()
	start := time.Now()
	e, err := StartEmbedded(t.TempDir(), Ephemeral())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("embedded etcd at %v ready in %v", e.Endpoints(), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func testConfig(e *Embedded, id protocol.NodeID) Config {
	var log *slog.Logger
	if os.Getenv("MEMBERSHIP_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return Config{
		Endpoints: e.Endpoints(),
		Cluster:   "test",
		Node:      id,
		Addr:      "127.0.0.1:" + strconv.Itoa(7000+int(id)),
		LeaseTTL:  ttl,
		Logger:    log,
	}
}

func join(t *testing.T, e *Embedded, id protocol.NodeID) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	m, err := Join(ctx, testConfig(e, id))
	if err != nil {
		t.Fatalf("join %d: %v", id, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// waitAll waits until every member's view satisfies ok, and returns the
// time it happened.
func waitAll(t *testing.T, timeout time.Duration, what string, ok func(View) bool, ms ...*Member) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		all := true
		for _, m := range ms {
			if !ok(m.View()) {
				all = false
				break
			}
		}
		if all {
			return time.Now()
		}
		if time.Now().After(deadline) {
			var got []string
			for _, m := range ms {
				got = append(got, fmt.Sprintf("node %d: %v", m.node, m.View()))
			}
			t.Fatalf("after %v, not every member sees %s: %s", timeout, what, strings.Join(got, "; "))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func members(ids ...protocol.NodeID) func(View) bool {
	return func(v View) bool { return slices.Equal(v.Members, ids) }
}

func sameView(t *testing.T, ms ...*Member) View {
	t.Helper()
	v := ms[0].View()
	for _, m := range ms[1:] {
		if w := m.View(); w.String() != v.String() {
			t.Fatalf("node %d sees %v, node %d sees %v", ms[0].node, v, m.node, w)
		}
	}
	return v
}

func TestViewString(t *testing.T) {
	v := View{Number: 7, Members: []protocol.NodeID{0, 2}}
	if got := v.String(); got != "view 7 {0 2}" {
		t.Fatalf("String() = %q", got)
	}
	if !v.Has(2) || v.Has(1) {
		t.Fatalf("Has wrong on %v", v)
	}
	enc, err := encodeView(v)
	if err != nil {
		t.Fatal(err)
	}
	if enc != `{"number":7,"members":[0,2]}` {
		t.Fatalf("encoded %s", enc)
	}
	back, err := decodeView([]byte(`{"number":7,"members":[2,0,2]}`))
	if err != nil || back.String() != v.String() {
		t.Fatalf("decoded %v, %v", back, err)
	}
	for _, bad := range []string{``, `{`, `{"number":0,"members":[]}`, `{"number":1,"members":[256]}`, `{"number":1,"members":[-1]}`, `[]`} {
		if _, err := decodeView([]byte(bad)); err == nil {
			t.Errorf("decodeView(%q) accepted", bad)
		}
	}
}

func TestThreeMembersAgree(t *testing.T) {
	e := startEtcd(t)
	m0, m1, m2 := join(t, e, 0), join(t, e, 1), join(t, e, 2)
	for _, m := range []*Member{m0, m1, m2} {
		if !m.View().Has(m.node) {
			t.Fatalf("Join of node %d returned with %v", m.node, m.View())
		}
	}
	waitAll(t, 2*time.Second, "{0 1 2}", members(0, 1, 2), m0, m1, m2)
	v := sameView(t, m0, m1, m2)
	t.Logf("agreed: %v", v)
	if d := time.Until(m0.ValidUntil()); d <= 0 || d > ttl {
		t.Fatalf("ValidUntil is %v from now, want within (0, %v]", d, ttl)
	}
}

func TestCrashedMemberRemovedAndRejoins(t *testing.T) {
	e := startEtcd(t)
	m0, m1, m2 := join(t, e, 0), join(t, e, 1), join(t, e, 2)
	waitAll(t, 2*time.Second, "{0 1 2}", members(0, 1, 2), m0, m1, m2)
	before := m0.View()

	crashed := time.Now()
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	limit := 2*ttl + time.Second
	seen := waitAll(t, limit, "{0 1}", members(0, 1), m0, m1)
	t.Logf("crash (Close without revoke) to agreed view without it: %v (TTL %v, limit %v)",
		seen.Sub(crashed).Round(time.Millisecond), ttl, limit)
	after := sameView(t, m0, m1)
	if after.Number <= before.Number {
		t.Fatalf("view number went from %d to %d", before.Number, after.Number)
	}
	for range m2.Views() {
		// Close has closed the channel; views still buffered drain here.
	}

	again := join(t, e, 2)
	waitAll(t, 2*time.Second, "{0 1 2}", members(0, 1, 2), m0, m1, again)
	rejoined := sameView(t, m0, m1, again)
	if rejoined.Number <= after.Number {
		t.Fatalf("rejoin view %v not after %v", rejoined, after)
	}
	t.Logf("views: %v, %v, %v", before, after, rejoined)
}

func TestLeaveIsSeenPromptly(t *testing.T) {
	e := startEtcd(t)
	m0, m1, m2 := join(t, e, 0), join(t, e, 1), join(t, e, 2)
	waitAll(t, 2*time.Second, "{0 1 2}", members(0, 1, 2), m0, m1, m2)
	left := time.Now()
	if err := m1.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	seen := waitAll(t, time.Second, "{0 2}", members(0, 2), m0, m2)
	t.Logf("Leave to agreed view: %v", seen.Sub(left).Round(time.Millisecond))
	if !errors.Is(m1.Err(), ErrClosed) {
		t.Fatalf("Err after Leave = %v", m1.Err())
	}
	if m1.ValidUntil().After(time.Now()) {
		t.Fatalf("ValidUntil after Leave is in the future")
	}
}

func TestSecondProcessWithSameID(t *testing.T) {
	e := startEtcd(t)
	first := join(t, e, 2)
	cfg := testConfig(e, 2)
	cfg.Addr = "127.0.0.1:9999"
	m, err := Join(t.Context(), cfg)
	if err == nil {
		_ = m.Close()
		t.Fatal("second Join with node id 2 succeeded")
	}
	if !errors.Is(err, ErrNodeIDTaken) {
		t.Fatalf("err = %v, want ErrNodeIDTaken", err)
	}
	want := fmt.Sprintf("node 2 is already a member (addr 127.0.0.1:7002, pid %d on host ", os.Getpid())
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to contain %q", err, want)
	}
	t.Log(err)
	// The failed attempt must leave the first member undisturbed.
	time.Sleep(100 * time.Millisecond)
	select {
	case <-first.Lost():
		t.Fatalf("first member lost: %v", first.Err())
	default:
	}
	if v := first.View(); !slices.Equal(v.Members, []protocol.NodeID{2}) {
		t.Fatalf("view %v", v)
	}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	cfg := Config{Endpoints: []string{"http://" + addr}, Cluster: "test", Node: 1, DialTimeout: 500 * time.Millisecond}
	start := time.Now()
	m, err := Join(t.Context(), cfg)
	took := time.Since(start)
	if err == nil {
		_ = m.Close()
		t.Fatal("Join succeeded with nothing listening")
	}
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	if !strings.Contains(err.Error(), "etcd at [http://"+addr+"] unreachable after 500ms") {
		t.Fatalf("err = %q", err)
	}
	t.Logf("%v (after %v)", err, took.Round(time.Millisecond))
	if took > 1200*time.Millisecond {
		t.Fatalf("Join took %v to fail", took)
	}
}

func TestConcurrentProposals(t *testing.T) {
	e := startEtcd(t)
	const n = 5
	var (
		wg      sync.WaitGroup
		ms      = make([]*Member, n)
		streams = make([][]View, n)
		errs    = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			ms[i], errs[i] = Join(ctx, testConfig(e, protocol.NodeID(i)))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
	}
	var collected sync.WaitGroup
	for i, m := range ms {
		collected.Go(func() {
			for v := range m.Views() {
				streams[i] = append(streams[i], v)
			}
		})
	}
	waitAll(t, 3*time.Second, "{0 1 2 3 4}", members(0, 1, 2, 3, 4), ms...)
	final := sameView(t, ms...)
	for _, m := range ms {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	collected.Wait() // Close closed every Views channel
	noMemberGoroutines(t)

	byNumber := map[uint64]string{}
	for i, s := range streams {
		if len(s) == 0 {
			t.Fatalf("node %d saw no views", i)
		}
		for j, v := range s {
			if j > 0 && v.Number <= s[j-1].Number {
				t.Fatalf("node %d: %v after %v", i, v, s[j-1])
			}
			if prev, ok := byNumber[v.Number]; ok && prev != v.String() {
				t.Fatalf("two views with one number: %s and %v", prev, v)
			}
			byNumber[v.Number] = v.String()
		}
		if last := s[len(s)-1]; last.String() != final.String() {
			t.Fatalf("node %d ends on %v, want %v", i, last, final)
		}
		t.Logf("node %d saw %v", i, s)
	}
}

func TestLostWhenRenewalsStop(t *testing.T) {
	e := startEtcd(t)
	m0, m1, m2 := join(t, e, 0), join(t, e, 1), join(t, e, 2)
	waitAll(t, 2*time.Second, "{0 1 2}", members(0, 1, 2), m0, m1, m2)

	m2.pauseRenewals.Store(true)
	paused := time.Now()
	select {
	case <-m2.Lost():
	case <-time.After(2 * ttl):
		t.Fatalf("Lost not closed %v after renewals stopped", 2*ttl)
	}
	lost := time.Now()
	// No renewal can succeed any more, so ValidUntil is final.
	validUntil := m2.ValidUntil()
	if !errors.Is(m2.Err(), ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", m2.Err())
	}
	if lost.Before(validUntil) {
		t.Fatalf("Lost closed %v before ValidUntil", validUntil.Sub(lost))
	}
	if late := lost.Sub(validUntil); late > 100*time.Millisecond {
		t.Fatalf("Lost closed %v after ValidUntil", late)
	}
	removed := waitAll(t, 2*ttl+time.Second, "{0 1}", members(0, 1), m0, m1)
	t.Logf("renewals paused; Lost %v later (%v after ValidUntil); others removed it %v after ValidUntil",
		lost.Sub(paused).Round(time.Millisecond), lost.Sub(validUntil).Round(time.Millisecond),
		removed.Sub(validUntil).Round(time.Millisecond))
	if !validUntil.Before(removed) {
		t.Fatalf("others removed the member %v before its ValidUntil", validUntil.Sub(removed))
	}
}

// noMemberGoroutines fails if a goroutine of this package's members is still
// running (goleak is not a dependency; this checks only our own goroutines,
// which Close must end before it returns).
func noMemberGoroutines(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "membership.(*Member).") {
			t.Fatalf("goroutine still running after Close:\n%s", g)
		}
	}
}
