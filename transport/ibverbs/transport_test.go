package ibverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/transporttest"
)

// spec tunes a test cluster.
type spec struct {
	opt   FakeOptions
	tweak func(*Config)
	wrap  func(Device) Device
	// before runs once the listeners are bound, before any node starts.
	before func(addrs map[protocol.NodeID]string)
}

// cluster builds len(handlers) transports on fake devices of one fabric,
// connected over loopback TCP exactly as real nodes are.
func cluster(t testing.TB, sp spec, handlers ...transport.Handler) []*Transport {
	t.Helper()
	fab := NewFabric()
	n := len(handlers)
	lns := make([]net.Listener, n)
	addrs := make(map[protocol.NodeID]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		addrs[protocol.NodeID(i)] = ln.Addr().String()
	}
	if sp.before != nil {
		sp.before(addrs)
	}
	ts := make([]*Transport, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := Config{Self: protocol.NodeID(i), Addrs: addrs, Listener: lns[i], Handler: handlers[i],
				ConnectTimeout: 10 * time.Second, PeerTimeout: 5 * time.Second}
			if sp.tweak != nil {
				sp.tweak(&cfg)
			}
			var dev Device = fab.NewDevice(fmt.Sprintf("fake%d", i), sp.opt)
			if sp.wrap != nil {
				dev = sp.wrap(dev)
			}
			ts[i], errs[i] = New(dev, cfg)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, tr := range ts {
				if tr != nil {
					tr.Close()
				}
			}
			t.Fatalf("node %d: %v", i, err)
		}
	}
	t.Cleanup(func() {
		for _, tr := range ts {
			tr.Close()
		}
	})
	return ts
}

func fakeFactory(t testing.TB, handlers []transport.Handler) []transport.Transport {
	ts := cluster(t, spec{}, handlers...)
	out := make([]transport.Transport, len(ts))
	for i, tr := range ts {
		out[i] = tr
	}
	return out
}

// TestConformance runs transporttest on the fake-backed transport.
func TestConformance(t *testing.T) {
	transporttest.Run(t, fakeFactory)
}

// frame builds a 64-byte frame: kind, a 64-bit id and three arguments.
func frame(kind byte, id uint64, args ...uint64) []byte {
	f := make([]byte, protocol.FrameSize)
	f[0] = kind
	binary.LittleEndian.PutUint64(f[8:], id)
	for i, a := range args {
		binary.LittleEndian.PutUint64(f[16+8*i:], a)
	}
	return f
}

func arg(f []byte, i int) uint64 { return binary.LittleEndian.Uint64(f[16+8*i:]) }

func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*131 + uint64(i)*7 + uint64(i>>8))
	}
	return b
}

// offHeap maps n bytes outside the Go heap, as registered memory must be.
func offHeap(t testing.TB, n int) []byte {
	mem, err := mapMemory(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmapMemory(mem) })
	return mem
}

// waiters routes replies to the goroutines waiting for them.
type waiters struct {
	mu sync.Mutex
	m  map[uint64]chan []byte
}

func (w *waiters) add(id uint64) chan []byte {
	ch := make(chan []byte, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = make(map[uint64]chan []byte)
	}
	w.m[id] = ch
	w.mu.Unlock()
	return ch
}

func (w *waiters) deliver(id uint64, b []byte) bool {
	w.mu.Lock()
	ch := w.m[id]
	delete(w.m, id)
	w.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- b
	return true
}

