package tcp

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// rawDial connects to tr without the transport, as a stray client would.
func rawDial(t *testing.T, tr *Transport) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", tr.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readAnswer reads the acceptor's answer, if it sent one, and the close.
func readAnswer(t *testing.T, c net.Conn) (reason, bool) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [answerSize]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, false
	}
	r, _, err := decodeAnswer(b[:])
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	if _, err := c.Read(b[:1]); err == nil {
		t.Fatal("the acceptor kept a rejected connection open")
	}
	return r, true
}

// exchange checks that two nodes still talk both ways.
func exchange(t *testing.T, ts []*Transport, cols []*collector, seq uint64) {
	t.Helper()
	if err := ts[0].Send(1, msgFrame(seq), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := ts[1].Send(0, msgFrame(seq), nil); err != nil {
		t.Fatal(err)
	}
	cols[1].waitSeq(t, 0, seq)
	cols[0].waitSeq(t, 1, seq)
}

func TestGarbageRejected(t *testing.T) {
	var logs logBuffer
	cols := []*collector{newCollector(), newCollector()}
	ts := startCluster(t, []transport.Handler{cols[0].handler, cols[1].handler}, func(c *Config) {
		if c.Self == 0 {
			c.Logger = logs.logger()
			c.HandshakeTimeout = 200 * time.Millisecond
		}
	})
	exchange(t, ts, cols, 1)

	hi := func(ver, from, to uint16, cluster uint64) []byte {
		return encodeHello(hello{version: ver, from: from, to: to, cluster: cluster})
	}
	reserved := hi(version, 1, 0, testCluster)
	reserved[10] = 1
	cases := []struct {
		name   string
		send   []byte
		want   reason // reasonOK: no answer expected
		substr string
	}{
		{"random bytes", nil, reasonBadMagic, "bad magic"},
		{"http", []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"), reasonBadMagic, `first_bytes="GET / HT"`},
		{"short garbage", []byte("HELO!!!!"), reasonBadMagic, "bad magic"},
		{"wrong cluster", hi(version, 1, 0, 7), reasonCluster, "want_cluster=42"},
		{"unknown node", hi(version, 300, 0, testCluster), reasonUnknownNode, "node=300"},
		{"not a peer", hi(version, 5, 0, testCluster), reasonNotPeer, "node=5"},
		{"self", hi(version, 0, 0, testCluster), reasonSelf, "node=0"},
		{"wrong target", hi(version, 1, 3, testCluster), reasonWrongTarget, "target=3"},
		{"wrong version", hi(version+1, 1, 0, testCluster), reasonVersion, "want_version=1"},
		{"reserved", reserved, reasonReserved, "reserved"},
		{"silent", []byte{}, reasonOK, "no handshake within 200ms"},
		{"truncated hello", hi(version, 1, 0, testCluster)[:13], reasonOK, "incomplete handshake"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, ts[0])
			send := tc.send
			if send == nil {
				send = make([]byte, 100)
				rand.Read(send)
				send[0] = 0 // never the magic's first byte
			}
			if _, err := c.Write(send); err != nil {
				t.Fatal(err)
			}
			if tc.name == "truncated hello" {
				c.(*net.TCPConn).CloseWrite()
			}
			got, answered := readAnswer(t, c)
			if tc.want != reasonOK && (!answered || got != tc.want) {
				t.Fatalf("answer %v (answered %v), want %v", got, answered, tc.want)
			}
			want := tc.want.String()
			if tc.want == reasonOK {
				want = tc.substr
			}
			logs.waitLog(t, "rejected incoming connection", "remote="+c.LocalAddr().String(), want, tc.substr)
		})
	}
	// The cluster is unharmed.
	exchange(t, ts, cols, 2)
}

// TestMalformedFrame: a frame longer than the maximum, after a valid
// handshake, closes that connection with a logged error; the sender
// reconnects and the nodes go on. The same with goroutines polling both
// nodes (Poll), which may be the ones that find the bad frame.
func TestMalformedFrame(t *testing.T) {
	t.Run("readers", func(t *testing.T) { testMalformedFrame(t, false) })
	t.Run("pollers", func(t *testing.T) { testMalformedFrame(t, true) })
}

