//go:build linux

package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/transporttest"
	"golang.org/x/sys/unix"
)

// logBuf collects a test's log lines (goroutines may log until Close
// returns, so t.Log would be unsafe); it prints them if the test failed.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testLogger(t testing.TB) (*slog.Logger, *logBuf) {
	buf := &logBuf{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("transport log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// sockDir is a short directory for sockets (a socket path has at most 107
// bytes; t.TempDir's names grow with the test name).
func sockDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "shm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func sockPaths(dir string, n int) map[protocol.NodeID]string {
	paths := map[protocol.NodeID]string{}
	for i := range n {
		paths[protocol.NodeID(i)] = filepath.Join(dir, fmt.Sprintf("n%d.sock", i))
	}
	return paths
}

// newCluster starts len(handlers) transports that know each other.
func newCluster(t testing.TB, handlers []transport.Handler, adjust func(*Config)) []*Transport {
	log, _ := testLogger(t)
	paths := sockPaths(sockDir(t), len(handlers))
	cluster := rand.Uint64()
	ts := make([]*Transport, len(handlers))
	for i, h := range handlers {
		cfg := Config{Self: protocol.NodeID(i), SocketPath: paths[protocol.NodeID(i)], Peers: paths,
			ClusterID: cluster, Handler: h, Logger: log, RingSize: MinRingSize}
		if adjust != nil {
			adjust(&cfg)
		}
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ts[i] = tr
	}
	waitConnected(t, ts...)
	return ts
}

// waitConnected waits until every pair of ts has a live link, so tests
// start from a connected cluster (as they would after a real start-up).
func waitConnected(t testing.TB, ts ...*Transport) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, a := range ts {
		for _, b := range ts {
			if a == b {
				continue
			}
			for a.peers[b.self].live.Load() == nil {
				if time.Now().After(deadline) {
					t.Fatalf("node %d never connected to node %d", a.self, b.self)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t testing.TB, handlers []transport.Handler) []transport.Transport {
		var out []transport.Transport
		for _, tr := range newCluster(t, handlers, nil) {
			out = append(out, tr)
		}
		return out
	})
}

// seqFrame is a frame carrying a sequence number at byte 8.
func seqFrame(seq uint64) []byte {
	f := make([]byte, protocol.FrameSize)
	f[0] = 0x5a
	binary.LittleEndian.PutUint64(f[8:], seq)
	return f
}

// The ring alone, across two mappings of one memfd (as two processes see
// it): many wrap-arounds with payloads of every size class, in order and
// intact; and the double mapping really aliases.
func TestRing(t *testing.T) {
	const size = MinRingSize
	fd, segA, err := createSegment("ring-test", size)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	defer segA.unmap()
	segB, err := mapSegment(fd, size)
	if err != nil {
		t.Fatal(err)
	}
	defer segB.unmap()

	// The wrap-around mapping: the byte after the end is the first byte.
	d := segA.data(ringMsgA)
	copy(d[size-3:], "wrap-around")
	if got := string(segB.data(ringMsgA)[:8]); got != "p-around" {
		t.Fatalf("second mapping reads %q at the ring start", got)
	}
	copy(d[size-3:], make([]byte, 11))

	var dead atomic.Bool
	stop := func() error {
		if dead.Load() {
			return errors.New("stopped")
		}
		return nil
	}
	var p producer
	p.init(newRing(segA.ctl(ringMsgA), segA.data(ringMsgA)), 5*time.Microsecond, 10*time.Second, stop)
	c := consumer{ring: newRing(segB.ctl(ringMsgA), segB.data(ringMsgA)), kinds: 1 << kindMsg, spin: newSpinner(5 * time.Microsecond)}

	const n = 20000
	sizes := func(i uint64) int {
		switch i % 11 {
		case 0:
			return 0
		case 1:
			return transport.MaxPayload
		case 2:
			return 1
		default:
			return int(i*7919) % (transport.MaxPayload + 1)
		}
	}
	errc := make(chan error, 1)
	go func() {
		for i := range uint64(n) {
			pl := make([]byte, sizes(i))
			for j := range pl {
				pl[j] = byte(i + uint64(j))
			}
			if err := p.put(kindMsg, seqFrame(i), pl); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	var bytesSeen uint64
	for i := uint64(0); i < n; {
		kind, frame, payload, sz, err := c.next()
		if err != nil {
			t.Fatal(err)
		}
		if sz == 0 {
			c.wait(func() bool { return false })
			continue
		}
		if kind != kindMsg || binary.LittleEndian.Uint64(frame[8:]) != i {
			t.Fatalf("record %d: kind %d seq %d", i, kind, binary.LittleEndian.Uint64(frame[8:]))
		}
		if len(payload) != sizes(i) {
			t.Fatalf("record %d: %d payload bytes, want %d", i, len(payload), sizes(i))
		}
		for j, b := range payload {
			if b != byte(i+uint64(j)) {
				t.Fatalf("record %d: payload byte %d is %d", i, j, b)
			}
		}
		bytesSeen += sz
		c.release(sz)
		i++
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if wraps := bytesSeen / size; wraps < 100 {
		t.Fatalf("only %d wrap-arounds", wraps)
	}
	if got := segA.ctl(ringMsgA).head.Load(); got != bytesSeen {
		t.Fatalf("head %d, want %d", got, bytesSeen)
	}
}

// A ring with impossible words is an error, not a panic.
func TestRingCorrupt(t *testing.T) {
	fd, seg, err := createSegment("corrupt-test", MinRingSize)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	defer seg.unmap()
	ctl := seg.ctl(ringMsgA)
	data := seg.data(ringMsgA)
	fresh := func() *consumer {
		ctl.tail.Store(0)
		ctl.head.Store(0)
		return &consumer{ring: newRing(ctl, data), kinds: 1<<kindMsg | 1<<kindVerbReq}
	}
	cases := []struct {
		name string
		set  func()
	}{
		{"tail beyond the ring", func() { ctl.tail.Store(MinRingSize + 8) }},
		{"tail backwards", func() { ctl.tail.Store(^uint64(0) - 7) }},
		{"unaligned tail", func() { ctl.tail.Store(77) }},
		{"short record", func() { ctl.tail.Store(8) }},
		{"huge payload", func() {
			binary.LittleEndian.PutUint32(data[0:], 1<<30)
			data[4] = kindMsg
			ctl.tail.Store(recFixed)
		}},
		{"payload past tail", func() {
			binary.LittleEndian.PutUint32(data[0:], 100)
			data[4] = kindMsg
			ctl.tail.Store(recFixed)
		}},
		{"unknown kind", func() {
			binary.LittleEndian.PutUint32(data[0:], 0)
			data[4] = 99
			ctl.tail.Store(recFixed)
		}},
		{"response in the message ring", func() {
			binary.LittleEndian.PutUint32(data[0:], 0)
			data[4] = kindVerbResp
			ctl.tail.Store(recFixed)
		}},
	}
	for _, tc := range cases {
		c := fresh()
		tc.set()
		if _, _, _, _, err := c.next(); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: %v, want errCorrupt", tc.name, err)
		}
	}
	// A producer facing a consumer head beyond its tail.
	var p producer
	p.init(newRing(ctl, data), 0, time.Second, func() error { return nil })
	ctl.tail.Store(0)
	ctl.head.Store(0)
	for range MinRingSize / recordSize(transport.MaxPayload) {
		if err := p.put(kindMsg, seqFrame(0), make([]byte, transport.MaxPayload)); err != nil {
			t.Fatal(err)
		}
	}
	ctl.head.Store(p.tail + 64)
	if err := p.put(kindMsg, seqFrame(0), make([]byte, transport.MaxPayload)); !errors.Is(err, errCorrupt) {
		t.Errorf("head beyond tail: %v, want errCorrupt", err)
	}
}

// collector records messages from a handler.
type collector struct {
	mu   sync.Mutex
	msgs []uint64
	got  chan struct{}
}

func newCollector() *collector { return &collector{got: make(chan struct{}, 1<<16)} }

func (c *collector) handler(from protocol.NodeID, frame, payload []byte) {
	c.mu.Lock()
	c.msgs = append(c.msgs, binary.LittleEndian.Uint64(frame[8:]))
	c.mu.Unlock()
	select {
	case c.got <- struct{}{}:
	default:
	}
}

func (c *collector) waitFor(t *testing.T, seq uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		for _, s := range c.msgs {
			if s == seq {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		select {
		case <-c.got:
		case <-deadline:
			t.Fatalf("message %d never arrived", seq)
		}
	}
}

// dialRaw opens a bootstrap connection like a (mis)behaving peer would.
func dialRaw(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.UnixConn)
}

// answer reads the acceptor's answer: a decoded hello, or an error if the
// acceptor just closed the connection.
func answer(t *testing.T, c *net.UnixConn) (hello, error) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, helloSize)
	if _, err := c.Read(b); err != nil {
		return hello{}, err
	}
	return decodeHello(b)
}

// Garbage on the bootstrap socket is refused with a logged error (and a
// reject naming the reason where the sender speaks our protocol), and the
// transport keeps working.
func TestBootstrapGarbage(t *testing.T) {
	log, logs := testLogger(t)
	boxes := []*collector{newCollector(), newCollector()}
	paths := sockPaths(sockDir(t), 2)
	const cluster = 0xC0FFEE
	var ts []*Transport
	for i := range 2 {
		tr, err := New(Config{Self: protocol.NodeID(i), SocketPath: paths[protocol.NodeID(i)], Peers: paths,
			ClusterID: cluster, Handler: boxes[i].handler, Logger: log, RingSize: MinRingSize,
			HandshakeTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		ts = append(ts, tr)
	}
	if err := ts[0].Send(1, seqFrame(1), nil); err != nil {
		t.Fatal(err)
	}
	boxes[1].waitFor(t, 1)
	target := paths[1]
	good := hello{kind: msgHello, version: protoVersion, cluster: cluster, from: 0, to: 1, ringSize: MinRingSize}
	memfd := func(t *testing.T, size int64, flags int) int {
		fd, err := unix.MemfdCreate("garbage", flags)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Ftruncate(fd, size); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	goodFd := func(t *testing.T) int {
		return memfd(t, int64(segmentSize(MinRingSize)), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	send := func(t *testing.T, h hello, fds ...int) *net.UnixConn {
		c := dialRaw(t, target)
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		if _, _, err := c.WriteMsgUnix(h.encode(), oob, nil); err != nil {
			t.Fatal(err)
		}
		return c
	}
	expectReject := func(t *testing.T, c *net.UnixConn, reason uint32) {
		t.Helper()
		defer c.Close()
		r, err := answer(t, c)
		if reason == 0 {
			if err == nil {
				t.Fatalf("got an answer %+v, want the connection closed", r)
			}
			return
		}
		if err != nil || r.kind != msgReject || r.reason != reason {
			t.Fatalf("answer %+v, %v; want a reject with reason %d (%s)", r, err, reason, rejectText[reason])
		}
	}

	t.Run("random bytes", func(t *testing.T) {
		c := dialRaw(t, target)
		junk := make([]byte, 300)
		for i := range junk {
			junk[i] = byte(rand.Uint32())
		}
		c.Write(junk)
		expectReject(t, c, 0)
	})
	t.Run("short then hang up", func(t *testing.T) {
		c := dialRaw(t, target)
		c.Write([]byte("SSG"))
		c.Close()
	})
	t.Run("wrong cluster", func(t *testing.T) {
		h := good
		h.cluster = 0xBAD
		expectReject(t, send(t, h, goodFd(t)), rejectCluster)
	})
	t.Run("wrong version", func(t *testing.T) {
		h := good
		h.version = 9
		expectReject(t, send(t, h, goodFd(t)), rejectVersion)
	})
	t.Run("not addressed to it", func(t *testing.T) {
		h := good
		h.to = 5
		expectReject(t, send(t, h, goodFd(t)), rejectNotMe)
	})
	t.Run("unknown sender", func(t *testing.T) {
		h := good
		h.from = 0 // known; make it unknown:
		h.from = 200
		expectReject(t, send(t, h, goodFd(t)), rejectUnknownPeer)
	})
	t.Run("wrong direction", func(t *testing.T) {
		h := good
		h.from, h.to = 1, 0
		c := dialRaw(t, paths[0])
		if _, _, err := c.WriteMsgUnix(h.encode(), unix.UnixRights(goodFd(t)), nil); err != nil {
			t.Fatal(err)
		}
		expectReject(t, c, rejectDirection)
	})
	t.Run("bad ring size", func(t *testing.T) {
		h := good
		h.ringSize = MinRingSize + 1
		expectReject(t, send(t, h, goodFd(t)), rejectRingSize)
	})
	t.Run("no fd", func(t *testing.T) {
		expectReject(t, send(t, good), 0)
	})
	t.Run("two fds", func(t *testing.T) {
		expectReject(t, send(t, good, goodFd(t), goodFd(t)), 0)
	})
	t.Run("segment too small", func(t *testing.T) {
		expectReject(t, send(t, good, memfd(t, pageSize, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)), rejectSegment)
	})
	t.Run("not sealable", func(t *testing.T) {
		expectReject(t, send(t, good, memfd(t, int64(segmentSize(MinRingSize)), unix.MFD_CLOEXEC)), rejectSegment)
	})
	t.Run("not a memfd", func(t *testing.T) {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		expectReject(t, send(t, good, p[0]), rejectSegment)
	})
	t.Run("segment without header", func(t *testing.T) {
		expectReject(t, send(t, good, goodFd(t)), rejectSegment)
	})

	// Still working, both ways, on the original link.
	if err := ts[0].Send(1, seqFrame(2), []byte("after")); err != nil {
		t.Fatal(err)
	}
	if err := ts[1].Send(0, seqFrame(3), nil); err != nil {
		t.Fatal(err)
	}
	boxes[1].waitFor(t, 2)
	boxes[0].waitFor(t, 3)
	text := logs.String()
	for _, want := range []string{"bad magic", "cluster id", "protocol version", "reached node 1", "not a member",
		"the lower id dials", "ring size", "want exactly one memfd", "too small", "sealing", "not a memfd", "header"} {
		if !strings.Contains(text, want) {
			t.Errorf("no logged error mentions %q", want)
		}
	}
	if n := strings.Count(text, "level=ERROR"); n < 13 {
		t.Errorf("%d errors logged, want one per refused connection", n)
	}
}

// A peer that closes while we are blocked on its full ring makes Send fail
// promptly with ErrPeerDown; later Sends fail at once.
func TestPeerClosedMidRun(t *testing.T) {
	slow := func(protocol.NodeID, []byte, []byte) { time.Sleep(time.Millisecond) }
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := newCluster(t, []transport.Handler{nop, slow}, nil)
	defer ts[0].Close()
	errc := make(chan error, 1)
	page := make([]byte, transport.MaxPayload)
	go func() {
		for i := uint64(0); ; i++ {
			if err := ts[0].Send(1, seqFrame(i), page); err != nil {
				errc <- err
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond) // the 64 KiB ring is full by now
	closed := time.Now()
	if err := ts[1].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, transport.ErrPeerDown) {
			t.Fatalf("send: %v, want ErrPeerDown", err)
		}
		t.Logf("send failed %v after the peer closed: %v", time.Since(closed), err)
	case <-time.After(3 * time.Second):
		t.Fatal("send still blocked 3s after the peer closed")
	}
	if err := ts[0].Send(1, seqFrame(0), nil); !errors.Is(err, transport.ErrPeerDown) {
		t.Fatalf("send after the failure: %v, want ErrPeerDown", err)
	}
	if _, err := ts[0].FetchAndAdd(transport.Region{Node: 1, Key: 1, Len: 8}, 0, 1); !errors.Is(err, transport.ErrPeerDown) {
		t.Fatalf("verb after the failure: %v, want ErrPeerDown", err)
	}
}

// A restarted peer is reconnected by the dialer; a peer that never comes up
// makes Send fail after PeerTimeout.
func TestReconnectAndNeverUp(t *testing.T) {
	box := newCollector()
	nop := func(protocol.NodeID, []byte, []byte) {}
	log, _ := testLogger(t)
	paths := sockPaths(sockDir(t), 3) // node 2 never starts
	cfg := func(i protocol.NodeID, h transport.Handler) Config {
		return Config{Self: i, SocketPath: paths[i], Peers: paths, ClusterID: 7, Handler: h, Logger: log,
			RingSize: MinRingSize, PeerTimeout: 300 * time.Millisecond, BackoffMax: 20 * time.Millisecond}
	}
	a, err := New(cfg(0, nop))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(cfg(1, nop))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(1, seqFrame(1), nil); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// Until a has read the EOF, its sends still land in the old ring and
	// are lost with it (at most once); wait for it to see the peer down.
	for deadline := time.Now().Add(5 * time.Second); ; {
		err := a.Send(1, seqFrame(0), nil)
		if errors.Is(err, transport.ErrPeerDown) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("send to the closed peer: %v, want ErrPeerDown within 5s", err)
		}
		time.Sleep(time.Millisecond)
	}
	b, err = New(cfg(1, box.handler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := a.Send(1, seqFrame(2), nil)
		if err == nil {
			break
		}
		if !errors.Is(err, transport.ErrPeerDown) || time.Now().After(deadline) {
			t.Fatalf("send to the restarted peer: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	box.waitFor(t, 2)
	start := time.Now()
	if err := a.Send(2, seqFrame(3), nil); !errors.Is(err, transport.ErrPeerDown) {
		t.Fatalf("send to a peer that never started: %v, want ErrPeerDown", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("gave up after %v, want about PeerTimeout", d)
	}
}

// A handler may issue verbs to the peer it is handling: the answers come
// back on the response ring, not through the busy reader.
func TestVerbFromHandler(t *testing.T) {
	mem, err := syscall.Mmap(-1, 0, pageSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	var ts []*Transport
	var region transport.Region
	done := make(chan error, 1)
	h1 := func(from protocol.NodeID, frame, payload []byte) {
		prev, err := ts[1].FetchAndAdd(region, 0, 5)
		if err == nil && prev != 0 {
			err = fmt.Errorf("prev %d", prev)
		}
		if err == nil {
			var b [8]byte
			err = ts[1].Read(b[:], region, 0)
			if err == nil && binary.LittleEndian.Uint64(b[:]) != 5 {
				err = fmt.Errorf("read %d after FAA", binary.LittleEndian.Uint64(b[:]))
			}
		}
		if err == nil {
			err = ts[1].Send(from, frame, nil)
		}
		if err != nil {
			done <- err
		}
	}
	h0 := func(protocol.NodeID, []byte, []byte) { done <- nil }
	ts = newCluster(t, []transport.Handler{h0, h1}, nil)
	defer ts[0].Close()
	defer ts[1].Close()
	if region, err = ts[0].Register(mem); err != nil {
		t.Fatal(err)
	}
	if err := ts[0].Send(1, seqFrame(1), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a verb from the handler hung")
	}
}

// Large reads and writes go in chunks; local regions are served directly.
func TestVerbChunksAndLocal(t *testing.T) {
	const n = 5*verbChunk + 123
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := newCluster(t, []transport.Handler{nop, nop}, nil)
	defer ts[0].Close()
	defer ts[1].Close()
	r, err := ts[1].Register(mem)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, n-7)
	for i := range src {
		src[i] = byte(i * 13)
	}
	if err := ts[0].Write(r, 7, src); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[7:], src) {
		t.Fatal("chunked write differs")
	}
	got := make([]byte, n-7)
	if err := ts[0].Read(got, r, 7); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("chunked read: %v", err)
	}
	if err := ts[1].Read(got[:100], r, 7); err != nil || !bytes.Equal(got[:100], src[:100]) {
		t.Fatalf("local read: %v", err)
	}
	if prev, err := ts[1].FetchAndAdd(r, 8, 1); err != nil || prev != binary.LittleEndian.Uint64(mem[8:])-1 {
		t.Fatalf("local FAA: %d %v", prev, err)
	}
	if err := ts[0].Read(got[:8], r, n-4); !errors.Is(err, transport.ErrAccess) {
		t.Fatalf("read past the end: %v", err)
	}
	if _, err := ts[0].CompareAndSwap(r, n, 0, 0); !errors.Is(err, transport.ErrMisaligned) && !errors.Is(err, transport.ErrAccess) {
		t.Fatalf("CAS at the end: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	nop := func(protocol.NodeID, []byte, []byte) {}
	dir := sockDir(t)
	for _, cfg := range []Config{
		{SocketPath: filepath.Join(dir, "a"), Handler: nil},
		{Handler: nop},
		{SocketPath: filepath.Join(dir, "a"), Handler: nop, RingSize: 3 << 16},
		{SocketPath: filepath.Join(dir, "a"), Handler: nop, RingSize: 4096},
		{SocketPath: filepath.Join(dir, "a"), Handler: nop, Peers: map[protocol.NodeID]string{1: ""}},
		{SocketPath: filepath.Join(dir, "no", "such", "dir", "a"), Handler: nop},
	} {
		if tr, err := New(cfg); err == nil {
			tr.Close()
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	// A live listener's path is refused; a stale socket file is replaced.
	path := filepath.Join(dir, "live")
	a, err := New(Config{SocketPath: path, Handler: nop})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := New(Config{SocketPath: path, Handler: nop}); err == nil {
		b.Close()
		t.Fatal("two transports on one socket path")
	}
	a.Close()
	stale := filepath.Join(dir, "stale")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	c, err := New(Config{SocketPath: stale, Handler: nop})
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	c.Close()
	if err := c.Send(1, seqFrame(0), nil); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	if _, err := c.Register(make([]byte, 8)); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("register after close: %v", err)
	}
}

// BenchmarkRoundTrip: 64-byte ping-pong between two transports of this
// process, driven from the handlers (no goroutine hand-off per message).
func BenchmarkRoundTrip(b *testing.B) {
	var ts []*Transport
	var count atomic.Int64
	done := make(chan struct{})
	var n int64
	frame := seqFrame(0)
	echo := func(from protocol.NodeID, f, _ []byte) {
		if err := ts[1].Send(from, f, nil); err != nil {
			b.Error(err)
		}
	}
	ping := func(_ protocol.NodeID, f, _ []byte) {
		if count.Add(1) >= n {
			close(done)
			return
		}
		if err := ts[0].Send(1, f, nil); err != nil {
			b.Error(err)
		}
	}
	ts = newCluster(b, []transport.Handler{ping, echo}, func(c *Config) { c.RingSize = 1 << 20 })
	defer ts[0].Close()
	defer ts[1].Close()
	// Warm up (connects, faults the ring pages in).
	n = 1000
	if err := ts[0].Send(1, frame, nil); err != nil {
		b.Fatal(err)
	}
	<-done
	done = make(chan struct{})
	count.Store(0)
	n = int64(b.N)
	b.ResetTimer()
	start := time.Now()
	if err := ts[0].Send(1, frame, nil); err != nil {
		b.Fatal(err)
	}
	<-done
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "roundtrips/s")
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N)/1000, "µs/roundtrip")
}

// TestPollSharesTheRingInOrder: pollers on the receiving side consume the
// ring between the reader's turns, and the handler still sees every
// message once, in order; a peer that goes away under pollers fails the
// link without a fault, and Poll on it afterwards consumes nothing.
func TestPollSharesTheRingInOrder(t *testing.T) {
	c := newCollector()
	nop := func(protocol.NodeID, []byte, []byte) {}
	// The reader parks at once when its ring is empty, so the pollers,
	// which never sleep, take most messages; the reader still takes some.
	ts := newCluster(t, []transport.Handler{nop, c.handler}, func(c *Config) { c.Spin = -1 })
	defer ts[1].Close()
	const n = 50_000
	stop := make(chan struct{})
	var polled atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				polled.Add(int64(ts[1].Poll()))
			}
		}()
	}
	payload := make([]byte, 100)
	// On a loaded host the pollers may not get a CPU during a round: up to
	// ten rounds are sent until they have taken some.
	var sent uint64
	for round := 0; round < 10 && (round == 0 || polled.Load() == 0); round++ {
		for range uint64(n) {
			if err := ts[0].Send(1, seqFrame(sent), payload[:sent%100]); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		c.waitFor(t, sent-1)
	}
	c.mu.Lock()
	if uint64(len(c.msgs)) != sent {
		t.Errorf("%d messages handled, want %d", len(c.msgs), sent)
	}
	for i, s := range c.msgs {
		if s != uint64(i) {
			t.Fatalf("message %d is %d: out of order or twice", i, s)
		}
	}
	c.mu.Unlock()
	if polled.Load() == 0 {
		t.Error("the pollers consumed nothing")
	}
	ts[0].Close() // the peer goes away while the pollers run
	deadline := time.Now().Add(5 * time.Second)
	for l := ts[1].peers[0].live.Load(); l != nil && !l.dead.Load(); l = ts[1].peers[0].live.Load() {
		if time.Now().After(deadline) {
			t.Fatal("link still up 5 s after the peer closed")
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if got := ts[1].Poll(); got != 0 {
		t.Fatalf("Poll on a dead link consumed %d records", got)
	}
	t.Logf("pollers consumed %d of %d messages", polled.Load(), sent)
}

// TestReadersNapWhileWorkersPoll: with the workers' activity counter moving
// and no worker parked, a reader that finds nothing naps instead of
// parking, so the sender never has a parked reader to wake (no futex
// wake-up); a message still arrives, through a poller or the reader after
// its nap. Once a worker parks (WorkerParks), the nappers are woken and the
// reader parks as before: a message then reaches the handler at once.
func TestReadersNapWhileWorkersPoll(t *testing.T) {
	c := newCollector()
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := newCluster(t, []transport.Handler{nop, c.handler}, nil)
	defer ts[0].Close()
	defer ts[1].Close()
	var activity atomic.Uint64
	ts[1].SetActivity(&activity)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a worker making progress, polling now and then
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			activity.Add(1)
			ts[1].Poll()
			time.Sleep(20 * time.Microsecond)
		}
	}()
	const n = 2000
	for i := range uint64(n) {
		if err := ts[0].Send(1, seqFrame(i), nil); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			time.Sleep(200 * time.Microsecond) // let the reader run dry and nap
		}
	}
	c.waitFor(t, n-1)
	if ts[1].naps.Load() == 0 {
		t.Error("the reader never napped while the worker made progress")
	}
	// A worker parks: the readers stop napping, and a message gets through
	// without any poller.
	close(stop)
	wg.Wait()
	ts[1].WorkerParks()
	defer ts[1].WorkerRuns()
	start := time.Now()
	if err := ts[0].Send(1, seqFrame(n), nil); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, n)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("a message to a node whose worker sleeps took %v", d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.msgs {
		if s != uint64(i) {
			t.Fatalf("message %d is %d: out of order or twice", i, s)
		}
	}
}
