package bufmgr

import (
	"encoding/binary"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

type nopRemote struct{}

func (nopRemote) Request(*Frame)               {}
func (nopRemote) Released(*Frame)              {}
func (nopRemote) NeedFrames()                  {}
func (nopRemote) Reachable(protocol.PID) error { return nil }
func (nopRemote) Unreadable(pid protocol.PID) error {
	return ErrUnreadable
}

// TestPoisonEnds: a dropped frame is poisoned whole by default and only in
// its first and last PoisonEnds bytes when that is set; the rest of the
// page is left as it was.
func TestPoisonEnds(t *testing.T) {
	for _, ends := range []int{0, 64} {
		c := NewCache(2, make([]byte, 2*protocol.PageSize), nopRemote{}, nil)
		c.PoisonEnds = ends
		f := c.Insert(7)
		f.Mode = protocol.ModeShared
		page := c.Page(f)
		for i := range page {
			page[i] = 0x11
		}
		c.Invalidate(f)
		poisoned := func(i int) bool { return ends == 0 || i < ends || i >= protocol.PageSize-ends }
		for i := 0; i < protocol.PageSize; i += 8 {
			want, what := uint64(0x1111111111111111), "untouched"
			if poisoned(i) {
				want, what = Poison, "the poison"
			}
			if got := binary.LittleEndian.Uint64(page[i:]); got != want {
				t.Fatalf("ends %d: word at %d is %#x, want %s", ends, i, got, what)
			}
		}
	}
}
