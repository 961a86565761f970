package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/scalestore-go/scalestore/internal/traceview"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
)

// plugScenarios lists the scenarios of every registered plug-in protocol.
func plugScenarios() ([]struct {
	p protocolapi.Protocol
	s protocolapi.Scenario
}, error) {
	reg, err := registry()
	if err != nil {
		return nil, err
	}
	var out []struct {
		p protocolapi.Protocol
		s protocolapi.Scenario
	}
	for _, p := range reg.All() {
		if p.Deploy == nil {
			continue
		}
		for _, s := range p.Scenarios {
			out = append(out, struct {
				p protocolapi.Protocol
				s protocolapi.Scenario
			}{p, s})
		}
	}
	return out, nil
}

// runPlugScenario runs the plug-in scenario name, if a registered
// protocol has it (found false otherwise), and prints its chart.
func runPlugScenario(name, htmlOut string, asJSON bool, stdout, stderr io.Writer) (code int, found bool) {
	all, err := plugScenarios()
	if err != nil {
		fmt.Fprintf(stderr, "scenario: %v\n", err)
		return 1, true
	}
	for _, ps := range all {
		if ps.s.Name != name {
			continue
		}
		res, err := simrunner.RunScenario(ps.p, name, nil)
		if err != nil {
			fmt.Fprintf(stderr, "scenario: %v\n", err)
			return 2, true
		}
		r := &res.Result
		var bad []string
		bad = append(bad, r.Violations...)
		if !r.Linearizable && !r.LinearUnknown {
			bad = append(bad, fmt.Sprintf("history not linearizable on keys %v", r.BadKeys))
		}
		watch := ""
		if ps.s.Watch >= 0 {
			watch = fmt.Sprintf("key %d", ps.s.Watch)
		}
		if htmlOut != "" {
			tr := traceview.Trace{Title: fmt.Sprintf("scenario %s (%s)", name, ps.p.Name), About: ps.s.About, Watch: watch,
				Steps: res.Steps, Notes: bad}
			tr.Nodes = max(viewNodes(tr.Steps), ps.s.Nodes)
			if err := writeTraceHTML(htmlOut, tr); err != nil {
				fmt.Fprintf(stderr, "scenario: --html: %v\n", err)
				return 1, true
			}
		}
		if asJSON {
			b, _ := json.Marshal(struct {
				Scenario   string           `json:"scenario"`
				Protocol   string           `json:"protocol"`
				About      string           `json:"about"`
				Messages   uint64           `json:"messages"`
				Steps      []traceview.Step `json:"trace"`
				Violations []string         `json:"violations"`
			}{name, ps.p.Name, ps.s.About, r.Messages, res.Steps, bad})
			fmt.Fprintln(stdout, string(b))
		} else {
			fmt.Fprintf(stdout, "scenario %s (%s): %s\n", name, ps.p.Name, ps.s.About)
			if watch != "" {
				fmt.Fprintf(stdout, "watching %s\n", watch)
			}
			fmt.Fprintf(stdout, "\n%9s  %-8s  %-40s  %s\n", "time", "from->to", "message", "state after")
			for _, st := range res.Steps {
				fmt.Fprintf(stdout, "%7.2fus  %3d -> %-2d  %-40s  %s\n", float64(st.At)/1000, st.From, st.To, st.Label, st.State)
			}
			fmt.Fprintf(stdout, "\nmessages: %d, accesses: %d, trace hash %016x\n", r.Messages, r.Ops, r.TraceHash)
			if len(bad) > 0 {
				fmt.Fprintln(stdout, "VIOLATIONS:")
				for _, v := range bad {
					fmt.Fprintf(stdout, "  %s\n", v)
				}
			}
		}
		if len(bad) > 0 {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
