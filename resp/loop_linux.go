package resp

import (
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// loopSupported: this system has epoll.
const loopSupported = true

// loopEvents is how many ready sockets one epoll_wait returns at most.
const loopEvents = 256

// eventLoop serves its connections the way redis-server's ae does: one
// epoll_wait returns every ready socket; each is read once, the commands
// read are executed in order on the loop's own goroutine, and their
// replies are written with one write. Nothing is handed to another
// goroutine on the way, so a request costs no scheduler wake-up.
//
// A command that blocks (a page fetched from a peer, a write-through to
// the store, a transaction waiting for a latch) blocks its loop for that
// long, and the other connections of the loop wait; there are GOMAXPROCS
// loops, so the others go on. The engine never waits for a RESP
// connection, so a blocked loop cannot hold up the call it waits for.
type eventLoop struct {
	s      *Server
	epfd   int
	wakefd int // an eventfd: Close wakes the loop through it
	events []unix.EpollEvent

	mu      sync.Mutex
	pending []*client // handed over by the accept loop, not yet in conns
	closing bool
	news    atomic.Bool // pending is not empty or closing is set
	shut    bool        // the loop has closed its descriptors

	conns map[int32]*client // by socket, owned by the loop's goroutine
	// eng, when the engine gives connections their own (PerConn), is the
	// one every connection on the loop shares: the commands of one turn
	// settle once, before any of their replies is written (turn).
	eng       ConnEngine
	turn      []*client
	now       time.Time // read once per turn when IdleTimeout is set
	lastSweep time.Time
	done      chan struct{}

	// index is the loop's place in Server.loops; the first homeLoops take
	// new connections (loopspread.go). reads and cmds count the reads of
	// the current window and the commands they brought; held counts conns
	// (for tests and INFO, read from other goroutines).
	index       int
	reads, cmds int
	lastWaits   uint64 // Server.waits at the window's start
	held        atomic.Int32
}

// startLoops starts the event loops (Config.Loops, GOMAXPROCS by default).
func (s *Server) startLoops() error {
	n := s.nLoops
	s.homeLoops = n
	if n == 0 {
		// Spread by how the clients send (loopspread.go).
		n = runtime.GOMAXPROCS(0)
		s.homeLoops = max(1, n/2)
	}
	for i := range n {
		l, err := newEventLoop(s)
		if err != nil {
			s.stopLoops()
			return err
		}
		l.index = i
		s.loops = append(s.loops, l)
	}
	for _, l := range s.loops {
		go l.run()
	}
	return nil
}

func newEventLoop(s *Server) (*eventLoop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wakefd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(wakefd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return &eventLoop{
		s:      s,
		epfd:   epfd,
		wakefd: wakefd,
		events: make([]unix.EpollEvent, loopEvents),
		conns:  make(map[int32]*client),
		done:   make(chan struct{}),
		eng:    s.ownEngine(),
	}, nil
}

// stopLoops stops every loop; each closes its connections first.
func (s *Server) stopLoops() {
	for _, l := range s.loops {
		l.mu.Lock()
		l.closing = true
		l.news.Store(true)
		if !l.shut {
			var one = [8]byte{1}
			unix.Write(l.wakefd, one[:])
		}
		l.mu.Unlock()
	}
	for _, l := range s.loops {
		<-l.done
	}
}

// toLoop moves c's connection off Go's netpoller onto an event loop: the
// loop works on a duplicate of its socket, and nc is closed. The caller
// counted c in s.conns and s.wg; the loop uncounts it when it closes.
func (s *Server) toLoop(c *client) {
	fd, err := dupSocket(c.nc)
	c.nc.Close()
	c.nc = nil
	if err != nil {
		s.log.Warn("resp: cannot serve a connection on an event loop", "remote", c.remote(), "err", err)
		s.conns.Add(-1)
		s.wg.Done()
		return
	}
	c.fd = fd
	c.active = time.Now()
	l := s.loops[s.nextLoop]
	s.nextLoop = (s.nextLoop + 1) % s.homeLoops
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing || l.shut {
		unix.Close(fd)
		s.conns.Add(-1)
		s.wg.Done()
		return
	}
	// An event on fd before the loop took c from pending is skipped, and
	// comes again (epoll is level-triggered here) once it has.
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		s.log.Warn("resp: epoll_ctl failed", "remote", c.remote(), "err", err)
		unix.Close(fd)
		s.conns.Add(-1)
		s.wg.Done()
		return
	}
	l.pending = append(l.pending, c)
	l.news.Store(true)
}

// dupSocket returns a duplicate (non-blocking, close-on-exec) of nc's
// socket, which Go's netpoller does not watch once nc is closed.
func dupSocket(nc net.Conn) (int, error) {
	sc, ok := nc.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return -1, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) {
		fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, os.NewSyscallError("fcntl", derr)
	}
	return fd, nil
}

