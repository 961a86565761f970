package tcp

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

const testCluster = 42

// testConfig is a node's config with timeouts short enough for tests.
func testConfig(self protocol.NodeID, n int, h transport.Handler) Config {
	peers := map[protocol.NodeID]string{}
	for j := range n {
		peers[protocol.NodeID(j)] = "" // members; addresses follow by SetPeerAddr
	}
	return Config{
		Self:             self,
		Listen:           "127.0.0.1:0",
		Peers:            peers,
		ClusterID:        testCluster,
		Handler:          h,
		HandshakeTimeout: 2 * time.Second,
		PeerTimeout:      2 * time.Second,
		BackoffMin:       2 * time.Millisecond,
		BackoffMax:       50 * time.Millisecond,
	}
}

// startCluster starts one transport per handler, then tells each the
// others' addresses. tweak, if set, edits each config first.
func startCluster(t testing.TB, handlers []transport.Handler, tweak func(*Config)) []*Transport {
	t.Helper()
	ts := make([]*Transport, len(handlers))
	for i, h := range handlers {
		cfg := testConfig(protocol.NodeID(i), len(handlers), h)
		if tweak != nil {
			tweak(&cfg)
		}
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		ts[i] = tr
	}
	for i, a := range ts {
		for j, b := range ts {
			if i != j {
				if err := a.SetPeerAddr(protocol.NodeID(j), b.Addr().String()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return ts
}

// logBuffer collects slog text output safely across goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitLog waits until a line of the log holds every one of subs.
func (b *logBuffer) waitLog(t testing.TB, subs ...string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for line := range strings.SplitSeq(b.String(), "\n") {
			all := true
			for _, s := range subs {
				if !strings.Contains(line, s) {
					all = false
					break
				}
			}
			if all {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q; log:\n%s", subs, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testPKI is a CA and what it signed, for mutual TLS tests.
type testPKI struct {
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	pool   *x509.CertPool
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "scalestore test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testPKI{caCert: cert, caKey: key, pool: pool}
}

// leaf signs a certificate for 127.0.0.1, good for server and client
// authentication, and returns it with its key in PEM.
func (p *testPKI) leaf(t testing.TB, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// config is a mutual-TLS config for one node.
func (p *testPKI) config(t testing.TB, name string) *tls.Config {
	t.Helper()
	certPEM, keyPEM := p.leaf(t, name)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: p.pool, ClientCAs: p.pool, MinVersion: tls.VersionTLS13}
}

// files writes a node's certificate, key and the CA to dir.
func (p *testPKI) files(t testing.TB, dir, name string) (certFile, keyFile, caFile string) {
	t.Helper()
	certPEM, keyPEM := p.leaf(t, name)
	certFile, keyFile, caFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"), filepath.Join(dir, "ca.crt")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.caCert.Raw})
	for f, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, caFile: caPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile, caFile
}

// msgFrame is a protocol-sized frame carrying seq in bytes 8..16, as the
// conformance suite's frames do.
func msgFrame(seq uint64) []byte {
	f := make([]byte, protocol.FrameSize)
	f[0] = 0xA5
	for i := range 8 {
		f[8+i] = byte(seq >> (8 * i))
	}
	return f
}

func frameSeq(f []byte) uint64 {
	var v uint64
	for i := range 8 {
		v |= uint64(f[8+i]) << (8 * i)
	}
	return v
}

// collector is a handler recording the seq of every message per sender.
type collector struct {
	mu   sync.Mutex
	seqs map[protocol.NodeID][]uint64
}

func newCollector() *collector { return &collector{seqs: map[protocol.NodeID][]uint64{}} }

func (c *collector) handler(from protocol.NodeID, frame, payload []byte) {
	c.mu.Lock()
	c.seqs[from] = append(c.seqs[from], frameSeq(frame))
	c.mu.Unlock()
}

func (c *collector) from(id protocol.NodeID) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.seqs[id]...)
}

// waitSeq waits until a message with seq arrived from id.
func (c *collector) waitSeq(t testing.TB, id protocol.NodeID, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range c.from(id) {
			if s == seq {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("message %d from node %d never arrived (got %v)", seq, id, c.from(id))
}

// offHeap maps n bytes outside the Go heap.
func offHeap(t testing.TB, n int) []byte {
	t.Helper()
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	return mem
}
