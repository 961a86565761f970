package scalestore

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/internal/respregister"
	"github.com/scalestore-go/scalestore/transport/ibverbs"
)

// The RDMA path above the transport, on the in-process verbs fake
// (transport/ibverbs's fake.go: RC queue pairs, mailboxes written by RDMA,
// one-sided verbs) since this machine has no RDMA NIC: three Join nodes in
// one process, a write through one node read through the others, Redis
// clients on every node with porcupine's check of their history. It runs
// in every build (the fake needs no libibverbs); make test also runs it
// with -tags ibverbs, where Join's own acceptance of the transport is the
// tagged one.
func TestJoinOverIBVerbsFake(t *testing.T) {
	fab := ibverbs.NewFabric()
	addrs := freePorts(t, 3)
	opts := clusterOpts(addrs, []string{t.TempDir(), t.TempDir(), t.TempDir()})
	opened := make([]int, len(opts))
	var mu sync.Mutex
	for i := range opts {
		opts[i].Transport = "ibverbs"
		opts[i].RESP = "127.0.0.1:0"
		opts[i].RDMA = RDMAOptions{Mailboxes: 24}
		opts[i].rdmaDevice = func() (ibverbs.Device, error) {
			mu.Lock()
			opened[i]++
			mu.Unlock()
			return fab.NewDevice(fmt.Sprintf("fake%d", i), ibverbs.FakeOptions{}), nil
		}
	}
	cs := joinAll(t, opts)
	defer closeAll(t, cs)
	for i, n := range opened {
		if n == 0 {
			t.Fatalf("node %d never opened its (fake) RDMA device: the transport is not ibverbs", i)
		}
	}
	if err := cs[0].Put([]byte("rdma"), []byte("verbs")); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs[1:] {
		if v, ok, err := c.Get([]byte("rdma"), nil); err != nil || !ok || string(v) != "verbs" {
			t.Fatalf("node %d read %q %v %v, want the value node 0 wrote", c.ID(), v, ok, err)
		}
	}
	// Enough keys that the tree splits, written from every node.
	const n = 1500
	putFromEveryNode(t, cs, n)
	if t.Failed() {
		return
	}
	for _, c := range cs {
		count := 0
		if err := c.Scan([]byte("key-"), []byte("key."), func(_, _ []byte) bool { count++; return true }); err != nil || count != n {
			t.Fatalf("node %d scanned %d of %d keys: %v", c.ID(), count, n, err)
		}
	}
	if st := cs[1].Stats(); st.RemoteFetches == 0 {
		t.Fatalf("node 1 fetched no page from another node over the fake verbs: %+v", st)
	}

	// Redis clients on every node, each SET a unique value; the history of
	// every key must be linearizable.
	const clients = 6
	d := 1500 * time.Millisecond
	if testing.Short() {
		d = 400 * time.Millisecond
	}
	ops, err := respregister.Run(context.Background(), respregister.Config{Clients: clients, Keys: 10, Duration: d,
		Dial: func(cl int, _ *rand.Rand) *redis.Client {
			return redis.NewClient(&redis.Options{Addr: cs[cl%len(cs)].RESPAddr(), MaxRetries: -1})
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) < clients*10 {
		t.Fatalf("only %d operations completed in %v", len(ops), d)
	}
	res, _ := checker.Check(ops, time.Minute)
	if !res.Ok {
		t.Fatalf("%d RESP operations over ibverbs (fake): not linearizable (keys %v, unknown=%v)", len(ops), res.BadPages, res.Unknown)
	}
	t.Logf("%d RESP operations of %d clients on 3 nodes over the fake verbs: linearizable", len(ops), clients)
}

// A device that cannot be opened fails Join with the device's own error,
// never a complaint about the transport's name.
func TestJoinIBVerbsDeviceError(t *testing.T) {
	opts := clusterOpts(freePorts(t, 1), nil)[0]
	opts.Transport = "ibverbs"
	opts.JoinTimeout = 5 * time.Second
	opts.rdmaDevice = func() (ibverbs.Device, error) {
		return nil, fmt.Errorf("%w: wanted device \"mlx5_9\"", ibverbs.ErrNoDevice)
	}
	c, err := Join(opts)
	if err == nil {
		c.Close()
		t.Fatal("Join succeeded without a device")
	}
	if !errors.Is(err, ibverbs.ErrNoDevice) || !strings.Contains(err.Error(), "mlx5_9") || strings.Contains(err.Error(), "want tcp") {
		t.Fatalf("error %q: want one that names the missing device", err)
	}
}

// What this binary does with Transport ibverbs and no fake: without the
// tag, an error that says how to build a binary that has RDMA; with it, on
// a host without an RDMA device, the device's error.
func TestJoinIBVerbsWithoutDevice(t *testing.T) {
	if ibverbs.Built && ibverbs.Available() {
		t.Skip("this host has an RDMA device")
	}
	opts := clusterOpts(freePorts(t, 1), nil)[0]
	opts.Transport = "ibverbs"
	opts.RDMA.Device = "mlx5_9"
	c, err := Join(opts)
	if err == nil {
		c.Close()
		t.Fatal("Join succeeded without RDMA")
	}
	if ibverbs.Built {
		if !errors.Is(err, ibverbs.ErrNoDevice) || !strings.Contains(err.Error(), `"mlx5_9"`) {
			t.Fatalf("error %q: want ErrNoDevice naming mlx5_9", err)
		}
		return
	}
	if !errors.Is(err, ibverbs.ErrNotBuilt) || !strings.Contains(err.Error(), "-tags ibverbs") {
		t.Fatalf("error %q: want ErrNotBuilt saying how to build with RDMA", err)
	}
}
