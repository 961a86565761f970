package btree

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"pgregory.net/rapid"
)

// fatalfer is what checkNode needs of a *testing.T or *rapid.T.
type fatalfer interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkNode checks n against want, its keys in order with their values:
// the node is valid, holds exactly want, every key starts with the node's
// prefix (of which no key is inlined), every head is the key's bytes after
// the prefix, and lowerBound finds every key and places every probe where
// a binary search of want does.
func checkNode(t fatalfer, stage string, n node, want [][2][]byte, probes [][]byte) {
	t.Helper()
	if !n.valid() {
		t.Fatalf("%s: the node is not valid (header % x)", stage, []byte(n[:headerSize]))
	}
	if n.count() != len(want) {
		t.Fatalf("%s: %d entries, want %d", stage, n.count(), len(want))
	}
	p := n.prefixLen()
	if (p > 0) != (n[1]&flagPrefix != 0) {
		t.Fatalf("%s: prefix length %d with flags %#x", stage, p, n[1])
	}
	var pre []byte
	if len(want) > 0 {
		pre = want[0][0][:min(p, len(want[0][0]))]
	}
	for i, e := range want {
		k := n.key(i)
		if !bytes.Equal(k, e[0]) || !bytes.Equal(n.value(i), e[1]) {
			t.Fatalf("%s: slot %d is %q=%q, want %q=%q", stage, i, k, n.value(i), e[0], e[1])
		}
		if p > 0 && (len(k) <= 8 || !bytes.HasPrefix(k, pre) || len(pre) != p) {
			t.Fatalf("%s: key %q in a node of prefix %q (%d bytes)", stage, k, pre, p)
		}
		if h := keyHead(k[min(p, len(k)):]); n.head(i) != h {
			t.Fatalf("%s: slot %d (%q) has head %#x, want %#x (prefix %d)", stage, i, k, n.head(i), h, p)
		}
	}
	cmp := func(e [2][]byte, k []byte) int { return bytes.Compare(e[0], k) }
	for _, e := range want {
		probes = append(probes, e[0])
	}
	for _, k := range probes {
		wi, wf := slices.BinarySearchFunc(want, k, cmp)
		if i, f := n.lowerBound(k); i != wi || f != wf {
			t.Fatalf("%s: lowerBound(%q) = %d,%v, want %d,%v (prefix %d)", stage, k, i, f, wi, wf, p)
		}
	}
}

// prefixKeys draws keys that mostly share a long prefix, with some that
// break it early, some of at most 8 bytes (kept in their heads), and some
// that are the prefix itself or a part of it.
func prefixKeys(t *rapid.T) *rapid.Generator[[]byte] {
	prefix := rapid.SliceOfN(rapid.ByteRange('a', 'c'), 0, 24).Draw(t, "prefix")
	return rapid.Custom(func(t *rapid.T) []byte {
		var k []byte
		switch rapid.IntRange(0, 9).Draw(t, "shape") {
		case 0: // a short key
			k = rapid.SliceOfN(rapid.ByteRange('a', 'c'), 1, 8).Draw(t, "short")
		case 1: // breaks the prefix somewhere
			cut := rapid.IntRange(0, len(prefix)).Draw(t, "cut")
			k = append(slices.Clone(prefix[:cut]), rapid.SliceOfN(rapid.ByteRange(0, 0xff), 1, 16).Draw(t, "tail")...)
		case 2: // a part of the prefix
			k = slices.Clone(prefix[:rapid.IntRange(0, len(prefix)).Draw(t, "part")])
		default:
			k = append(slices.Clone(prefix), rapid.SliceOfN(rapid.ByteRange('0', '3'), 0, 14).Draw(t, "digits")...)
		}
		if len(k) == 0 {
			k = []byte{'a'}
		}
		return k
	})
}

