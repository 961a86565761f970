package protocol

import "testing"

// Each test names the sentence of the paper (or the decision of
// docs/protocol.md) it checks.

func newDir(t *testing.T, v Variant) (*Directory, PID) {
	t.Helper()
	d := NewDirectory(0, v, 16)
	pid, ok := d.Allocate(1)
	if !ok {
		t.Fatal("allocate failed")
	}
	return d, pid
}

func req(t *testing.T, d *Directory, from NodeID, pid PID, m Mode) Decision {
	t.Helper()
	dec, err := d.Request(from, pid, m, false)
	if err != nil {
		t.Fatalf("request from %d: %v", from, err)
	}
	return dec
}

func evictAll(t *testing.T, d *Directory, n NodeID, pid PID, epoch uint32, served uint32) EvictDecision {
	t.Helper()
	dec, err := d.Evict(n, EvictEntry{PID: pid, Epoch: epoch, Served: served})
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

// "The directory node id is encoded in the first 8 bits of the PID" and the
// directory is "the node on which the page is initially created".
func TestAllocateMakesCreatorOwner(t *testing.T) {
	d, pid := newDir(t, Chaining)
	m := d.Meta(pid)
	if pid.Dir() != 0 || m.Mode != ModeExclusive || m.Owner != 1 || !m.Stale {
		t.Fatalf("after allocation: %+v", m)
	}
	small := NewDirectory(3, Chaining, 1)
	if _, ok := small.Allocate(0); !ok {
		t.Fatal("first allocation failed")
	}
	if _, ok := small.Allocate(0); ok {
		t.Fatal("allocation beyond capacity succeeded")
	}
}

// Base case (Fig. 3): no conflict, the directory answers with the page.
func TestBaseCase(t *testing.T) {
	d, pid := newDir(t, Chaining)
	if evictAll(t, d, 1, pid, 0, 0) != EvictPull {
		t.Fatal("dirty page not pulled")
	}
	if err := d.PulledPage(1, pid); err != nil {
		t.Fatal(err)
	}
	if err := d.Persisted(pid); err != nil {
		t.Fatal(err)
	}
	dec := req(t, d, 2, pid, ModeShared)
	if dec.Action != ActGrantFromSSD {
		t.Fatalf("base case: %v", dec.Action)
	}
	if m := d.Meta(pid); m.Mode != ModeShared || !m.Sharers.Has(2) {
		t.Fatalf("metadata not updated: %+v", m)
	}
}

// "Regardless of whether the requester needs node-exclusive or node-shared
// ownership, both are incompatible with a node-exclusive ownership of another
// node ... replies in ④ with the conflicting node id."
func TestExclusiveConflictForwardsToOwner(t *testing.T) {
	for _, mode := range []Mode{ModeShared, ModeExclusive} {
		d, pid := newDir(t, Chaining)
		dec := req(t, d, 2, pid, mode)
		if dec.Action != ActForward || dec.Target != 1 || dec.Pred != 0 {
			t.Fatalf("%v: %+v", mode, dec)
		}
	}
}

// Anticipatory chaining: "when the second request from N_1 arrives, D
// directly forwards N_1 to the predecessor N_0 ... even though the page might
// not have been physically moved yet."
func TestChainingForwardsToPredecessor(t *testing.T) {
	d, pid := newDir(t, Chaining)
	for i, n := range []NodeID{2, 3, 4} {
		dec := req(t, d, n, pid, ModeExclusive)
		want := NodeID(1)
		if i > 0 {
			want = n - 1
		}
		if dec.Target != want {
			t.Fatalf("request of %d forwarded to %d, want predecessor %d", n, dec.Target, want)
		}
	}
}

// The conflict epoch rises at a shared conflict (upgrades included) and
// nowhere else in accept: not at an exclusive conflict, a copy or a new
// copy source (docs/protocol.md, "Epoch bumps").
func TestEpochRisesOnlyAtSharedConflicts(t *testing.T) {
	d, pid := newDir(t, Chaining) // 1 owns it at epoch 0
	steps := []struct {
		from NodeID
		mode Mode
		want uint32
	}{
		{2, ModeExclusive, 0}, // exclusive conflict
		{3, ModeShared, 0},    // exclusive conflict, X to S: 2 is the source
		{4, ModeShared, 0},    // a copy from the source
		{3, ModeExclusive, 1}, // upgrade: a shared conflict
		{2, ModeShared, 1},    // exclusive conflict
		{4, ModeExclusive, 2}, // shared conflict
	}
	for i, s := range steps {
		if dec := req(t, d, s.from, pid, s.mode); dec.Epoch != s.want || d.Meta(pid).Epoch != s.want {
			t.Fatalf("step %d (%d asks %v): epoch %d, page's %d, want %d", i, s.from, s.mode, dec.Epoch, d.Meta(pid).Epoch, s.want)
		}
	}
}

// Owner stability: "D can thus detect that the current conflict epoch does
// not match the epoch from the eviction request ... D declines the eviction".
// The directory detects it by the holder of record: 1 is no longer the
// owner once 2 is chained behind it (decision 5 of docs/protocol.md).
func TestOwnerStability(t *testing.T) {
	d, pid := newDir(t, Chaining)
	req(t, d, 2, pid, ModeExclusive) // 2 chained behind 1
	if got := evictAll(t, d, 1, pid, 0, 0); got != EvictDeclined {
		t.Fatalf("eviction of a chained predecessor: %v", got)
	}
	// The successor, once it holds the page (at epoch 0: no shared
	// conflict), may evict.
	if got := evictAll(t, d, 2, pid, 0, 0); got != EvictPull {
		t.Fatalf("eviction of the current owner: %v", got)
	}
	// While the dirty page is on its way to the SSD, requests park.
	if dec := req(t, d, 3, pid, ModeShared); dec.Action != ActParked {
		t.Fatalf("request during write-back: %v", dec.Action)
	}
	if err := d.PulledPage(2, pid); err != nil {
		t.Fatal(err)
	}
	if err := d.Persisted(pid); err != nil {
		t.Fatal(err)
	}
	from, mode, ok := d.NextParked(pid)
	if !ok || from != 3 || mode != ModeShared {
		t.Fatalf("parked request: %d %v %v", from, mode, ok)
	}
}

// The mutation breaks owner stability on purpose.
func TestNoOwnerStabilityMutation(t *testing.T) {
	d, pid := newDir(t, Chaining)
	d.NoOwnerStability = func() bool { return true }
	req(t, d, 2, pid, ModeExclusive)
	if got := evictAll(t, d, 1, pid, 0, 0); got != EvictAccepted {
		t.Fatalf("mutated directory declined: %v", got)
	}
}

// Shared conflict: "the directory node detects the conflict and sends a list
// of node-shared owners to the requester", which invalidates them. The page
// comes from the source sharer, after the copies it owes; with a stable
// copy of its own, the directory node serves from cache.
func TestSharedConflict(t *testing.T) {
	d, pid := newDir(t, Chaining)
	evictAll(t, d, 1, pid, 0, 0)
	_ = d.PulledPage(1, pid)
	_ = d.Persisted(pid)
	req(t, d, 1, pid, ModeShared)
	req(t, d, 2, pid, ModeShared)
	dec := req(t, d, 3, pid, ModeExclusive)
	if dec.Action != ActForward || dec.Target != 1 || dec.K != 1 || !dec.AnyCopy || dec.Set.Len() != 1 || !dec.Set.Has(2) {
		t.Fatalf("shared conflict: %+v", dec)
	}
	if m := d.Meta(pid); m.Mode != ModeExclusive || m.Owner != 3 || m.OwnerEpoch != dec.Epoch || m.Sourced {
		t.Fatalf("metadata: %+v", m)
	}
	d2, pid2 := newDir(t, Chaining)
	evictAll(t, d2, 1, pid2, 0, 0)
	_ = d2.PulledPage(1, pid2)
	_ = d2.Persisted(pid2)
	req(t, d2, 0, pid2, ModeShared)
	dec2, err := d2.Request(2, pid2, ModeShared, true)
	if err != nil || dec2.Action != ActServeLocal || dec2.Target != 0 {
		t.Fatalf("shared copy with a local copy: %+v %v", dec2, err)
	}
}

// A page whose SSD copy is the latest is served by a sharer once one has it
// (paper §3.4.3: a remote cache is faster than the SSD): the first node
// granted it from the SSD becomes the source; when the source is evicted,
// another sharer serves in its place, from whatever copy it holds or awaits
// (FlagAnyCopy); the last sharer gone, the SSD serves again.
func TestSharerServesCopies(t *testing.T) {
	d, pid := newDir(t, Chaining)
	evictAll(t, d, 1, pid, 0, 0)
	_ = d.PulledPage(1, pid)
	_ = d.Persisted(pid)
	first := req(t, d, 1, pid, ModeShared)
	if first.Action != ActGrantFromSSD {
		t.Fatalf("first copy: %+v", first)
	}
	second := req(t, d, 2, pid, ModeShared)
	if second.Action != ActForward || second.Target != 1 || !second.AnyCopy || second.Pred != 0 {
		t.Fatalf("second copy not from the first sharer: %+v", second)
	}
	third := req(t, d, 3, pid, ModeShared)
	if third.Target != 1 || d.Meta(pid).Copies != 2 {
		t.Fatalf("third copy: %+v, copies %d", third, d.Meta(pid).Copies)
	}
	// The source owes two copies: it may not leave before it served them.
	if got, _ := d.Evict(1, EvictEntry{PID: pid, Epoch: first.Epoch, Served: 1}); got != EvictDeclined {
		t.Fatalf("source left owing a copy: %v", got)
	}
	if got, _ := d.Evict(1, EvictEntry{PID: pid, Epoch: first.Epoch, Served: 2}); got != EvictAccepted {
		t.Fatalf("source could not leave: %v", got)
	}
	if m := d.Meta(pid); !m.Sourced || m.Source != 2 || m.Copies != 0 {
		t.Fatalf("no sharer took the source's place: %+v", m)
	}
	if next := req(t, d, 4, pid, ModeShared); next.Target != 2 || !next.AnyCopy {
		t.Fatalf("copy after the source left: %+v", next)
	}
	for _, n := range []NodeID{2, 3, 4} {
		served := uint32(0)
		if n == 2 {
			served = 1
		}
		if got, _ := d.Evict(n, EvictEntry{PID: pid, Served: served}); got != EvictAccepted {
			t.Fatalf("sharer %d could not leave: %v", n, got)
		}
	}
	if m := d.Meta(pid); m.Mode != ModeNone || m.Sourced {
		t.Fatalf("after every sharer left: %+v", m)
	}
	if again := req(t, d, 5, pid, ModeShared); again.Action != ActGrantFromSSD {
		t.Fatalf("no sharer left, yet %+v", again)
	}
}

// A forward names the acquisition of the holder it refers to (Pred), so a
// holder with a request of its own outstanding can order the two.
func TestForwardNamesPredecessorAcquisition(t *testing.T) {
	d, pid := newDir(t, Chaining) // owner 1 at epoch 0
	a := req(t, d, 2, pid, ModeExclusive)
	b := req(t, d, 3, pid, ModeExclusive)
	if a.Pred != 0 || b.Pred != a.Epoch {
		t.Fatalf("pred epochs %d %d, want 0 and %d", a.Pred, b.Pred, a.Epoch)
	}
}

// Copy from a sharer when the SSD copy is stale, and the copies a source owes
// before it may hand the page on (docs/protocol.md, "the copy source").
func TestStaleCopySource(t *testing.T) {
	d, pid := newDir(t, Chaining) // 1 owns it, dirty
	a := req(t, d, 2, pid, ModeShared)
	b := req(t, d, 3, pid, ModeShared)
	if a.Target != 1 || b.Target != 1 {
		t.Fatalf("copies not from the source: %d %d", a.Target, b.Target)
	}
	x := req(t, d, 4, pid, ModeExclusive)
	if x.Target != 1 || x.K != 2 || x.Set.Len() != 2 || !x.Set.Has(2) || !x.Set.Has(3) {
		t.Fatalf("exclusive after copies: %+v", x)
	}
}

// The source may not be evicted while it owes copies.
func TestSourceEvictionWaitsForCopies(t *testing.T) {
	d, pid := newDir(t, Chaining)
	req(t, d, 2, pid, ModeShared)
	if got := evictAll(t, d, 1, pid, 1, 0); got != EvictDeclined {
		t.Fatalf("source owing a copy evicted: %v", got)
	}
	if got := evictAll(t, d, 1, pid, 1, 1); got != EvictPull {
		t.Fatalf("source with copies served: %v", got)
	}
}

// Upgrade: a sharer asking exclusive keeps its copy and invalidates the rest.
func TestUpgrade(t *testing.T) {
	d, pid := newDir(t, Chaining)
	req(t, d, 2, pid, ModeShared) // S{1,2}, source 1, stale
	dec := req(t, d, 2, pid, ModeExclusive)
	if dec.Action != ActGrantNoData || !dec.Set.Has(1) || dec.Target != 1 || dec.K != 1 {
		t.Fatalf("upgrade: %+v", dec)
	}
}

// A node asking for what it already holds is a protocol error, not a panic.
func TestDuplicateRequestRejected(t *testing.T) {
	d, pid := newDir(t, Chaining)
	if _, err := d.Request(1, pid, ModeExclusive, false); err == nil {
		t.Fatal("owner re-requesting exclusive accepted")
	}
	if _, err := d.Request(1, MakePID(0, 99), ModeShared, false); err == nil {
		t.Fatal("request for an unallocated page accepted")
	}
	if _, err := d.Request(1, MakePID(5, 0), ModeShared, false); err == nil {
		t.Fatal("request for another directory's page accepted")
	}
}

// FIFO: one transition at a time; the directory node's own requests jump
// the queue (paper §3.4.2).
func TestFIFOQueues(t *testing.T) {
	d, pid := newDir(t, FIFO)
	if err := d.Done(1, pid); err == nil {
		t.Fatal("done without a transition accepted")
	}
	req(t, d, 2, pid, ModeExclusive)
	if dec := req(t, d, 3, pid, ModeExclusive); dec.Action != ActParked {
		t.Fatalf("second request not queued: %v", dec.Action)
	}
	if dec := req(t, d, 0, pid, ModeExclusive); dec.Action != ActParked {
		t.Fatalf("local request not queued: %v", dec.Action)
	}
	if _, _, ok := d.NextParked(pid); ok {
		t.Fatal("dequeued during a transition")
	}
	if err := d.Done(2, pid); err != nil {
		t.Fatal(err)
	}
	if from, _, ok := d.NextParked(pid); !ok || from != 0 {
		t.Fatalf("local request did not jump the queue: %d %v", from, ok)
	}
}

// Polling: requests during a transition are told to come back.
func TestPollingBusy(t *testing.T) {
	d, pid := newDir(t, Polling)
	req(t, d, 2, pid, ModeExclusive)
	if dec := req(t, d, 3, pid, ModeExclusive); dec.Action != ActBusy {
		t.Fatalf("polling: %v", dec.Action)
	}
}

// A checkpoint writes a page back in place: the exclusive owner keeps it,
// shared; requests park until the SSD copy is written; then the page is
// fresh, its owner serves copies, and the owner's next write upgrades it
// and marks it stale again. Anything but a stale page held exclusively by
// the caller is refused.
func TestWriteBackInPlace(t *testing.T) {
	d, pid := newDir(t, Chaining) // 1 owns it, stale
	if err := d.WriteBackInPlace(pid, 2); err == nil {
		t.Fatal("write-back in place by a node that does not own the page")
	}
	if err := d.WriteBackInPlace(pid, 1); err != nil {
		t.Fatal(err)
	}
	if m := d.Meta(pid); m.Mode != ModeShared || !m.Sharers.Has(1) || !m.InTransition() {
		t.Fatalf("during the write: %+v", m)
	}
	if err := d.WriteBackInPlace(pid, 1); err == nil {
		t.Fatal("a second write-back in place while the first is under way")
	}
	if dec := req(t, d, 3, pid, ModeShared); dec.Action != ActParked {
		t.Fatalf("request during the write: %+v", dec)
	}
	if err := d.Persisted(pid); err != nil {
		t.Fatal(err)
	}
	m := d.Meta(pid)
	if m.Stale || !m.Sourced || m.Source != 1 {
		t.Fatalf("after the write: %+v", m)
	}
	from, mode, ok := d.NextParked(pid)
	if !ok || from != 3 || mode != ModeShared {
		t.Fatalf("parked request: %d %v %v", from, mode, ok)
	}
	if dec := req(t, d, from, pid, mode); dec.Target != 1 || !dec.AnyCopy {
		t.Fatalf("copy after the write-back: %+v", dec)
	}
	up := req(t, d, 1, pid, ModeExclusive)
	if up.Action != ActGrantNoData || !up.Set.Has(3) || d.Meta(pid).Mode != ModeExclusive || !d.Meta(pid).Stale {
		t.Fatalf("the owner's next write: %+v, meta %+v", up, d.Meta(pid))
	}
}
