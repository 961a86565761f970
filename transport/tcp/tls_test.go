package tcp

import (
	"crypto/tls"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// TestTLSRejectsClients: a TLS node refuses clients without a
// certificate, with one from another CA, and plain TCP; it logs each, and
// the cluster goes on.
func TestTLSRejectsClients(t *testing.T) {
	pki, other := newPKI(t), newPKI(t)
	var logs logBuffer
	cols := []*collector{newCollector(), newCollector()}
	ts := startCluster(t, []transport.Handler{cols[0].handler, cols[1].handler}, func(c *Config) {
		c.TLS = pki.config(t, "node")
		if c.Self == 0 {
			c.Logger = logs.logger()
		}
	})
	exchange(t, ts, cols, 1)

	hi := encodeHello(hello{version: version, from: 1, to: 0, cluster: testCluster})
	clients := map[string]*tls.Config{
		"no certificate":   {RootCAs: pki.pool, ServerName: "127.0.0.1"},
		"foreign ca":       other.config(t, "intruder"),
		"server unchecked": {InsecureSkipVerify: true}, // still no client certificate
	}
	// It trusts the server; the server must not trust it.
	clients["foreign ca"].RootCAs = pki.pool
	clients["foreign ca"].ServerName = "127.0.0.1"
	for name, cfg := range clients {
		t.Run(name, func(t *testing.T) {
			raw := rawDial(t, ts[0])
			c := tls.Client(raw, cfg)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			// In TLS 1.3 the client finishes its handshake before the
			// server checks its certificate; the refusal shows on the
			// first read.
			_ = c.Handshake()
			c.Write(hi)
			if n, err := io.ReadFull(c, make([]byte, answerSize)); err == nil {
				t.Fatalf("a client without a valid certificate got an answer (%d bytes)", n)
			}
			line := logs.waitLog(t, "TLS handshake failed", "remote="+raw.LocalAddr().String())
			t.Log(line)
			if !strings.Contains(line, "certificate") {
				t.Errorf("the log does not say the certificate is the problem: %s", line)
			}
		})
	}
	t.Run("plain tcp", func(t *testing.T) {
		c := rawDial(t, ts[0])
		c.Write(hi)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, answerSize)
		if n, err := io.ReadFull(c, b); err == nil {
			if _, _, err := decodeAnswer(b); err == nil {
				t.Fatalf("a plain TCP client got an answer (%d bytes)", n)
			}
		}
		t.Log(logs.waitLog(t, "TLS handshake failed", "remote="+c.LocalAddr().String()))
	})
	exchange(t, ts, cols, 2)
}

func TestLoadTLS(t *testing.T) {
	pki := newPKI(t)
	dir := t.TempDir()
	cert0, key0, ca := pki.files(t, dir, "node0")
	cert1, key1, _ := pki.files(t, dir, "node1")
	cfg0, err := LoadTLS(cert0, key0, ca)
	if err != nil {
		t.Fatal(err)
	}
	cfg1, err := LoadTLS(cert1, key1, ca)
	if err != nil {
		t.Fatal(err)
	}
	cols := []*collector{newCollector(), newCollector()}
	cfgs := []*tls.Config{cfg0, cfg1}
	ts := startCluster(t, []transport.Handler{cols[0].handler, cols[1].handler}, func(c *Config) {
		c.TLS = cfgs[c.Self]
	})
	exchange(t, ts, cols, 1)

	// Clear errors for missing and broken files.
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	foreignCert, foreignKey, _ := newPKI(t).files(t, t.TempDir(), "foreign")
	for _, tc := range []struct {
		cert, key, ca string
		want          string
	}{
		{"", key0, ca, "needs a certificate, a key and a CA"},
		{filepath.Join(dir, "missing.crt"), key0, ca, "missing.crt"},
		{cert0, key1, ca, "loading certificate"},
		{garbage, key0, ca, "garbage.pem"},
		{cert0, key0, filepath.Join(dir, "missing-ca.crt"), "missing-ca.crt"},
		{cert0, key0, garbage, "holds no PEM certificate"},
		{foreignCert, foreignKey, ca, "does not verify against CA"},
	} {
		if _, err := LoadTLS(tc.cert, tc.key, tc.ca); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadTLS(%q, %q, %q): %v, want an error naming %q", tc.cert, tc.key, tc.ca, err, tc.want)
		}
	}
	if _, err := New(Config{Listen: "127.0.0.1:0", Handler: func(protocol.NodeID, []byte, []byte) {}, TLS: &tls.Config{}}); err == nil {
		t.Error("a TLS config without a certificate was accepted")
	}
}

// TestTLSMismatchedNodes: two nodes whose certificates come from different
// CAs never connect; both log why on every attempt and report the other
// down.
func TestTLSMismatchedNodes(t *testing.T) {
	pkis := []*testPKI{newPKI(t), newPKI(t)}
	logs := []*logBuffer{{}, {}}
	nop := func(protocol.NodeID, []byte, []byte) {}
	ts := startCluster(t, []transport.Handler{nop, nop}, func(c *Config) {
		c.TLS = pkis[c.Self].config(t, "node")
		c.Logger = logs[c.Self].logger()
		c.PeerTimeout = 300 * time.Millisecond
	})
	for i := range ts {
		logs[i].waitLog(t, "handshake with peer failed", "certificate")
		logs[i].waitLog(t, "TLS handshake failed", "certificate")
		logs[i].waitLog(t, "peer down")
		if err := ts[i].Send(protocol.NodeID(1-i), msgFrame(1), nil); !errors.Is(err, transport.ErrPeerDown) {
			t.Errorf("node %d: send to a node it cannot trust: %v", i, err)
		}
	}
}
