package msi_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/examples/msi"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/simrunner"
)

// swarmConfig is the swarm's shape: 4 nodes of 3 workers on 48 keys with
// 12 lines a node (evictions during conflicts), heavy faults.
func swarmConfig() simrunner.Config {
	cfg := simrunner.DefaultConfig()
	cfg.Nodes, cfg.Workers, cfg.Keys, cfg.CacheLines = 4, 3, 48, 12
	cfg.Ops, cfg.ReadRatio, cfg.Zipf, cfg.Faults = 2000, 0.6, 0.9, "heavy"
	return cfg
}

func TestCodecRoundTrip(t *testing.T) {
	c := msi.Protocol().Codec
	for _, m := range []msi.Msg{{T: msi.GetS, Key: 3}, {T: msi.GetM, Key: 1 << 40}, {T: msi.Data, Key: 2, Mode: msi.ModeS, Value: 9},
		{T: msi.Data, Key: 2, Mode: msi.ModeM, Value: 1}, {T: msi.Inv, Key: 5}, {T: msi.InvAck, Key: 5}, {T: msi.Fetch, Key: 7, Keep: true},
		{T: msi.Fetch, Key: 7}, {T: msi.WriteBack, Key: 7, Value: 12}, {T: msi.PutM, Key: 8, Value: 3}, {T: msi.PutAck, Key: 8}} {
		if err := protocolapi.RoundTrip(c, m); err != nil {
			t.Error(err)
		}
	}
}

// FuzzDecode: nothing a peer sends makes the codec panic, and what it
// accepts encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	c := msi.Protocol().Codec
	frame := make([]byte, protocol.FrameSize)
	payload, _ := protocolapi.EncodeFrame(c, frame, 0, 1, msi.Msg{T: msi.Data, Key: 4, Mode: msi.ModeM, Value: 77})
	f.Add(append([]byte(nil), frame...), payload)
	f.Fuzz(func(t *testing.T, frame, payload []byte) {
		from, to, m, err := protocolapi.DecodeFrame(c, frame, payload)
		if err != nil {
			return
		}
		again := make([]byte, protocol.FrameSize)
		p, err := protocolapi.EncodeFrame(c, again, from, to, m)
		if err != nil || !bytes.Equal(again, frame) || !bytes.Equal(p, payload) {
			t.Fatalf("%v decoded from %x/%x encodes as %x/%x (%v)", m, frame, payload, again, p, err)
		}
	})
}

// The swarm: 30 seeds under heavy faults, register and rmw, no violation.
func TestSwarmClean(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 8
	}
	for _, workload := range []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW} {
		cfg := swarmConfig()
		cfg.Workload = workload
		msgs := uint64(0)
		counts := map[string]uint64{}
		runs, failed, err := simrunner.Swarm(msi.Protocol(), cfg, 1, seeds, func(r simrunner.Result) {
			msgs += r.Messages
			for _, c := range r.Counters {
				counts[c.Name] += c.Value
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if failed != nil {
			t.Fatalf("%s: seed %d: %v (linearizable %v, bad keys %v)", workload, failed.Seed, failed.Violations, failed.Linearizable, failed.BadKeys)
		}
		if runs != seeds || msgs == 0 {
			t.Fatalf("%s: %d runs, %d messages", workload, runs, msgs)
		}
		// The swarm reaches every case of the protocol: invalidations,
		// fetches from an owner and evictions of modified lines.
		for _, name := range []string{"grants", "invalidations", "fetches", "evictions"} {
			if counts[name] == 0 {
				t.Errorf("%s: no %s in %d seeds", workload, name, runs)
			}
		}
		t.Logf("%s: %d seeds clean, %d messages, %v", workload, runs, msgs, counts)
	}
}

// Each mutant is caught within the swarm, by the check its comment names.
func TestMutantsCaught(t *testing.T) {
	for _, tc := range []struct {
		mutant, want string
	}{
		{msi.MutantGrantWithoutInvalidation, "single writer broken"},
		{msi.MutantForgetWriteBack, ""}, // porcupine: not linearizable
	} {
		cfg := swarmConfig()
		cfg.Mutant = tc.mutant
		runs, failed, err := simrunner.Swarm(msi.Protocol(), cfg, 1, 30, nil)
		if err != nil {
			t.Fatal(err)
		}
		if failed == nil {
			t.Fatalf("%s: not caught in %d seeds", tc.mutant, runs)
		}
		if tc.want != "" && !strings.Contains(strings.Join(failed.Violations, "\n"), tc.want) {
			t.Fatalf("%s: caught at seed %d, but not by %q: %v", tc.mutant, failed.Seed, tc.want, failed.Violations)
		}
		if tc.want == "" && (failed.Linearizable || len(failed.BadKeys) == 0) {
			t.Fatalf("%s: caught at seed %d, but not by porcupine: %v", tc.mutant, failed.Seed, failed.Violations)
		}
		t.Logf("%s: caught at seed %d (%d runs): %v bad keys %v", tc.mutant, failed.Seed, runs, failed.Violations, failed.BadKeys)
	}
}

// A seed reproduces its run bit for bit; another seed does not.
func TestReproducible(t *testing.T) {
	cfg := swarmConfig()
	cfg.Seed = 5
	var trace1, trace2 bytes.Buffer
	cfg.Trace = &trace1
	a, err := simrunner.Run(msi.Protocol(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Trace = &trace2
	b, _ := simrunner.Run(msi.Protocol(), cfg)
	cfg.Seed, cfg.Trace = 6, nil
	c, _ := simrunner.Run(msi.Protocol(), cfg)
	if a.TraceHash != b.TraceHash || !bytes.Equal(trace1.Bytes(), trace2.Bytes()) || a.Messages != b.Messages {
		t.Fatalf("seed 5 twice: hashes %x and %x, traces equal %v", a.TraceHash, b.TraceHash, bytes.Equal(trace1.Bytes(), trace2.Bytes()))
	}
	if a.TraceHash == c.TraceHash {
		t.Fatalf("seeds 5 and 6 have the same hash %x", a.TraceHash)
	}
	if !strings.Contains(trace1.String(), " GetM ") || !strings.Contains(trace1.String(), " PutM ") {
		t.Fatalf("the trace does not name MSI's messages: %.300s", trace1.String())
	}
}

// The scenarios chart the textbook conflicts, message by message.
func TestScenarios(t *testing.T) {
	p := msi.Protocol()
	want := map[string][]string{
		"msi-invalidate": {"GetS", "GetS", "Data", "Data", "GetM", "Inv", "Inv", "InvAck", "InvAck", "Data"},
		"msi-fetch":      {"GetM", "Data", "GetS", "Fetch", "WriteBack", "Data"},
	}
	for _, sc := range p.Scenarios {
		res, err := simrunner.RunScenario(p, sc.Name, nil)
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
		if strings.Join(got, " ") != strings.Join(want[sc.Name], " ") {
			t.Errorf("%s: messages %v, want %v", sc.Name, got, want[sc.Name])
		}
		if last := res.Steps[len(res.Steps)-1]; !strings.Contains(last.State, "home node 0:") {
			t.Errorf("%s: the chart's state %q does not show the home", sc.Name, last.State)
		}
	}
}
