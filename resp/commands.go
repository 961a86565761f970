package resp

import (
	"crypto/sha256"
	"crypto/subtle"
	"strconv"
)

// exec runs one command and appends its reply to c.out.
func (c *client) exec(args [][]byte) {
	c.nCmds++
	name := c.lowerName(args[0])
	if c.s.password && !c.authed {
		switch string(name) {
		case "auth", "hello", "quit":
		default:
			c.error(msgNoAuth)
			return
		}
	}
	switch string(name) {
	case "get":
		c.cmdGet(args)
	case "set":
		c.cmdSet(args)
	case "setnx":
		c.cmdSetNX(args)
	case "del":
		c.cmdDel(args)
	case "exists":
		c.cmdExists(args)
	case "mget":
		c.cmdMGet(args)
	case "mset":
		c.cmdMSet(args)
	case "scan":
		c.cmdScan(args)
	case "dbsize":
		c.cmdDBSize(args)
	case "ping":
		c.cmdPing(args)
	case "echo":
		c.cmdEcho(args)
	case "info":
		c.cmdInfo(args)
	case "select":
		c.cmdSelect(args)
	case "quit":
		c.ok()
		c.quit = true
	case "auth":
		c.cmdAuth(args)
	case "hello":
		c.cmdHello(args)
	case "command":
		c.cmdCommand(args)
	case "config":
		c.cmdConfig(args)
	case "client":
		c.cmdClient(args)
	default:
		c.unknown(args)
	}
}

// unknown answers as Redis does: the name and, all told, about 128 bytes
// of the arguments.
func (c *client) unknown(args [][]byte) {
	msg := "ERR unknown command '" + clip(args[0], 128) + "', with args beginning with: "
	var rest string
	for _, a := range args[1:] {
		if len(rest) >= 128 {
			break
		}
		rest += "'" + clip(a, 128-len(rest)) + "' "
	}
	c.error(msg + rest)
}

