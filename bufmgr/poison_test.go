package bufmgr

import (
	"encoding/binary"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

type nopRemote struct{}

func (nopRemote) Request(*Frame)  {}
func (nopRemote) Released(*Frame) {}
func (nopRemote) NeedFrames()     {}
func (nopRemote) Unreadable(pid protocol.PID) error {
	return ErrUnreadable
}

// TestPoisonPrefix: a dropped frame is poisoned whole by default (the
// simulator's setting) and only in its first PoisonPrefix bytes when that
// is set (the real world's); the rest of the page is left as it was.
func TestPoisonPrefix(t *testing.T) {
	for _, prefix := range []int{0, 64} {
		c := NewCache(2, make([]byte, 2*protocol.PageSize), nopRemote{}, nil)
		c.PoisonPrefix = prefix
		f := c.Insert(7)
		f.Mode = protocol.ModeShared
		page := c.Page(f)
		for i := range page {
			page[i] = 0x11
		}
		c.Invalidate(f)
		poisoned := protocol.PageSize
		if prefix > 0 {
			poisoned = prefix
		}
		for i := 0; i < protocol.PageSize; i += 8 {
			want, what := uint64(0x1111111111111111), "untouched"
			if i < poisoned {
				want, what = Poison, "the poison"
			}
			if got := binary.LittleEndian.Uint64(page[i:]); got != want {
				t.Fatalf("prefix %d: word at %d is %#x, want %s", prefix, i, got, what)
			}
		}
	}
}