// Mailbox RPC: clients on two nodes, several goroutines each, call a server
// whose handler answers from the mailbox poller. Four mailboxes per peer, so
// the rings wrap and credits flow many times.
func TestMailboxRPC(t *testing.T) {
	const (
		perWorker = 150
		workers   = 4
	)
	// Handlers get the transport through an atomic: the race detector sees
	// no synchronization through registered (off-heap) memory.
	var srv atomic.Pointer[Transport]
	var bad atomic.Int64
	var clients [3]waiters
	handlers := []transport.Handler{
		func(from protocol.NodeID, f, payload []byte) { // the server: echo the payload reversed
			if f[0] != 'Q' {
				bad.Add(1)
				return
			}
			r := slices.Clone(payload)
			slices.Reverse(r)
			if err := srv.Load().Send(from, frame('R', binary.LittleEndian.Uint64(f[8:]), uint64(len(payload))), r); err != nil {
				bad.Add(1)
			}
		},
	}
	for i := 1; i <= 2; i++ {
		handlers = append(handlers, func(from protocol.NodeID, f, payload []byte) {
			if from != 0 || f[0] != 'R' || arg(f, 0) != uint64(len(payload)) ||
				!clients[i].deliver(binary.LittleEndian.Uint64(f[8:]), slices.Clone(payload)) {
				bad.Add(1)
			}
		})
	}
	ts := cluster(t, spec{tweak: func(c *Config) { c.Mailboxes = 4 }}, handlers...)
	srv.Store(ts[0])
	var wg sync.WaitGroup
	for node := 1; node <= 2; node++ {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWorker {
					id := uint64(node)<<32 | uint64(w)<<16 | uint64(i)
					n := int(id*37) % (transport.MaxPayload + 1)
					req := pattern(id, n)
					ch := clients[node].add(id)
					if err := ts[node].Send(0, frame('Q', id), req); err != nil {
						t.Errorf("node %d: %v", node, err)
						return
					}
					select {
					case got := <-ch:
						slices.Reverse(got)
						if !bytes.Equal(got, req) {
							t.Errorf("node %d call %#x: reply differs", node, id)
							return
						}
					case <-time.After(10 * time.Second):
						t.Errorf("node %d call %#x: no reply", node, id)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d malformed or unexpected messages", n)
	}
}

// Page transfer: the requester names a frame of its registered page pool;
// the responder writes the page straight into it and sends the response on
// the same queue pair. When the response is handled, the page is there.
func TestWriteSendPage(t *testing.T) {
	const frames = 8
	// Handlers see these through atomics (see TestMailboxRPC).
	var owner atomic.Pointer[Transport]
	var poolp atomic.Pointer[[]byte]
	var bad atomic.Int64
	var w waiters
	handlers := []transport.Handler{
		func(from protocol.NodeID, f, payload []byte) { // requester: the response
			id, off := binary.LittleEndian.Uint64(f[8:]), arg(f, 0)
			pool := *poolp.Load()
			if f[0] != 'P' || payload != nil || !bytes.Equal(pool[off:off+protocol.PageSize], pattern(id, protocol.PageSize)) {
				bad.Add(1)
			}
			w.deliver(id, nil)
		},
		func(from protocol.NodeID, f, payload []byte) { // owner: send the page
			id, key, off := binary.LittleEndian.Uint64(f[8:]), arg(f, 0), arg(f, 1)
			dst := transport.Region{Node: from, Key: uint32(key), Len: arg(f, 2)}
			if err := owner.Load().WriteSend(dst, off, pattern(id, protocol.PageSize), frame('P', id, off)); err != nil {
				bad.Add(1)
			}
		},
	}
	ts := cluster(t, spec{}, handlers...)
	owner.Store(ts[1])
	pool := offHeap(t, frames*protocol.PageSize)
	poolp.Store(&pool)
	poolRegion, err := ts[0].Register(pool)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for fr := range frames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := uint64(fr * protocol.PageSize)
			for i := range 60 {
				id := uint64(fr)<<32 | uint64(i)
				ch := w.add(id)
				if err := ts[0].Send(1, frame('G', id, uint64(poolRegion.Key), off, poolRegion.Len), nil); err != nil {
					t.Error(err)
					return
				}
				select {
				case <-ch:
				case <-time.After(10 * time.Second):
					t.Errorf("page %#x: no response", id)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d responses without their page in place", n)
	}
	// Bounds are checked before anything is posted.
	if err := ts[1].WriteSend(poolRegion, poolRegion.Len-8, pattern(1, 16), frame('P', 0)); !errors.Is(err, transport.ErrAccess) {
		t.Fatalf("page past the end of the region: %v, want ErrAccess", err)
	}
}

// A wrong key in WriteSend is caught by the receiving NIC and breaks the
// message queue pair: the peer is reported down, nothing hangs.
func TestWriteSendWrongKey(t *testing.T) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := cluster(t, spec{tweak: func(c *Config) { c.PeerTimeout = 2 * time.Second }}, nop, nop)
	r, err := ts[0].Register(offHeap(t, protocol.PageSize))
	if err != nil {
		t.Fatal(err)
	}
	r.Key ^= 0x5a5a
	if err := ts[1].WriteSend(r, 0, pattern(0, 64), frame('P', 0)); err != nil {
		t.Fatal(err) // posted: the error comes back asynchronously
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := ts[1].Send(0, frame('x', 0), nil)
		if errors.Is(err, transport.ErrPeerDown) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sends after a broken write-send: %v, want ErrPeerDown", err)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestOneSidedSemantics(t *testing.T) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := cluster(t, spec{}, nop, nop, nop)
	mem := offHeap(t, 64<<10)
	r, err := ts[2].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	if r.Node != 2 || r.Len != uint64(len(mem)) {
		t.Fatalf("region %+v", r)
	}
	// A page and a multi-chunk transfer.
	for _, n := range []int{protocol.PageSize, 3*OneSidedChunk + 100} {
		src := pattern(uint64(n), n)
		if err := ts[0].Write(r, 1000, src); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mem[1000:1000+n], src) {
			t.Fatalf("write of %d bytes did not land", n)
		}
		got := make([]byte, n)
		if err := ts[1].Read(got, r, 1000); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("read of %d bytes differs", n)
		}
	}
	// Compare-and-swap and fetch-and-add.
	binary.LittleEndian.PutUint64(mem[64:], 5)
	for i, s := range []struct {
		cas        bool
		a, b, prev uint64
	}{{true, 4, 9, 5}, {true, 5, 9, 5}, {false, 3, 0, 9}, {false, ^uint64(0), 0, 12}, {true, 11, 0, 11}} {
		var prev uint64
		var err error
		if s.cas {
			prev, err = ts[0].CompareAndSwap(r, 64, s.a, s.b)
		} else {
			prev, err = ts[0].FetchAndAdd(r, 64, s.a)
		}
		if err != nil || prev != s.prev {
			t.Fatalf("step %d: prev %d err %v, want %d", i, prev, err, s.prev)
		}
	}
	if v := binary.LittleEndian.Uint64(mem[64:]); v != 0 {
		t.Fatalf("word %d, want 0", v)
	}
	// Concurrent fetch-and-add from two nodes and the owner's sync/atomic.
	const n = 400
	var wg sync.WaitGroup
	for node := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if _, err := ts[node].FetchAndAdd(r, 128, 1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range n {
		atomic.AddUint64(word(mem[128:]), 1)
	}
	wg.Wait()
	if v := binary.LittleEndian.Uint64(mem[128:]); v != 3*n {
		t.Fatalf("counter %d, want %d", v, 3*n)
	}
	// Local checks.
	if _, err := ts[0].FetchAndAdd(r, 12, 1); !errors.Is(err, transport.ErrMisaligned) {
		t.Errorf("misaligned: %v", err)
	}
	if err := ts[0].Read(make([]byte, 16), r, r.Len-8); !errors.Is(err, transport.ErrAccess) {
		t.Errorf("past the end: %v", err)
	}
	if err := ts[2].Read(make([]byte, 8), r, 0); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Errorf("own region: %v", err)
	}
	if _, err := ts[0].CompareAndSwap(transport.Region{Node: 9, Len: 8}, 0, 0, 1); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Errorf("unknown node: %v", err)
	}
}