// A node against a sorted slice under inserts, deletes, updates to other
// sizes, compactions and splits, with keys whose shared prefix comes and
// goes: the prefix is chosen, lowered and dropped as keys come.
func TestPrefixNodeMatchesASortedSlice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gen := prefixKeys(t)
		var page [protocol.PageSize]byte
		kind := rapid.SampledFrom([]byte{kindLeaf, kindInner}).Draw(t, "kind")
		initNode(page[:], kind)
		n := node(page[:])
		var want [][2][]byte
		cmp := func(e [2][]byte, k []byte) int { return bytes.Compare(e[0], k) }
		for step := range rapid.IntRange(1, 300).Draw(t, "steps") {
			k := gen.Draw(t, "key")
			i, found := slices.BinarySearchFunc(want, k, cmp)
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 6: // insert or update
				v := bytes.Repeat([]byte{byte(step)}, rapid.IntRange(0, 40).Draw(t, "vlen"))
				if found {
					n.removeAt(i)
					want = slices.Delete(want, i, i+1)
				}
				if !n.room(len(k), len(v)) {
					continue
				}
				n.insertAt(i, k, v)
				want = slices.Insert(want, i, [2][]byte{k, v})
			case op < 8:
				if found {
					n.removeAt(i)
					want = slices.Delete(want, i, i+1)
				}
			case op == 8:
				n.compact()
			default: // split, and go on with one half
				if len(want) < 3 {
					continue
				}
				var rp [protocol.PageSize]byte
				initNode(rp[:], kind)
				r := node(rp[:])
				c := n.count()
				sep := n.splitInto(r, 99, k)
				left, right := want, [][2][]byte(nil)
				if kind == kindLeaf {
					left, right = want[:n.count()], want[n.count():]
				} else {
					left, right = want[:n.count()], want[n.count()+1:]
				}
				if n.count()+r.count() != c-boolInt(kind == kindInner) {
					t.Fatalf("split of %d entries left %d and %d", c, n.count(), r.count())
				}
				for _, e := range left {
					if bytes.Compare(e[0], sep) > 0 {
						t.Fatalf("left key %q above the separator %q", e[0], sep)
					}
				}
				for _, e := range right {
					if bytes.Compare(e[0], sep) <= 0 {
						t.Fatalf("right key %q at or below the separator %q", e[0], sep)
					}
				}
				checkNode(t, "split's right node", r, right, nil)
				if rapid.Bool().Draw(t, "go right") {
					copy(page[:], rp[:])
					want = slices.Clone(right)
				} else {
					want = slices.Clone(left)
				}
			}
			checkNode(t, fmt.Sprintf("step %d", step), n, want, [][]byte{k, gen.Draw(t, "probe")})
		}
		n.compact()
		checkNode(t, "compacted", n, want, nil)
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fillLeafWith makes n a leaf full of keys key(i), i drawn by r from 100,000
// (as redis-benchmark -r 100000 does), each with val, and compacts it: a
// split or compaction is what sets up a node's layout (its prefix).
func fillLeafWith(n node, r *rand.Rand, val []byte, key func(i int) []byte) {
	initNode(n, kindLeaf)
	for {
		k := key(r.IntN(100_000))
		i, found := n.lowerBound(k)
		if found {
			continue
		}
		if !n.room(len(k), len(val)) {
			break
		}
		n.insertAt(i, k, val)
	}
	n.compact()
}

// counterLeaf fills a leaf with keys of format drawn from 100,000 (as
// redis-benchmark -r 100000 does) and 8-byte values, compacts it, and
// returns its entries in order.
func counterLeaf(n node, format string, seed uint64) [][2][]byte {
	val := []byte("12345678")
	fillLeafWith(n, rand.New(rand.NewPCG(seed, 1)), val, func(i int) []byte { return fmt.Appendf(nil, format, i) })
	var out [][2][]byte
	for i := range n.count() {
		out = append(out, [2][]byte{slices.Clone(n.key(i)), val})
	}
	return out
}

// redis-benchmark's keys get a prefix past their shared 8 bytes, so that
// heads tell them apart; a key that breaks the prefix lowers it, a short
// key drops it, and the keys and searches stay right throughout.
func TestPrefixOfCounterKeys(t *testing.T) {
	for _, format := range []string{"counter:%012d", "key:%012d"} {
		var page [protocol.PageSize]byte
		n := node(page[:])
		want := counterLeaf(n, format, 1)
		if p := n.prefixLen(); p <= 8 {
			t.Fatalf("%s: a compacted leaf has a prefix of %d bytes, want more than 8", format, p)
		}
		checkNode(t, format, n, want, [][]byte{[]byte("a"), []byte("zzz"), fmt.Appendf(nil, format, 5)})
		ties := 0
		for i := 1; i < n.count(); i++ {
			if n.head(i) == n.head(i-1) {
				ties++
			}
		}
		if ties > 0 {
			t.Fatalf("%s: %d slots share their head with the one before", format, ties)
		}
		// Room for the inserts below.
		for n.count() > 40 {
			n.removeAt(n.count() - 1)
			want = want[:len(want)-1]
		}
		p := n.prefixLen()
		for _, k := range []string{fmt.Sprintf(format, 99_999), "counter", "counter:1", "kez:0", "a"} {
			i, found := n.lowerBound([]byte(k))
			if found {
				t.Fatalf("%s: %q found", format, k)
			}
			n.insertAt(i, []byte(k), []byte("v"))
			want = slices.Insert(want, i, [2][]byte{[]byte(k), []byte("v")})
			checkNode(t, fmt.Sprintf("%s after %q", format, k), n, want, nil)
			if np := n.prefixLen(); np > p || (len(k) <= 8 && np != 0) {
				t.Fatalf("%s: prefix %d after inserting %q, was %d", format, np, k, p)
			}
			p = n.prefixLen()
		}
		if p != 0 {
			t.Fatalf("%s: prefix %d with a short key in the node", format, p)
		}
		// Removing the short keys and compacting brings a prefix back.
		for i := len(want) - 1; i >= 0; i-- {
			if len(want[i][0]) <= 8 || !bytes.HasPrefix(want[i][0], []byte(format[:3])) {
				n.removeAt(i)
				want = slices.Delete(want, i, i+1)
			}
		}
		n.compact()
		if n.prefixLen() == 0 {
			t.Fatalf("%s: no prefix after the short keys went", format)
		}
		checkNode(t, format+" compacted again", n, want, nil)
		for len(want) > 0 {
			n.removeAt(0)
			want = want[1:]
			checkNode(t, format+" emptying", n, want, nil)
		}
		if n.prefixLen() != 0 || n[1] != flagShortInline {
			t.Fatalf("%s: an empty node has prefix %d, flags %#x", format, n.prefixLen(), n[1])
		}
	}
}

