package resp

import (
	"sort"
	"strconv"
	"sync/atomic"
)

// Per-command counters for INFO commandstats: a connection counts in its
// own slices and adds them to the server's at publish, as it does its
// command and error counts.

// commandNames are dispatch's names in order; a command's id indexes them.
var commandNames []string

func numberCommands() {
	for name := range dispatch {
		commandNames = append(commandNames, name)
	}
	sort.Strings(commandNames)
	for i, name := range commandNames {
		cmd := dispatch[name]
		cmd.id = i
		dispatch[name] = cmd
	}
	for _, name := range writeCommands {
		cmd, ok := dispatch[name]
		if !ok {
			panic("resp: write command " + name + " is not in the table")
		}
		cmd.writes = true
		dispatch[name] = cmd
	}
}

// cmdStat is one command's counters on the server.
type cmdStat struct {
	calls, failed, rejected atomic.Uint64
}

// connStats is one connection's counts since it last published.
type connStats struct {
	calls, failed, rejected []uint64
	touched                 []int
}

func (c *client) countCommand(id int, failed, rejected bool) {
	st := &c.stats
	if st.calls == nil {
		n := len(commandNames)
		st.calls, st.failed, st.rejected = make([]uint64, n), make([]uint64, n), make([]uint64, n)
	}
	if st.calls[id] == 0 && st.failed[id] == 0 && st.rejected[id] == 0 {
		st.touched = append(st.touched, id)
	}
	switch {
	case rejected:
		st.rejected[id]++
	case failed:
		st.calls[id]++
		st.failed[id]++
	default:
		st.calls[id]++
	}
}

func (c *client) publishCmdStats() {
	st := &c.stats
	for _, id := range st.touched {
		s := &c.s.cmdStats[id]
		s.calls.Add(st.calls[id])
		s.failed.Add(st.failed[id])
		s.rejected.Add(st.rejected[id])
		st.calls[id], st.failed[id], st.rejected[id] = 0, 0, 0
	}
	st.touched = st.touched[:0]
}

// commandStatsSection is INFO's Commandstats.
func (s *Server) commandStatsSection() InfoSection {
	sec := InfoSection{Name: "Commandstats"}
	for id, name := range commandNames {
		st := &s.cmdStats[id]
		calls, failed, rejected := st.calls.Load(), st.failed.Load(), st.rejected.Load()
		if calls == 0 && rejected == 0 {
			continue
		}
		sec.Fields = append(sec.Fields, [2]string{"cmdstat_" + name,
			"calls=" + strconv.FormatUint(calls, 10) + ",rejected_calls=" + strconv.FormatUint(rejected, 10) +
				",failed_calls=" + strconv.FormatUint(failed, 10)})
	}
	return sec
}
