package scalestore

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// freePorts finds n free loopback TCP addresses.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs
}

func peersOf(addrs []string) map[int]string {
	p := map[int]string{}
	for i, a := range addrs {
		p[i] = a
	}
	return p
}

// joinAll starts every node at once (the non-bootstrap ones first, so they
// wait for the bootstrap node) and returns them by id.
func joinAll(t *testing.T, opts []ClusterOptions) []*Cluster {
	t.Helper()
	out := make([]*Cluster, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i := len(opts) - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = Join(opts[i])
		}()
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, c := range out {
				if c != nil {
					c.Close()
				}
			}
			t.Fatalf("node %d: %v", i, err)
		}
	}
	return out
}

// putFromEveryNode writes keys key-00000.. key-<n-1> ("value-K"), node i
// the keys i, i+len(cs), ..., all nodes at once.
func putFromEveryNode(t *testing.T, cs []*Cluster, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := i; k < n; k += len(cs) {
				if err := c.Put(fmt.Appendf(nil, "key-%05d", k), fmt.Appendf(nil, "value-%d", k)); err != nil {
					t.Errorf("node %d put %d: %v", i, k, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func closeAll(t *testing.T, cs []*Cluster) {
	t.Helper()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.Close() }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("closing node %d: %v", i, err)
		}
	}
}

func clusterOpts(addrs []string, dirs []string) []ClusterOptions {
	var opts []ClusterOptions
	for i := range addrs {
		o := ClusterOptions{ID: i, Peers: peersOf(addrs), CachePages: 256, Timeout: 5 * time.Second,
			JoinTimeout: 20 * time.Second, ShutdownTimeout: 10 * time.Second}
		if dirs != nil {
			o.Data = dirs[i]
		}
		if os.Getenv("SCALESTORE_TEST_LOG") != "" {
			o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("who", i)
		}
		opts = append(opts, o)
	}
	return opts
}

// Any node reads and writes any key; tables are shared; a conditional put
// from two nodes at once applies once.
func TestJoinNodesShareKeysAndTables(t *testing.T) {
	cs := joinAll(t, clusterOpts(freePorts(t, 3), nil))
	defer closeAll(t, cs)
	var kv KV = cs[0] // the interface a single-node DB satisfies too
	if err := kv.Put([]byte("hello"), []byte("world")); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		v, ok, err := c.Get([]byte("hello"), nil)
		if err != nil || !ok || string(v) != "world" {
			t.Fatalf("node %d: %q %v %v", c.ID(), v, ok, err)
		}
	}
	// Enough keys that the tree splits on every node.
	const n = 3000
	putFromEveryNode(t, cs, n)
	for _, c := range cs {
		count := 0
		err := c.Scan([]byte("key-"), []byte("key."), func(k, v []byte) bool {
			if want := fmt.Sprintf("key-%05d", count); string(k) != want {
				t.Fatalf("node %d: scan found %q, want %q", c.ID(), k, want)
			}
			count++
			return true
		})
		if err != nil || count != n {
			t.Fatalf("node %d: scan saw %d of %d keys: %v", c.ID(), count, n, err)
		}
		keys := [][]byte{[]byte("key-00007"), []byte("nope"), []byte("key-02999")}
		vals, found := make([][]byte, 3), make([]bool, 3)
		if err := c.GetBatch(keys, vals, found); err != nil || !found[0] || found[1] || string(vals[2]) != "value-2999" {
			t.Fatalf("node %d: GetBatch %q %v %v", c.ID(), vals, found, err)
		}
	}
	salvaged := 0
	if err := cs[2].Salvage(nil, nil, func(_, _ []byte) bool { salvaged++; return true }, func(_, _ []byte, err error) bool {
		t.Errorf("salvage skipped a range: %v", err)
		return true
	}); err != nil || salvaged != n+1 {
		t.Fatalf("salvage read %d keys of %d: %v", salvaged, n+1, err)
	}
	if ok, err := cs[2].Delete([]byte("hello")); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if _, ok, _ := cs[0].Get([]byte("hello"), nil); ok {
		t.Fatal("a deleted key is still there on another node")
	}
	users, err := cs[1].Table("users")
	if err != nil {
		t.Fatal(err)
	}
	if err := users.Put([]byte("ada"), []byte("lovelace")); err != nil {
		t.Fatal(err)
	}
	again, err := cs[2].Table("users")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := again.Get([]byte("ada"), nil); err != nil || !ok || string(v) != "lovelace" {
		t.Fatalf("table read on another node: %q %v %v", v, ok, err)
	}
	if _, ok, _ := cs[0].Get([]byte("ada"), nil); ok {
		t.Fatal("a table's key leaked into the default table")
	}
	names, err := cs[0].Tables()
	if err != nil || strings.Join(names, ",") != "default,users" {
		t.Fatalf("tables %v %v", names, err)
	}
	// SET NX from every node at once: one wins.
	var applied sync.WaitGroup
	wins := make([]bool, len(cs))
	for i, c := range cs {
		applied.Add(1)
		go func() {
			defer applied.Done()
			ok, err := c.PutIf([]byte("lock"), fmt.Appendf(nil, "node-%d", i), func(_ []byte, found bool) bool { return !found })
			if err != nil {
				t.Error(err)
			}
			wins[i] = ok
		}()
	}
	applied.Wait()
	won := -1
	for i, w := range wins {
		if w {
			if won >= 0 {
				t.Fatalf("nodes %d and %d both won SET NX", won, i)
			}
			won = i
		}
	}
	if v, _, _ := cs[1].Get([]byte("lock"), nil); won < 0 || string(v) != fmt.Sprintf("node-%d", won) {
		t.Fatalf("SET NX: winner %d, value %q", won, v)
	}
	if st := cs[1].Stats(); st.RemoteFetches == 0 {
		t.Fatalf("node 1 fetched no page from another node: %+v", st)
	}
}

