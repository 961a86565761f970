package scenarios

import (
	"slices"
	"strings"
	"testing"
)

// figurePoints runs the points of figure name whose labels are given, on
// systems (a subset of the figure's, with its options), one seed, and
// returns the rows by "label protocol". Every row must be free of
// violations.
func figurePoints(t *testing.T, name string, labels, systems []string) map[string]CompareRow {
	t.Helper()
	f, err := FigureByName(name)
	if err != nil {
		t.Fatal(err)
	}
	base := figureBase()
	if f.Base != nil {
		base = f.Base()
	}
	opts := CompareOptions{Options: map[string]map[string]string{}, SkipStepChecks: f.SkipStepChecks}
	for _, sys := range systems {
		if !slices.Contains(f.Systems, sys) {
			t.Fatalf("%s does not run %s", name, sys)
		}
		if o, ok := f.Options[sys]; ok {
			opts.Options[sys] = o
		}
	}
	reg := testRegistry(t)
	out := map[string]CompareRow{}
	for _, p := range f.Points(base) {
		if !slices.Contains(labels, p.Label) {
			continue
		}
		rows, err := compare(reg, p.Cfg, systems, 1, p.Label, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Violations > 0 {
				t.Fatalf("%s %s: %d violations", r.Label, r.Protocol, r.Violations)
			}
			out[r.Label+" "+r.Protocol] = r
		}
	}
	if len(out) != len(labels)*len(systems) {
		t.Fatalf("%s: %d rows for %d labels and %d systems (a label is not the figure's?)", name, len(out), len(labels), len(systems))
	}
	return out
}

// Plug-in protocols run in compare beside the built-ins on the same
// workload, and their rows carry what the built-ins' do.
func TestComparePlugIns(t *testing.T) {
	reg := testRegistry(t)
	cfg := figureBase()
	cfg.Ops = 600
	rows, err := CompareWith(reg, cfg, []string{SystemSELCC, "sel", "gam-seq"}, 2, "", CompareOptions{Options: map[string]map[string]string{"gam-seq": {"memory-nodes": "2"}}})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]CompareRow{}
	for _, r := range rows {
		if r.Ops != 2*cfg.Ops || r.OpsPerSimSec <= 0 || r.P99us < r.P50us || r.Fairness <= 0 || r.Fairness > 1 || r.Violations != 0 {
			t.Errorf("%s: %+v", r.Protocol, r)
		}
		if len(r.Shares) != cfg.Nodes {
			t.Errorf("%s: shares of %d nodes, want %d", r.Protocol, len(r.Shares), cfg.Nodes)
		}
		by[r.Protocol] = r
	}
	// SEL is verbs only, no cache; GAM is messages only, handled by its
	// serial queues.
	if s := by["sel"]; s.MessagesPerOp != 0 || s.MemoryHandlerCalls != 0 || s.VerbsPerOp < 3 {
		t.Errorf("sel: %.2f messages, %.2f verbs an operation, %d handled: want verbs only, 3 at least (latch, READ, release)", s.MessagesPerOp, s.VerbsPerOp, s.MemoryHandlerCalls)
	}
	if g := by["gam-seq"]; g.VerbsPerOp != 0 || g.MessagesPerOp == 0 || g.MemoryHandlerCalls == 0 {
		t.Errorf("gam-seq: %.2f messages, %.2f verbs an operation, %d handled: want messages only", g.MessagesPerOp, g.VerbsPerOp, g.MemoryHandlerCalls)
	}
	// The memory nodes change GAM's run: its homes are no longer the
	// compute nodes.
	plain, err := CompareIn(reg, cfg, []string{"gam-seq"}, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	if plain[0].MessagesPerOp == by["gam-seq"].MessagesPerOp {
		t.Errorf("gam-seq with and without memory nodes sent %.3f messages an operation both: the option did not reach it", plain[0].MessagesPerOp)
	}
	for _, bad := range []struct {
		systems []string
		opts    map[string]map[string]string
		cfg     func(*SimConfig)
		want    string
	}{
		{[]string{"raft"}, nil, nil, "none of"},
		{[]string{"sel"}, map[string]map[string]string{"sel": {"bogus": "1"}}, nil, "no option"},
		{[]string{SystemSELCC}, map[string]map[string]string{SystemSELCC: {"bogus": "2"}}, nil, `protocol selcc has no option "bogus"`},
		{[]string{SystemScaleStore}, map[string]map[string]string{SystemScaleStore: {OptionComputeNodes: "2"}}, nil, "compute nodes are its --nodes"},
		{[]string{"sel"}, map[string]map[string]string{"gam-seq": {"memory-nodes": "2"}}, nil, "not among"},
		{[]string{"sel"}, nil, func(c *SimConfig) { c.SingleWriter = true }, "does not model a single writer"},
		{[]string{"gam-tso"}, nil, func(c *SimConfig) { c.Workload = "rmw" }, "does not support the rmw workload"},
	} {
		c := cfg
		if bad.cfg != nil {
			bad.cfg(&c)
		}
		if _, err := CompareWith(reg, c, bad.systems, 1, "", CompareOptions{Options: bad.opts}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v with %v: error %v, want one saying %q", bad.systems, bad.opts, err, bad.want)
		}
	}
}

