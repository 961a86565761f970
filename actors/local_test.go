package actors

import (
	"testing"

	"github.com/scalestore-go/scalestore/storage/memfile"
)

// TestLocalFreeTarget: a node of one keeps a frame in a hundred free (at
// least 256, at most a tenth of the cache), a cluster node's default a
// tenth; a target that was set is kept.
func TestLocalFreeTarget(t *testing.T) {
	for _, tc := range []struct{ frames, set, want int }{
		{16, 0, 1},
		{1000, 0, 100},
		{10000, 0, 256},
		{65536, 0, 655},
		{65536, 3000, 3000},
	} {
		l, err := NewLocal(Config{CacheFrames: tc.frames, FreeTarget: tc.set}, memfile.New(1<<12, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := l.node.cfg.FreeTarget; got != tc.want {
			t.Errorf("%d frames, FreeTarget %d: the node keeps %d free, want %d", tc.frames, tc.set, got, tc.want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	c := Config{CacheFrames: 65536}
	c.Defaults()
	if got := c.FreeTarget; got != 6553 {
		t.Errorf("a cluster node's default: %d, want 6553", got)
	}
}
