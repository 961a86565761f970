package sel

import (
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

func TestWordAndTag(t *testing.T) {
	for _, c := range []struct {
		n  protocol.NodeID
		wk int
	}{{0, 0}, {3, 2}, {255, MaxWorkers - 1}} {
		tag := TagOf(c.n, c.wk)
		if tag == 0 || tag.Node() != c.n || tag.Worker() != c.wk {
			t.Fatalf("TagOf(%d, %d) = %#x decodes as node %d worker %d", c.n, c.wk, uint32(tag), tag.Node(), tag.Worker())
		}
		w := Word(exclusive(tag) + 3)
		if w.Holder() != tag || w.Readers() != 3 {
			t.Fatalf("word %#x: holder %v readers %d", uint64(w), w.Holder(), w.Readers())
		}
		if got := Word(uint64(w) + releaseExclusive(tag)); got != 3 {
			t.Fatalf("releasing %v leaves %v", tag, got)
		}
	}
	five := uint64(5)
	if w := Word(five + readerRelease); w != 4 {
		t.Fatalf("a reader's release of 5 leaves %d", w)
	}
	if s := Word(0).String(); s != "(free, 0 readers)" {
		t.Fatalf("%q", s)
	}
	if s := Word(exclusive(TagOf(1, 0))).String(); s != "(X n1/w0, 0 readers)" {
		t.Fatalf("%q", s)
	}
	if s := Tag(0xFFFFFFFF).String(); s != "garbage 0xffffffff" {
		t.Fatalf("%q", s)
	}
}

// Every key has one place; the regions hold exactly their keys; a verb's
// offset maps back to its key.
func TestLineLayout(t *testing.T) {
	for _, l := range []lineLayout{{computes: 3, memories: 2, lineSize: 64}, {computes: 1, memories: 5, lineSize: protocol.PageSize}} {
		for _, keys := range []int{1, 3, 7, 48} {
			seen := map[[2]uint64]bool{}
			total := 0
			for i := range l.memories {
				total += l.memoryBytes(i, keys)
			}
			if total != keys*int(l.stride()) {
				t.Fatalf("%+v, %d keys: regions of %d bytes in all, want %d", l, keys, total, keys*int(l.stride()))
			}
			for key := range uint64(keys) {
				home, slot := l.home(key)
				i := int(home) - l.computes
				if i < 0 || i >= l.memories || seen[[2]uint64{uint64(home), slot}] {
					t.Fatalf("%+v: key %d at node %d slot %d", l, key, home, slot)
				}
				seen[[2]uint64{uint64(home), slot}] = true
				if end := l.dataOff(key) + uint64(l.lineSize); end > uint64(l.memoryBytes(i, keys)) || l.wordOff(key)%8 != 0 {
					t.Fatalf("%+v: key %d ends at %d of a %d-byte region (word at %d)", l, key, end, l.memoryBytes(i, keys), l.wordOff(key))
				}
				for _, off := range []uint64{l.wordOff(key), l.dataOff(key), l.dataOff(key) + uint64(l.lineSize) - 8} {
					if k, ok := l.keyOf(home, off); !ok || k != key {
						t.Fatalf("%+v: offset %d of node %d maps to key %d (%v), want %d", l, off, home, k, ok, key)
					}
				}
			}
			if _, ok := l.keyOf(protocol.NodeID(l.computes-1), 0); ok {
				t.Fatalf("%+v: a compute node's offset maps to a key", l)
			}
		}
	}
}

func TestFillLine(t *testing.T) {
	buf := make([]byte, 64)
	for i := range buf {
		buf[i] = 0xEE
	}
	fillLine(buf[:32], buf[32:], 7, 99)
	if h, tl, v := lineVersions(buf); h != 7 || tl != 7 || v != 99 {
		t.Fatalf("versions %d/%d value %d", h, tl, v)
	}
	if buf[20] != 0 || buf[40] != 0 {
		t.Fatal("fillLine left old bytes in the line")
	}
}
