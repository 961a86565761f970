package resp

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/btree"
	"github.com/tidwall/redcon"
)

// TestMain fails the run if goroutines are left over: every test must
// close its servers and clients.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "leaked goroutines: %d before, %d after\n%s\n", before, n, buf)
			code = 1
		}
	}
	os.Exit(code)
}

// errInjected is what fakeEngine answers for keys that start with "!fail".
var errInjected = errors.New("injected failure")

// fakeEngine is an in-memory Engine: a sorted map under a mutex.
type fakeEngine struct {
	mu   sync.Mutex
	m    btree.Map[string, []byte]
	txns int // transactions committed by Atomic
	// txReads counts the reads of the engine by transactions' Gets.
	txReads int
}

func newFakeEngine() *fakeEngine { return &fakeEngine{} }

// txnCount is how many transactions Atomic committed. (Under the mutex:
// the server's goroutines write it, and a reply read from a socket orders
// nothing for the race detector.)
func (e *fakeEngine) txnCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.txns
}

func failing(key []byte) bool { return bytes.HasPrefix(key, []byte("!fail")) }

func (e *fakeEngine) Get(key, dst []byte) ([]byte, bool, error) {
	if failing(key) {
		return dst, false, errInjected
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.m.Get(string(key))
	if !ok {
		return dst, false, nil
	}
	return append(dst, v...), true, nil
}

func (e *fakeEngine) GetBatch(keys, vals [][]byte, found []bool) error {
	for _, k := range keys {
		if failing(k) {
			return errInjected
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, k := range keys {
		v, ok := e.m.Get(string(k))
		found[i] = ok
		vals[i] = append(vals[i][:0], v...)
	}
	return nil
}

func (e *fakeEngine) Put(key, val []byte) error {
	if failing(key) {
		return errInjected
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m.Set(string(key), bytes.Clone(val))
	return nil
}

func (e *fakeEngine) PutIf(key, val []byte, cond func(old []byte, found bool) bool) (bool, error) {
	if failing(key) {
		return false, errInjected
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old, found := e.m.Get(string(key))
	if !cond(old, found) {
		return false, nil
	}
	e.m.Set(string(key), bytes.Clone(val))
	return true, nil
}

func (e *fakeEngine) Modify(key []byte, fn func(old []byte, found bool) ([]byte, bool, bool)) error {
	if failing(key) {
		return errInjected
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old, found := e.m.Get(string(key))
	val, exists, write := fn(bytes.Clone(old), found)
	switch {
	case !write:
	case exists:
		e.m.Set(string(key), bytes.Clone(val))
	default:
		e.m.Delete(string(key))
	}
	return nil
}

// fakeTx is a transaction of fakeEngine: reads remembered, writes
// buffered, and a commit that checks the reads under the engine's lock.
type fakeTx struct {
	e        *fakeEngine
	readOnly bool
	reads    map[string][]byte // nil: absent
	writes   map[string][]byte // nil: deleted
	// unless holds PutUnless's checks of the keys written blind;
	// matched, the keys whose check matched at an earlier commit.
	unless  map[string]func([]byte) bool
	matched map[string]bool
}

// PutUnless is UnlessTxn's: a blind write checked at commit.
func (tx *fakeTx) PutUnless(key, val []byte, unless func([]byte) bool) (bool, error) {
	if failing(key) {
		return false, errInjected
	}
	if tx.readOnly {
		return false, errors.New("read-only transaction")
	}
	k := string(key)
	_, read := tx.reads[k]
	_, written := tx.writes[k]
	if read || written || tx.matched[k] {
		return false, nil
	}
	if err := tx.Put(key, val); err != nil {
		return false, err
	}
	tx.unless[k] = unless
	return true, nil
}

func (tx *fakeTx) Get(key, dst []byte) ([]byte, bool, error) {
	if failing(key) {
		return dst, false, errInjected
	}
	if v, ok := tx.writes[string(key)]; ok {
		return append(dst, v...), v != nil, nil
	}
	if v, ok := tx.reads[string(key)]; ok {
		return append(dst, v...), v != nil, nil
	}
	tx.e.mu.Lock()
	v, ok := tx.e.m.Get(string(key))
	tx.e.txReads++
	tx.e.mu.Unlock()
	if ok {
		v = bytes.Clone(v)
		if v == nil {
			v = []byte{}
		}
	}
	tx.reads[string(key)] = v
	return append(dst, v...), ok, nil
}

func (tx *fakeTx) Put(key, val []byte) error {
	if failing(key) {
		return errInjected
	}
	if tx.readOnly {
		return errors.New("read-only transaction")
	}
	v := bytes.Clone(val)
	if v == nil {
		v = []byte{}
	}
	tx.writes[string(key)] = v
	return nil
}

func (tx *fakeTx) Delete(key []byte) (bool, error) {
	if tx.readOnly {
		return false, errors.New("read-only transaction")
	}
	_, found, err := tx.Get(key, nil)
	if err != nil {
		return false, err
	}
	tx.writes[string(key)] = nil
	return found, nil
}

// Atomic runs fn until its reads still hold at commit.
func (e *fakeEngine) Atomic(readOnly bool, fn func(tx Txn) error) error {
	matched := map[string]bool{}
	for {
		tx := &fakeTx{e: e, readOnly: readOnly, reads: map[string][]byte{}, writes: map[string][]byte{},
			unless: map[string]func([]byte) bool{}, matched: matched}
		if err := fn(tx); err != nil {
			return err
		}
		e.mu.Lock()
		ok := true
		for k, v := range tx.reads {
			cur, found := e.m.Get(k)
			if found != (v != nil) || !bytes.Equal(cur, v) {
				ok = false
				break
			}
		}
		for k, unless := range tx.unless {
			if cur, found := e.m.Get(k); found && unless(cur) {
				matched[k], ok = true, false
			}
		}
		if ok {
			for k, v := range tx.writes {
				if v == nil {
					e.m.Delete(k)
				} else {
					e.m.Set(k, v)
				}
			}
			e.txns++
		}
		e.mu.Unlock()
		if ok {
			return nil
		}
	}
}

func (e *fakeEngine) Delete(key []byte) (bool, error) {
	if failing(key) {
		return false, errInjected
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, found := e.m.Delete(string(key))
	return found, nil
}

func (e *fakeEngine) Scan(from, to []byte, fn func(key, val []byte) bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m.Ascend(string(from), func(k string, v []byte) bool {
		if to != nil && k >= string(to) {
			return false
		}
		return fn([]byte(k), v)
	})
	return nil
}

// get reads a key directly, bypassing the server.
func (e *fakeEngine) get(key string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.m.Get(key)
	return string(v), ok
}

// txReadCount is how many reads transactions made of the engine.
func (e *fakeEngine) txReadCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.txReads
}

func (e *fakeEngine) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m.Len()
}

// startServer serves a fresh fakeEngine on a loopback port; both are
// closed when the test ends.
func startServer(t testing.TB, cfg Config) (*Server, *fakeEngine) {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Loop == "" {
		cfg.Loop = testLoop
	}
	cfg.OffloadWrites = cfg.OffloadWrites || testOffload
	e := newFakeEngine()
	s, err := Listen(cfg, e)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, e
}

// newRedis is a go-redis client for s, closed when the test ends.
func newRedis(t testing.TB, s *Server, opt *redis.Options) *redis.Client {
	t.Helper()
	if opt == nil {
		opt = &redis.Options{}
	}
	opt.Addr = s.Addr()
	if opt.DialTimeout == 0 {
		opt.DialTimeout = 5 * time.Second
	}
	opt.ReadTimeout = 10 * time.Second
	opt.WriteTimeout = 10 * time.Second
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	return rc
}

// rawConn is a plain TCP connection for writing raw bytes and reading
// replies, which redcon.ReadNextRESP parses.
type rawConn struct {
	t   testing.TB
	nc  net.Conn
	buf []byte
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write([]byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// cmd encodes args as a RESP array.
func cmd(args ...string) string {
	var b []byte
	b = redcon.AppendArray(b, len(args))
	for _, a := range args {
		b = redcon.AppendBulkString(b, a)
	}
	return string(b)
}

// read returns the next reply, or an error if the connection ended or
// nothing came within 5 seconds.
func (c *rawConn) read() (redcon.RESP, error) {
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if n, r := redcon.ReadNextRESP(c.buf); n > 0 {
			r.Raw = bytes.Clone(r.Raw)
			r.Data = bytes.Clone(r.Data)
			c.buf = c.buf[n:]
			return r, nil
		}
		var tmp [64 << 10]byte
		n, err := c.nc.Read(tmp[:])
		c.buf = append(c.buf, tmp[:n]...)
		if err != nil && n == 0 {
			return redcon.RESP{}, err
		}
	}
}

// expect reads the next reply and checks its raw form.
func (c *rawConn) expect(want string) {
	c.t.Helper()
	r, err := c.read()
	if err != nil {
		c.t.Fatalf("reading reply, want %q: %v", want, err)
	}
	if string(r.Raw) != want {
		c.t.Fatalf("reply %q, want %q", r.Raw, want)
	}
}

// expectPrefix reads the next reply and checks how it starts.
func (c *rawConn) expectPrefix(want string) string {
	c.t.Helper()
	r, err := c.read()
	if err != nil {
		c.t.Fatalf("reading reply, want %q...: %v", want, err)
	}
	if !strings.HasPrefix(string(r.Raw), want) {
		c.t.Fatalf("reply %q, want %q...", r.Raw, want)
	}
	return string(r.Raw)
}

// expectClosed checks that the server closes the connection (EOF or a
// reset) without another reply.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	r, err := c.read()
	if err == nil {
		c.t.Fatalf("reply %q, want the connection closed", r.Raw)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open: %v", err)
	}
}

// testTLS makes a self-signed certificate for 127.0.0.1 and returns a
// server config with it and a client config that trusts it.
func testTLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "resp test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
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
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}
	client = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	return server, client
}
