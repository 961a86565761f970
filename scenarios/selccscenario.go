package scenarios

import (
	"fmt"
	"strings"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/linecache"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// selccScenarios are SELCC's named scenarios (its paper's Fig. 7 and 8).
var selccScenarios = []ScenarioInfo{
	{"selcc-modified-conflict", "SELCC Fig. 7", "node 2 holds the line Modified; node 1 writes it (case 1: ownership handover by FAA, the line forwarded), then node 3 reads it (case 2: flushed, both shared)"},
	{"selcc-shared-invalidation", "SELCC Fig. 8", "nodes 0 and 2 hold the line shared; node 1 writes it: its CAS fails, it invalidates both, they release by FAA, its CAS succeeds"},
}

func init() {
	Scenarios = append(Scenarios, selccScenarios...)
	for _, s := range selccScenarios {
		scenarioRuns[s.Name] = runSELCCScenario
	}
}

// selccScenario runs a SELCC scenario on 4 compute nodes (0..3) and one
// memory node (4), one line, no faults: the chart has every message and
// every verb with the latch word after it.
func runSELCCScenario(info *ScenarioInfo) (*ScenarioResult, error) {
	cfg := SimConfig{Seed: 1, Nodes: 4, Workers: 1, Pages: 1, CachePages: 4, MemoryNodes: 1, Gamma: -1, NoPriority: true}
	s, err := newSELCCCluster(cfg, sim.FaultPlan{Name: "none"})
	if err != nil {
		return nil, err
	}
	line := s.line(0)
	res := &ScenarioResult{Scenario: info.Name, Protocol: SystemSELCC, About: info.About, PID: line.String(), Latched: true,
		RequestOrder: []int{}, GrantOrder: []int{}}
	tracing := false
	var t0 int64
	state := func() string { return s.lineState(line) }
	s.w.SetTrace(func(at int64, m *protocol.Message, _ []byte) {
		if tracing {
			res.Messages++
			res.Steps = append(res.Steps, Step{At: at - t0, From: int(m.From), To: int(m.To),
				Message: fmt.Sprintf("%v %v priority=%d", m.Type, m.Mode, m.Epoch), Dir: state()})
		}
	})
	s.onVerb = func(at int64, v *sim.Verb) {
		if !tracing {
			return
		}
		res.Steps = append(res.Steps, Step{At: at - t0, From: int(v.From), To: int(v.Region.Node),
			Message: s.describeVerb(v), PageSent: v.Len == linecache.LineSize, Dir: state()})
	}
	access := func(nodes []int, a selcc.Access, v uint64) {
		for i, n := range nodes {
			t := &linecache.Thread{Slot: 0}
			s.w.Spawn(protocol.NodeID(n), int64(i)*100, func(co *sim.Coroutine) {
				t.P = co
				err := s.caches[n].Access(t, line, a, func(data []byte) {
					if a == selcc.Write {
						checker.PutPageValue(data, v+uint64(n), false)
						checker.PutPageValue(data, v+uint64(n), true)
					}
				})
				if err != nil {
					s.fail("node %d: %v", n, err)
				}
				res.GrantOrder = append(res.GrantOrder, n)
			})
		}
		for range 1_000_000 {
			if !s.w.Step() {
				break
			}
			s.checkChanged()
		}
	}
	traced := func(fn func()) {
		tracing, t0 = true, s.w.Now()
		fn()
		tracing = false
	}
	switch info.Name {
	case "selcc-modified-conflict":
		access([]int{2}, selcc.Write, 70)
		res.GrantOrder = res.GrantOrder[:0]
		traced(func() {
			access([]int{1}, selcc.Write, 80)
			access([]int{3}, selcc.Read, 0)
		})
	case "selcc-shared-invalidation":
		access([]int{0}, selcc.Read, 0)
		access([]int{2}, selcc.Read, 0)
		res.GrantOrder = res.GrantOrder[:0]
		traced(func() { access([]int{1}, selcc.Write, 80) })
	}
	res.AtRest = state()
	s.stopping = true
	for _, h := range s.handlers {
		h.Wake()
	}
	for s.w.Step() {
	}
	s.checkLine(line, true)
	res.Violations = s.viol.List()
	if res.Violations == nil {
		res.Violations = []string{}
	}
	return res, nil
}

// lineState is a line's latch word and every compute node's memo.
func (s *selccCluster) lineState(line protocol.PID) string {
	var b strings.Builder
	fmt.Fprintf(&b, "word %v memos", s.word(line))
	for _, c := range s.caches {
		b.WriteString(" " + c.Memo(line).String())
	}
	v, _ := checker.PageValue(s.memData(line))
	fmt.Fprintf(&b, " memory=%d", v)
	return b.String()
}

// describeVerb names a verb for the chart: what it is for, in the
// protocol's terms.
func (s *selccCluster) describeVerb(v *sim.Verb) string {
	toMemory := int(v.Region.Node) >= s.computes
	switch v.Kind {
	case sim.VerbCAS:
		return fmt.Sprintf("CAS %v -> %v (found %v)", selcc.Word(v.Old), selcc.Word(v.New), selcc.Word(v.Prev))
	case sim.VerbFAA:
		return fmt.Sprintf("FAA (found %v)", selcc.Word(v.Prev))
	case sim.VerbRead:
		return fmt.Sprintf("READ line (%d B)", v.Len)
	case sim.VerbWrite:
		if toMemory {
			return fmt.Sprintf("WRITE line back (%d B)", v.Len)
		}
		if v.Len == linecache.LineSize {
			return fmt.Sprintf("WRITE line into the sender's slot (%d B)", v.Len)
		}
		return "WRITE reply status"
	}
	return v.Kind.String()
}
