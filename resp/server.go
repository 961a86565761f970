package resp

import (
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Engine is the key-value engine the server fronts: a cluster node's
// default table (Modify and Atomic are DB.Modify, Update and View).
//
// The key and val slices the server passes alias its read buffer and are
// valid only during the call: an engine that keeps them must copy them.
type Engine interface {
	// Get appends the value of key to dst and returns it; ok reports
	// whether key exists.
	Get(key, dst []byte) (val []byte, ok bool, err error)
	// GetBatch looks up every key: vals[i] = append(vals[i][:0], value)
	// and found[i] reports whether keys[i] exists.
	GetBatch(keys, vals [][]byte, found []bool) error
	// Put sets key to val.
	Put(key, val []byte) error
	// Modify is an atomic read-modify-write of key: fn gets the current
	// value (valid only during the call) and whether the key exists, and
	// says what it becomes (write false: unchanged; exists false: deleted;
	// else val). No other write of the key comes between. fn may be called
	// more than once (only its last answer counts) and must not return old
	// or a slice of it.
	Modify(key []byte, fn func(old []byte, found bool) (val []byte, exists, write bool)) error
	// Atomic runs fn in a transaction over any keys (serializable, all
	// its writes or none), read-only if readOnly. fn may run more than
	// once (after a conflict); its Txn is valid only during the call.
	Atomic(readOnly bool, fn func(tx Txn) error) error
	// Delete removes key; found reports whether it existed.
	Delete(key []byte) (found bool, err error)
	// Scan calls fn for the keys in [from,to) in order, until fn returns
	// false; to nil means no upper bound. key and val are valid only
	// during fn.
	Scan(from, to []byte, fn func(key, val []byte) bool) error
}

// ConnEngine is an Engine for one connection whose calls may return
// before what they wrote (or read) is durable: the server calls Settle
// before it sends their replies, and closes the connection without them if
// Settle fails. A pipeline of writes then waits for its durability once.
type ConnEngine interface {
	Engine
	Settle() error
}

// PerConn is an Engine that gives each connection one of its own
// (ForConn; nil: the connection uses the Engine itself).
type PerConn interface {
	ForConn() ConnEngine
}

// Txn is a transaction of Engine.Atomic.
type Txn interface {
	Get(key, dst []byte) ([]byte, bool, error)
	Put(key, val []byte) error
	Delete(key []byte) (found bool, err error)
}

// Config configures a Server. The zero value of every field but Addr has
// a usable default.
type Config struct {
	// Addr is where to listen, host:port. ":0" picks a free port;
	// Server.Addr tells the bound address.
	Addr string
	// Password, when non-empty, must be given with AUTH (or HELLO 2 AUTH)
	// before any command but AUTH, HELLO and QUIT; the others answer
	// "-NOAUTH Authentication required.".
	Password string
	// TLS, when non-nil, makes the server speak TLS. It must carry a
	// certificate (Certificates, GetCertificate or GetConfigForClient).
	TLS *tls.Config
	// MaxKey is the longest key accepted, in bytes (0: 256).
	MaxKey int
	// MaxValue is the longest value accepted, in bytes (0: 4 MiB).
	MaxValue int
	// MaxEntry is the longest key plus stored value the Engine keeps in
	// one entry, in bytes (0: 1024). A longer one is stored in chunks of
	// the entry's size, written in one transaction (big.go): a value of
	// n bytes is a transaction of about n/MaxEntry keys, twice that when
	// it replaces another such value, which the engine's cache must let
	// one commit latch.
	MaxEntry int
	// MaxConns is how many connections are served at once (0: 10000). One
	// more gets "-ERR max number of clients reached" and is closed.
	MaxConns int
	// IdleTimeout closes a connection that sent nothing for this long, and
	// one that does not take its replies for this long (0: never).
	IdleTimeout time.Duration
	// Info gives INFO's sections (nil: a "# Server" section of the
	// server's own). "# Clients" and "# Stats" sections are always added.
	Info func() []InfoSection
	// Logger receives the server's log records (nil: none).
	Logger *slog.Logger
	// Now is the clock of key expiry (nil: time.Now).
	Now func() time.Time
	// Unprotected turns protected mode off. In protected mode (the
	// default, as in Redis), a server without a Password answers clients
	// that do not connect from the loopback interface with -DENIED and
	// closes them.
	Unprotected bool
	// Loop is how connections are served: LoopEpoll (the default on
	// Linux) serves the ready connections in batches on GOMAXPROCS event
	// loops; LoopGoroutine gives each connection a goroutine that blocks
	// in read. Under TLS, and off Linux, connections are served by
	// goroutines whatever Loop says.
	Loop string
	// Loops is how many event loops LoopEpoll runs, all taking new
	// connections. 0: GOMAXPROCS loops, of which half (at least one)
	// take new connections and the others serve clients that pipeline,
	// moved to them while they do (loopspread.go).
	Loops int
	// OffloadWrites says that the engine's writes block (a write-through
	// to a store): on an event loop, a connection leaves the loop for a
	// goroutine of its own (as LoopGoroutine serves it) before its first
	// write, so that the loop's other connections go on and writes that
	// wait together share the store's flush. Connections that only read
	// stay on the loops.
	OffloadWrites bool
	// Waits, when set, counts the times the engine's calls so far waited
	// for the network (a cluster node's requests for pages): event loops
	// whose commands wait take connections on every loop, not only on the
	// home loops (loopspread.go), since a loop blocks while its command
	// waits.
	Waits func() uint64
}

// Loop values of Config.
const (
	LoopGoroutine = "goroutine"
	LoopEpoll     = "epoll"
)

// InfoSection is one section of INFO's reply, rendered as
// "# Name\r\nk:v\r\n...".
type InfoSection struct {
	Name   string
	Fields [][2]string
}

// Stats are a server's counters.
type Stats struct {
	Conns      uint64 // connections being served now
	ConnsTotal uint64 // connections accepted since Listen, rejected ones included
	Commands   uint64 // commands processed
	Errors     uint64 // error replies sent
}

const (
	defaultMaxKey   = 256
	defaultMaxValue = 4 << 20
	defaultMaxEntry = 1024
	defaultMaxConns = 10000

	// maxCommandBytes bounds what one connection may have pending for a
	// single incomplete command; maxInlineBytes does for an inline
	// (telnet-style) command, as Redis does.
	maxCommandBytes = 8 << 20
	maxInlineBytes  = 64 << 10

	readBufSize  = 4 << 10  // a connection's read buffer to start with
	keepBufBytes = 64 << 10 // buffers larger than this are dropped once drained
	flushAt      = 64 << 10 // replies are written out once this many are pending
	keepArgs     = 1024     // argument and batch slices longer than this are dropped

	lingerTime  = 500 * time.Millisecond // how long a closing connection is drained
	lingerBytes = 1 << 20                // and how much of it at most

	compatVersion = "7.0.0" // the Redis version told to clients that ask
)

const (
	msgMaxClients = "ERR max number of clients reached"
	msgNoAuth     = "NOAUTH Authentication required."
)

// Server serves the Redis protocol in front of an Engine.
type Server struct {
	eng       Engine // the engine with large values in chunks (bigEngine)
	raw       Engine // the engine itself
	ln        net.Listener
	addr      string
	log       *slog.Logger
	info      func() []InfoSection
	idle      time.Duration
	maxKey    int
	maxValue  int
	maxEntry  int
	maxConns  int64
	password  bool
	pwHash    [sha256.Size]byte
	tlsOn     bool
	started   time.Time
	cursors   cursorTable
	now       func() time.Time
	expiry    expirer
	protected bool
	cmdStats  []cmdStat // by command id (cmdstats.go)
	closeOnce sync.Once
	closeErr  error
	done      chan struct{} // closed when the accept loop has returned
	loops     []*eventLoop  // nil: every connection has a goroutine
	nLoops    int           // how many loops to start
	offload   bool          // Config.OffloadWrites
	nextLoop  int           // the loop the next connection goes to
	homeLoops int           // the loops that take new connections (loopspread.go)
	waits     func() uint64 // Config.Waits

	conns      atomic.Int64
	connsTotal atomic.Uint64
	rejected   atomic.Uint64
	commands   atomic.Uint64
	errors     atomic.Uint64
	nextID     atomic.Uint64

	mu      sync.Mutex
	closing bool
	open    map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// Listen binds cfg.Addr (synchronously: an address in use is an error)
// and serves the Redis protocol for e in the background until Close.
func Listen(cfg Config, e Engine) (*Server, error) {
	if e == nil {
		return nil, errors.New("resp: nil Engine")
	}
	if cfg.MaxKey < 0 || cfg.MaxValue < 0 || cfg.MaxEntry < 0 || cfg.MaxConns < 0 || cfg.IdleTimeout < 0 || cfg.Loops < 0 {
		return nil, errors.New("resp: negative limit in Config")
	}
	if e := orDefault(cfg.MaxEntry, defaultMaxEntry); e < chunkKeyLen+16 {
		return nil, fmt.Errorf("resp: Config.MaxEntry is %d: a large value's chunk needs %d bytes of key and some room for its bytes", e, chunkKeyLen)
	}
	switch cfg.Loop {
	case "", LoopGoroutine, LoopEpoll:
	default:
		return nil, errors.New("resp: Config.Loop is " + strconv.Quote(cfg.Loop) + ", want " + LoopGoroutine + " or " + LoopEpoll)
	}
	if cfg.TLS != nil && len(cfg.TLS.Certificates) == 0 &&
		cfg.TLS.GetCertificate == nil && cfg.TLS.GetConfigForClient == nil {
		return nil, errors.New("resp: TLS config has no certificate")
	}
	s := &Server{
		eng:       bigEngine{raw: e, entry: orDefault(cfg.MaxEntry, defaultMaxEntry)},
		raw:       e,
		log:       cfg.Logger,
		info:      cfg.Info,
		idle:      cfg.IdleTimeout,
		maxKey:    orDefault(cfg.MaxKey, defaultMaxKey),
		maxValue:  orDefault(cfg.MaxValue, defaultMaxValue),
		maxEntry:  orDefault(cfg.MaxEntry, defaultMaxEntry),
		maxConns:  int64(orDefault(cfg.MaxConns, defaultMaxConns)),
		password:  cfg.Password != "",
		pwHash:    sha256.Sum256([]byte(cfg.Password)),
		tlsOn:     cfg.TLS != nil,
		started:   time.Now(),
		done:      make(chan struct{}),
		open:      make(map[net.Conn]struct{}),
		now:       cfg.Now,
		protected: !cfg.Unprotected,
		nLoops:    cfg.Loops,
		offload:   cfg.OffloadWrites,
		waits:     cfg.Waits,
		cmdStats:  make([]cmdStat, len(commandNames)),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.cursors.init()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	s.ln = ln
	if cfg.TLS == nil && cfg.Loop != LoopGoroutine && loopSupported {
		if err := s.startLoops(); err != nil {
			ln.Close()
			return nil, err
		}
	}
	go s.acceptLoop()
	s.startExpirer()
	return s, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Addr returns the address the server listens on, host:port.
func (s *Server) Addr() string { return s.addr }

// Close stops accepting, closes every connection and waits for their
// handlers to return. A handler inside an Engine call finishes that call
// first. Close may be called more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.closeErr = s.ln.Close()
		s.stopExpirer()
		<-s.done
		s.stopLoops()
		s.mu.Lock()
		open := make([]net.Conn, 0, len(s.open))
		for nc := range s.open {
			open = append(open, nc)
		}
		s.mu.Unlock()
		for _, nc := range open {
			// Under TLS, close the TCP connection itself: tls.Conn.Close
			// would first try to send close_notify, for up to 5 s, to a
			// client that may not be reading.
			if tc, ok := nc.(*tls.Conn); ok {
				tc.NetConn().Close()
			} else {
				nc.Close()
			}
		}
		s.wg.Wait()
	})
	return s.closeErr
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	n := s.conns.Load()
	if n < 0 {
		n = 0
	}
	return Stats{
		Conns:      uint64(n),
		ConnsTotal: s.connsTotal.Load(),
		Commands:   s.commands.Load(),
		Errors:     s.errors.Load(),
	}
}

func (s *Server) acceptLoop() {
	defer close(s.done)
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, as
			// net/http does, and try again.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay *= 2; delay > time.Second {
				delay = time.Second
			}
			s.log.Warn("resp: accept failed", "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		s.connsTotal.Add(1)
		if !s.track(nc) {
			nc.Close()
			continue
		}
		s.wg.Add(1)
		if s.denied(nc.RemoteAddr()) {
			go s.deny(nc)
			continue
		}
		if s.conns.Add(1) > s.maxConns {
			s.conns.Add(-1)
			s.rejected.Add(1)
			go s.reject(nc)
			continue
		}
		c := newClient(s, nc)
		if s.loops != nil {
			s.untrack(nc)
			s.toLoop(c)
			continue
		}
		go c.serve()
	}
}

