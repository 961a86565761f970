package gam_test

import (
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/gam"
)

func w(client int, key, v uint64, call, ret int64) checker.Op {
	return checker.Op{Client: client, Page: key, Kind: checker.KindWrite, Value: v, Call: call, Return: ret}
}

func r(client int, key, v uint64, call, ret int64) checker.Op {
	return checker.Op{Client: client, Page: key, Kind: checker.KindRead, Value: v, Call: call, Return: ret}
}

func TestCheckTSO(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []checker.Op
		want string // "": no violation
	}{
		{"empty", nil, ""},
		// Store buffering: both threads read 0 after their writes
		// returned (not linearizable, fine under TSO).
		{"store buffering", []checker.Op{w(0, 1, 10, 0, 1), r(0, 2, 0, 2, 3), w(1, 2, 20, 0, 1), r(1, 1, 0, 2, 3)}, ""},
		// A thread reads its own buffered write while another still
		// reads the old value, which is before it.
		{"own write first", []checker.Op{w(0, 1, 10, 0, 1), r(0, 1, 10, 2, 3), r(1, 1, 0, 2, 3), r(1, 1, 10, 4, 5)}, ""},
		{"writes in one order", []checker.Op{w(0, 1, 10, 0, 1), w(1, 1, 20, 0, 1), r(2, 1, 10, 2, 3), r(2, 1, 20, 4, 5), r(3, 1, 20, 6, 7)}, ""},
		{"invented value", []checker.Op{w(0, 1, 10, 0, 1), r(1, 1, 11, 2, 3)}, "which no write of the key wrote"},
		{"value of another key", []checker.Op{w(0, 1, 10, 0, 1), r(1, 2, 10, 2, 3)}, "which no write of the key wrote"},
		{"read from the future", []checker.Op{r(1, 1, 10, 0, 1), w(0, 1, 10, 5, 6)}, "before thread 0 issued that write"},
		{"own write not seen", []checker.Op{w(0, 1, 10, 0, 1), r(0, 1, 0, 2, 3)}, "a thread must see its own writes"},
		{"own writes out of order", []checker.Op{w(0, 1, 10, 0, 1), w(0, 1, 11, 2, 3), r(0, 1, 10, 4, 5)}, "a thread must see its own writes"},
		{"read goes back", []checker.Op{w(0, 1, 10, 0, 1), w(0, 1, 11, 2, 3), r(1, 1, 10, 4, 5), r(1, 1, 11, 6, 7), r(1, 1, 10, 8, 9)}, "its reads went back"},
		{"threads disagree", []checker.Op{w(0, 1, 10, 0, 1), w(1, 1, 20, 0, 1), r(2, 1, 10, 2, 3), r(2, 1, 20, 4, 5),
			r(3, 1, 20, 2, 3), r(3, 1, 10, 4, 5)}, "orders no single order agrees with"},
		{"value written twice", []checker.Op{w(0, 1, 10, 0, 1), w(1, 1, 10, 2, 3)}, "written twice"},
		{"rmw", []checker.Op{{Client: 0, Page: 1, Kind: checker.KindRMW, Value: 3, Call: 0, Return: 1}}, "does not take"},
	} {
		got := strings.Join(gam.CheckTSO(tc.ops), "\n")
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: %s", tc.name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A linearizable history is a TSO history: the checker passes every clean
// SEQ history the swarm makes (and it is not trivially quiet: the tests
// above fail it on purpose).
func TestCheckTSOAcceptsSEQHistories(t *testing.T) {
	cfg := swarmConfig()
	for seed := uint64(1); seed <= 5; seed++ {
		cfg.Seed = seed
		res, err := simrunnerRun(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed() {
			t.Fatalf("seed %d: %v", seed, res.Violations)
		}
		if bad := gam.CheckTSO(res.History.Ops()); len(bad) > 0 {
			t.Fatalf("seed %d: a linearizable history fails CheckTSO: %v", seed, bad[:min(3, len(bad))])
		}
	}
}