// A node with another cluster id or peer list is refused, saying which;
// a cluster stopped together and started again holds every key; a store of
// another cluster is refused.
func TestJoinRestartAndRefusals(t *testing.T) {
	addrs := freePorts(t, 2)
	dirs := []string{t.TempDir(), t.TempDir()}
	opts := clusterOpts(addrs, dirs)
	// The same ids, node 1's address written another way: the catalog's
	// identity tells them apart. (On a cluster of its own: the refused node
	// read the catalog as node 1, and a node 1 that comes later while its
	// directory still counts the refused one's copies is the restart of a
	// node the directories were not told about, which needs the view
	// change of issue 38.)
	{
		solo := clusterOpts(freePorts(t, 2), []string{t.TempDir(), t.TempDir()})
		s0, err := Join(solo[0])
		if err != nil {
			t.Fatal(err)
		}
		other := solo[1]
		_, port, _ := net.SplitHostPort(solo[1].Peers[1])
		other.Peers = map[int]string{0: solo[0].Peers[0], 1: "localhost:" + port}
		if _, err := Join(other); !errors.Is(err, ErrWrongCluster) || !strings.Contains(err.Error(), "peer list") {
			t.Fatalf("a node with another peer list: %v", err)
		}
		// Another cluster id: node 0's transport refuses the handshake.
		wrongID := solo[1]
		wrongID.Data, wrongID.ClusterID, wrongID.JoinTimeout, wrongID.Timeout = t.TempDir(), 9, time.Second, 6*time.Second
		start := time.Now()
		if _, err := Join(wrongID); err == nil || !strings.Contains(err.Error(), "wrong cluster id") {
			t.Fatalf("a node of cluster 9 joined cluster 1: %v", err)
		}
		t.Logf("refused a node of another cluster id after %v", time.Since(start).Round(time.Millisecond))
		s0.opts.ShutdownTimeout = time.Second
		s0.Close()
	}
	c0, err := Join(opts[0])
	if err != nil {
		t.Fatal(err)
	}
	c1, err := Join(opts[1])
	if err != nil {
		t.Fatal(err)
	}
	cs := []*Cluster{c0, c1}
	const n = 2000
	start := time.Now()
	for k := range n {
		if err := cs[k%2].Put(fmt.Appendf(nil, "k%05d", k), fmt.Appendf(nil, "v%d", k)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d puts alternating between the nodes in %v", n, time.Since(start))
	tb, err := cs[1].Table("second")
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Put([]byte("x"), []byte("y")); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	closeAll(t, cs)
	t.Logf("closed both in %v", time.Since(start))
	start = time.Now()
	cs = joinAll(t, opts)
	t.Logf("restarted both in %v", time.Since(start))
	for _, c := range cs {
		for k := range n {
			v, ok, err := c.Get(fmt.Appendf(nil, "k%05d", k), nil)
			if err != nil || !ok || string(v) != fmt.Sprintf("v%d", k) {
				t.Fatalf("after the restart node %d: key %d: %q %v %v", c.ID(), k, v, ok, err)
			}
		}
	}
	tb, err = cs[0].Table("second")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := tb.Get([]byte("x"), nil); err != nil || !ok || string(v) != "y" {
		t.Fatalf("the named table after the restart: %q %v %v", v, ok, err)
	}
	closeAll(t, cs)

	// Node 1's store joined as a node of cluster 9: refused by the store.
	wrong := opts[1]
	wrong.ClusterID = 9
	if _, err := Join(wrong); !errors.Is(err, ErrWrongCluster) || !strings.Contains(err.Error(), "cluster 1") {
		t.Fatalf("a store of cluster 1 joined as cluster 9: %v", err)
	}
	// The bootstrap node starts a new cluster (its store reformatted): the
	// other node's store belongs to the old one.
	fresh := opts[0]
	fresh.Reformat, fresh.ShutdownTimeout = true, time.Second
	c0, err = Join(fresh)
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	if _, err := Join(opts[1]); !errors.Is(err, ErrWrongCluster) || !strings.Contains(err.Error(), "another cluster") {
		t.Fatalf("a store of the old cluster joined the new one: %v", err)
	}
}

// A node whose peer port listens on a non-loopback address without TLS
// warns at start; one on loopback does not.
func TestJoinWarnsOfOpenPeerPort(t *testing.T) {
	for _, listen := range []string{"0.0.0.0", "127.0.0.1"} {
		addr := freePorts(t, 1)[0]
		_, port, _ := net.SplitHostPort(addr)
		var buf syncBuffer
		o := clusterOpts([]string{addr}, nil)[0]
		o.Listen = net.JoinHostPort(listen, port)
		o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
		c, err := Join(o)
		if err != nil {
			t.Fatal(err)
		}
		closeAll(t, []*Cluster{c})
		warned := strings.Contains(buf.String(), "non-loopback address without TLS")
		if warned != (listen == "0.0.0.0") {
			t.Fatalf("listening on %s: warned %v; log:\n%s", listen, warned, buf.String())
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