func (l *eventLoop) run() {
	defer close(l.done)
	s := l.s
	timeout := -1
	var sweepEvery time.Duration
	if s.idle > 0 {
		sweepEvery = min(max(s.idle/4, 10*time.Millisecond), time.Second)
		timeout = int(sweepEvery / time.Millisecond)
		l.lastSweep = time.Now()
	}
	for {
		n, err := unix.EpollWait(l.epfd, l.events, timeout)
		if err != nil && err != unix.EINTR {
			// Not expected with a valid epoll fd: stop serving rather
			// than spin.
			s.log.Error("resp: epoll_wait failed; the loop's connections are closed", "err", err)
			l.shutdown()
			return
		}
		if l.take() {
			l.shutdown()
			return
		}
		if s.idle > 0 {
			l.now = time.Now()
		}
		for i := range max(n, 0) {
			ev := &l.events[i]
			if int(ev.Fd) == l.wakefd {
				var b [8]byte
				unix.Read(l.wakefd, b[:])
				continue
			}
			c := l.conns[ev.Fd]
			if c == nil {
				continue
			}
			if c.wantWrite {
				l.writable(c)
			} else {
				l.readable(c)
			}
		}
		if len(l.turn) > 0 {
			l.serveTurn()
		}
		if l.reads >= spreadWindow && s.homeLoops < len(s.loops) {
			l.adapt()
		}
		if s.idle > 0 && l.now.Sub(l.lastSweep) >= sweepEvery {
			l.sweep()
		}
	}
}

// take moves the pending clients into conns; true if the loop must stop.
func (l *eventLoop) take() bool {
	if !l.news.Load() {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.takeLocked()
	return l.closing
}

func (l *eventLoop) takeLocked() {
	for i, c := range l.pending {
		if l.eng != nil {
			c.useEngine(l.eng)
		}
		l.conns[int32(c.fd)] = c
		l.held.Add(1)
		l.pending[i] = nil
	}
	l.pending = l.pending[:0]
	l.news.Store(l.closing)
}

// shutdown closes every connection of the loop (Close).
func (l *eventLoop) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closing = true
	l.takeLocked()
	for _, c := range l.conns {
		l.drop(c)
	}
	unix.Close(l.epfd)
	unix.Close(l.wakefd)
	l.shut = true
}

// sweep closes the connections that neither sent anything nor took
// replies for IdleTimeout.
func (l *eventLoop) sweep() {
	l.lastSweep = l.now
	for _, c := range l.conns {
		if l.now.Sub(c.active) > l.s.idle {
			l.s.log.Debug("resp: idle connection closed", "remote", c.remote())
			l.drop(c)
		}
	}
}

// drop closes c's socket and forgets it.
func (l *eventLoop) drop(c *client) {
	delete(l.conns, int32(c.fd))
	l.held.Add(-1)
	unix.Close(c.fd) // the only descriptor of the socket: epoll forgets it
	c.fd = -1
	l.s.conns.Add(-1)
	l.s.wg.Done()
}

// readable reads what c sent, once, and serves it.
func (l *eventLoop) readable(c *client) {
	if err := c.makeRoom(); err != nil {
		l.protocolError(c, err)
		return
	}
	n, err := unix.Read(c.fd, c.buf[c.w:])
	switch {
	case n > 0:
		c.w += n
		l.reads++
		c.active = l.now
	case err == unix.EAGAIN || err == unix.EINTR:
		return
	default: // 0: the client hung up; or a socket error
		c.eof = true
	}
	if l.eng != nil {
		// Run its commands now, answer them once the turn's writes are
		// durable (serveTurn).
		c.execUntil(l.s.offload)
		l.cmds += c.takeExecs()
		l.turn = append(l.turn, c)
		return
	}
	l.serve(c)
}

// serveTurn settles the commands the turn ran on the loop's connections,
// once for all, then serves each (writes its replies, runs what is left).
// If the writes cannot be made durable the node failed: the turn's
// connections are closed without their replies.
func (l *eventLoop) serveTurn() {
	err := l.eng.Settle()
	for i, c := range l.turn {
		l.turn[i] = nil
		if c.fd < 0 || l.conns[int32(c.fd)] != c {
			continue // dropped meanwhile
		}
		if err != nil {
			c.publish()
			l.drop(c)
			continue
		}
		l.serve(c)
	}
	l.turn = l.turn[:0]
}

// writable writes the replies c's socket would not take before, and goes
// on with c's commands once they are all out.
func (l *eventLoop) writable(c *client) {
	done, err := write(c, l.now)
	if err != nil {
		l.drop(c)
		return
	}
	if !done {
		return
	}
	c.wantWrite = false
	if l.serve(c) && !c.wantWrite {
		l.watch(c, unix.EPOLLIN)
	}
}

