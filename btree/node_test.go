package btree

import (
	"math/rand/v2"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

// TestTornPagesDoNotPanic: an optimistic reader may see any bytes while a
// writer changes a page (it restarts when it validates). Every read
// accessor must stay inside the page whatever the bytes say.
func TestTornPagesDoNotPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	page := make([]byte, protocol.PageSize)
	key := []byte("some key")
	for range 20000 {
		for i := range page {
			page[i] = byte(r.Uint32())
		}
		if r.IntN(2) == 0 {
			page[0] = byte(1 + r.IntN(2)) // a plausible kind
		}
		n := node(page)
		_ = n.valid()
		_, _ = n.lowerBound(key)
		_ = n.childFor(key)
		for i := -1; i <= n.count(); i++ {
			_, _, _ = n.slot(i)
			_ = n.key(i)
			_ = n.value(i)
			_ = n.child(i)
		}
	}
}