// A node of the format before prefixes (p = 0, heads of the keys' first 8
// bytes; byte 1 with or without flagShortInline, bytes 6-7 the latest
// insert's slot as 16 bits), built from bytes, reads as it did, takes
// inserts and deletes, and gets a prefix when compacted.
func TestOldFormatNodeReads(t *testing.T) {
	for _, flags := range []byte{0, flagShortInline} {
		var page [protocol.PageSize]byte
		b := page[:]
		b[0] = kindLeaf
		b[1] = flags
		var want [][2][]byte
		for i := range 30 {
			want = append(want, [2][]byte{fmt.Appendf(nil, "counter:%012d", 1000+3*i), fmt.Appendf(nil, "v%d", i)})
		}
		h := usable
		for i, e := range want {
			h -= len(e[0]) + len(e[1])
			copy(b[h:], e[0])
			copy(b[h+len(e[0]):], e[1])
			s := b[headerSize+i*slotSize:]
			binary.BigEndian.PutUint64(s, 0) // then the head, little-endian
			binary.LittleEndian.PutUint64(s, binary.BigEndian.Uint64(e[0]))
			binary.LittleEndian.PutUint16(s[8:], uint16(h))
			binary.LittleEndian.PutUint16(s[10:], uint16(len(e[0])))
			binary.LittleEndian.PutUint16(s[12:], uint16(len(e[1])))
		}
		binary.LittleEndian.PutUint16(b[2:], uint16(len(want)))
		binary.LittleEndian.PutUint16(b[4:], uint16(h))
		binary.LittleEndian.PutUint16(b[6:], 17) // the latest insert
		n := node(b)
		if n.prefixLen() != 0 || n.lastInsert() != 17 {
			t.Fatalf("flags %#x: prefix %d, latest insert %d", flags, n.prefixLen(), n.lastInsert())
		}
		probes := [][]byte{[]byte("counter:000000001001"), []byte("counter:"), []byte("d")}
		checkNode(t, "old format", n, want, probes)
		k := []byte("counter:000000001002")
		i, _ := n.lowerBound(k)
		n.insertAt(i, k, []byte("new"))
		want = slices.Insert(want, i, [2][]byte{k, []byte("new")})
		n.removeAt(0)
		want = want[1:]
		if n.prefixLen() != 0 {
			t.Fatalf("flags %#x: an insert gave an old node a prefix", flags)
		}
		checkNode(t, "old format, changed", n, want, probes)
		n.compact()
		if n.prefixLen() != len("counter:0000000010") || n[1] != flagShortInline|flagPrefix {
			t.Fatalf("flags %#x: compacted to prefix %d, flags %#x", flags, n.prefixLen(), n[1])
		}
		checkNode(t, "old format, compacted", n, want, probes)
	}
}

