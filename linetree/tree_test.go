package linetree

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/scalestore-go/scalestore/linecache"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocol/selcc"
	"github.com/scalestore-go/scalestore/transport"
)

// memory is one memory node's registered lines, served at once: a
// Poster for a single compute node whose verbs never wait.
type memory struct{ mem []byte }

func (m *memory) Read(dst []byte, _ transport.Region, off uint64, done func(error)) {
	copy(dst, m.mem[off:])
	done(nil)
}
func (m *memory) Write(_ transport.Region, off uint64, src []byte, done func(error)) {
	copy(m.mem[off:], src)
	done(nil)
}
func (m *memory) CompareAndSwap(_ transport.Region, off, old, new uint64, done func(uint64, error)) {
	prev := binary.LittleEndian.Uint64(m.mem[off:])
	if prev == old {
		binary.LittleEndian.PutUint64(m.mem[off:], new)
	}
	done(prev, nil)
}
func (m *memory) FetchAndAdd(_ transport.Region, off, delta uint64, done func(uint64, error)) {
	prev := binary.LittleEndian.Uint64(m.mem[off:])
	binary.LittleEndian.PutUint64(m.mem[off:], prev+delta)
	done(prev, nil)
}

type noWait struct{}

func (noWait) Park()       { panic("a lone thread never waits") }
func (noWait) Wake()       {}
func (noWait) Sleep(int64) {}
func (noWait) MaybeYield() {}

func newTree(t *testing.T, lines, frames, fanout int) (*Tree, *linecache.Thread, *memory) {
	const memNode = protocol.NodeID(1)
	m := &memory{mem: make([]byte, linecache.MemoryBytes(lines))}
	reply := make([]byte, linecache.ReplyBytes(1))
	c, err := linecache.New(linecache.Config{Self: 0, ID: 0, Computes: []protocol.NodeID{0},
		Replies: []transport.Region{{Node: 0, Len: uint64(len(reply))}}, ReplyMem: reply,
		Memory: map[protocol.NodeID]transport.Region{memNode: {Node: memNode, Len: uint64(len(m.mem))}},
		Frames: frames, Threads: 1, RTT: 1, Inbox: 1, Post: m, Now: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	line := func(i uint64) protocol.PID { return protocol.MakePID(memNode, i) }
	off := func(i uint64) uint64 { return linecache.WordOffset(i) + linecache.DataOffset }
	Format(m.mem[off(0):off(0)+linecache.LineSize], m.mem[off(1):off(1)+linecache.LineSize])
	next := uint64(2)
	tr := &Tree{Cache: c, Fanout: fanout, Line: line, Alloc: func() (uint64, bool) {
		l := next
		next++
		return l, l < uint64(lines)
	}}
	return tr, &linecache.Thread{P: noWait{}}, m
}

// Keys in random order through a small cache and a fanout of 4: the tree
// grows several levels, evicts most of its lines, and every key reads back
// its last value; absent keys are absent.
func TestPutGet(t *testing.T) {
	tr, th, _ := newTree(t, 4000, 16, 4)
	r := rand.New(rand.NewPCG(1, 2))
	want := map[uint64]uint64{}
	for i := range 3000 {
		k := r.Uint64N(1500) * 2 // even keys only
		if err := tr.Put(th, k, uint64(i+1)); err != nil {
			t.Fatalf("put %d: %v", k, err)
		}
		want[k] = uint64(i + 1)
	}
	for k := uint64(0); k < 3000; k++ {
		v, ok, err := tr.Get(th, k)
		if err != nil {
			t.Fatal(err)
		}
		if w, in := want[k]; ok != in || v != w {
			t.Fatalf("key %d: got %d %v, want %d %v", k, v, ok, w, in)
		}
	}
	root, _ := tr.root(th)
	var depth int
	for line := root; ; depth++ {
		var kind byte
		var child uint64
		_ = tr.Cache.Access(th, tr.Line(line), selcc.Read, func(d []byte) { kind, child = d[0], node(d).val(0) })
		if kind == kindLeaf {
			break
		}
		line = child
	}
	if depth < 3 {
		t.Fatalf("depth %d: the tree did not grow", depth)
	}
	if tr.Cache.Stats.Evictions == 0 {
		t.Fatal("no eviction: the cache was never under pressure")
	}
}

// Running out of lines is an error, not a corrupt tree.
func TestFull(t *testing.T) {
	tr, th, _ := newTree(t, 8, 4, 3)
	var err error
	for k := uint64(0); k < 100 && err == nil; k++ {
		err = tr.Put(th, k, k+1)
	}
	if err != ErrFull {
		t.Fatalf("got %v, want ErrFull", err)
	}
}
