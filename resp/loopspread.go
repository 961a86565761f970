//go:build linux

package resp

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Spreading connections over the loops by how they send.
//
// A client that sends its requests one at a time costs its machine a
// read and a write per request, as much as the server's: on a small
// machine that runs its clients too (redis-benchmark beside the node on
// this 2-core VM), a loop per core takes the cores the clients need, and
// both loops wake for a request or two each time. A client that pipelines
// sends many requests per read, and the server's work per request is what
// limits it: there a loop per core is what serves the most.
//
// So by default (Config.Loops 0) only the home loops, half of them (at
// least one), take connections, and each loop measures the commands per
// read of its connections over a window of reads:
//   - a home loop that reads spreadRatio commands or more per read gives
//     connections to an extra loop until both serve as many;
//   - an extra loop that reads fewer than gatherRatio gives its
//     connections back to the home loops;
//   - a cluster node's loop blocks while a command waits for a page from
//     a peer, and the loop's other connections wait with it: a window in
//     which the node's commands waited for the network once per waitShare
//     reads or more (Config.Waits) spreads as pipelining does, and keeps
//     the extra loops' connections where they are.
//
// Measured on the 2-core VM (redis-benchmark -c 50 -d 128, against
// redis-server in the same run): one loop serves -P 1 at 0.93-1.11x of
// redis-server where two serve it at 0.75-0.85x, and two serve -P 16 at
// 1.0-1.2x where one serves it at 0.80-0.92x (docs/bench.md).
const (
	spreadWindow = 1024 // reads between two looks
	spreadRatio  = 4    // commands per read at or above which a home loop spreads
	gatherRatio  = 2    // commands per read below which an extra loop gathers back
	// waitShare: a window with a wait for the network (Config.Waits) per
	// waitShare reads or more spreads as pipelining does, and keeps an
	// extra loop's connections.
	waitShare = 64
)

// adapt looks at the window that just ended: it gives connections away
// when the loop's clients pipeline (a home loop) or when they do not (an
// extra loop). Called between turns, when no connection of the loop is in
// the middle of a command.
func (l *eventLoop) adapt() {
	reads, cmds := l.reads, l.cmds
	l.reads, l.cmds = 0, 0
	s := l.s
	waiting := false
	if s.waits != nil {
		w := s.waits()
		// The node's count, not the loop's: all its loops see the waits.
		waiting = (w-l.lastWaits)*waitShare >= uint64(reads)
		l.lastWaits = w
	}
	home := s.homeLoops
	switch {
	case l.index < home && (cmds >= spreadRatio*reads || waiting):
		extra := len(s.loops) - home
		if extra == 0 {
			return
		}
		// Even the two out: a loop that gave half its connections at
		// every window would end up with none.
		to := s.loops[home+l.index%extra]
		surplus := (len(l.conns) - int(to.held.Load())) / 2
		for _, c := range l.conns {
			if surplus <= 0 {
				break
			}
			l.give(c, to)
			surplus--
		}
	case l.index >= home && cmds < gatherRatio*reads && !waiting:
		i := 0
		for _, c := range l.conns {
			l.give(c, s.loops[i%home])
			i++
		}
	}
}

// give moves c, which l serves, to loop to: out of l's epoll set and
// into to's, then to's pending list, which to takes before it handles the
// events it waits for. If to is closing, c stays.
func (l *eventLoop) give(c *client, to *eventLoop) {
	fd := c.fd
	events := uint32(unix.EPOLLIN)
	if c.wantWrite {
		events = unix.EPOLLOUT
	}
	to.mu.Lock()
	defer to.mu.Unlock()
	if to.closing || to.shut {
		return
	}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return
	}
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(to.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		// Keep serving it here.
		ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
		if unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev) != nil {
			l.s.log.Warn("resp: epoll_ctl failed", "remote", c.remote(), "err", err)
			l.drop(c)
		}
		return
	}
	delete(l.conns, int32(fd))
	l.held.Add(-1)
	to.pending = append(to.pending, c)
	to.news.Store(true)
	// Wake it: c may have nothing new to read for a while, and its
	// buffered bytes are to's now.
	var one = [8]byte{1}
	unix.Write(to.wakefd, one[:])
}

// loopClients lists how many connections each loop serves, "4,1": INFO's
// event_loop_clients.
func (s *Server) loopClients() string {
	var b strings.Builder
	for i, l := range s.loops {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(l.held.Load())))
	}
	return b.String()
}
