package gam_test

import (
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
)

// The scenarios chart a conflict message by message, and their histories
// show what each mode promises.
func TestScenarios(t *testing.T) {
	for _, tc := range []struct {
		p    protocolapi.Protocol
		msgs string
		// ops checks the history: the ops of the scenario's script, in
		// its order per client.
		ops func(t *testing.T, ops []checker.Op)
	}{
		{seq(), "ReadShared ReadShared Grant Grant ReadExclusive Invalidate InvalidateAck Grant FetchShared WriteBack",
			func(t *testing.T, ops []checker.Op) {
				// The home's own read (client 0) waits for the fetch and
				// reads node 1's write.
				if w, r := ops[2], ops[3]; w.Kind != checker.KindWrite || r.Client != 0 || r.Value != w.Value {
					t.Errorf("the home read %+v after the write %+v", r, w)
				}
			}},
		{tso(), "ReadShared Grant ReadExclusive Invalidate InvalidateAck Grant ReadShared FetchShared WriteBack Grant",
			func(t *testing.T, ops []checker.Op) {
				var w1, w2, own, other, later checker.Op
				for _, op := range ops {
					switch {
					case op.Client == 1 && op.Kind == checker.KindWrite && w1.Kind == "":
						w1 = op
					case op.Client == 1 && op.Kind == checker.KindWrite:
						w2 = op
					case op.Client == 1:
						own = op
					case op.Client == 2 && op.Call == 30_000:
						other = op
					case op.Client == 2 && op.Call == 90_000:
						later = op
					}
				}
				if w1.Return != w1.Call || w2.Return != w2.Call {
					t.Errorf("TSO writes waited: %+v %+v", w1, w2)
				}
				if own.Value != w2.Value {
					t.Errorf("node 1 read %d, not its own newest write %d", own.Value, w2.Value)
				}
				if other.Value != 0 || later.Value != w2.Value {
					t.Errorf("node 2 read %d while the writes were buffered (want 0) and %d later (want %d)", other.Value, later.Value, w2.Value)
				}
			}},
	} {
		for _, sc := range tc.p.Scenarios {
			res, err := simrunner.RunScenario(tc.p, sc.Name, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Result.Failed() {
				t.Fatalf("%s: %v", sc.Name, res.Result.Violations)
			}
			var got []string
			for _, s := range res.Steps {
				got = append(got, strings.Fields(s.Label)[0])
			}
			if strings.Join(got, " ") != tc.msgs {
				t.Errorf("%s: messages %v, want %s", sc.Name, got, tc.msgs)
			}
			if last := res.Steps[len(res.Steps)-1]; !strings.Contains(last.State, "home node 0:") || !strings.Contains(last.State, "n2:") {
				t.Errorf("%s: the chart's state %q does not show the home and the caches", sc.Name, last.State)
			}
			tc.ops(t, res.Result.History.Ops())
		}
	}
}
