package membership

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// embeddedStartTimeout bounds how long StartEmbedded waits for the server to
// elect itself and serve: a single member does so within about one election
// timeout, so this only fires when something is wrong (a full disk, a port
// taken), and then as an error rather than a hang.
const embeddedStartTimeout = 20 * time.Second

// Embedded is an etcd server running inside this process
// (go.etcd.io/etcd/server/v3/embed), for tests and for `scalestore cluster`'s
// local default. It is a single member: it tolerates no failure of its own,
// which is fine where every node runs on this host anyway.
type Embedded struct {
	etcd      *embed.Etcd
	endpoints []string
	closeOnce sync.Once
}

// StartEmbedded starts a single-member etcd server with its data and its log
// (errors only) in dir, listening on 127.0.0.1 on free ports, and returns
// once it serves.
//
// Its timings are short (a 50 ms heartbeat, a 500 ms election timeout) so
// that the server grants the 1 s leases that fast failure detection needs:
// etcd's minimum lease TTL is 1.5 election timeouts, rounded up to seconds.
// That is only sound on one host, where the round trips are microseconds.
//
// Options: Ephemeral, for a server whose data goes with its process.
func StartEmbedded(dir string, opts ...EmbeddedOption) (*Embedded, error) {
	var o embeddedOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("membership: embedded etcd: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "scalestore"
	cfg.Dir = filepath.Join(dir, "etcd-data")
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	// Port 0: the kernel picks free ports when the server listens, so there
	// is no window in which another process can take a port we chose. The
	// peer URL is never dialled (there are no peers); the client URL we hand
	// out is the listener's real address.
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.EnableGRPCGateway = false
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	cfg.UnsafeNoFsync = o.ephemeral

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("membership: starting embedded etcd in %s: %w", dir, err)
	}
	timer := time.NewTimer(embeddedStartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("membership: embedded etcd in %s failed while starting: %w", dir, err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("membership: embedded etcd in %s not ready after %v (see %s)",
			dir, embeddedStartTimeout, cfg.LogOutputs[0])
	}
	if len(e.Clients) == 0 {
		e.Close()
		return nil, errors.New("membership: embedded etcd has no client listener")
	}
	em := &Embedded{etcd: e}
	for _, l := range e.Clients {
		em.endpoints = append(em.endpoints, "http://"+l.Addr().String())
	}
	return em, nil
}

// EmbeddedOption adjusts StartEmbedded.
type EmbeddedOption func(*embeddedOptions)

type embeddedOptions struct{ ephemeral bool }

// Ephemeral is for a server whose data is removed when its run ends (tests,
// `cluster --kill`, `crashtest --cluster`, `bench resp`): it never calls
// fsync (etcd's UnsafeNoFsync), since nothing of it has to outlive an OS
// crash. A lease renewal waits for the server to apply what it committed,
// and with fsync a disk busy with the nodes' own writes stalled that for
// over a lease's 2 s on a loaded 2-core machine: every node lost its lease
// at once. `scalestore etcd --data`, whose data is kept, syncs.
func Ephemeral() EmbeddedOption { return func(o *embeddedOptions) { o.ephemeral = true } }

// Endpoints returns the client URLs to put in Config.Endpoints.
func (e *Embedded) Endpoints() []string {
	return append([]string(nil), e.endpoints...)
}

// Close stops the server. Its data stays in the directory.
func (e *Embedded) Close() error {
	e.closeOnce.Do(e.etcd.Close)
	return nil
}
