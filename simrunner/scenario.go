package simrunner

import (
	"fmt"
	"io"
	"time"

	"github.com/scalestore-go/scalestore/internal/traceview"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// Swarm runs seeds first..first+n-1 of cfg and stops at the first seed
// that fails. each, when set, sees every result as it comes.
func Swarm(p protocolapi.Protocol, cfg Config, first uint64, n int, each func(Result)) (runs int, failed *Result, err error) {
	return SwarmOf(func(c Config) (Result, error) { return Run(p, c) }, cfg, first, n, each)
}

// SwarmOf is Swarm of the seeds run (Runner: a protocol's world too).
func SwarmOf(run func(Config) (Result, error), cfg Config, first uint64, n int, each func(Result)) (runs int, failed *Result, err error) {
	for i := range n {
		c := cfg
		c.Seed = first + uint64(i)
		res, err := run(c)
		if err != nil {
			return runs, nil, err
		}
		runs++
		if each != nil {
			each(res)
		}
		if res.Failed() {
			return runs, &res, nil
		}
	}
	return runs, nil, nil
}

// ScenarioResult is the chart of a scenario's run.
type ScenarioResult struct {
	Scenario protocolapi.Scenario
	Steps    []traceview.Step
	Result   Result
}

// RunScenario runs p's named scenario without faults (seed 1), every
// message a step of the chart, then the checks at rest and the history's.
func RunScenario(p protocolapi.Protocol, name string, trace io.Writer) (ScenarioResult, error) {
	sc, ok := p.Scenario(name)
	if !ok {
		var names []string
		for _, s := range p.Scenarios {
			names = append(names, s.Name)
		}
		return ScenarioResult{}, fmt.Errorf("protocol %s has no scenario %q (it has %v)", p.Name, name, names)
	}
	out := ScenarioResult{Scenario: sc}
	cfg := Config{Seed: 1, Nodes: sc.Nodes, Workers: sc.Workers, Keys: sc.Keys, CacheLines: sc.CacheLines,
		Faults: "none", Workload: protocolapi.WorkloadRegister, Watch: sc.Watch, Trace: trace, Steps: &out.Steps,
		CheckTimeout: time.Minute}
	for _, op := range sc.Script {
		switch {
		case int(op.Node) >= sc.Nodes || op.Worker < 0 || op.Worker >= sc.Workers:
			return out, fmt.Errorf("scenario %s: an access by node %d worker %d, outside its %d nodes of %d workers", name, op.Node, op.Worker, sc.Nodes, sc.Workers)
		case op.Key >= uint64(sc.Keys):
			return out, fmt.Errorf("scenario %s: key %d of %d", name, op.Key, sc.Keys)
		case op.Kind == protocolapi.OpRMW && !p.Supports.Workload(protocolapi.WorkloadRMW):
			return out, fmt.Errorf("scenario %s: a read-modify-write, which protocol %s does not support", name, p.Name)
		}
	}
	if err := Check(p, cfg); err != nil {
		return out, err
	}
	plan, _ := sim.Plan("none", nil)
	r, err := deploy(p, cfg, plan)
	if err != nil {
		return out, err
	}
	var cos []*sim.Coroutine
	for n := range sc.Nodes {
		for k := range sc.Workers {
			var mine []protocolapi.ScriptOp
			for _, op := range sc.Script {
				if int(op.Node) == n && op.Worker == k {
					mine = append(mine, op)
				}
			}
			if len(mine) == 0 {
				continue
			}
			id := r.worker(protocol.NodeID(n), k)
			var acc protocolapi.Accessor
			co := r.w.Spawn(protocol.NodeID(n), 0, func(co *sim.Coroutine) {
				for _, op := range mine {
					if d := op.At - r.w.Now(); d > 0 {
						co.Sleep(d)
					}
					r.work.Access(co, id, acc, op.Kind, op.Key, 0)
				}
			})
			acc = r.bind(id, co)
			cos = append(cos, co)
		}
	}
	if r.runUntil(cos, "scenario") {
		r.settle("after the scenario")
	}
	r.finish(&out.Result)
	r.checkHistory(&out.Result)
	return out, nil
}