// track registers nc so that Close can close it; false if closing.
func (s *Server) track(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.open[nc] = struct{}{}
	return true
}

func (s *Server) untrack(nc net.Conn) {
	s.mu.Lock()
	delete(s.open, nc)
	s.mu.Unlock()
}

// reject tells a connection over MaxConns so and closes it.
func (s *Server) reject(nc net.Conn) {
	defer s.wg.Done()
	defer s.untrack(nc)
	s.errors.Add(1)
	s.log.Debug("resp: max clients reached", "remote", nc.RemoteAddr().String())
	nc.SetDeadline(time.Now().Add(time.Second))
	nc.Write([]byte("-" + msgMaxClients + "\r\n"))
	lingerClose(nc)
}

// lingerClose closes nc after a reply was written to it, so that the
// client reads that reply rather than a reset: it shuts down the write
// side and discards what the client still sends, briefly, before closing.
func lingerClose(nc net.Conn) {
	nc.SetDeadline(time.Now().Add(lingerTime))
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			io.CopyN(io.Discard, nc, lingerBytes)
		}
	}
	nc.Close()
}

// limitError renders "<what> is <n> bytes, over the limit of <max> (<field>)".
func limitError(what string, n, max int, field string) string {
	return "ERR " + what + " is " + strconv.Itoa(n) + " bytes, over the limit of " +
		strconv.Itoa(max) + " bytes (" + field + ")"
}
