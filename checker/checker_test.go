package checker

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func w(client int, page, value uint64, call, ret int64) Op {
	return Op{Client: client, Page: page, Kind: KindWrite, Value: value, Call: call, Return: ret}
}

func r(client int, page, value uint64, call, ret int64) Op {
	return Op{Client: client, Page: page, Kind: KindRead, Value: value, Call: call, Return: ret}
}

func mustCheck(t *testing.T, ops []Op) Result {
	t.Helper()
	res, _ := Check(ops, 0)
	if res.Unknown {
		t.Fatalf("Check with no timeout returned Unknown: %+v", res)
	}
	return res
}

func TestSequentialLinearizable(t *testing.T) {
	ops := []Op{
		r(0, 1, 0, 0, 10), // pages start at 0
		w(0, 1, 5, 20, 30),
		w(1, 2, 9, 25, 35),
		r(1, 1, 5, 40, 50),
		r(0, 2, 9, 40, 50),
		w(2, 3, 1, 60, 70),
		w(2, 1, 6, 80, 90),
		r(0, 1, 6, 100, 110),
		r(1, 3, 1, 100, 110),
		r(2, 2, 9, 120, 130),
		w(0, 3, 2, 140, 140), // zero-duration op is valid
		r(1, 3, 2, 150, 160),
	}
	res := mustCheck(t, ops)
	if !res.Ok || len(res.BadPages) != 0 || res.Partitions != 3 {
		t.Fatalf("got %+v, want Ok with 3 partitions and no bad pages", res)
	}
}

func TestStaleRead(t *testing.T) {
	ops := []Op{
		w(0, 1, 1, 0, 10),
		w(0, 2, 1, 0, 10),
		w(1, 3, 4, 0, 10),
		w(0, 2, 2, 20, 30), // completes strictly before the read's call
		r(1, 2, 1, 40, 50), // stale: returns the value overwritten at 30
		r(2, 1, 1, 40, 50),
		r(2, 3, 4, 60, 70),
	}
	res := mustCheck(t, ops)
	if res.Ok {
		t.Fatalf("stale read accepted: %+v", res)
	}
	if !slices.Equal(res.BadPages, []uint64{2}) {
		t.Fatalf("BadPages = %v, want [2]", res.BadPages)
	}
	if res.Partitions != 3 {
		t.Fatalf("Partitions = %d, want 3", res.Partitions)
	}
}

func TestBadPagesSortedAndComplete(t *testing.T) {
	// Stale reads on pages 30, 7 and 19 (given out of order), good pages in between.
	var ops []Op
	for _, page := range []uint64{30, 4, 7, 12, 19, 1} {
		ops = append(ops, w(0, page, 1, 0, 10), w(0, page, 2, 20, 30))
		stale := page == 30 || page == 7 || page == 19
		if stale {
			ops = append(ops, r(1, page, 1, 40, 50))
		} else {
			ops = append(ops, r(1, page, 2, 40, 50))
		}
	}
	res := mustCheck(t, ops)
	if res.Ok || !slices.Equal(res.BadPages, []uint64{7, 19, 30}) || res.Partitions != 6 {
		t.Fatalf("got %+v, want not Ok with BadPages [7 19 30] and 6 partitions", res)
	}
}

func TestConcurrentWriteRead(t *testing.T) {
	for _, got := range []uint64{0, 7} {
		ops := []Op{
			w(0, 42, 7, 100, 200),
			r(1, 42, got, 150, 250), // overlaps the write: old or new value is fine
		}
		if res := mustCheck(t, ops); !res.Ok {
			t.Errorf("read returning %d during a concurrent write rejected: %+v", got, res)
		}
	}
	// Intervals touching at one nanosecond are concurrent (closed intervals).
	ops := []Op{w(0, 42, 7, 100, 200), r(1, 42, 0, 200, 300)}
	if res := mustCheck(t, ops); !res.Ok {
		t.Errorf("read called at the write's return instant rejected: %+v", res)
	}
	// One nanosecond later the old value is stale.
	ops = []Op{w(0, 42, 7, 100, 200), r(1, 42, 0, 201, 300)}
	if res := mustCheck(t, ops); res.Ok || !slices.Equal(res.BadPages, []uint64{42}) {
		t.Errorf("stale read one ns after the write accepted: %+v", res)
	}
}

func TestReadOfUnwrittenValue(t *testing.T) {
	ops := []Op{
		w(0, 5, 1, 0, 10),
		w(1, 5, 2, 5, 15),
		r(2, 5, 3, 0, 20), // 3 is never written
	}
	res := mustCheck(t, ops)
	if res.Ok || !slices.Equal(res.BadPages, []uint64{5}) {
		t.Fatalf("got %+v, want not Ok with BadPages [5]", res)
	}
}

