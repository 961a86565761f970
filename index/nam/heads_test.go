package nam

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/scalestore-go/scalestore/transport"
)

// plainFabric hides localFabric's ReadBatch: the READs of a batch go one
// after the other.
type plainFabric struct{ Fabric }

// yieldFabric lets other goroutines run before each READ, so a thread
// spinning on a locked node does not starve the lock's holder of the
// processor (the machine may have fewer cores than goroutines).
type yieldFabric struct{ localFabric }

func (f yieldFabric) Read(dst []byte, r transport.Region, off uint64) error {
	runtime.Gosched()
	return f.localFabric.Read(dst, r, off)
}

// loadTree fills a tree of design d with the keys, in random order.
func loadTree(t *testing.T, d Design, keys []uint64) (*Layout, localFabric) {
	t.Helper()
	l, f := newLocal(t, d, 3, 20_000)
	c := &Client{L: l, F: f}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, i := range rng.Perm(len(keys)) {
		if err := c.Put(keys[i], keys[i]+1); err != nil {
			t.Fatal(err)
		}
	}
	return l, f
}

// scanKeys scans [from, to) and checks every value (key+1).
func scanKeys(t *testing.T, c *Client, from, to uint64) []uint64 {
	t.Helper()
	var got []uint64
	if err := c.Scan(from, to, func(k, v uint64) bool {
		if v != k+1 {
			t.Fatalf("scan [%d, %d): key %d has value %d", from, to, k, v)
		}
		got = append(got, k)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func wantKeys(sorted []uint64, from, to uint64) []uint64 {
	i, _ := slices.BinarySearch(sorted, from)
	j, _ := slices.BinarySearch(sorted, to)
	return sorted[i:j]
}

func evens(n uint64) []uint64 {
	var ks []uint64
	for k := uint64(0); k < n; k += 2 {
		ks = append(ks, k)
	}
	return ks
}

// TestNAMHeadNodeFormat: a head node and a full leaf with a head pointer
// survive Encode and Decode; an unknown flag does not decode.
func TestNAMHeadNodeFormat(t *testing.T) {
	b := make([]byte, NodeSize)
	leaf := Node{Head: MakePtr(2, 77), HasHigh: true, High: 1 << 40, Low: 3, Sibling: MakePtr(1, 5)}
	for i := range MaxFanout {
		leaf.Insert(uint64(10+i), ^uint64(i))
	}
	Encode(b, &leaf)
	var got Node
	if err := Decode(b, &got); err != nil || got.Head != leaf.Head || got.IsHead || !slices.Equal(got.Vals, leaf.Vals) {
		t.Fatalf("leaf: %v, head %v, vals %v", err, got.Head, got.Vals)
	}
	head := Node{IsHead: true, Keys: []uint64{3, 9}, Vals: []uint64{uint64(MakePtr(0, 4)), uint64(MakePtr(1, 8))}, Sibling: MakePtr(2, 9)}
	Encode(b, &head)
	if err := Decode(b, &got); err != nil || !got.IsHead || got.Head.Valid() || got.Sibling != head.Sibling || len(got.Keys) != 2 {
		t.Fatalf("head node: %v, %+v", err, got)
	}
	b[13] |= 8
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[12:], castagnoli))
	if err := Decode(b, &got); err == nil {
		t.Fatal("a node with flag bit 3 decoded")
	}
}

// TestNAMHeadNodeScans: for FG and hybrid, scans that prefetch through fresh
// head nodes read exactly the keys scans without them read, and wait for
// far fewer round trips; a second pass changes nothing.
func TestNAMHeadNodeScans(t *testing.T) {
	for _, d := range []Design{FineGrained, Hybrid} {
		t.Run(string(d), func(t *testing.T) {
			keys := evens(6000)
			l, f := loadTree(t, d, keys)
			pass := &Client{L: l, F: f, Alloc: 1}
			st, err := pass.RefreshHeads(4)
			if err != nil {
				t.Fatal(err)
			}
			if st.Groups < st.Leaves/4 || st.NewHeads != st.Groups || st.LeafWrites != st.Leaves {
				t.Fatalf("first pass: %+v", st)
			}
			if st, err = pass.RefreshHeads(4); err != nil || st.NewHeads+st.HeadWrites+st.LeafWrites != 0 {
				t.Fatalf("second pass of an unchanged tree: %+v, %v", st, err)
			}
			if _, _, err := CheckTree(l, f.mem); err != nil {
				t.Fatal(err)
			}
			with := &Client{L: l, F: f, HeadNodes: true}
			without := &Client{L: l, F: f}
			unbatched := &Client{L: l, F: plainFabric{f}, HeadNodes: true}
			rng := rand.New(rand.NewPCG(5, 6))
			var waitsWith, waitsWithout uint64
			for range 300 {
				from := rng.Uint64N(6000)
				to := from + 1 + rng.Uint64N(300)
				w0 := *f.waits
				a := scanKeys(t, with, from, to)
				w1 := *f.waits
				b := scanKeys(t, without, from, to)
				waitsWith, waitsWithout = waitsWith+w1-w0, waitsWithout+*f.waits-w1
				c := scanKeys(t, unbatched, from, to)
				if want := wantKeys(keys, from, to); !slices.Equal(a, want) || !slices.Equal(b, want) || !slices.Equal(c, want) {
					t.Fatalf("scan [%d, %d): with head nodes %v, without %v, unbatched %v, want %v", from, to, a, b, c, want)
				}
			}
			t.Logf("%s: round trips per scan %.2f with head nodes, %.2f without; %+v", d, float64(waitsWith)/300, float64(waitsWithout)/300, with.Stats)
			if with.Stats.PrefetchHits == 0 || with.Stats.StaleHeads != 0 || 3*waitsWith > 2*waitsWithout {
				t.Fatalf("with head nodes %d round trips, without %d; %+v", waitsWith, waitsWithout, with.Stats)
			}
		})
	}
}

// TestNAMStaleHeadNodes: splits after the pass leave head nodes that miss the
// new leaves; scans still read every key (the extra READ), and find no
// stale head node once the pass ran again. A scan that trusts the head
// node over the sibling pointer (the mutant) loses keys.
func TestNAMStaleHeadNodes(t *testing.T) {
	for _, d := range []Design{FineGrained, Hybrid} {
		t.Run(string(d), func(t *testing.T) {
			keys := evens(4000)
			l, f := loadTree(t, d, keys)
			pass := &Client{L: l, F: f, Alloc: 1}
			if _, err := pass.RefreshHeads(4); err != nil {
				t.Fatal(err)
			}
			w := &Client{L: l, F: f}
			rng := rand.New(rand.NewPCG(7, 8))
			for range 1500 {
				k := 2*rng.Uint64N(2000) + 1
				if err := w.Put(k, k+1); err != nil {
					t.Fatal(err)
				}
				if i, found := slices.BinarySearch(keys, k); !found {
					keys = slices.Insert(keys, i, k)
				}
			}
			check := func(c *Client) (wrong int) {
				for range 200 {
					from := rng.Uint64N(4000)
					to := from + 1 + rng.Uint64N(200)
					if !slices.Equal(scanKeys(t, c, from, to), wantKeys(keys, from, to)) {
						wrong++
					}
				}
				return wrong
			}
			c := &Client{L: l, F: f, HeadNodes: true}
			if wrong := check(c); wrong > 0 || c.Stats.StaleHeads == 0 {
				t.Fatalf("stale head nodes: %d wrong scans, %+v", wrong, c.Stats)
			}
			mutant := &Client{L: l, F: f, HeadNodes: true, Mut: Mutations{TrustHead: func() bool { return true }}}
			if wrong := check(mutant); wrong == 0 {
				t.Fatal("the scan that trusts stale head nodes read every key right: the test cannot see the bug")
			}
			st, err := pass.RefreshHeads(4)
			if err != nil || st.LeafWrites == 0 {
				t.Fatalf("the pass after splits: %+v, %v", st, err)
			}
			if _, _, err := CheckTree(l, f.mem); err != nil {
				t.Fatal(err)
			}
			c.Stats = Stats{}
			if wrong := check(c); wrong > 0 || c.Stats.StaleHeads != 0 || c.Stats.PrefetchHits == 0 {
				t.Fatalf("refreshed head nodes: %d wrong scans, %+v", wrong, c.Stats)
			}
		})
	}
}

// TestNAMGarbledHeadNodes: head nodes whose lists name the wrong leaves
// (each head node given the next one's leaves) cost READs, never keys.
func TestNAMGarbledHeadNodes(t *testing.T) {
	keys := evens(3000)
	l, f := loadTree(t, FineGrained, keys)
	pass := &Client{L: l, F: f, Alloc: 1}
	if _, err := pass.RefreshHeads(6); err != nil {
		t.Fatal(err)
	}
	var heads [][]byte
	var lists [][]uint64
	for _, m := range f.mem {
		for slot := uint64(1); slot < l.Slots; slot++ {
			b := m[slot*NodeSize : (slot+1)*NodeSize]
			var n Node
			if Decode(b, &n) == nil && n.IsHead {
				heads, lists = append(heads, b), append(lists, n.Vals)
			}
		}
	}
	if len(heads) < 2 {
		t.Fatalf("%d head nodes", len(heads))
	}
	for i, b := range heads {
		var n Node
		if err := Decode(b, &n); err != nil {
			t.Fatal(err)
		}
		other := lists[(i+1)%len(lists)]
		for j := range n.Vals {
			n.Vals[j] = other[j%len(other)]
		}
		Encode(b, &n)
	}
	c := &Client{L: l, F: f, HeadNodes: true}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 200 {
		from := rng.Uint64N(3000)
		to := from + 1 + rng.Uint64N(200)
		if got, want := scanKeys(t, c, from, to), wantKeys(keys, from, to); !slices.Equal(got, want) {
			t.Fatalf("scan [%d, %d) over garbled head nodes: %v, want %v", from, to, got, want)
		}
	}
	if c.Stats.StaleHeads == 0 {
		t.Fatalf("garbled head nodes not noticed: %+v", c.Stats)
	}
}

// TestNAMHeadPassConcurrent: the pass runs again and again beside writers and
// scanners (goroutines, each verb atomic): every scan reads every key loaded
// before it started, in order, and the tree at rest checks.
func TestNAMHeadPassConcurrent(t *testing.T) {
	for _, d := range []Design{FineGrained, Hybrid} {
		t.Run(string(d), func(t *testing.T) {
			keys := evens(3000)
			l, lf := loadTree(t, d, keys)
			f := yieldFabric{lf}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			errs := make(chan error, 8)
			wg.Add(1)
			go func() {
				defer wg.Done()
				pass := &Client{L: l, F: f, Alloc: 7}
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := pass.RefreshHeads(4); err != nil {
						errs <- fmt.Errorf("pass: %w", err)
						return
					}
				}
			}()
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := &Client{L: l, F: f, Alloc: i}
					rng := rand.New(rand.NewPCG(uint64(i), 11))
					for range 1500 {
						k := 2*rng.Uint64N(1500) + 1
						if err := c.Put(k, k+1); err != nil {
							errs <- fmt.Errorf("put: %w", err)
							return
						}
					}
				}()
			}
			var scanWG sync.WaitGroup
			for i := range 2 {
				scanWG.Add(1)
				go func() {
					defer scanWG.Done()
					c := &Client{L: l, F: f, HeadNodes: true}
					rng := rand.New(rand.NewPCG(uint64(i), 12))
					for range 400 {
						from := rng.Uint64N(3000)
						to := from + 1 + rng.Uint64N(200)
						var got []uint64
						if err := c.Scan(from, to, func(k, v uint64) bool { got = append(got, k); return true }); err != nil {
							errs <- fmt.Errorf("scan: %w", err)
							return
						}
						var even []uint64
						for j, k := range got {
							if k < from || k >= to || j > 0 && k <= got[j-1] {
								t.Errorf("scan [%d, %d): %v out of order or range", from, to, got)
								return
							}
							if k%2 == 0 {
								even = append(even, k)
							}
						}
						if want := wantKeys(keys, from, to); !slices.Equal(even, want) {
							t.Errorf("scan [%d, %d): even keys %v, want %v", from, to, even, want)
							return
						}
					}
				}()
			}
			scanWG.Wait()
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if _, _, err := CheckTree(l, lf.mem); err != nil {
				t.Fatal(err)
			}
		})
	}
}
