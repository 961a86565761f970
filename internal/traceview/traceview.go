package traceview

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
)

// Step is one message of the trace.
type Step struct {
	At    int64  `json:"t"`     // simulated ns
	From  int    `json:"from"`  // sending node
	To    int    `json:"to"`    // receiving node
	Label string `json:"label"` // what the message says
	Page  bool   `json:"page"`  // it carries a page
	State string `json:"state"` // the watched page's directory state after it ("" if none)
}

// Trace is what the viewer shows.
type Trace struct {
	Title string `json:"title"`
	About string `json:"about"`
	Nodes int    `json:"nodes"`
	Watch string `json:"watch"` // what State describes, e.g. "page 0:3, directory node 0"
	Steps []Step `json:"steps"`
	// Notes are shown under the diagram (violations, the state at rest).
	Notes []string `json:"notes"`
}

// Write writes t as one HTML file. A trace without steps or with a step
// between nodes outside 0..Nodes-1 is refused.
func Write(w io.Writer, t Trace) error {
	if len(t.Steps) == 0 {
		return fmt.Errorf("traceview: %q has no steps to show", t.Title)
	}
	if t.Nodes < 1 {
		return fmt.Errorf("traceview: %q has %d nodes", t.Title, t.Nodes)
	}
	for i, s := range t.Steps {
		if s.From < 0 || s.From >= t.Nodes || s.To < 0 || s.To >= t.Nodes {
			return fmt.Errorf("traceview: step %d goes from node %d to %d, outside the %d nodes", i, s.From, s.To, t.Nodes)
		}
	}
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("traceview: %w", err)
	}
	return page.Execute(w, struct {
		Title string
		Data  template.JS
	}{t.Title, template.JS(data)})
}

var page = template.Must(template.New("trace").Parse(pageHTML))
