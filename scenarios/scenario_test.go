package scenarios

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/scalestore-go/scalestore/protocol"
)

// TestScenarioCharts runs the named scenarios and compares their message
// charts with testdata/scenarios. A protocol change shows as a readable
// diff; regenerate with: go test ./scenarios -run TestScenarioCharts -rewrite
func TestScenarioCharts(t *testing.T) {
	datadriven.RunTest(t, "testdata/scenarios", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "run" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		cfg := ScenarioConfig{Protocol: protocol.Chaining, Requesters: 3}
		d.ScanArgs(t, "name", &cfg.Name)
		if d.HasArg("requesters") {
			d.ScanArgs(t, "requesters", &cfg.Requesters)
		}
		if d.HasArg("protocol") {
			var p string
			d.ScanArgs(t, "protocol", &p)
			v, err := protocol.ParseVariant(p)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			cfg.Protocol = v
		}
		res, err := RunScenario(cfg)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		var b bytes.Buffer
		WriteChart(&b, res)
		return b.String()
	})
}

// The message counts the issue states for the paper's figures.
func TestScenarioMessageCounts(t *testing.T) {
	for name, want := range map[string]int{"base-case": 2, "exclusive-conflict": 4, "shared-conflict": 6, "upgrade": 4, "eviction-dirty": 3} {
		res, err := RunScenario(ScenarioConfig{Name: name, Protocol: protocol.Chaining})
		if err != nil {
			t.Fatal(err)
		}
		if res.Messages != want || len(res.Violations) > 0 {
			t.Errorf("%s: %d messages (want %d), violations %v", name, res.Messages, want, res.Violations)
		}
	}
}

// Chaining sends fewer messages than the FIFO queue, which sends fewer than
// busy polling, and with chaining the page moves in the order the directory
// accepted the requests (paper §3.4, Fig. 5).
func TestChainingBeatsBaselines(t *testing.T) {
	for _, n := range []int{2, 6, 12} {
		msgs := map[protocol.Variant]int{}
		for _, v := range []protocol.Variant{protocol.Chaining, protocol.FIFO, protocol.Polling} {
			res, err := RunScenario(ScenarioConfig{Name: "chaining", Protocol: v, Requesters: n})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Violations) > 0 {
				t.Fatalf("%v n=%d: %v", v, n, res.Violations)
			}
			if len(res.GrantOrder) != n {
				t.Fatalf("%v n=%d: %d grants", v, n, len(res.GrantOrder))
			}
			if v == protocol.Chaining && fmt.Sprint(res.GrantOrder) != fmt.Sprint(res.RequestOrder) {
				t.Fatalf("chaining n=%d: grant order %v differs from request order %v", n, res.GrantOrder, res.RequestOrder)
			}
			msgs[v] = res.Messages
		}
		if !(msgs[protocol.Chaining] < msgs[protocol.FIFO] && msgs[protocol.FIFO] < msgs[protocol.Polling]) {
			t.Fatalf("n=%d: messages chaining %d, fifo %d, polling %d", n, msgs[protocol.Chaining], msgs[protocol.FIFO], msgs[protocol.Polling])
		}
	}
}

func TestUnknownScenario(t *testing.T) {
	if _, err := RunScenario(ScenarioConfig{Name: "nope"}); err == nil {
		t.Fatal("unknown scenario ran")
	}
	if _, err := RunScenario(ScenarioConfig{Name: "chaining", Requesters: 0}); err == nil {
		t.Fatal("chaining with no requesters ran")
	}
}

// SELCC's figures cost what its paper draws: Fig. 7 one invalidation per
// case, an ownership handover by FAA and the line forwarded by WRITE;
// Fig. 8 one invalidation per sharer and a second CAS (the extra round
// trip the paper accepts against the RPC design).
func TestSELCCScenarioCosts(t *testing.T) {
	for name, want := range map[string][2]int{"selcc-modified-conflict": {2, 12}, "selcc-shared-invalidation": {2, 8}} {
		res, err := RunScenario(ScenarioConfig{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if res.Messages != want[0] || len(res.Steps)-res.Messages != want[1] || len(res.Violations) > 0 {
			t.Errorf("%s: %d messages, %d verbs (want %v), violations %v", name, res.Messages, len(res.Steps)-res.Messages, want, res.Violations)
		}
	}
}