func TestEmptyHistory(t *testing.T) {
	res := mustCheck(t, nil)
	if !res.Ok || res.Partitions != 0 {
		t.Fatalf("got %+v, want Ok with no partitions", res)
	}
}

func TestCheckPanicsOnInvalidOp(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Check accepted an op with return < call")
		}
	}()
	Check([]Op{w(0, 1, 1, 10, 5)}, 0)
}

// TestRandomLinearizable simulates registers whose operations take effect at
// a random instant inside their interval: every such history is linearizable.
func TestRandomLinearizable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type pending struct {
		op Op
		at int64
	}
	for round := 0; round < 20; round++ {
		var evs []pending
		for i := 0; i < 400; i++ {
			call := rng.Int64N(10000)
			ret := call + rng.Int64N(300)
			at := call + rng.Int64N(ret-call+1)
			op := Op{Client: rng.IntN(8), Page: rng.Uint64N(5), Kind: KindRead, Call: call, Return: ret}
			if rng.IntN(2) == 0 {
				op.Kind, op.Value = KindWrite, uint64(i+1)
			}
			evs = append(evs, pending{op, at})
		}
		slices.SortStableFunc(evs, func(a, b pending) int { return int(a.at - b.at) })
		regs := map[uint64]uint64{}
		ops := make([]Op, len(evs))
		for i, e := range evs {
			if e.op.Kind == KindWrite {
				regs[e.op.Page] = e.op.Value
			} else {
				e.op.Value = regs[e.op.Page]
			}
			ops[i] = e.op
		}
		rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
		if res := mustCheck(t, ops); !res.Ok {
			t.Fatalf("round %d: linearizable history rejected: %+v", round, res)
		}
		// Corrupt one read to return a value never written: must be caught.
		for i := range ops {
			if ops[i].Kind == KindRead {
				ops[i].Value = 1 << 40
				res := mustCheck(t, ops)
				if res.Ok || !slices.Equal(res.BadPages, []uint64{ops[i].Page}) {
					t.Fatalf("round %d: corrupted read on page %d: got %+v", round, ops[i].Page, res)
				}
				break
			}
		}
	}
}

func TestJSONLinesFormat(t *testing.T) {
	h := NewHistory(2)
	h.Add(Op{Client: 1, Page: 42, Kind: KindWrite, Value: 7, Call: 100, Return: 180})
	h.Add(Op{Client: 0, Page: 0, Kind: KindRead, Value: 0, Call: -5, Return: 0})
	var buf bytes.Buffer
	if err := h.WriteJSONLines(&buf); err != nil {
		t.Fatal(err)
	}
	want := `{"client":1,"page":42,"op":"write","value":7,"call":100,"return":180}` + "\n" +
		`{"client":0,"page":0,"op":"read","value":0,"call":-5,"return":0}` + "\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestJSONLinesRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	h := NewHistory(1000)
	extremes := []Op{
		{Client: -3, Page: ^uint64(0), Kind: KindWrite, Value: ^uint64(0), Call: -1 << 63, Return: 1<<63 - 1},
		{Client: 0, Page: 0, Kind: KindRead, Value: 0, Call: 0, Return: 0},
	}
	for _, op := range extremes {
		h.Add(op)
	}
	for h.Len() < 1000 {
		call := rng.Int64N(1<<62) - 1<<61
		op := Op{Client: rng.IntN(100), Page: rng.Uint64(), Kind: KindRead, Value: rng.Uint64(),
			Call: call, Return: call + rng.Int64N(1<<20)}
		if rng.IntN(2) == 0 {
			op.Kind = KindWrite
		}
		h.Add(op)
	}
	var buf bytes.Buffer
	if err := h.WriteJSONLines(&buf); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != h.Len() {
		t.Fatalf("%d lines for %d ops", n, h.Len())
	}
	got, err := ReadJSONLines(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h.Ops()) {
		for i := range got {
			if i >= len(h.Ops()) || got[i] != h.Ops()[i] {
				t.Fatalf("op %d: got %+v, want %+v", i, got[i], h.Ops()[i])
			}
		}
		t.Fatalf("got %d ops, want %d", len(got), h.Len())
	}
}