func clip(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

func (c *client) cmdGet(args [][]byte) {
	if len(args) != 2 {
		c.arity("get")
		return
	}
	if !c.checkKey(args[1]) {
		return
	}
	v, ok, err := c.s.eng.Get(args[1], c.val[:0])
	if cap(v) <= keepBufBytes {
		c.val = v[:0]
	}
	switch {
	case err != nil:
		c.engineError(err)
	case !ok:
		c.null()
	default:
		c.bulk(v)
	}
}

// putIfCond is the cond SET NX|XX|GET and SETNX hand to Engine.PutIf; it
// is a method value made once per connection, so that it costs no
// allocation per command.
func (c *client) putIfCond(old []byte, found bool) bool {
	c.condOK = found
	if c.condGt {
		c.val = append(c.val[:0], old...)
	}
	switch c.condIf {
	case condNX:
		return !found
	case condXX:
		return found
	}
	return true
}

func (c *client) cmdSet(args [][]byte) {
	if len(args) < 3 {
		c.arity("set")
		return
	}
	key, val := args[1], args[2]
	mode, get, expiry := condAlways, false, false
	for i := 3; i < len(args); i++ {
		switch string(c.lowerName(args[i])) {
		case "nx":
			if mode == condXX {
				c.syntaxError()
				return
			}
			mode = condNX
		case "xx":
			if mode == condNX {
				c.syntaxError()
				return
			}
			mode = condXX
		case "get":
			get = true
		case "keepttl":
			expiry = true
		case "ex", "px", "exat", "pxat":
			if i+1 == len(args) {
				c.syntaxError()
				return
			}
			i++
			expiry = true
		default:
			c.syntaxError()
			return
		}
	}
	if expiry {
		c.error("ERR expiry is not supported: the engine keeps no TTL")
		return
	}
	if !c.checkEntry(key, val) {
		return
	}
	if mode == condAlways && !get {
		if err := c.s.eng.Put(key, val); err != nil {
			c.engineError(err)
			return
		}
		c.ok()
		return
	}
	c.condIf, c.condGt, c.condOK = mode, get, false
	applied, err := c.s.eng.PutIf(key, val, c.cond)
	switch {
	case err != nil:
		c.engineError(err)
	case get && c.condOK:
		c.bulk(c.val)
	case get:
		c.null()
	case applied:
		c.ok()
	default:
		c.null()
	}
	if cap(c.val) > keepBufBytes {
		c.val = nil
	}
}

func (c *client) cmdSetNX(args [][]byte) {
	if len(args) != 3 {
		c.arity("setnx")
		return
	}
	if !c.checkEntry(args[1], args[2]) {
		return
	}
	c.condIf, c.condGt = condNX, false
	applied, err := c.s.eng.PutIf(args[1], args[2], c.cond)
	switch {
	case err != nil:
		c.engineError(err)
	case applied:
		c.int(1)
	default:
		c.int(0)
	}
}

// checkKeys checks every key against MaxKey.
func (c *client) checkKeys(keys [][]byte) bool {
	for _, k := range keys {
		if !c.checkKey(k) {
			return false
		}
	}
	return true
}

func (c *client) cmdDel(args [][]byte) {
	if len(args) < 2 {
		c.arity("del")
		return
	}
	if !c.checkKeys(args[1:]) {
		return
	}
	var n int64
	for _, k := range args[1:] {
		found, err := c.s.eng.Delete(k)
		if err != nil {
			c.engineError(err)
			return
		}
		if found {
			n++
		}
	}
	c.int(n)
}

func (c *client) cmdExists(args [][]byte) {
	if len(args) < 2 {
		c.arity("exists")
		return
	}
	if !c.checkKeys(args[1:]) {
		return
	}
	var n int64
	for _, k := range args[1:] {
		v, ok, err := c.s.eng.Get(k, c.val[:0])
		if cap(v) <= keepBufBytes {
			c.val = v[:0]
		}
		if err != nil {
			c.engineError(err)
			return
		}
		if ok {
			n++
		}
	}
	c.int(n)
}

func (c *client) cmdMGet(args [][]byte) {
	if len(args) < 2 {
		c.arity("mget")
		return
	}
	keys := args[1:]
	if !c.checkKeys(keys) {
		return
	}
	n := len(keys)
	if cap(c.vals) < n {
		c.vals = append(c.vals[:cap(c.vals)], make([][]byte, n-cap(c.vals))...)
	}
	if cap(c.found) < n {
		c.found = make([]bool, n)
	}
	vals, found := c.vals[:n], c.found[:n]
	clear(found)
	err := c.s.eng.GetBatch(keys, vals, found)
	if err != nil {
		c.engineError(err)
	} else {
		c.array(n)
		for i := range n {
			if found[i] {
				c.bulk(vals[i])
			} else {
				c.null()
			}
		}
	}
	if n > keepArgs {
		c.vals, c.found = nil, nil
	}
}

func (c *client) cmdMSet(args [][]byte) {
	if len(args) < 3 || len(args)%2 == 0 {
		c.arity("mset")
		return
	}
	for i := 1; i < len(args); i += 2 {
		if !c.checkEntry(args[i], args[i+1]) {
			return
		}
	}
	// Each key in turn: MSET is not atomic across keys, and an engine
	// error leaves the keys before it written.
	for i := 1; i < len(args); i += 2 {
		if err := c.s.eng.Put(args[i], args[i+1]); err != nil {
			c.engineError(err)
			return
		}
	}
	c.ok()
}

func (c *client) cmdDBSize(args [][]byte) {
	if len(args) != 1 {
		c.arity("dbsize")
		return
	}
	var n int64
	err := c.s.eng.Scan(nil, nil, func(_, _ []byte) bool {
		n++
		return true
	})
	if err != nil {
		c.engineError(err)
		return
	}
	c.int(n)
}

func (c *client) cmdPing(args [][]byte) {
	switch len(args) {
	case 1:
		c.status("PONG")
	case 2:
		c.bulk(args[1])
	default:
		c.arity("ping")
	}
}

func (c *client) cmdEcho(args [][]byte) {
	if len(args) != 2 {
		c.arity("echo")
		return
	}
	c.bulk(args[1])
}

func (c *client) cmdSelect(args [][]byte) {
	if len(args) != 2 {
		c.arity("select")
		return
	}
	n, err := strconv.Atoi(string(args[1]))
	switch {
	case err != nil:
		c.error("ERR value is not an integer or out of range")
	case n != 0:
		c.error("ERR DB index is out of range")
	default:
		c.ok()
	}
}

// checkPassword compares in constant time, and without telling the
// password's length, with the configured password.
func (c *client) checkPassword(user, pass []byte) bool {
	h := sha256.Sum256(pass)
	ok := subtle.ConstantTimeCompare(h[:], c.s.pwHash[:]) == 1
	return ok && (user == nil || string(user) == "default")
}

const msgWrongPass = "WRONGPASS invalid username-password pair or user is disabled."

func (c *client) cmdAuth(args [][]byte) {
	if len(args) != 2 && len(args) != 3 {
		c.arity("auth")
		return
	}
	if !c.s.password {
		c.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return
	}
	var user []byte
	if len(args) == 3 {
		user = args[1]
	}
	if !c.checkPassword(user, args[len(args)-1]) {
		c.authed = false
		c.error(msgWrongPass)
		return
	}
	c.authed = true
	c.ok()
}

// cmdHello speaks only RESP2: HELLO [2 [AUTH user pass] [SETNAME name]].
// Clients that ask for 3 get NOPROTO and fall back to RESP2.
func (c *client) cmdHello(args [][]byte) {
	if len(args) >= 2 {
		v, err := strconv.Atoi(string(args[1]))
		if err != nil {
			c.error("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 {
			c.error("NOPROTO unsupported protocol version")
			return
		}
	}
	var user, pass, name []byte
	var setName bool
	for i := 2; i < len(args); i++ {
		switch string(c.lowerName(args[i])) {
		case "auth":
			if i+2 >= len(args) {
				c.error("ERR Syntax error in HELLO option '" + clip(args[i], 128) + "'")
				return
			}
			user, pass = args[i+1], args[i+2]
			i += 2
		case "setname":
			if i+1 >= len(args) {
				c.error("ERR Syntax error in HELLO option '" + clip(args[i], 128) + "'")
				return
			}
			name, setName = args[i+1], true
			i++
		default:
			c.error("ERR Syntax error in HELLO option '" + clip(args[i], 128) + "'")
			return
		}
	}
	if pass != nil {
		if !c.s.password {
			c.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
			return
		}
		if !c.checkPassword(user, pass) {
			c.error(msgWrongPass)
			return
		}
		c.authed = true
	}
	if c.s.password && !c.authed {
		c.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if setName {
		if !validClientName(name) {
			c.error(msgBadClientName)
			return
		}
		c.name = string(name)
	}
	c.array(14)
	c.bulkString("server")
	c.bulkString("scalestore")
	c.bulkString("version")
	c.bulkString(compatVersion)
	c.bulkString("proto")
	c.int(2)
	c.bulkString("id")
	c.int(int64(c.id))
	c.bulkString("mode")
	c.bulkString("standalone")
	c.bulkString("role")
	c.bulkString("master")
	c.bulkString("modules")
	c.array(0)
}

const msgBadClientName = "ERR Client names cannot contain spaces, newlines or special characters."

func validClientName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func (c *client) cmdClient(args [][]byte) {
	if len(args) < 2 {
		c.arity("client")
		return
	}
	sub := string(c.lowerName(args[1]))
	switch sub {
	case "setname":
		if len(args) != 3 {
			c.arity("client|setname")
			return
		}
		if !validClientName(args[2]) {
			c.error(msgBadClientName)
			return
		}
		c.name = string(args[2])
		c.ok()
	case "getname":
		if len(args) != 2 {
			c.arity("client|getname")
			return
		}
		if c.name == "" {
			c.null()
		} else {
			c.bulkString(c.name)
		}
	case "id":
		if len(args) != 2 {
			c.arity("client|id")
			return
		}
		c.int(int64(c.id))
	case "setinfo":
		if len(args) != 4 {
			c.arity("client|setinfo")
			return
		}
		c.ok()
	case "no-evict", "no-touch":
		if len(args) != 3 {
			c.arity("client|" + sub)
			return
		}
		c.ok()
	default:
		// TRACKING, KILL, PAUSE and the rest: a blanket OK would mislead
		// (a client-side cache waiting for invalidations, say).
		c.error("ERR unknown subcommand '" + clip(args[1], 128) + "'. Try CLIENT HELP.")
	}
}