// A page whose prefix bytes are bogus is refused by valid, and reading it
// does not panic.
func TestBogusPrefixIsRefused(t *testing.T) {
	var page [protocol.PageSize]byte
	n := node(page[:])
	counterLeaf(n, "counter:%012d", 2)
	if !n.valid() || n.prefixLen() == 0 {
		t.Fatalf("a leaf of counters: valid %v, prefix %d", n.valid(), n.prefixLen())
	}
	_, kl0, _ := n.slot(0)
	var good [protocol.PageSize]byte
	copy(good[:], page[:])
	for _, tc := range []struct {
		name string
		mod  func()
	}{
		{"longer than slot 0's key", func() { n[7] = byte(kl0 + 1) }},
		{"255", func() { n[7] = 255 }},
		{"a length without the flag", func() { n[1] = flagShortInline }},
		{"the flag without a length", func() { n[7] = 0 }},
		{"without inlined short keys", func() { n[1] = flagPrefix }},
		{"in an empty node", func() { n.setCount(0) }},
		{"slot 0 a short key", func() { binary.LittleEndian.PutUint16(n[headerSize+10:], 8) }},
		{"slot 0 outside the heap", func() { binary.LittleEndian.PutUint16(n[headerSize+8:], uint16(usable-2)) }},
	} {
		copy(page[:], good[:])
		tc.mod()
		if n.valid() {
			t.Errorf("%s: valid", tc.name)
		}
		for _, k := range [][]byte{[]byte("counter:000000012345"), []byte("c"), bytes.Repeat([]byte{0xff}, MaxKey)} {
			_, _ = n.lowerBound(k)
		}
		for i := range n.count() {
			_ = n.key(i)
		}
	}
	// guessOffset compares heads with a key's first 8 bytes: not through
	// a node whose heads come after a prefix.
	copy(page[:], good[:])
	if got := n.guessOffset(1, u64key(5), 16); got != -1 {
		t.Errorf("a guess through a node with a prefix: %d", got)
	}
}

