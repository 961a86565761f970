package resp

import (
	"net"
	"strconv"
	"time"

	"github.com/tidwall/redcon"
)

// client is one connection's state. Only its serve goroutine, or the
// event loop that owns it, touches it.
type client struct {
	s     *Server
	execs int      // commands execUntil ran, for the event loop (takeExecs)
	nc    net.Conn // the goroutine path's connection (nil on an event loop)
	raddr net.Addr
	id    uint64

	// The event loop's state (loop_linux.go): the socket, how much of out
	// was written, whether the loop waits for the socket to take more
	// replies, whether the client hung up, and when it last made progress
	// (active).
	fd        int
	sent      int
	wantWrite bool
	eof       bool
	active    time.Time

	buf  []byte   // read buffer; buf[r:w] is received and not yet executed
	r, w int      //
	args [][]byte // reused argument slice for redcon.ReadNextCommand
	out  []byte   // replies not yet written

	authed bool
	quit   bool   // close after writing the replies so far
	name   string // CLIENT SETNAME
	lower  [24]byte
	// lastName and lastCmd: the command this client ran last (exec).
	lastName []byte
	lastCmd  command

	// Reused per-command scratch space, so the hot paths do not allocate.
	val   []byte   // GET's destination and SET GET's old value
	vals  [][]byte // MGET's values
	found []bool   // MGET's found flags
	keys  []byte   // SCAN's matching keys, back to back
	ends  []int    // and where each ends in keys
	last  []byte   // SCAN's last examined key
	nCmds uint64   // commands since the counters were last published
	nErrs uint64   // error replies since then

	// kv is where commands read and write: the engine, or the
	// transaction of a multi-key command or EXEC (store.go).
	kv    store
	txBuf []byte
	multi bool       // between MULTI and EXEC or DISCARD
	tx    multiState // multi.go
	stats connStats  // per-command counts (cmdstats.go)
	// SET's and INCR's state, and their Modify functions made once.
	set    setState
	incr   incrState
	setFn  func(old []byte, found bool) ([]byte, bool, bool)
	incrFn func(old []byte, found bool) ([]byte, bool, bool)
	// eng is the server's engine, or this connection's own (PerConn),
	// whose replies wait for settle before they are sent.
	eng    Engine
	settle func() error
}

func newClient(s *Server, nc net.Conn) *client {
	c := &client{
		s:    s,
		nc:   nc,
		id:   s.nextID.Add(1),
		fd:   -1,
		buf:  make([]byte, readBufSize),
		args: make([][]byte, 0, 8),
	}
	if nc != nil {
		c.raddr = nc.RemoteAddr()
	}
	c.useEngine(s.ownEngine())
	c.setFn, c.incrFn = c.setModify, c.incrModify
	return c
}

// protoError is a protocol error of this package's own (redcon's print
// as "Protocol error: ..." too).
type protoError string

func (e protoError) Error() string { return "Protocol error: " + string(e) }

// serve reads, executes and answers commands until the connection ends.
func (c *client) serve() {
	s := c.s
	defer func() {
		s.untrack(c.nc)
		s.conns.Add(-1)
		s.wg.Done()
	}()
	var readErr error
	for {
		// Execute every complete command received, writing the replies
		// out whenever flushAt of them are pending.
		for {
			if err := c.execBuffered(); err != nil {
				c.protocolError(err)
				return
			}
			if c.quit {
				c.publish()
				if c.flush() == nil {
					lingerClose(c.nc)
				} else {
					c.nc.Close()
				}
				return
			}
			if len(c.out) < flushAt {
				break
			}
			if c.flush() != nil {
				c.nc.Close()
				return
			}
		}
		c.publish()
		if c.flush() != nil {
			c.nc.Close()
			return
		}
		if readErr != nil {
			if c.r < c.w {
				s.log.Debug("resp: connection ended mid-command", "remote", c.remote(), "err", readErr)
			}
			c.nc.Close()
			return
		}
		if err := c.makeRoom(); err != nil {
			c.protocolError(err)
			return
		}
		if s.idle > 0 {
			c.nc.SetReadDeadline(time.Now().Add(s.idle))
		}
		var n int
		n, readErr = c.nc.Read(c.buf[c.w:])
		c.w += n
	}
}

