package scenarios

import (
	"fmt"
	"io"
	"strings"

	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// ScenarioInfo describes a named scenario.
type ScenarioInfo struct {
	Name  string
	Paper string // where in the paper
	About string
}

// Scenarios lists the named scenarios in teaching order.
var Scenarios = []ScenarioInfo{
	{"base-case", "Fig. 3", "node 0 is the directory and holds the page; node 1 asks for it shared"},
	{"exclusive-conflict", "Fig. 4", "node 2 holds the page exclusively; node 1 asks for it exclusively"},
	{"shared-conflict", "§3.3", "nodes 1 and 2 hold the page shared, the directory holds no copy; node 3 asks exclusively"},
	{"copy-from-sharer", "§3.3", "node 2 wrote the page, node 1 copied it; the directory's SSD copy is stale, so node 3 copies from the sharer"},
	{"upgrade", "§5.1", "nodes 1 and 2 hold the page shared; node 1 upgrades to exclusive"},
	{"upgrade-deadlock", "§3.4.3", "nodes 1 and 2 hold the page shared and upgrade at once; the older conflict epoch backs off"},
	{"chaining", "Fig. 5", "N requesters ask for a page held exclusively by another node, all at once (--requesters, --protocol)"},
	{"owner-stability", "§3.4.3", "node 2 holds the page; node 1's request is chained behind it while node 2 tries to evict it"},
	{"eviction-dirty", "§4.2", "node 1 holds a page it modified and evicts it; the directory pulls the page and persists it"},
}

// scenarioRuns are the scenarios of Scenarios that another system runs
// (SELCC's), by name: the rest are ScaleStore's, run by RunScenario.
var scenarioRuns = map[string]func(*ScenarioInfo) (*ScenarioResult, error){}

// ScenarioConfig selects a scenario run.
type ScenarioConfig struct {
	Name       string
	Protocol   protocol.Variant
	Requesters int // chaining only
}

// Step is one network message of a scenario's chart.
type Step struct {
	At       int64  `json:"t_ns"`
	From     int    `json:"from"`
	To       int    `json:"to"`
	Message  string `json:"message"`
	PageSent bool   `json:"page"`
	Dir      string `json:"directory_after"`
}

// ScenarioResult is the chart of a run.
type ScenarioResult struct {
	Scenario     string   `json:"scenario"`
	Protocol     string   `json:"protocol"`
	About        string   `json:"about"`
	Messages     int      `json:"messages"`
	RequestOrder []int    `json:"request_order"`
	GrantOrder   []int    `json:"grant_order"`
	Steps        []Step   `json:"trace"`
	Violations   []string `json:"violations"`
	PID          string   `json:"page"`
	AtRest       string   `json:"directory_at_rest"`
	// Latched: the protocol keeps a line under a latch word on a memory
	// node (SELCC's), so the chart is of messages and one-sided verbs and
	// watches the latch word, not a directory.
	Latched bool `json:"-"`
}

// scenario is the running state of a scenario.
type scenario struct {
	c        *cluster
	pid      protocol.PID
	res      *ScenarioResult
	tracing  bool
	t0       int64
	requests []int
	grants   []int
}

// scenario observes accepted requests and grants for the orders.
func (s *scenario) Violation(protocol.NodeID, error)                                                {}
func (s *scenario) CopyChanged(protocol.NodeID, protocol.PID, protocol.Mode, protocol.Mode, []byte) {}
func (s *scenario) Unreadable(protocol.NodeID, protocol.PID, error)                                 {}
func (s *scenario) Accepted(dir protocol.NodeID, d protocol.Decision) {
	if s.tracing && d.PID == s.pid {
		s.requests = append(s.requests, int(d.Requester))
	}
}
func (s *scenario) Obtained(n protocol.NodeID, pid protocol.PID, m protocol.Mode, waited int64) {
	if s.tracing && pid == s.pid {
		s.grants = append(s.grants, int(n))
	}
}

// RunScenario runs a named scenario and returns its chart.
func RunScenario(cfg ScenarioConfig) (*ScenarioResult, error) {
	var info *ScenarioInfo
	for i := range Scenarios {
		if Scenarios[i].Name == cfg.Name {
			info = &Scenarios[i]
		}
	}
	if info == nil {
		return nil, fmt.Errorf("unknown scenario %q ('scalestore scenario list' names them)", cfg.Name)
	}
	if run := scenarioRuns[info.Name]; run != nil {
		return run(info)
	}
	nodes := 4
	if cfg.Name == "chaining" {
		if cfg.Requesters < 1 || cfg.Requesters > protocol.MaxNodes-2 {
			return nil, fmt.Errorf("--requesters %d: want 1..%d", cfg.Requesters, protocol.MaxNodes-2)
		}
		nodes = cfg.Requesters + 2
	}
	s := &scenario{res: &ScenarioResult{Scenario: cfg.Name, Protocol: cfg.Protocol.String(), About: info.About}}
	c, err := newCluster(clusterConfig{seed: 1, nodes: nodes, cachePages: 8, ssdPages: 8, variant: cfg.Protocol,
		plan: sim.FaultPlan{Name: "none"}, latency: sim.DefaultLatency, observer: s})
	if err != nil {
		return nil, err
	}
	s.c = c
	c.setTrace(s.trace)
	// No page provider ticks: evictions happen only where the scenario says.
	switch cfg.Name {
	case "base-case":
		s.alloc(0, 0)
		s.write(0, 7)
		s.traced(func() { s.read(1) })
	case "exclusive-conflict":
		s.alloc(2, 0)
		s.write(2, 7)
		s.traced(func() { s.write(1, 8) })
	case "shared-conflict":
		s.alloc(0, 0)
		s.write(0, 7)
		s.evict(0)
		s.read(1)
		s.read(2)
		s.traced(func() { s.write(3, 8) })
	case "copy-from-sharer":
		s.alloc(2, 0)
		s.write(2, 7)
		s.read(1)
		s.traced(func() { s.read(3) })
	case "upgrade":
		s.alloc(0, 0)
		s.evict(0)
		s.read(1)
		s.read(2)
		s.traced(func() { s.upgrade([]int{1}) })
	case "upgrade-deadlock":
		s.alloc(0, 0)
		s.evict(0)
		s.read(1)
		s.read(2)
		s.traced(func() { s.upgrade([]int{1, 2}) })
	case "chaining":
		holder := nodes - 1
		s.alloc(holder, 0)
		s.write(holder, 1)
		s.traced(func() { s.concurrentWrites(1, cfg.Requesters) })
	case "owner-stability":
		s.alloc(2, 0)
		s.write(2, 7)
		s.traced(func() { s.evictRace(1, 2) })
	case "eviction-dirty":
		s.alloc(1, 0)
		s.write(1, 7)
		s.traced(func() { s.evict(1) })
	}
	s.res.PID = s.pid.String()
	s.res.RequestOrder, s.res.GrantOrder = s.requests, s.grants
	if s.res.RequestOrder == nil {
		s.res.RequestOrder = []int{}
	}
	if s.res.GrantOrder == nil {
		s.res.GrantOrder = []int{}
	}
	s.res.AtRest = s.dirState()
	c.checkQuiet([]protocol.PID{s.pid})
	c.checkCosts()
	s.res.Violations, _ = c.inv.Violations()
	if s.res.Violations == nil {
		s.res.Violations = []string{}
	}
	return s.res, nil
}

func (s *scenario) trace(at int64, m *protocol.Message, payload []byte) {
	if !s.tracing {
		return
	}
	s.res.Messages++
	s.res.Steps = append(s.res.Steps, Step{At: at - s.t0, From: int(m.From), To: int(m.To), Message: describe(m, payload),
		PageSent: len(payload) == protocol.PageSize, Dir: s.dirState()})
}

func (s *scenario) dirState() string { return s.c.dirState(s.pid) }

// dirState describes what pid's directory holds about it, for charts.
func (c *cluster) dirState(pid protocol.PID) string {
	meta := c.dirOf(pid).Meta(pid)
	if meta == nil {
		return "-"
	}
	var b strings.Builder
	switch meta.Mode {
	case protocol.ModeNone:
		b.WriteString("no copies")
	case protocol.ModeExclusive:
		fmt.Fprintf(&b, "X owner=%d", meta.Owner)
	case protocol.ModeShared:
		fmt.Fprintf(&b, "S sharers=%v", meta.Sharers)
		if meta.Stale {
			fmt.Fprintf(&b, " source=%d copies=%d", meta.Source, meta.Copies)
		}
	}
	fmt.Fprintf(&b, " epoch=%d", meta.Epoch)
	if meta.Stale {
		b.WriteString(" ssd=stale")
	} else {
		b.WriteString(" ssd=fresh")
	}
	if meta.InTransition() {
		b.WriteString(" (in transition)")
	}
	return b.String()
}

// describe names a message for the chart without repeating from/to.
func describe(m *protocol.Message, payload []byte) string {
	var b strings.Builder
	b.WriteString(m.Type.String())
	if m.Mode != protocol.ModeNone {
		b.WriteString(" " + m.Mode.String())
	}
	if m.Type == protocol.TForward {
		fmt.Fprintf(&b, " fetch-from=%d", m.Target)
	}
	if m.Epoch != 0 {
		fmt.Fprintf(&b, " epoch=%d", m.Epoch)
	}
	if m.Flags&protocol.FlagAnyCopy != 0 {
		b.WriteString(" from-any-copy")
	} else if m.Type == protocol.TForward || m.Type == protocol.TTransfer {
		fmt.Fprintf(&b, " pred=%d", m.Pred)
	}
	if m.K != 0 {
		fmt.Fprintf(&b, " after-copies=%d", m.K)
	}
	if !m.Set.Empty() {
		fmt.Fprintf(&b, " invalidate=%v", m.Set)
	}
	if m.Flags&protocol.FlagNoData != 0 {
		b.WriteString(" (keeps its copy)")
	}
	if m.Count != 0 {
		reply := m.Type == protocol.TEvictReply
		entries, err := protocol.DecodeEvictEntries(nil, payload, int(m.Count), reply)
		if err != nil {
			fmt.Fprintf(&b, " (bad batch: %v)", err)
		}
		for _, e := range entries {
			if reply {
				fmt.Fprintf(&b, " [%v %v]", e.PID, e.Decision)
			} else {
				fmt.Fprintf(&b, " [%v epoch=%d served=%d]", e.PID, e.Epoch, e.Served)
			}
		}
	}
	return b.String()
}

// traced runs fn with the chart recording.
func (s *scenario) traced(fn func()) {
	s.tracing = true
	s.t0 = s.c.w.Now()
	fn()
	s.tracing = false
}

// on runs body on a coroutine of node and runs the world until it is quiet.
func (s *scenario) on(node int, body func(co *sim.Coroutine, bw *bufmgr.Worker)) {
	s.c.w.Spawn(protocol.NodeID(node), 0, func(co *sim.Coroutine) {
		body(co, &bufmgr.Worker{ID: node, P: co})
	})
	s.c.drain(1_000_000)
}

func (s *scenario) alloc(node, dir int) {
	s.on(node, func(co *sim.Coroutine, bw *bufmgr.Worker) {
		g, ok := s.c.nodes[node].Allocate(bw, protocol.NodeID(dir))
		if !ok {
			s.c.inv.Fail("allocation failed")
			return
		}
		s.pid = g.PID()
		g.Release()
	})
}

func (s *scenario) write(node int, v uint64) {
	s.on(node, func(co *sim.Coroutine, bw *bufmgr.Worker) { s.doWrite(co, bw, node, v) })
}

func (s *scenario) doWrite(co *sim.Coroutine, bw *bufmgr.Worker, node int, v uint64) {
	x := s.c.nodes[node].Cache().Exclusive(bw, s.pid)
	checker.PutPageValue(x.Data(), v, false)
	checker.PutPageValue(x.Data(), v, true)
	s.c.inv.Wrote(s.pid, v)
	co.Sleep(1_000) // the access itself takes a while
	x.Release()
}

func (s *scenario) read(node int) {
	s.on(node, func(co *sim.Coroutine, bw *bufmgr.Worker) {
		g := s.c.nodes[node].Cache().Shared(bw, s.pid)
		g.Release()
	})
}

func (s *scenario) evict(node int) {
	if !s.c.nodes[node].EvictPage(s.pid) {
		s.c.inv.Fail("node %d cannot evict %v now", node, s.pid)
	}
	s.c.drain(1_000_000)
}

// upgrade: every node in nodes holds a shared guard and upgrades it at once.
func (s *scenario) upgrade(nodes []int) {
	for _, node := range nodes {
		s.c.w.Spawn(protocol.NodeID(node), 0, func(co *sim.Coroutine) {
			bw := &bufmgr.Worker{ID: node, P: co}
			c := s.c.nodes[node].Cache()
			g := c.Shared(bw, s.pid)
			x, err := g.Upgrade(bw)
			if err != nil {
				x = c.Exclusive(bw, s.pid) // backed off: take it anew
			}
			v := uint64(100 + node)
			checker.PutPageValue(x.Data(), v, false)
			checker.PutPageValue(x.Data(), v, true)
			s.c.inv.Wrote(s.pid, v)
			co.Sleep(1_000)
			x.Release()
		})
	}
	s.c.drain(1_000_000)
}

// concurrentWrites: nodes first..first+n-1 ask for the page exclusively,
// 100 ns apart, so the directory sees them in node order.
func (s *scenario) concurrentWrites(first, n int) {
	for i := range n {
		node := first + i
		s.c.w.Spawn(protocol.NodeID(node), int64(i)*100, func(co *sim.Coroutine) {
			s.doWrite(co, &bufmgr.Worker{ID: node, P: co}, node, uint64(10+node))
		})
	}
	s.c.drain(10_000_000)
}

// evictRace: requester asks for the page exclusively; the holder's page
// provider picks the page for eviction just after.
func (s *scenario) evictRace(requester, holder int) {
	s.c.w.Spawn(protocol.NodeID(requester), 0, func(co *sim.Coroutine) {
		s.doWrite(co, &bufmgr.Worker{ID: requester, P: co}, requester, 8)
	})
	s.c.w.After(protocol.NodeID(holder), 1_000, func() {
		if !s.c.nodes[holder].EvictPage(s.pid) {
			s.c.inv.Fail("node %d cannot evict %v now", holder, s.pid)
		}
	})
	s.c.drain(1_000_000)
}

// WriteChart prints the result as a readable message chart.
func WriteChart(w io.Writer, r *ScenarioResult) {
	fmt.Fprintf(w, "scenario %s (%s): %s\n", r.Scenario, r.Protocol, r.About)
	if r.Latched {
		fmt.Fprintf(w, "line %s on memory node %s; compute nodes 0-3 (a latch word names them: (holder,{readers}))\n\n", r.PID, strings.SplitN(r.PID, ":", 2)[0])
		fmt.Fprintf(w, "%9s  %-8s  %-58s  %s\n", "time", "from->to", "message or one-sided verb", "latch word, memos of nodes 0-3, memory's value after")
	} else {
		fmt.Fprintf(w, "page %s; directory is node %s\n\n", r.PID, strings.SplitN(r.PID, ":", 2)[0])
		fmt.Fprintf(w, "%9s  %-8s  %-58s  %s\n", "time", "from->to", "message", "directory metadata after")
	}
	for _, st := range r.Steps {
		msg := st.Message
		if st.PageSent {
			msg += " +page"
		}
		fmt.Fprintf(w, "%7.2fus  %3d -> %-2d  %-58s  %s\n", float64(st.At)/1000, st.From, st.To, msg, st.Dir)
	}
	fmt.Fprintf(w, "%9s  at rest: %s\n", "", r.AtRest)
	fmt.Fprintf(w, "\nmessages: %d\n", r.Messages)
	if r.Latched {
		fmt.Fprintf(w, "one-sided verbs: %d\naccess order: %v\n", len(r.Steps)-r.Messages, r.GrantOrder)
	} else {
		fmt.Fprintf(w, "request order: %v\ngrant order:   %v\n", r.RequestOrder, r.GrantOrder)
	}
	if len(r.Violations) > 0 {
		fmt.Fprintf(w, "VIOLATIONS:\n")
		for _, v := range r.Violations {
			fmt.Fprintf(w, "  %s\n", v)
		}
	}
}
