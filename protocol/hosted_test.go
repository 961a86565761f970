package protocol

import "testing"

// A directory hosted for a failed node (docs/replication.md) decides for
// that node's pages and serves from its host's cache: its pages keep
// their ids, and the host's own copy is what "local" means.
func TestHostedDirectoryServesFromItsHost(t *testing.T) {
	d := NewHostedDirectory(1, 2, Chaining, 8)
	if err := d.Restore(2); err != nil {
		t.Fatal(err)
	}
	pid := MakePID(1, 0)
	if d.Meta(MakePID(2, 0)) != nil || d.Meta(pid) == nil {
		t.Fatal("the hosted directory must decide for directory 1's pages only")
	}
	// The host reads the page shared, then node 3 asks: the host's
	// copy serves it.
	if dec, err := d.Request(2, pid, ModeShared, false); err != nil || dec.Action != ActGrantFromSSD {
		t.Fatalf("host's request: %v %v", dec, err)
	}
	dec, err := d.Request(3, pid, ModeShared, true)
	if err != nil || dec.Action != ActServeLocal || dec.Target != 2 {
		t.Fatalf("node 3's request: %+v %v, want the host's copy to serve", dec, err)
	}
	// Node 1 (the failed directory's node) is nobody special here.
	if dec, err := d.Request(1, pid, ModeExclusive, true); err != nil || dec.Action == ActServeLocal && dec.Target == 1 {
		t.Fatalf("node 1's request: %+v %v", dec, err)
	}
	if d.Host() != 2 || d.Self() != 1 {
		t.Fatalf("host %d self %d", d.Host(), d.Self())
	}
}

// Hold parks every request for a page until Unhold (a write whose copy
// to the backup is still under way), and refuses a page in a transition.
func TestHoldParksRequests(t *testing.T) {
	d := NewDirectory(0, Chaining, 4)
	if err := d.Restore(1); err != nil {
		t.Fatal(err)
	}
	pid := MakePID(0, 0)
	if err := d.Hold(pid); err != nil {
		t.Fatal(err)
	}
	if err := d.Hold(pid); err == nil {
		t.Fatal("a held page was held again")
	}
	dec, err := d.Request(3, pid, ModeShared, false)
	if err != nil || dec.Action != ActParked {
		t.Fatalf("request on a held page: %+v %v, want parked", dec, err)
	}
	if _, _, ok := d.NextParked(pid); ok {
		t.Fatal("a parked request went on while the page is held")
	}
	if err := d.Unhold(pid); err != nil {
		t.Fatal(err)
	}
	from, mode, ok := d.NextParked(pid)
	if !ok || from != 3 || mode != ModeShared {
		t.Fatalf("after Unhold: %d %v %v", from, mode, ok)
	}
	if err := d.Unhold(pid); err == nil {
		t.Fatal("a page not held was let go")
	}
}