// A tree of redis-benchmark's keys against a map: puts (new keys, updates
// of the same and other sizes), deletes, gets, scans and a salvage, with
// enough keys for splits up to inner nodes, whose separators get prefixes
// too.
func TestPrefixTreeMatchesAMap(t *testing.T) {
	r := newGuessRig(t)
	rng := rand.New(rand.NewPCG(7, 8))
	model := map[string][]byte{}
	formats := []string{"counter:%012d", "key:%012d", "counter:%d", "c%d"}
	keyOf := func() []byte {
		return fmt.Appendf(nil, formats[rng.IntN(len(formats))], rng.IntN(20_000))
	}
	r.do(func(s Session) error {
		for op := range 60_000 {
			k := keyOf()
			switch x := rng.IntN(10); {
			case x < 7:
				v := bytes.Repeat([]byte{byte(op)}, 1+rng.IntN(12))
				if err := r.tr.Put(s, k, v); err != nil {
					return err
				}
				model[string(k)] = v
			case x < 9:
				found, err := r.tr.Delete(s, k)
				if err != nil {
					return err
				}
				if _, ok := model[string(k)]; ok != found {
					t.Fatalf("delete %q: found %v, model %v", k, found, ok)
				}
				delete(model, string(k))
			default:
				v, ok, err := r.tr.Get(s, k, nil)
				if err != nil {
					return err
				}
				if want, wok := model[string(k)]; ok != wok || !bytes.Equal(v, want) {
					t.Fatalf("get %q: %q %v, want %q %v", k, v, ok, want, wok)
				}
			}
		}
		keys := make([]string, 0, len(model))
		for k := range model {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var got []string
		err := r.tr.Scan(s, []byte("counter:0"), []byte("key:"), func(k, v []byte) bool {
			if !bytes.Equal(v, model[string(k)]) {
				t.Fatalf("scan: %q=%q, want %q", k, v, model[string(k)])
			}
			got = append(got, string(k))
			return true
		})
		if err != nil {
			return err
		}
		lo, _ := slices.BinarySearch(keys, "counter:0")
		hi, _ := slices.BinarySearch(keys, "key:")
		if !slices.Equal(got, keys[lo:hi]) {
			t.Fatalf("scan found %d keys, want %d", len(got), hi-lo)
		}
		got = got[:0]
		err = r.tr.Salvage(s, nil, nil, func(k, v []byte) bool {
			got = append(got, string(k))
			return true
		}, func(lo, hi []byte, err error) bool {
			t.Fatalf("salvage skipped %q..%q: %v", lo, hi, err)
			return false
		})
		if err != nil {
			return err
		}
		if !slices.Equal(got, keys) {
			t.Fatalf("salvage found %d keys, want %d", len(got), len(keys))
		}
		for k, v := range model {
			got, ok, err := r.tr.Get(s, []byte(k), nil)
			if err != nil || !ok || !bytes.Equal(got, v) {
				t.Fatalf("get %q: %q %v %v, want %q", k, got, ok, err, v)
			}
		}
		return nil
	})
	// The root is an inner node now, and its separators share a prefix.
	r.do(func(s Session) error {
		cat := s.Cache.Shared(s.Worker, r.tr.catalog)
		root, _ := rootOf(cat.Data())
		cat.Release()
		g := s.Cache.Shared(s.Worker, root)
		defer g.Release()
		n := node(g.Data())
		if n.isLeaf() || !n.valid() {
			t.Fatalf("the root of %d keys: leaf %v, valid %v", len(model), n.isLeaf(), n.valid())
		}
		return nil
	})
	// A tree of counters alone: its inner nodes get prefixes.
	r2 := newGuessRig(t)
	r2.do(func(s Session) error {
		for _, i := range rng.Perm(30_000) {
			if err := r2.tr.Put(s, fmt.Appendf(nil, "counter:%012d", i), []byte("1")); err != nil {
				return err
			}
		}
		cat := s.Cache.Shared(s.Worker, r2.tr.catalog)
		root, _ := rootOf(cat.Data())
		cat.Release()
		prefixed, inner := 0, 0
		var walk func(pid protocol.PID)
		walk = func(pid protocol.PID) {
			g := s.Cache.Shared(s.Worker, pid)
			n := node(slices.Clone(g.Data()))
			g.Release()
			if n.isLeaf() {
				return
			}
			inner++
			if n.prefixLen() > 8 {
				prefixed++
			}
			for i := range n.count() {
				walk(protocol.PID(n.child(i)))
			}
			walk(protocol.PID(n.upper()))
		}
		walk(root)
		if inner == 0 || prefixed != inner {
			t.Fatalf("%d of %d inner nodes have a prefix past the keys' 8 shared bytes", prefixed, inner)
		}
		for i := range 30_000 {
			if _, ok, err := r2.tr.Get(s, fmt.Appendf(nil, "counter:%012d", i), nil); err != nil || !ok {
				t.Fatalf("counter %d: %v %v", i, ok, err)
			}
		}
		// GetBatch, whose lookups prefetch the nodes' prefixes, agrees,
		// with absent keys (past the end, and not counters) among them.
		for range 200 {
			var keys [][]byte
			for range 1 + rng.IntN(MaxBatch) {
				keys = append(keys, fmt.Appendf(nil, "counter:%012d", rng.IntN(40_000)))
			}
			keys = append(keys, []byte("counter:"), []byte("d"))
			vals, found := make([][]byte, len(keys)), make([]bool, len(keys))
			if err := r2.tr.GetBatch(s, keys, vals, found); err != nil {
				return err
			}
			for j, k := range keys {
				var i int
				want := false
				if n, _ := fmt.Sscanf(string(k), "counter:%d", &i); n == 1 && i < 30_000 {
					want = true
				}
				if found[j] != want || (want && string(vals[j]) != "1") {
					t.Fatalf("batch: %q found %v %q, want %v", k, found[j], vals[j], want)
				}
			}
		}
		return nil
	})
}

// A tree whose catalog has the magic of the format before prefixes (or
// before inlined keys) reads as it is, and Upgrade gives it the current
// magic, which a binary that does not know prefixes refuses.
func TestUpgradeFromTheFormatsBefore(t *testing.T) {
	for _, old := range []uint64{catalogMagicV1, catalogMagicV2} {
		r := newGuessRig(t)
		key := func(i int) []byte { return fmt.Appendf(nil, "counter:%012d", i) }
		r.do(func(s Session) error {
			for i := range 500 {
				if err := r.tr.Put(s, key(i), []byte("v")); err != nil {
					return err
				}
			}
			cat := s.Cache.Exclusive(s.Worker, r.tr.catalog)
			if m := binary.LittleEndian.Uint64(cat.Data()); m != catalogMagic {
				t.Fatalf("a new catalog has magic %#x, want %#x", m, catalogMagic)
			}
			binary.LittleEndian.PutUint64(cat.Data(), old)
			cat.Release()
			if _, ok, err := r.tr.Get(s, key(7), nil); err != nil || !ok {
				t.Fatalf("magic %#x: get: %v %v", old, ok, err)
			}
			if err := r.tr.Upgrade(s); err != nil {
				return err
			}
			cat = s.Cache.Exclusive(s.Worker, r.tr.catalog)
			m := binary.LittleEndian.Uint64(cat.Data())
			cat.Release()
			if m != catalogMagic {
				t.Fatalf("magic %#x upgraded to %#x, want %#x", old, m, catalogMagic)
			}
			for i := range 500 {
				if _, ok, err := r.tr.Get(s, key(i), nil); err != nil || !ok {
					t.Fatalf("magic %#x upgraded: get %d: %v %v", old, i, ok, err)
				}
			}
			return nil
		})
	}
}
