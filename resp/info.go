package resp

import (
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cmdInfo: INFO [section ...]. No section, or "default": every section
// but Commandstats; "all" and "everything": every section; else the
// sections named (case-insensitively), with "default" or "all" among them
// adding theirs.
func (c *client) cmdInfo(args [][]byte) {
	want := map[string]bool{}
	all, def := false, len(args) == 1
	for _, a := range args[1:] {
		switch name := strings.ToLower(string(a)); name {
		case "all", "everything":
			all = true
		case "default":
			def = true
		default:
			want[name] = true
		}
	}
	var b []byte
	for _, sec := range c.s.infoSections(all || want["commandstats"]) {
		name := strings.ToLower(sec.Name)
		if !all && !want[name] && !(def && name != "commandstats") {
			continue
		}
		if len(b) > 0 {
			b = append(b, "\r\n"...)
		}
		b = append(b, "# "...)
		b = append(b, sec.Name...)
		b = append(b, "\r\n"...)
		for _, f := range sec.Fields {
			b = append(b, f[0]...)
			b = append(b, ':')
			b = append(b, f[1]...)
			b = append(b, "\r\n"...)
		}
	}
	c.bulk(b)
}

// infoSections are the server's sections (Server, Clients, Memory, CPU,
// Stats, Replication, and Commandstats if asked), each followed by the
// fields Config.Info gives for a section of that name; its other sections
// come after.
func (s *Server) infoSections(cmdStats bool) []InfoSection {
	_, port, _ := net.SplitHostPort(s.addr)
	st := s.Stats()
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	secs := []InfoSection{
		{Name: "Server", Fields: [][2]string{
			{"redis_version", compatVersion},
			{"server_name", "scalestore"},
			{"redis_mode", "standalone"},
			{"process_id", strconv.Itoa(os.Getpid())},
			{"tcp_port", port},
			{"uptime_in_seconds", strconv.FormatInt(int64(time.Since(s.started)/time.Second), 10)},
		}},
		{Name: "Clients", Fields: [][2]string{
			{"connected_clients", u(st.Conns)},
			{"maxclients", strconv.FormatInt(s.maxConns, 10)},
		}},
		{Name: "Memory", Fields: [][2]string{
			{"used_memory", u(ms.HeapAlloc)},
			{"used_memory_rss", u(ms.Sys)},
		}},
		{Name: "CPU", Fields: [][2]string{
			{"used_cpu_sys", seconds(self.Stime)},
			{"used_cpu_user", seconds(self.Utime)},
			{"used_cpu_sys_children", seconds(children.Stime)},
			{"used_cpu_user_children", seconds(children.Utime)},
		}},
		{Name: "Stats", Fields: [][2]string{
			{"total_connections_received", u(st.ConnsTotal)},
			{"total_commands_processed", u(st.Commands)},
			{"total_error_replies", u(st.Errors)},
			{"rejected_connections", u(s.rejected.Load())},
		}},
		// No replication: a master without replicas, as Redis tells it.
		{Name: "Replication", Fields: [][2]string{
			{"role", "master"},
			{"connected_slaves", "0"},
			{"master_repl_offset", "0"},
		}},
	}
	if lc := s.loopClients(); lc != "" {
		// Not Redis's: the connections each event loop serves, the home
		// loops first (resp/loopspread.go).
		secs[1].Fields = append(secs[1].Fields, [2]string{"event_loop_clients", lc})
	}
	if cmdStats {
		secs = append(secs, s.commandStatsSection())
	}
	if s.info == nil {
		return secs
	}
next:
	for _, extra := range s.info() {
		for i := range secs {
			if strings.EqualFold(secs[i].Name, extra.Name) {
				secs[i].Fields = append(secs[i].Fields, extra.Fields...)
				continue next
			}
		}
		secs = append(secs, extra)
	}
	return secs
}

func seconds(t syscall.Timeval) string {
	return strconv.FormatFloat(float64(t.Sec)+float64(t.Usec)/1e6, 'f', 6, 64)
}

// configParams are what CONFIG GET tells: enough for redis-benchmark,
// which asks for save and appendonly when it starts.
func (s *Server) configParams() [][2]string {
	return [][2]string{
		{"save", ""},
		{"appendonly", "no"},
		{"databases", "1"},
		{"maxclients", strconv.FormatInt(s.maxConns, 10)},
		{"timeout", strconv.FormatInt(int64(s.idle/time.Second), 10)},
		{"proto-max-bulk-len", strconv.Itoa(maxCommandBytes)},
		{"requirepass", ""}, // never told, as Redis does not either
	}
}

// cmdConfig: CONFIG GET pattern [pattern ...] answers the matching
// parameters as name, value pairs; nothing can be set.
func (c *client) cmdConfig(args [][]byte) {
	if len(args) < 2 {
		c.arity("config")
		return
	}
	switch sub := strings.ToLower(string(args[1])); sub {
	case "get":
		if len(args) < 3 {
			c.arity("config|get")
			return
		}
		var hits [][2]string
		for _, p := range c.s.configParams() {
			for _, pat := range args[2:] {
				if globMatch([]byte(strings.ToLower(string(pat))), []byte(p[0])) {
					hits = append(hits, p)
					break
				}
			}
		}
		c.array(2 * len(hits))
		for _, h := range hits {
			c.bulkString(h[0])
			c.bulkString(h[1])
		}
	case "set", "resetstat", "rewrite":
		c.error("ERR CONFIG " + strings.ToUpper(sub) + " is not supported")
	default:
		c.error("ERR unknown subcommand '" + clip(args[1], 128) + "'. Try CONFIG HELP.")
	}
}

// commandInfo is one row of COMMAND's reply (the Redis 6 form).
type commandInfo struct {
	name                    string
	arity                   int
	flags                   []string
	firstKey, lastKey, step int
	categories              []string
}

var commandInfos = []commandInfo{
	{"get", 2, []string{"readonly", "fast"}, 1, 1, 1, []string{"@read", "@string", "@fast"}},
	{"set", -3, []string{"write", "denyoom"}, 1, 1, 1, []string{"@write", "@string", "@slow"}},
	{"setnx", 3, []string{"write", "denyoom", "fast"}, 1, 1, 1, []string{"@write", "@string", "@fast"}},
	{"del", -2, []string{"write"}, 1, -1, 1, []string{"@keyspace", "@write", "@slow"}},
	{"exists", -2, []string{"readonly", "fast"}, 1, -1, 1, []string{"@keyspace", "@read", "@fast"}},
	{"mget", -2, []string{"readonly", "fast"}, 1, -1, 1, []string{"@read", "@string", "@fast"}},
	{"mset", -3, []string{"write", "denyoom"}, 1, -1, 2, []string{"@write", "@string", "@slow"}},
	{"setex", 4, []string{"write", "denyoom"}, 1, 1, 1, []string{"@write", "@string", "@slow"}},
	{"psetex", 4, []string{"write", "denyoom"}, 1, 1, 1, []string{"@write", "@string", "@slow"}},
	{"getset", 3, []string{"write", "denyoom", "fast"}, 1, 1, 1, []string{"@write", "@string", "@fast"}},
	{"getdel", 2, []string{"write", "fast"}, 1, 1, 1, []string{"@write", "@string", "@fast"}},
	{"getex", -2, []string{"write", "fast"}, 1, 1, 1, []string{"@write", "@string", "@fast"}},
	{"append", 3, []string{"write", "denyoom", "fast"}, 1, 1, 1, []string{"@write", "@string", "@fast"}},
	{"strlen", 2, []string{"readonly", "fast"}, 1, 1, 1, []string{"@read", "@string", "@fast"}},
	{"getrange", 4, []string{"readonly"}, 1, 1, 1, []string{"@read", "@string", "@slow"}},
	{"substr", 4, []string{"readonly"}, 1, 1, 1, []string{"@read", "@string", "@slow"}},
	{"setrange", 4, []string{"write", "denyoom"}, 1, 1, 1, []string{"@write", "@string", "@slow"}},
	{"incr", 2, []string{"write", "denyoom", "fast"}, 1, 1, 1, []string{"@write", "@string", "@fast"}},
	{"decr", 2, []string{"write", "denyoom", "fast"}, 1, 1, 1, []string{"@write", "@string", "@fast"}},
	{"incrby", 3, []string{"write", "denyoom", "fast"}, 1, 1, 1, []string{"@write", "@string", "@fast"}},
	{"decrby", 3, []string{"write", "denyoom", "fast"}, 1, 1, 1, []string{"@write", "@string", "@fast"}},
	{"incrbyfloat", 3, []string{"write", "denyoom", "fast"}, 1, 1, 1, []string{"@write", "@string", "@fast"}},
	{"setbit", 4, []string{"write", "denyoom"}, 1, 1, 1, []string{"@write", "@bitmap", "@slow"}},
	{"getbit", 3, []string{"readonly", "fast"}, 1, 1, 1, []string{"@read", "@bitmap", "@fast"}},
	{"lcs", -3, []string{"readonly"}, 1, 2, 1, []string{"@read", "@string", "@slow"}},
	{"function", -2, []string{"noscript"}, 0, 0, 0, []string{"@slow", "@scripting"}},
	{"time", 1, []string{"loading", "stale", "fast"}, 0, 0, 0, []string{"@fast"}},
	{"unlink", -2, []string{"write", "fast"}, 1, -1, 1, []string{"@keyspace", "@write", "@fast"}},
	{"touch", -2, []string{"readonly", "fast"}, 1, -1, 1, []string{"@keyspace", "@read", "@fast"}},
	{"msetnx", -3, []string{"write", "denyoom"}, 1, -1, 2, []string{"@write", "@string", "@slow"}},
	{"keys", 2, []string{"readonly"}, 0, 0, 0, []string{"@keyspace", "@read", "@slow", "@dangerous"}},
	{"type", 2, []string{"readonly", "fast"}, 1, 1, 1, []string{"@keyspace", "@read", "@fast"}},
	{"rename", 3, []string{"write"}, 1, 2, 1, []string{"@keyspace", "@write", "@slow"}},
	{"renamenx", 3, []string{"write", "fast"}, 1, 2, 1, []string{"@keyspace", "@write", "@fast"}},
	{"copy", -3, []string{"write", "denyoom"}, 1, 2, 1, []string{"@keyspace", "@write", "@slow"}},
	{"flushdb", -1, []string{"write"}, 0, 0, 0, []string{"@keyspace", "@write", "@slow", "@dangerous"}},
	{"flushall", -1, []string{"write"}, 0, 0, 0, []string{"@keyspace", "@write", "@slow", "@dangerous"}},
	{"randomkey", 1, []string{"readonly"}, 0, 0, 0, []string{"@keyspace", "@read", "@slow"}},
	{"expire", -3, []string{"write", "fast"}, 1, 1, 1, []string{"@keyspace", "@write", "@fast"}},
	{"pexpire", -3, []string{"write", "fast"}, 1, 1, 1, []string{"@keyspace", "@write", "@fast"}},
	{"expireat", -3, []string{"write", "fast"}, 1, 1, 1, []string{"@keyspace", "@write", "@fast"}},
	{"pexpireat", -3, []string{"write", "fast"}, 1, 1, 1, []string{"@keyspace", "@write", "@fast"}},
	{"ttl", 2, []string{"readonly", "fast"}, 1, 1, 1, []string{"@keyspace", "@read", "@fast"}},
	{"pttl", 2, []string{"readonly", "fast"}, 1, 1, 1, []string{"@keyspace", "@read", "@fast"}},
	{"expiretime", 2, []string{"readonly", "fast"}, 1, 1, 1, []string{"@keyspace", "@read", "@fast"}},
	{"pexpiretime", 2, []string{"readonly", "fast"}, 1, 1, 1, []string{"@keyspace", "@read", "@fast"}},
	{"persist", 2, []string{"write", "fast"}, 1, 1, 1, []string{"@keyspace", "@write", "@fast"}},
	{"multi", 1, []string{"noscript", "loading", "stale", "fast"}, 0, 0, 0, []string{"@fast", "@transaction"}},
	{"exec", 1, []string{"noscript", "loading", "stale", "skip_slowlog"}, 0, 0, 0, []string{"@slow", "@transaction"}},
	{"discard", 1, []string{"noscript", "loading", "stale", "fast"}, 0, 0, 0, []string{"@fast", "@transaction"}},
	{"watch", -2, []string{"noscript", "loading", "stale", "fast"}, 1, -1, 1, []string{"@fast", "@transaction"}},
	{"unwatch", 1, []string{"noscript", "loading", "stale", "fast"}, 0, 0, 0, []string{"@fast", "@transaction"}},
	{"scan", -2, []string{"readonly"}, 0, 0, 0, []string{"@keyspace", "@read", "@slow"}},
	{"dbsize", 1, []string{"readonly", "fast"}, 0, 0, 0, []string{"@keyspace", "@read", "@fast"}},
	{"ping", -1, []string{"fast"}, 0, 0, 0, []string{"@fast", "@connection"}},
	{"echo", 2, []string{"fast"}, 0, 0, 0, []string{"@fast", "@connection"}},
	{"info", -1, []string{"loading", "stale"}, 0, 0, 0, []string{"@slow", "@dangerous"}},
	{"select", 2, []string{"loading", "stale", "fast"}, 0, 0, 0, []string{"@fast", "@connection"}},
	{"quit", -1, []string{"noscript", "loading", "stale", "fast", "no_auth"}, 0, 0, 0, []string{"@fast", "@connection"}},
	{"auth", -2, []string{"noscript", "loading", "stale", "fast", "no_auth"}, 0, 0, 0, []string{"@fast", "@connection"}},
	{"hello", -1, []string{"noscript", "loading", "stale", "fast", "no_auth"}, 0, 0, 0, []string{"@fast", "@connection"}},
	{"command", -1, []string{"loading", "stale"}, 0, 0, 0, []string{"@slow", "@connection"}},
	{"config", -2, []string{"admin", "noscript", "loading", "stale"}, 0, 0, 0, []string{"@admin", "@slow", "@dangerous"}},
	{"client", -2, []string{"admin", "noscript", "loading", "stale"}, 0, 0, 0, []string{"@slow", "@connection"}},
}

func (c *client) commandInfo(ci commandInfo) {
	c.array(7)
	c.bulkString(ci.name)
	c.int(int64(ci.arity))
	c.array(len(ci.flags))
	for _, f := range ci.flags {
		c.status(f)
	}
	c.int(int64(ci.firstKey))
	c.int(int64(ci.lastKey))
	c.int(int64(ci.step))
	c.array(len(ci.categories))
	for _, f := range ci.categories {
		c.status(f)
	}
}

// cmdCommand: COMMAND, COMMAND COUNT, COMMAND LIST, COMMAND INFO name...,
// and COMMAND DOCS (an empty reply: redis-cli then uses its own help).
func (c *client) cmdCommand(args [][]byte) {
	if len(args) == 1 {
		c.array(len(commandInfos))
		for _, ci := range commandInfos {
			c.commandInfo(ci)
		}
		return
	}
	switch sub := strings.ToLower(string(args[1])); sub {
	case "count":
		c.int(int64(len(commandInfos)))
	case "list":
		c.array(len(commandInfos))
		for _, ci := range commandInfos {
			c.bulkString(ci.name)
		}
	case "docs":
		c.array(0)
	case "info":
		names := args[2:]
		if len(names) == 0 {
			c.array(len(commandInfos))
			for _, ci := range commandInfos {
				c.commandInfo(ci)
			}
			return
		}
		c.array(len(names))
	next:
		for _, n := range names {
			for _, ci := range commandInfos {
				if strings.EqualFold(ci.name, string(n)) {
					c.commandInfo(ci)
					continue next
				}
			}
			c.null()
		}
	default:
		c.error("ERR unknown subcommand '" + clip(args[1], 128) + "'. Try COMMAND HELP.")
	}
}
