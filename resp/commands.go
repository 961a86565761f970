package resp

import (
	"crypto/sha256"
	"crypto/subtle"
	"strconv"
)

// command is an entry of the command table.
// maxLastName bounds the command name a client remembers (client.lastName).
const maxLastName = 32

type command struct {
	fn func(c *client, args [][]byte)
	// arity is Redis's: n means exactly n arguments (the name included),
	// -n at least n.
	arity int
	// now: runs at once inside MULTI instead of being queued.
	now bool
	id  int // index in commandNames (cmdstats.go)
	// writes: the command writes through the engine (Put, Modify, Delete,
	// a writing Atomic), which may block until a store has it
	// (Config.OffloadWrites).
	writes bool
}

// writeCommands are the commands whose engine calls write. (A read that
// finds an expired key deletes it too; that is rare and not counted.)
var writeCommands = []string{"set", "setnx", "setex", "psetex", "getset", "getdel", "getex",
	"append", "setrange", "incr", "decr", "incrby", "decrby", "incrbyfloat", "setbit", "del",
	"unlink", "mset", "msetnx", "rename", "renamenx", "copy", "flushdb", "flushall", "expire",
	"pexpire", "expireat", "pexpireat", "persist", "exec"}

var dispatch map[string]command

func init() {
	dispatch = map[string]command{
		"get":         {fn: (*client).cmdGet, arity: 2},
		"set":         {fn: (*client).cmdSet, arity: -3},
		"setnx":       {fn: (*client).cmdSetNX, arity: 3},
		"setex":       {fn: (*client).cmdSetEx, arity: 4},
		"psetex":      {fn: (*client).cmdPSetEx, arity: 4},
		"getset":      {fn: (*client).cmdGetSet, arity: 3},
		"getdel":      {fn: (*client).cmdGetDel, arity: 2},
		"getex":       {fn: (*client).cmdGetEx, arity: -2},
		"append":      {fn: (*client).cmdAppend, arity: 3},
		"strlen":      {fn: (*client).cmdStrlen, arity: 2},
		"getrange":    {fn: (*client).cmdGetRange, arity: 4},
		"substr":      {fn: (*client).cmdGetRange, arity: 4},
		"setrange":    {fn: (*client).cmdSetRange, arity: 4},
		"incr":        {fn: (*client).cmdIncr, arity: 2},
		"decr":        {fn: (*client).cmdDecr, arity: 2},
		"incrby":      {fn: (*client).cmdIncrBy, arity: 3},
		"decrby":      {fn: (*client).cmdDecrBy, arity: 3},
		"incrbyfloat": {fn: (*client).cmdIncrByFloat, arity: 3},
		"setbit":      {fn: (*client).cmdSetBit, arity: 4},
		"getbit":      {fn: (*client).cmdGetBit, arity: 3},
		"lcs":         {fn: (*client).cmdLCS, arity: -3},
		"del":         {fn: (*client).cmdDel, arity: -2},
		"unlink":      {fn: (*client).cmdDel, arity: -2},
		"exists":      {fn: (*client).cmdExists, arity: -2},
		"touch":       {fn: (*client).cmdExists, arity: -2},
		"mget":        {fn: (*client).cmdMGet, arity: -2},
		"mset":        {fn: (*client).cmdMSet, arity: -3},
		"msetnx":      {fn: (*client).cmdMSetNX, arity: -3},
		"keys":        {fn: (*client).cmdKeys, arity: 2},
		"type":        {fn: (*client).cmdType, arity: 2},
		"rename":      {fn: (*client).cmdRename, arity: 3},
		"renamenx":    {fn: (*client).cmdRenameNX, arity: 3},
		"copy":        {fn: (*client).cmdCopy, arity: -3},
		"flushdb":     {fn: (*client).cmdFlush, arity: -1},
		"flushall":    {fn: (*client).cmdFlush, arity: -1},
		"randomkey":   {fn: (*client).cmdRandomKey, arity: 1},
		"expire":      {fn: (*client).cmdExpire, arity: -3},
		"pexpire":     {fn: (*client).cmdExpire, arity: -3},
		"expireat":    {fn: (*client).cmdExpire, arity: -3},
		"pexpireat":   {fn: (*client).cmdExpire, arity: -3},
		"ttl":         {fn: (*client).cmdTTL, arity: 2},
		"pttl":        {fn: (*client).cmdTTL, arity: 2},
		"expiretime":  {fn: (*client).cmdTTL, arity: 2},
		"pexpiretime": {fn: (*client).cmdTTL, arity: 2},
		"persist":     {fn: (*client).cmdPersist, arity: 2},
		"multi":       {fn: (*client).cmdMulti, arity: 1, now: true},
		"exec":        {fn: (*client).cmdExec, arity: 1, now: true},
		"discard":     {fn: (*client).cmdDiscard, arity: 1, now: true},
		"watch":       {fn: (*client).cmdWatch, arity: -2, now: true},
		"unwatch":     {fn: (*client).cmdUnwatch, arity: 1},
		"scan":        {fn: (*client).cmdScan, arity: -2},
		"dbsize":      {fn: (*client).cmdDBSize, arity: 1},
		"ping":        {fn: (*client).cmdPing, arity: -1},
		"echo":        {fn: (*client).cmdEcho, arity: 2},
		"info":        {fn: (*client).cmdInfo, arity: -1},
		"select":      {fn: (*client).cmdSelect, arity: 2},
		"quit":        {fn: (*client).cmdQuit, arity: -1, now: true},
		"auth":        {fn: (*client).cmdAuth, arity: -2},
		"hello":       {fn: (*client).cmdHello, arity: -1},
		"command":     {fn: (*client).cmdCommand, arity: -1},
		"config":      {fn: (*client).cmdConfig, arity: -2},
		"client":      {fn: (*client).cmdClient, arity: -2},
		"function":    {fn: (*client).cmdFunction, arity: -2},
		"time":        {fn: (*client).cmdTime, arity: 1},
	}
	numberCommands()
}

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
	// Clients mostly repeat a command (a pipeline of SETs): the last one
	// found skips the table's lookup (3% of a -P 16 SET profile).
	cmd, ok := c.lastCmd, len(c.lastName) > 0 && string(name) == string(c.lastName)
	if !ok {
		if cmd, ok = dispatch[string(name)]; ok && len(name) <= maxLastName {
			c.lastName, c.lastCmd = append(c.lastName[:0], name...), cmd
		}
	}
	if !ok {
		c.multiFailed()
		c.unknown(args)
		return
	}
	if (cmd.arity > 0 && len(args) != cmd.arity) || len(args) < -cmd.arity {
		c.multiFailed()
		c.countCommand(cmd.id, false, true)
		c.arity(string(name))
		return
	}
	if c.multi && !cmd.now {
		c.queue(args)
		return
	}
	errs := c.nErrs
	cmd.fn(c, args)
	c.countCommand(cmd.id, c.nErrs != errs, false)
}

// cmdFunction: there is no scripting, so no function is ever loaded:
// FUNCTION FLUSH has nothing to remove, and FUNCTION LIST nothing to
// list (Redis's test suite flushes functions before every unit). LOAD
// and the rest are refused.
func (c *client) cmdFunction(args [][]byte) {
	switch string(c.lowerName(args[1])) {
	case "flush":
		if len(args) > 3 {
			c.syntaxError()
			return
		}
		if len(args) == 3 {
			switch string(c.lowerName(args[2])) {
			case "async", "sync":
			default:
				c.syntaxError()
				return
			}
		}
		c.ok()
	case "list":
		c.array(0)
	default:
		c.error("ERR unknown subcommand '" + clip(args[1], 128) + "'. Try FUNCTION HELP.")
	}
}

// cmdTime answers the server's clock (the one expiry uses): Unix seconds
// and the microseconds into that second.
func (c *client) cmdTime(args [][]byte) {
	us := c.s.nowMicros()
	c.array(2)
	c.bulkString(strconv.FormatInt(us/1e6, 10))
	c.bulkString(strconv.FormatInt(us%1e6, 10))
}

func (c *client) cmdQuit(args [][]byte) {
	c.ok()
	c.quit = true
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
