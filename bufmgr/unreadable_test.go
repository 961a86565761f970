package bufmgr

import (
	"errors"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

// grantingRemote grants every request at once, as an unreadable copy for
// the pages in bad.
type grantingRemote struct {
	c   *Cache
	bad map[protocol.PID]bool
}

var errBadSector = errors.New("bad sector")

func (r *grantingRemote) Request(f *Frame) {
	f.Mode, f.Pending = f.Pending, protocol.ModeNone
	f.Unreadable = r.bad[f.PID]
	r.c.Granted(f)
}
func (r *grantingRemote) Released(*Frame)              {}
func (r *grantingRemote) NeedFrames()                  {}
func (r *grantingRemote) Reachable(protocol.PID) error { return nil }
func (r *grantingRemote) Unreadable(pid protocol.PID) error {
	return errors.Join(ErrUnreadable, errBadSector)
}

// neverParks fails the test if a worker would wait: the remote above
// answers at once.
type neverParks struct{ t *testing.T }

func (p neverParks) Park()       { p.t.Fatal("a worker parked") }
func (p neverParks) Wake()       {}
func (p neverParks) MaybeYield() {}

// An unreadable copy fails every guard on its page, with the remote's
// reason, and leaves nothing latched; the guard constructors panic with the
// *PageError (Catch returns it), the conversions return it. Other pages
// are not affected, and once the copy is dropped the page reads again.
func TestUnreadableFailsItsGuards(t *testing.T) {
	r := &grantingRemote{bad: map[protocol.PID]bool{7: true}}
	c := NewCache(4, make([]byte, 4*protocol.PageSize), r, nil)
	r.c = c
	w := &Worker{P: neverParks{t}}
	const good, bad = protocol.PID(3), protocol.PID(7)

	for name, fn := range map[string]func(){
		"Optimistic": func() { c.Optimistic(w, bad) },
		"Shared":     func() { c.Shared(w, bad) },
		"Exclusive":  func() { c.Exclusive(w, bad) },
	} {
		err := Catch(fn)
		if err == nil {
			t.Fatalf("%s of an unreadable page succeeded", name)
		}
		wantPageErrorOf(t, err, bad)
	}
	f := c.Lookup(bad)
	if !f.Latch.Free() || protocol.Mode(f.fast.Load()) != protocol.ModeNone {
		t.Fatalf("after the failures: latch free %v, hot path mode %v; want free and closed",
			f.Latch.Free(), protocol.Mode(f.fast.Load()))
	}

	// The good page works, with every kind of guard.
	if err := Catch(func() {
		g := c.Shared(w, good)
		g.Release()
		o := c.Optimistic(w, good)
		if o.HasChanged() {
			t.Fatal("optimistic guard of an untouched page changed")
		}
		x, err := o.ToExclusive(w)
		if err != nil {
			t.Fatalf("ToExclusive of the good page: %v", err)
		}
		x.Release()
	}); err != nil {
		t.Fatalf("good page: %v", err)
	}

	// A conversion that meets an unreadable copy returns the error.
	r.bad[good] = true
	g := c.Lookup(good)
	c.Invalidate(g) // the copy is dropped; the next request brings an unreadable one
	if err := Catch(func() { c.Optimistic(w, good) }); err == nil {
		t.Fatal("optimistic guard on a page granted unreadable")
	}
	r.bad[good] = false
	c.Invalidate(g)
	o := c.Optimistic(w, good) // a shared copy, readable
	r.bad[good] = true
	g.Mode = protocol.ModeNone // lost meanwhile: ToExclusive must fetch it again
	g.slow()
	_, err := o.ToExclusive(w)
	wantPageErrorOf(t, err, good)
	if !g.Latch.Free() {
		t.Fatal("a failed ToExclusive left the page latched")
	}

	// Dropping the copy heals a page whose read error went away.
	r.bad[bad] = false
	c.Invalidate(f)
	if err := Catch(func() { s := c.Shared(w, bad); s.Release() }); err != nil {
		t.Fatalf("after the copy was dropped: %v", err)
	}
}

func wantPageErrorOf(t *testing.T, err error, pid protocol.PID) {
	t.Helper()
	var pe *PageError
	if !errors.As(err, &pe) || pe.PID != pid || !errors.Is(err, ErrUnreadable) || !errors.Is(err, errBadSector) {
		t.Fatalf("%v, want a *PageError of page %v wrapping the remote's reason", err, pid)
	}
}