// SELCC Fig. 13: with locality SELCC's cache keeps what a thread comes
// back to, so at 64 threads it is above SEL (every access pays its verbs)
// and above GAM and ScaleStore at every read ratio. GAM's serial queues
// (one worker a memory node) flatten its curve: from 32 to 64 threads it
// gains far less than SELCC, and without the queue's service time it
// would go much further.
func TestSELCCFigure13Locality(t *testing.T) {
	systems := []string{SystemSELCC, "sel", "gam-tso", "gam-seq", SystemScaleStore}
	rows := figurePoints(t, "selcc-fig13", []string{"reads=95% threads=64", "reads=50% threads=64", "reads=0% threads=64"}, systems)
	for _, rr := range []string{"95%", "50%", "0%"} {
		at := "reads=" + rr + " threads=64 "
		selcc := rows[at+SystemSELCC].OpsPerSimSec
		for _, other := range systems[1:] {
			if o := rows[at+other].OpsPerSimSec; o >= selcc {
				t.Errorf("%s reads, 64 threads, locality: %s %.0f ops/s, SELCC %.0f: want SELCC above (the paper: above every system)", rr, other, o, selcc)
			}
		}
		if sel := rows[at+"sel"].OpsPerSimSec; selcc < 1.2*sel {
			t.Errorf("%s reads, 64 threads, locality: SELCC %.0f ops/s, SEL %.0f: want 1.2x at least (the paper: 1.26x to 1.85x)", rr, selcc, sel)
		}
	}
	scaling := figurePoints(t, "selcc-fig13", []string{"reads=50% threads=32"}, []string{SystemSELCC, "gam-seq"})
	selccGain := rows["reads=50% threads=64 selcc"].OpsPerSimSec / scaling["reads=50% threads=32 selcc"].OpsPerSimSec
	gamGain := rows["reads=50% threads=64 gam-seq"].OpsPerSimSec / scaling["reads=50% threads=32 gam-seq"].OpsPerSimSec
	if gamGain > 1.3 || selccGain < 1.6 {
		t.Errorf("50%% reads, 32 to 64 threads: GAM SEQ gains %.2fx, SELCC %.2fx: want GAM flat (1.3x at most) and SELCC near linear (1.6x at least)", gamGain, selccGain)
	}
	// The cause is the queue: without its service time GAM goes on.
	f, _ := FigureByName("selcc-fig13")
	var cfg SimConfig
	for _, p := range f.Points(f.Base()) {
		if p.Label == "reads=50% threads=64" {
			cfg = p.Cfg
		}
	}
	free, err := compare(testRegistry(t), cfg, []string{"gam-seq"}, 1, "", CompareOptions{SkipStepChecks: true,
		Options: map[string]map[string]string{"gam-seq": {"memory-nodes": "2", "service-ns": "0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if q := rows["reads=50% threads=64 gam-seq"].OpsPerSimSec; free[0].OpsPerSimSec < 1.5*q || free[0].Violations > 0 {
		t.Errorf("50%% reads, 64 threads: GAM SEQ %.0f ops/s with its serial queue's 500 ns an item, %.0f without (%d violations): want 1.5x at least without", q, free[0].OpsPerSimSec, free[0].Violations)
	}
}

// SELCC Fig. 14: under zipf 0.99, read-heavy, SELCC's cache serves the
// hot lines and it is above SEL at 64 threads; write-intensive and
// write-only, the hot lines' invalidations cost SELCC more than SEL's
// latch at 8 threads, and SEL falls behind SELCC as threads are added.
func TestSELCCFigure14Skew(t *testing.T) {
	rows := figurePoints(t, "selcc-fig14", []string{"reads=95% threads=64", "reads=50% threads=8", "reads=50% threads=64",
		"reads=0% threads=8", "reads=0% threads=64"}, []string{SystemSELCC, "sel"})
	ops := func(label, sys string) float64 { return rows[label+" "+sys].OpsPerSimSec }
	if selcc, sel := ops("reads=95% threads=64", SystemSELCC), ops("reads=95% threads=64", "sel"); selcc <= 1.05*sel {
		t.Errorf("95%% reads, 64 threads: SELCC %.0f ops/s, SEL %.0f: want SELCC above by 5%% at least (the paper: 3.09x)", selcc, sel)
	}
	for _, rr := range []string{"50%", "0%"} {
		few, many := "reads="+rr+" threads=8", "reads="+rr+" threads=64"
		if selcc, sel := ops(few, SystemSELCC), ops(few, "sel"); sel <= 1.2*selcc {
			t.Errorf("%s reads, 8 threads: SEL %.0f ops/s, SELCC %.0f: want SEL above by 20%% at least", rr, sel, selcc)
		}
		before, after := ops(few, "sel")/ops(few, SystemSELCC), ops(many, "sel")/ops(many, SystemSELCC)
		if after >= before/1.5 || after >= 1 {
			t.Errorf("%s reads: SEL/SELCC %.2f at 8 threads, %.2f at 64: want SEL to fall below SELCC as threads grow", rr, before, after)
		}
	}
}

// ScaleStore §6.4: ScaleStore above GAM in SEQ mode in every cell of the
// table, and above GAM in TSO mode in every cell but the write-intensive
// scale-out (docs/figures.md: TSO's writes do not wait). GAM's one worker
// thread caps the single node at 2M operations a second (500 ns an item)
// however many threads, while ScaleStore's 20 threads scale.
func TestScaleStoreAboveGAM(t *testing.T) {
	f, err := FigureByName("scalestore-gam")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := RunFigureIn(testRegistry(t), f, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]float64{}
	for _, r := range rows {
		if r.Violations > 0 {
			t.Fatalf("%s %s: %d violations", r.Label, r.Protocol, r.Violations)
		}
		at[r.Label+" "+r.Protocol] = r.OpsPerSimSec
	}
	if len(at) != 24 {
		t.Fatalf("%d rows, want 24 (8 cells, 3 systems)", len(at))
	}
	for _, r := range rows {
		if r.Protocol == SystemScaleStore {
			continue
		}
		ss := at[r.Label+" "+SystemScaleStore]
		tsoWrites := r.Protocol == "gam-tso" && strings.HasPrefix(r.Label, "reads=50% scale-out")
		if !tsoWrites && r.OpsPerSimSec >= ss {
			t.Errorf("%s: %s %.0f ops/s, ScaleStore %.0f: want ScaleStore above", r.Label, r.Protocol, r.OpsPerSimSec, ss)
		}
	}
	for _, rr := range []string{"100%", "50%"} {
		one, twenty := "reads="+rr+" scale-up nodes=1 threads=1 ", "reads="+rr+" scale-up nodes=1 threads=20 "
		if g := at[twenty+"gam-seq"]; g > 2.01e6 || g/at[one+"gam-seq"] > 4 {
			t.Errorf("%s reads, one node: GAM SEQ %.0f ops/s at 20 threads, %.0f at 1: want its serial worker's cap (2M a second)", rr, g, at[one+"gam-seq"])
		}
		if s := at[twenty+SystemScaleStore] / at[one+SystemScaleStore]; s < 10 {
			t.Errorf("%s reads, one node: ScaleStore gains %.1fx from 1 to 20 threads: want 10x at least", rr, s)
		}
	}
}

// A built-in's options reach its run loop through compare: SELCC's lines
// on one memory node, without its lease and its starved-writer priority,
// run differently on the same seed.
func TestCompareBuiltInOptions(t *testing.T) {
	cfg := figureBase()
	cfg.Ops = 600
	run := func(opts map[string]string) CompareRow {
		t.Helper()
		rows, err := CompareWith(testRegistry(t), cfg, []string{SystemSELCC}, 1, "", CompareOptions{Options: map[string]map[string]string{SystemSELCC: opts}})
		if err != nil || len(rows) != 1 || rows[0].Violations != 0 {
			t.Fatalf("%v: %v %+v", opts, err, rows)
		}
		return rows[0]
	}
	plain, off := run(nil), run(map[string]string{"memory-nodes": "1", "gamma": "0", "priority": "off"})
	if plain.OpsPerSimSec == off.OpsPerSimSec && plain.P99us == off.P99us {
		t.Errorf("memory-nodes=1 gamma=0 priority=off ran as the defaults did: %+v", off)
	}
}
