package btree

import (
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// firstHead against sort.Search over the same heads: any sorted run of
// heads (with ties), any bounds, any probe, including probes equal to a
// head, below all and above all.
func TestFirstHeadIsALowerBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		heads := rapid.SliceOfN(rapid.Uint64Range(0, 50), 0, maxSlots).Draw(t, "heads")
		sort.Slice(heads, func(i, j int) bool { return heads[i] < heads[j] })
		n := make(node, usable)
		initNode(n, kindLeaf)
		for i, h := range heads {
			n.setSlot(i, usable-1, h, 8, 0)
		}
		c := len(heads)
		lo := rapid.IntRange(0, c).Draw(t, "lo")
		hi := rapid.IntRange(lo, c).Draw(t, "hi")
		h := rapid.Uint64Range(0, 51).Draw(t, "probe")
		want := lo + sort.Search(hi-lo, func(i int) bool { return heads[lo+i] >= h })
		if got := n.firstHead(h, lo, hi); got != want {
			t.Fatalf("firstHead(%d, %d, %d) over %v = %d, want %d", h, lo, hi, heads, got, want)
		}
	})
}
