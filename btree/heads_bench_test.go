package btree

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/bufmgr"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/storage/memfile"
)

// The key shapes of redis-benchmark with -r, whose keys share their first
// 8 bytes (and more) with every other, and YCSB's 8-byte big-endian keys.
var benchKeyShapes = []struct {
	name string
	key  func(dst []byte, i int) []byte
}{
	{"counter", func(dst []byte, i int) []byte { return fmt.Appendf(dst, "counter:%012d", i) }},
	{"key", func(dst []byte, i int) []byte { return fmt.Appendf(dst, "key:%012d", i) }},
	{"u64", func(dst []byte, i int) []byte { return binary.BigEndian.AppendUint64(dst, uint64(i)) }},
}

// BenchmarkLeafSearch: lowerBound in a full leaf of keys drawn from
// 100,000 (redis-benchmark -r 100000), values of 8 bytes; each search
// finds one of the leaf's keys.
func BenchmarkLeafSearch(b *testing.B) {
	for _, shape := range benchKeyShapes {
		b.Run(shape.name, func(b *testing.B) {
			var page [protocol.PageSize]byte
			n := node(page[:])
			r := rand.New(rand.NewPCG(1, 2))
			fillLeafWith(n, r, make([]byte, 8), func(i int) []byte { return shape.key(nil, i) })
			keys := make([][]byte, n.count())
			for i := range keys {
				keys[i] = n.key(i)
			}
			r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			b.ResetTimer()
			for i := range b.N {
				if _, found := n.lowerBound(keys[i%len(keys)]); !found {
					b.Fatal("a key of the leaf is not found")
				}
			}
		})
	}
}

// BenchmarkTreePut: Put (an overwrite of the same size, as INCR's) and Get
// of random keys of a tree of 100,000 keys, on a node of one in memory.
func BenchmarkTreePut(b *testing.B) {
	for _, shape := range benchKeyShapes {
		rt, err := actors.NewLocal(actors.Config{CacheFrames: 8192}, memfile.New(1<<14, nil))
		if err != nil {
			b.Fatal(err)
		}
		var tr *Tree
		do := func(fn func(s Session) error) {
			if err := rt.Do(func(w *bufmgr.Worker) error {
				return fn(Session{Cache: rt.Node().Cache(), Worker: w, Allocate: rt.Allocate})
			}); err != nil {
				b.Fatal(err)
			}
		}
		const keys = 100_000
		r := rand.New(rand.NewPCG(3, 4))
		do(func(s Session) error {
			if tr, err = Create(s); err != nil {
				return err
			}
			for _, i := range r.Perm(keys) {
				if err := tr.Put(s, shape.key(nil, i), []byte("12345678")); err != nil {
					return err
				}
			}
			return nil
		})
		b.Run(shape.name+"/put", func(b *testing.B) {
			do(func(s Session) error {
				var k []byte
				b.ResetTimer()
				for range b.N {
					k = shape.key(k[:0], r.IntN(keys))
					if err := tr.Put(s, k, []byte("87654321")); err != nil {
						return err
					}
				}
				return nil
			})
		})
		b.Run(shape.name+"/get", func(b *testing.B) {
			do(func(s Session) error {
				var k, v []byte
				b.ResetTimer()
				for range b.N {
					k = shape.key(k[:0], r.IntN(keys))
					var ok bool
					if v, ok, err = tr.Get(s, k, v[:0]); err != nil || !ok {
						return fmt.Errorf("get %s: %v %v", k, ok, err)
					}
				}
				return nil
			})
		})
		rt.Close()
	}
}