func TestReadJSONLinesNonCanonical(t *testing.T) {
	// Valid JSON in another layout goes through encoding/json.
	in := "\n{ \"return\": 9, \"call\": 3, \"op\": \"re\\u0061d\", \"page\": 2, \"value\": 1, \"client\": 4 }\r\n\n"
	got, err := ReadJSONLines(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Op{{Client: 4, Page: 2, Kind: KindRead, Value: 1, Call: 3, Return: 9}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestReadJSONLinesRejects(t *testing.T) {
	good := `{"client":1,"page":42,"op":"write","value":7,"call":100,"return":180}`
	cases := map[string]string{
		"bad op":          `{"client":1,"page":42,"op":"cas","value":7,"call":100,"return":180}`,
		"return < call":   `{"client":1,"page":42,"op":"read","value":7,"call":100,"return":99}`,
		"broken json":     `{"client":1,"page":42,"op":"read","value":7,"call":100,`,
		"missing op":      `{"client":1,"page":42,"value":7,"call":100,"return":180}`,
		"unknown field":   `{"client":1,"page":42,"op":"read","value":7,"call":100,"return":180,"x":1}`,
		"trailing data":   good + ` {}`,
		"leading zero":    `{"client":01,"page":42,"op":"read","value":7,"call":100,"return":180}`,
		"negative page":   `{"client":1,"page":-42,"op":"read","value":7,"call":100,"return":180}`,
		"uint64 overflow": `{"client":1,"page":18446744073709551616,"op":"read","value":7,"call":100,"return":180}`,
		"fraction":        `{"client":1,"page":42,"op":"read","value":7.5,"call":100,"return":180}`,
	}
	for name, bad := range cases {
		in := good + "\n" + good + "\n" + bad + "\n" + good + "\n"
		ops, err := ReadJSONLines(strings.NewReader(in))
		if err == nil {
			t.Errorf("%s: accepted, got %+v", name, ops)
			continue
		}
		if !strings.Contains(err.Error(), "line 3") {
			t.Errorf("%s: error %q does not name line 3", name, err)
		}
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	h := NewHistory(200)
	op := w(1, 2, 3, 4, 5)
	allocs := testing.AllocsPerRun(100, func() { h.Add(op) })
	if allocs != 0 {
		t.Fatalf("Add allocated %v times per call within capacity", allocs)
	}
	if h.Len() != 101 { // AllocsPerRun runs the function once more to warm up
		t.Fatalf("Len = %d, want 101", h.Len())
	}
}

func TestWriteVisualization(t *testing.T) {
	for name, ops := range map[string][]Op{
		"ok":      {w(0, 42, 7, 100, 200), r(1, 42, 7, 150, 250), r(0, 3, 0, 0, 10)},
		"illegal": {w(0, 42, 7, 100, 200), r(1, 42, 7, 210, 220), r(1, 42, 0, 300, 400), r(0, 3, 0, 0, 10)},
	} {
		res, info := Check(ops, 0)
		if res.Ok != (name == "ok") {
			t.Fatalf("%s: unexpected result %+v", name, res)
		}
		path := filepath.Join(t.TempDir(), name+".html")
		if err := WriteVisualization(path, info); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if name == "ok" {
			// Decided by zones: porcupine never ran, and there is
			// nothing to draw, but an empty drawing is still a page.
			if res.Decided != 2 || !strings.Contains(string(data), "<html") {
				t.Fatalf("ok: decided %d pages by zones, visualization of %d bytes", res.Decided, len(data))
			}
			continue
		}
		// The data is embedded with json.Marshal, which escapes ">" as \u003e.
		s := string(data)
		for _, want := range []string{"<html", "write 7", `read -\u003e 7`, "page 42"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s: visualization (%d bytes) lacks %q", name, len(s), want)
			}
		}
	}
}

// linearizableHistory builds n operations over pages registers with a few
// concurrent clients, every operation taking effect inside its interval.
func linearizableHistory(n, pages int) []Op {
	rng := rand.New(rand.NewPCG(5, 6))
	regs := make([]uint64, pages)
	ops := make([]Op, 0, n)
	for i := 0; i < n; i++ {
		// Operations take effect in order i at time 10*i; intervals widen around it.
		at := int64(10 * i)
		op := Op{Client: i % 16, Page: uint64(rng.IntN(pages)), Call: at - rng.Int64N(40), Return: at + rng.Int64N(40)}
		if rng.IntN(3) == 0 {
			op.Kind, op.Value = KindWrite, uint64(i+1)
			regs[op.Page] = op.Value
		} else {
			op.Kind, op.Value = KindRead, regs[op.Page]
		}
		ops = append(ops, op)
	}
	return ops
}

func BenchmarkCheck100k(b *testing.B) {
	ops := linearizableHistory(100_000, 1000)
	b.ResetTimer()
	for b.Loop() {
		if res, _ := Check(ops, 0); !res.Ok {
			b.Fatalf("%+v", res)
		}
	}
}

func BenchmarkWriteJSONLines1M(b *testing.B) {
	h := NewHistory(1_000_000)
	for _, op := range linearizableHistory(1_000_000, 1000) {
		h.Add(op)
	}
	var buf bytes.Buffer
	b.ResetTimer()
	for b.Loop() {
		buf.Reset()
		if err := h.WriteJSONLines(&buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadJSONLines1M(b *testing.B) {
	h := NewHistory(1_000_000)
	for _, op := range linearizableHistory(1_000_000, 1000) {
		h.Add(op)
	}
	var buf bytes.Buffer
	if err := h.WriteJSONLines(&buf); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ReadJSONLines(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