// execBuffered executes the complete commands in buf[r:w], in order,
// until none is left, flushAt bytes of replies are pending, or a command
// asked to close the connection (c.quit). A malformed request is the
// error, with the replies before it in out.
func (c *client) execBuffered() error {
	_, err := c.execUntil(false)
	return err
}

// execUntil is execBuffered that, if beforeWrite, stops before a command
// that writes through an engine whose writes block (Config.OffloadWrites)
// and reports it (blocked).
func (c *client) execUntil(beforeWrite bool) (blocked bool, err error) {
	for c.r < c.w && len(c.out) < flushAt && !c.quit {
		complete, args, n, err := c.next()
		if err != nil {
			return false, err
		}
		if !complete {
			return false, nil
		}
		if beforeWrite && len(args) > 0 && c.writeBlocks(args) {
			return true, nil
		}
		c.r += n
		if len(args) == 0 {
			continue
		}
		c.exec(args)
		c.execs++
	}
	return false, nil
}

// takeExecs returns how many commands execUntil ran since the last call
// (an event loop's measure of pipelining: loopspread.go).
func (c *client) takeExecs() int {
	n := c.execs
	c.execs = 0
	return n
}

// writeBlocks reports whether executing args now would write through the
// engine, with Config.OffloadWrites set: a write command, run now (not
// queued in MULTI) by a client allowed to.
func (c *client) writeBlocks(args [][]byte) bool {
	if !c.s.offload || (c.s.password && !c.authed) {
		return false
	}
	cmd, ok := dispatch[string(c.lowerName(args[0]))]
	return ok && cmd.writes && (!c.multi || cmd.now)
}

// next parses the next command in buf[r:w] with redcon. complete is false
// when more bytes are needed; n is how many bytes the command took.
func (c *client) next() (complete bool, args [][]byte, n int, err error) {
	packet := c.buf[c.r:c.w]
	if packet[0] == '$' {
		// redcon would read this as Tile38's native protocol.
		return false, nil, 0, protoError("expected '*', got '$'")
	}
	defer func() {
		// redcon v1.6.4 indexes out of range on some bulk lengths (a
		// negative one, or one that overflows when 2 is added).
		if r := recover(); r != nil {
			c.s.log.Debug("resp: redcon parser panicked", "remote", c.remote(), "panic", r)
			complete, args, n = false, nil, 0
			if _, err = checkRequest(packet); err == nil {
				err = protoError("invalid bulk length")
			}
		}
	}()
	complete, args, _, leftover, err := redcon.ReadNextCommand(packet, c.args)
	if cap(args) <= keepArgs {
		c.args = args[:0]
	} else {
		c.args = make([][]byte, 0, 8)
	}
	if (err != nil || !complete) && packet[0] == '*' {
		// Redis's reading of what redcon refused or waits on (reqcheck.go).
		skip, cerr := checkRequest(packet)
		switch {
		case cerr != nil:
			return false, nil, 0, cerr
		case skip > 0:
			return true, nil, skip, nil
		}
	}
	if err != nil || !complete {
		return false, nil, 0, err
	}
	return true, args, len(packet) - len(leftover), nil
}

// makeRoom makes sure buf has room past w to read into, moving the
// pending bytes to the front or growing buf, and refuses once an
// incomplete command is over the limit.
func (c *client) makeRoom() error {
	pending := c.w - c.r
	if pending == 0 {
		c.r, c.w = 0, 0
		if len(c.buf) > keepBufBytes {
			c.buf = make([]byte, readBufSize)
		}
		return nil
	}
	limit := maxCommandBytes
	if c.buf[c.r] != '*' {
		limit = maxInlineBytes
	}
	if pending >= limit {
		if limit == maxInlineBytes {
			return protoError("too big inline request")
		}
		return protoError("too big request: a command may take at most " + strconv.Itoa(maxCommandBytes) + " bytes")
	}
	if c.w < len(c.buf) {
		return nil
	}
	if c.r > 0 {
		copy(c.buf, c.buf[c.r:c.w])
		c.r, c.w = 0, pending
	}
	if c.w == len(c.buf) {
		// Grow to one byte over the limit at most, so that a command
		// over it is seen as such.
		size := min(2*len(c.buf), limit+1)
		nb := make([]byte, size)
		copy(nb, c.buf[:c.w])
		c.buf = nb
	}
	return nil
}