// serve executes c's complete commands and writes their replies, until
// none is left or the socket takes no more; then closes c if it hung up.
// onLoop: c is still the loop's (not closed, handed off or offloaded).
func (l *eventLoop) serve(c *client) (onLoop bool) {
	for {
		blocked, err := c.execUntil(l.s.offload)
		l.cmds += c.takeExecs()
		if err != nil {
			l.protocolError(c, err)
			return false
		}
		if blocked {
			// The replies so far go out before the write that may block.
			if len(c.out) > 0 {
				if _, err := write(c, l.now); err != nil {
					c.publish()
					l.drop(c)
					return false
				}
			}
			l.offload(c)
			return false
		}
		if c.quit {
			c.publish()
			l.handOff(c)
			return false
		}
		if len(c.out) == 0 {
			break
		}
		done, err := write(c, l.now)
		if err != nil {
			c.publish()
			l.drop(c)
			return false
		}
		if !done {
			// Take no more commands from c until its replies are out:
			// what it sends meanwhile stays in the kernel's buffers.
			c.publish()
			c.wantWrite = true
			return l.watch(c, unix.EPOLLOUT)
		}
	}
	c.publish()
	if c.eof {
		if c.r < c.w {
			l.s.log.Debug("resp: connection ended mid-command", "remote", c.remote())
		}
		l.drop(c)
		return false
	}
	return true
}

// write writes out[sent:] with one write; done when all of out is written.
func write(c *client, now time.Time) (done bool, err error) {
	if c.sent == 0 {
		if err := c.settled(); err != nil {
			return false, err
		}
	}
	n, err := unix.Write(c.fd, c.out[c.sent:])
	if n > 0 {
		c.sent += n
		c.active = now
	}
	if err != nil && err != unix.EAGAIN && err != unix.EINTR {
		return false, err
	}
	if c.sent < len(c.out) {
		return false, nil
	}
	c.sent = 0
	if cap(c.out) > keepBufBytes {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	return true, nil
}

// watch sets what the loop waits for on c's socket; false if it failed
// and c is closed.
func (l *eventLoop) watch(c *client, events uint32) bool {
	ev := unix.EpollEvent{Events: events, Fd: int32(c.fd)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		l.s.log.Warn("resp: epoll_ctl failed", "remote", c.remote(), "err", err)
		l.drop(c)
		return false
	}
	return true
}

// protocolError answers a malformed request as Redis does and closes.
func (l *eventLoop) protocolError(c *client, err error) {
	l.s.log.Debug("resp: protocol error", "remote", c.remote(), "err", err)
	c.error("ERR " + err.Error())
	c.publish()
	l.handOff(c)
}

// handOff takes c off the loop, to write its last replies and close it
// gently (lingerClose) on a goroutine of its own: that may take up to
// lingerTime, which the loop's other connections must not wait for.
func (l *eventLoop) handOff(c *client) {
	if c.sent == 0 && len(c.out) > 0 && c.settled() != nil {
		l.drop(c)
		return
	}
	fd := c.fd
	delete(l.conns, int32(fd))
	l.held.Add(-1)
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	c.fd = -1
	go l.s.closeGently(fd, c.out[c.sent:])
}

// closeGently writes out to the socket fd and closes it with
// lingerClose, through Go's netpoller; it uncounts the connection.
func (s *Server) closeGently(fd int, out []byte) {
	defer s.wg.Done()
	defer s.conns.Add(-1)
	f := os.NewFile(uintptr(fd), "resp")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return
	}
	if !s.track(nc) {
		nc.Close()
		return
	}
	defer s.untrack(nc)
	if s.idle > 0 {
		nc.SetWriteDeadline(time.Now().Add(s.idle))
	}
	if _, err := nc.Write(out); err != nil {
		nc.Close()
		return
	}
	lingerClose(nc)
}

// offload moves c off the loop for good, to a goroutine of its own that
// serves it as LoopGoroutine does (client.serve), from the write that may
// block on (Config.OffloadWrites): the loop's other connections go on
// meanwhile, and the connection's later writes do not come back to block
// the loop. A connection that only reads stays on its loop. (Handing the
// write to a worker and giving the connection back after it cost three
// syscalls and two wake-ups per write: 30-40% fewer durable SETs/s than a
// goroutine per connection, docs/bench.md.)
func (l *eventLoop) offload(c *client) {
	if l.eng != nil {
		// Off the loop it must not share the loop's engine.
		c.useEngine(l.s.ownEngine())
	}
	fd := c.fd
	delete(l.conns, int32(fd))
	l.held.Add(-1)
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	c.fd = -1
	go l.s.serveMoved(c, fd)
}

// serveMoved serves c, whose socket fd an event loop gave up, on this
// goroutine through Go's netpoller, until it ends.
func (s *Server) serveMoved(c *client, fd int) {
	f := os.NewFile(uintptr(fd), "resp")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		s.log.Warn("resp: cannot move a connection off its event loop", "remote", c.remote(), "err", err)
		s.conns.Add(-1)
		s.wg.Done()
		return
	}
	if !s.track(nc) {
		nc.Close()
		s.conns.Add(-1)
		s.wg.Done()
		return
	}
	c.nc = nc
	c.out = c.out[c.sent:]
	c.sent, c.wantWrite = 0, false
	c.serve()
}
