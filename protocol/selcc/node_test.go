package selcc

import (
	"strings"
	"testing"
)

// §4.2: "Reader: Acquire Shared ownership [on Invalid]; Writer: Ownership
// upgrade [on Shared], Acquire Modified ownership [on Invalid]", and an
// access the memo allows needs no RDMA operation.
func TestNeedIsThePaperTable(t *testing.T) {
	cases := []struct {
		m    Memo
		a    Access
		want Step
	}{
		{Modified, Read, Hit}, {Modified, Write, Hit},
		{SharedCopy, Read, Hit}, {SharedCopy, Write, UpgradeStep},
		{Invalid, Read, AcquireSharedStep}, {Invalid, Write, AcquireExclusiveStep},
	}
	for _, c := range cases {
		if got := Need(c.m, c.a); got != c.want {
			t.Errorf("Need(%v, %v) = %v, want %v", c.m, c.a, got, c.want)
		}
	}
}

// §4.3.2: "The reader checks the return value of RDMA_FAA to determine if
// a writer is currently holding the latch. If so, the acquisition fails,
// and the reader resets its bit ... Then it sends an invalidation message
// based on the holder ID".
func TestAfterShared(t *testing.T) {
	if o := AfterShared(2, Shared(1, 3)); !o.Granted || o.Undo != 0 {
		t.Fatalf("readers only: %+v, want granted", o)
	}
	o := AfterShared(2, Exclusive(5))
	if o.Granted || !o.HasHolder || o.Holder != 5 {
		t.Fatalf("a holder: %+v, want failed naming 5", o)
	}
	if w := Exclusive(5).Add(AcquireShared(2)).Add(o.Undo); w != Exclusive(5) {
		t.Fatalf("the undo leaves %v, want %v", w, Exclusive(5))
	}
	if ts := o.Targets(); len(ts) != 1 || ts[0] != 5 {
		t.Fatalf("targets %v, want [5]", ts)
	}
}

// §4.3.2: "If the RDMA_CAS fails, the prior latch word is returned to the
// compute node that parses the shared/exclusive latch holder IDs and sends
// them invalidation messages."
func TestAfterCAS(t *testing.T) {
	e, _ := AcquireExclusive(1)
	if o := AfterCAS(1, e, 0); !o.Granted {
		t.Fatalf("free line: %+v", o)
	}
	if o := AfterCAS(1, e, Exclusive(4)); o.Granted || !o.HasHolder || o.Holder != 4 {
		t.Fatalf("held line: %+v", o)
	}
	o := AfterCAS(1, e, Shared(0, 3))
	if o.Granted || o.HasHolder || o.Readers != 1<<0|1<<3 {
		t.Fatalf("shared line: %+v", o)
	}
	// An upgrade never invalidates its own copy.
	u, _ := Upgrade(3)
	if o := AfterCAS(3, u, Shared(0, 3)); o.Readers != 1 {
		t.Fatalf("upgrade: %+v, want readers {0}", o)
	}
}

// §4.4.1: a writer meets Modified: "ownership can be atomically
// transferred from Node B to Node A by adding (A-B, 00..0)"; §4.4.2: a
// reader meets Modified: "(-B, (1<<A)|(1<<B))" and "the latest GCL is
// flushed back"; §4.4.3: a writer meets Shared: "each victim node [is
// prompted] to release its shared lock"; §5.1.2: dropped when invalid,
// evicted or in local use.
func TestOnInvalidate(t *testing.T) {
	const a, b = Node(1), Node(4)
	r := OnInvalidate(b, Modified, false, a, Write)
	if r.Reply != HandedOverExclusive || r.Memo != Invalid || r.Flush || Exclusive(b).Add(r.Delta) != Exclusive(a) {
		t.Fatalf("writer meets Modified: %+v", r)
	}
	r = OnInvalidate(b, Modified, false, a, Read)
	if r.Reply != HandedOverShared || r.Memo != SharedCopy || !r.Flush || Exclusive(b).Add(r.Delta) != Shared(a, b) {
		t.Fatalf("reader meets Modified: %+v", r)
	}
	r = OnInvalidate(b, SharedCopy, false, a, Write)
	if r.Reply != Released || r.Memo != Invalid || Shared(a, b).Add(r.Delta) != Shared(a) {
		t.Fatalf("writer meets Shared: %+v", r)
	}
	for _, c := range []struct {
		memo Memo
		busy bool
		want Access
	}{{Invalid, false, Write}, {Modified, true, Write}, {SharedCopy, true, Write}, {SharedCopy, false, Read}} {
		if r := OnInvalidate(b, c.memo, c.busy, a, c.want); r.Reply != Dropped || r.Delta != 0 || r.Memo != c.memo {
			t.Errorf("%+v: %+v, want dropped, nothing changed", c, r)
		}
	}
}

func TestStatus(t *testing.T) {
	w := Status(7, HandedOverShared)
	if ParseStatus(w, 7) != HandedOverShared || ParseStatus(w, 8) != NoReply || ParseStatus(0, 1) != NoReply {
		t.Fatal("status word round trip")
	}
}

// §5.3.1: "When the synthetic access times A = Rc/P + Wc exceed a
// predefined threshold gamma, the local thread proactively release[s]".
func TestLease(t *testing.T) {
	if Lease(8, 0, 2, 4) || !Lease(9, 0, 2, 4) || !Lease(0, 5, 2, 4) || Lease(100, 100, 2, 0) {
		t.Fatal("lease threshold")
	}
	if Backoff(2500, 1) <= Backoff(2500, 4) {
		t.Fatal("a node that retried more must wait less (§5.3.2)")
	}
}

func TestCheckLine(t *testing.T) {
	ok := []struct {
		w     Word
		memos []Memo
	}{
		{0, []Memo{Invalid, Invalid}},
		{Exclusive(1), []Memo{Invalid, Modified}},
		{Exclusive(1), []Memo{Invalid, Invalid}},              // a handover in flight
		{Exclusive(1) | Shared(0), []Memo{Invalid, Modified}}, // a failed reader's bit
		{Shared(0, 1), []Memo{SharedCopy, Invalid}},           // an acquire in flight
		{Exclusive(0), []Memo{SharedCopy, Invalid}},           // an upgrade in flight
		{Shared(0, 1), []Memo{SharedCopy, SharedCopy}},
	}
	for _, c := range ok {
		if err := CheckLine(c.w, c.memos); err != nil {
			t.Errorf("%v %v: %v", c.w, c.memos, err)
		}
	}
	bad := []struct {
		w     Word
		memos []Memo
		why   string
	}{
		{0, []Memo{Modified, Invalid}, "Modified"},
		{Exclusive(0), []Memo{Invalid, Modified}, "Modified"},
		{Shared(1), []Memo{SharedCopy, Invalid}, "shared copy"},
		{Exclusive(0), []Memo{Modified, SharedCopy}, "shared copy"},
	}
	for _, c := range bad {
		if err := CheckLine(c.w, c.memos); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%v %v: %v, want an error about %q", c.w, c.memos, err, c.why)
		}
	}
	if CheckLineAtRest(Exclusive(1), []Memo{Invalid, Invalid}) == nil || CheckLineAtRest(Shared(0, 1), []Memo{SharedCopy, SharedCopy}) != nil {
		t.Fatal("at rest the word is exactly the memos")
	}
}