// protocolError answers a malformed request as Redis does and closes.
func (c *client) protocolError(err error) {
	c.s.log.Debug("resp: protocol error", "remote", c.remote(), "err", err)
	c.error("ERR " + err.Error())
	c.publish()
	if c.flush() == nil {
		lingerClose(c.nc)
	} else {
		c.nc.Close()
	}
}

func (c *client) remote() string {
	if a := c.raddr; a != nil {
		return a.String()
	}
	return ""
}

// flush writes the pending replies.
func (c *client) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	if err := c.settled(); err != nil {
		return err
	}
	if c.s.idle > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(c.s.idle))
	}
	_, err := c.nc.Write(c.out)
	if cap(c.out) > keepBufBytes {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	return err
}

// ownEngine is an engine of a connection's own (PerConn), or nil.
func (s *Server) ownEngine() ConnEngine {
	if pc, ok := s.raw.(PerConn); ok {
		return pc.ForConn()
	}
	return nil
}

// useEngine makes c run its commands through ce (nil: the server's
// engine), with large values in chunks as the server's (bigEngine).
func (c *client) useEngine(ce ConnEngine) {
	c.eng, c.settle = c.s.eng, nil
	if ce != nil {
		c.eng, c.settle = bigEngine{raw: ce, entry: c.s.maxEntry}, ce.Settle
	}
	c.kv = engineStore{c.eng, new(bigModify)}
}

// settled waits until what the replies in out tell of is durable (a
// connection's own engine, PerConn). A failure means the node failed: the
// replies are not sent.
func (c *client) settled() error {
	if c.settle == nil {
		return nil
	}
	if err := c.settle(); err != nil {
		c.s.log.Warn("resp: closing a connection whose replies wait for a failed write", "remote", c.remote(), "err", err)
		return err
	}
	return nil
}

// publish adds this connection's counts to the server's.
func (c *client) publish() {
	if c.nCmds != 0 {
		c.s.commands.Add(c.nCmds)
		c.nCmds = 0
	}
	if c.nErrs != 0 {
		c.s.errors.Add(c.nErrs)
		c.nErrs = 0
	}
	c.publishCmdStats()
}

// Replies.

func (c *client) error(msg string) {
	c.nErrs++
	c.out = redcon.AppendError(c.out, msg)
}

func (c *client) engineError(err error) {
	c.error("ERR " + err.Error())
}

func (c *client) ok()                 { c.out = redcon.AppendOK(c.out) }
func (c *client) status(s string)     { c.out = redcon.AppendString(c.out, s) }
func (c *client) bulk(b []byte)       { c.out = redcon.AppendBulk(c.out, b) }
func (c *client) bulkString(s string) { c.out = redcon.AppendBulkString(c.out, s) }
func (c *client) null()               { c.out = redcon.AppendNull(c.out) }
func (c *client) int(n int64)         { c.out = redcon.AppendInt(c.out, n) }
func (c *client) array(n int)         { c.out = redcon.AppendArray(c.out, n) }

func (c *client) arity(name string) {
	c.error("ERR wrong number of arguments for '" + name + "' command")
}

func (c *client) syntaxError() { c.error("ERR syntax error") }

// checkKey answers an error and returns false if key is over MaxKey.
func (c *client) checkKey(key []byte) bool {
	if len(key) > c.s.maxKey {
		c.error(limitError("key", len(key), c.s.maxKey, "MaxKey"))
		return false
	}
	return true
}

// checkEntry answers an error and returns false if key or val is over its
// limit.
func (c *client) checkEntry(key, val []byte) bool {
	if !c.checkKey(key) {
		return false
	}
	if len(val) > c.s.maxValue {
		c.error(limitError("value", len(val), c.s.maxValue, "MaxValue"))
		return false
	}
	return true
}

// lowerName lowercases a command or option name into c.lower; names
// longer than that buffer come back as "" (no command is that long).
func (c *client) lowerName(b []byte) []byte {
	if len(b) > len(c.lower) {
		return nil
	}
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		c.lower[i] = ch
	}
	return c.lower[:len(b)]
}