// A wrong rkey is ErrAccess, the queue pair comes back for the next verb,
// requests flushed behind the bad one are retried (and executed exactly
// once), and messages are not disturbed.
func TestOneSidedWrongKey(t *testing.T) {
	var got atomic.Int64
	count := func(protocol.NodeID, []byte, []byte) { got.Add(1) }
	ts := cluster(t, spec{}, count, count)
	mem := offHeap(t, protocol.PageSize)
	r, err := ts[1].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	bad := r
	bad.Key ^= 0x5a5a5a5a
	buf := make([]byte, 8)
	for range 3 {
		if err := ts[0].Read(buf, bad, 0); !errors.Is(err, transport.ErrAccess) {
			t.Fatalf("read with a wrong key: %v, want ErrAccess", err)
		}
		if _, err := ts[0].FetchAndAdd(r, 0, 1); err != nil {
			t.Fatalf("the verb after a refused one: %v", err)
		}
	}
	// Good adds from four goroutines while a fifth keeps using a wrong key
	// and the nodes exchange messages.
	const adds = 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range adds {
				if _, err := ts[0].FetchAndAdd(r, 8, 1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var refused atomic.Int64
	var errWG sync.WaitGroup
	errWG.Add(1)
	go func() {
		defer errWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := ts[0].FetchAndAdd(bad, 8, 1000); !errors.Is(err, transport.ErrAccess) {
				t.Errorf("wrong key: %v", err)
				return
			}
			refused.Add(1)
		}
	}()
	const msgs = 300
	for i := range msgs {
		if err := ts[0].Send(1, frame('m', uint64(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(stop)
	errWG.Wait()
	if v := binary.LittleEndian.Uint64(mem[8:]); v != 4*adds {
		t.Fatalf("counter %d after %d good adds (and %d refused ones), want %d", v, 4*adds, refused.Load(), 4*adds)
	}
	if refused.Load() == 0 {
		t.Fatal("no wrong-key verb ran")
	}
	deadline := time.Now().Add(5 * time.Second)
	for got.Load() != msgs && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got.Load() != msgs {
		t.Fatalf("%d of %d messages arrived", got.Load(), msgs)
	}
}

// A write then a read of the same address sees the write; a write is
// ordered after the messages sent before it.
func TestOrdering(t *testing.T) {
	release := make(chan struct{})
	var handled atomic.Int64
	ts := cluster(t, spec{}, func(protocol.NodeID, []byte, []byte) {},
		func(protocol.NodeID, []byte, []byte) {
			<-release // hold the first message: the rest stay in the ring
			handled.Add(1)
		})
	defer close(release)
	mem := offHeap(t, protocol.PageSize)
	r, err := ts[1].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(50) {
		if err := ts[0].Write(r, 8*(i%64), binary.LittleEndian.AppendUint64(nil, i)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 8)
		if err := ts[0].Read(got, r, 8*(i%64)); err != nil || binary.LittleEndian.Uint64(got) != i {
			t.Fatalf("read after write %d: %d %v", i, binary.LittleEndian.Uint64(got), err)
		}
	}
	const k = 10 // fewer than the mailboxes, so Send never waits
	for i := range k {
		if err := ts[0].Send(1, frame('m', uint64(i)), pattern(uint64(i), 3000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts[0].Write(r, 0, []byte("flag-set")); err != nil {
		t.Fatal(err)
	}
	// The write returned, so every earlier message is in node 1's ring.
	p := ts[1].peers[0]
	for i := range uint64(k) {
		tr := loadLE(p.ring[(i+1)*slotSize-trailerSize:])
		if byte(tr>>56) != doorbell || uint32(tr>>24) != uint32(i) {
			t.Fatalf("message %d not in place when the write after it completed (trailer %#x)", i, tr)
		}
	}
}

// countingDevice counts the work requests posted and the completions
// polled, to check selective signaling.
type countingDevice struct {
	Device
	posted, completed *atomic.Int64
}

type countingCQ struct {
	CQ
	n *atomic.Int64
}

type countingQP struct {
	QP
	n *atomic.Int64
}

func (d countingDevice) CreateCQ(n int) (CQ, error) {
	cq, err := d.Device.CreateCQ(n)
	return countingCQ{cq, d.completed}, err
}

func (d countingDevice) CreateQP(cq CQ, c QPCap) (QP, error) {
	qp, err := d.Device.CreateQP(cq.(countingCQ).CQ, c)
	return countingQP{qp, d.posted}, err
}

func (c countingCQ) Poll(out []Completion) (int, error) {
	n, err := c.CQ.Poll(out)
	c.n.Add(int64(n))
	return n, err
}

func (q countingQP) Post(wrs []WorkRequest) error {
	q.n.Add(int64(len(wrs)))
	return q.QP.Post(wrs)
}

func TestSelectiveSignaling(t *testing.T) {
	var posted, completed atomic.Int64
	var got atomic.Int64
	count := func(protocol.NodeID, []byte, []byte) { got.Add(1) }
	ts := cluster(t, spec{wrap: func(d Device) Device { return countingDevice{d, &posted, &completed} }}, count, count)
	p0, c0 := posted.Load(), completed.Load()
	const n = 2000
	for i := range n {
		var payload []byte
		if i%3 == 0 {
			payload = pattern(uint64(i), protocol.PageSize) // not inline
		}
		if err := ts[0].Send(1, frame('m', uint64(i)), payload); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() != n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got.Load() != n {
		t.Fatalf("%d of %d messages arrived", got.Load(), n)
	}
	posts, comps := posted.Load()-p0, completed.Load()-c0
	t.Logf("%d messages: %d work requests posted (messages and credits), %d completions", n, posts, comps)
	if posts < n || comps*4 > posts {
		t.Fatalf("%d completions for %d work requests: not selectively signaled", comps, posts)
	}
}

// Devices that return atomic results big endian are detected at connection
// time and their results converted.
func TestAtomicReplyByteOrder(t *testing.T) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := cluster(t, spec{opt: FakeOptions{AtomicReplyBigEndian: true}}, nop, nop)
	if !ts[0].peers[1].os.replyBE {
		t.Fatal("the probe did not detect big-endian atomic replies")
	}
	mem := offHeap(t, 64)
	r, err := ts[1].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(mem, 0x0102030405)
	if prev, err := ts[0].FetchAndAdd(r, 0, 1); err != nil || prev != 0x0102030405 {
		t.Fatalf("prev %#x err %v", prev, err)
	}
	if prev, err := ts[0].CompareAndSwap(r, 0, 0x0102030406, 7); err != nil || prev != 0x0102030406 || binary.LittleEndian.Uint64(mem) != 7 {
		t.Fatalf("prev %#x err %v word %#x", prev, err, binary.LittleEndian.Uint64(mem))
	}
}

// A closed peer is reported down to senders and one-sided verbs; a Send
// waiting for a mailbox slot returns when its own transport closes.
func TestPeerDownAndClose(t *testing.T) {
	block := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(block) })
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := cluster(t, spec{tweak: func(c *Config) { c.Mailboxes = 2 }}, nop, nop,
		func(protocol.NodeID, []byte, []byte) { <-block })
	r, err := ts[0].Register(offHeap(t, 64))
	if err != nil {
		t.Fatal(err)
	}
	if err := ts[0].Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ts[1].Send(0, frame('x', 0), nil)
		if errors.Is(err, transport.ErrPeerDown) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("send to a closed node: %v, want ErrPeerDown", err)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := ts[1].FetchAndAdd(r, 0, 1); !errors.Is(err, transport.ErrPeerDown) {
		t.Fatalf("one-sided verb to a closed node: %v, want ErrPeerDown", err)
	}
	// Node 2's handler holds node 1's messages: with two mailboxes, the
	// fourth Send waits for a slot, until node 1 closes.
	errc := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			if err := ts[1].Send(2, frame('x', uint64(i)), nil); err != nil {
				errc <- err
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	if err := ts[1].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("blocked send after close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a send waiting for a slot did not return on close")
	}
	once.Do(func() { close(block) })
}

// Stray connections to a listener (a port scanner, a silent client, an old
// node) do not keep the cluster from forming.
func TestStrayConnections(t *testing.T) {
	var strays []net.Conn
	defer func() {
		for _, c := range strays {
			c.Close()
		}
	}()
	nop := func(protocol.NodeID, []byte, []byte) {}
	cluster(t, spec{before: func(addrs map[protocol.NodeID]string) {
		for _, junk := range [][]byte{nil, []byte("GET / HTTP/1.0\r\n\r\n"), bytes.Repeat([]byte{0}, RecordSize)} {
			c, err := net.Dial("tcp", addrs[0])
			if err != nil {
				t.Fatal(err)
			}
			c.Write(junk)
			strays = append(strays, c)
		}
	}}, nop, nop, nop)
}

func TestMailboxesMustAgree(t *testing.T) {
	fab := NewFabric()
	lns := make([]net.Listener, 2)
	addrs := map[protocol.NodeID]string{}
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		addrs[protocol.NodeID(i)] = ln.Addr().String()
	}
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			tr, err := New(fab.NewDevice("d", FakeOptions{}), Config{Self: protocol.NodeID(i), Addrs: addrs, Listener: lns[i],
				Handler: func(protocol.NodeID, []byte, []byte) {}, Mailboxes: 8 + 8*i, ConnectTimeout: 5 * time.Second})
			if err == nil {
				tr.Close()
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err == nil {
			t.Fatal("nodes with different mailbox counts connected")
		} else if !strings.Contains(err.Error(), "mailboxes") && !strings.Contains(err.Error(), "setting up") {
			t.Fatalf("error %v does not say why", err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	h := func(protocol.NodeID, []byte, []byte) {}
	for _, c := range []Config{
		{Addrs: map[protocol.NodeID]string{0: "x"}},
		{Handler: h, Mailboxes: MaxMailboxes + 1, Addrs: map[protocol.NodeID]string{0: "x"}},
		{Handler: h, MTU: 1500, Addrs: map[protocol.NodeID]string{0: "x"}},
		{Handler: h, UseGIDIndex: true, GIDIndex: -1, Addrs: map[protocol.NodeID]string{0: "x"}},
		{Handler: h, Self: 3, Addrs: map[protocol.NodeID]string{0: "x"}},
	} {
		if _, err := New(NewFabric().NewDevice("d", FakeOptions{}), c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

func TestRegisterChecks(t *testing.T) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := cluster(t, spec{}, nop, nop)
	mem := offHeap(t, 64)
	if _, err := ts[0].Register(mem[1:9]); err == nil {
		t.Error("unaligned memory registered")
	}
	if _, err := ts[0].Register(nil); err == nil {
		t.Error("empty memory registered")
	}
	ts[0].Close()
	if _, err := ts[0].Register(mem); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("register after close: %v", err)
	}
}