func testMalformedFrame(t *testing.T, poll bool) {
	var logs0, logs1 logBuffer
	cols := []*collector{newCollector(), newCollector()}
	ts := startCluster(t, []transport.Handler{cols[0].handler, cols[1].handler}, func(c *Config) {
		if c.Self == 0 {
			c.Logger = logs0.logger()
			c.Peers[2] = "" // a member that never runs: the impostor below
		} else {
			c.Logger = logs1.logger()
		}
	})
	if poll {
		startPollers(t, ts...)
	}
	exchange(t, ts, cols, 1)

	// Inject a frame claiming 1 GiB into node 0's own connection to 1.
	bad := appendHeader(nil, kindMsg, 1<<30)
	if err := ts[0].peer(1).enqueue(item{buf: bad}, nil); err != nil {
		t.Fatal(err)
	}
	logs1.waitLog(t, "malformed frame, closing connection", "peer=0", "message body of 1073741824 bytes")
	logs0.waitLog(t, "connection to peer lost, reconnecting", "peer=1")
	// Messages queued right behind the bad frame may be lost with the
	// connection; keep sending until one arrives.
	deadline := time.Now().Add(10 * time.Second)
	for seq := uint64(100); ; seq++ {
		if err := ts[0].Send(1, msgFrame(seq), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		if got := cols[1].from(0); got[len(got)-1] >= 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node 0 never reconnected to node 1")
		}
	}
	exchange(t, ts, cols, 1000)

	// A raw client passing the handshake as node 2, then breaking the
	// format in four ways.
	for _, frame := range [][]byte{
		{9, 0, 0, 0, 0, 0, 0, 0},
		binary.LittleEndian.AppendUint32([]byte{byte(kindCAS), 0, 0, 0}, 8),
		{byte(kindReply), 0, 0, 0, 24, 0, 0, 0},
		{byte(kindMsg), 1, 0, 0, 64, 0, 0, 0},
	} {
		c := rawDial(t, ts[0])
		c.Write(encodeHello(hello{version: version, from: 2, to: 0, cluster: testCluster}))
		if r, ok := readAnswer0(t, c); !ok || r != reasonOK {
			t.Fatalf("handshake answer %v %v", r, ok)
		}
		c.Write(frame)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("frame % x: connection not closed: %v", frame, err)
		}
	}
	logs0.waitLog(t, "malformed frame", "unknown kind 9")
	logs0.waitLog(t, "malformed frame", "compare-and-swap body of 8 bytes")
	logs0.waitLog(t, "malformed frame", "unexpected reply frame")
	logs0.waitLog(t, "malformed frame", "reserved header bytes")
	exchange(t, ts, cols, 3000)
}

// readAnswer0 reads an answer and leaves the connection open.
func readAnswer0(t *testing.T, c net.Conn) (reason, bool) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [answerSize]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, false
	}
	r, node, err := decodeAnswer(b[:])
	if err != nil || node != 0 {
		t.Fatalf("answer from node %d: %v", node, err)
	}
	return r, true
}

// TestDialerRejected: a node configured with the wrong cluster id keeps
// dialing, logs the refusal on every attempt, and its sends fail as
// ErrPeerDown after the peer timeout; it never crashes.
func TestDialerRejected(t *testing.T) {
	var logs logBuffer
	nop := func(protocol.NodeID, []byte, []byte) {}
	good, err := New(testConfig(0, 2, nop))
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	cfg := testConfig(1, 2, nop)
	cfg.ClusterID = 7
	cfg.PeerTimeout = 300 * time.Millisecond
	cfg.Logger = logs.logger()
	cfg.Peers[0] = good.Addr().String()
	bad, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	logs.waitLog(t, "peer rejected the handshake", "peer=0", `reason="wrong cluster id"`)
	logs.waitLog(t, "peer down", "peer=0")
	start := time.Now()
	for {
		err := bad.Send(0, msgFrame(1), nil)
		if errors.Is(err, transport.ErrPeerDown) {
			break
		}
		if err != nil || time.Since(start) > 5*time.Second {
			t.Fatalf("send to a peer that rejects us: %v after %v", err, time.Since(start))
		}
		time.Sleep(time.Millisecond)
	}
}
