package cell

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/scalestore-go/scalestore/index/nam"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// localFabric reaches the servers' memory and handlers directly. A READ
// copies without a lock, as a NIC does: it may see a server's write half
// done, which the checksum and the lock bit must catch.
type localFabric struct {
	mem     [][]byte
	servers []*Server
	mu      *sync.Mutex // guards mem for a READ under the race detector
	// errs gets what a meganode split's step or link reports.
	errs *[]error
}

func (f localFabric) Read(dst []byte, r transport.Region, off uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(dst, f.mem[r.Node][off:])
	return nil
}
func (f localFabric) Write(transport.Region, uint64, []byte) error {
	return errors.New("a Cell client never writes")
}
func (f localFabric) CompareAndSwap(transport.Region, uint64, uint64, uint64) (uint64, error) {
	return 0, errors.New("a Cell client never takes a lock")
}
func (f localFabric) FetchAndAdd(transport.Region, uint64, uint64) (uint64, error) {
	return 0, errors.New("a Cell client never takes a lock")
}
func (f localFabric) Call(server int, req, out []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out = f.servers[server].Handle(req, out)
	f.pump()
	return out, nil
}

// pump does one step of every meganode split that can step, and
// delivers the calls the servers made to servers (links, a split's
// reserve, adopts and unlock) with their replies: between calls, as a
// server's loop does between requests.
func (f localFabric) pump() {
	for _, s := range f.servers {
		if s.Ready() {
			if _, err := s.Step(); err != nil {
				*f.errs = append(*f.errs, err)
			}
		}
		for out := s.TakeOutgoing(); len(out) > 0; out = s.TakeOutgoing() {
			for _, o := range out {
				if err := s.HandleReply(f.servers[o.To].Handle(o.Req, nil)); err != nil {
					*f.errs = append(*f.errs, err)
				}
			}
		}
	}
}

// settle finishes the splits under way.
func (f localFabric) settle(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for range 100_000 {
		f.pump()
		if len(*f.errs) > 0 {
			t.Fatal(*f.errs)
		}
		busy := false
		for _, s := range f.servers {
			busy = busy || s.Pending()
		}
		if !busy {
			for _, s := range f.servers {
				if err := s.CheckFree(); err != nil {
					t.Fatal(err)
				}
			}
			return
		}
	}
	t.Fatal("the meganode splits do not end")
}

func newLocal(t *testing.T, servers, megas int, keys uint64, slots uint64, megaNodes int) (*Layout, localFabric) {
	t.Helper()
	l := &Layout{Slots: slots, ScanBatch: 3}
	f := localFabric{mu: &sync.Mutex{}, errs: new([]error)}
	for i := range servers {
		f.mem = append(f.mem, make([]byte, slots*nam.NodeSize))
		f.servers = append(f.servers, &Server{MegaNodes: megaNodes})
		l.Regions = append(l.Regions, transport.Region{Node: protocol.NodeID(i), Len: slots * nam.NodeSize})
	}
	if err := Format(l, f.mem, f.servers, Lows(megas, keys), 4); err != nil {
		t.Fatal(err)
	}
	return l, f
}

// TestAgainstAMap: every search method, with and without caching, gives
// what a map gives, through many splits of nodes and meganode roots, and,
// with meganodes of at most 24 nodes, of meganodes.
func TestAgainstAMap(t *testing.T) {
	for _, how := range []Search{ServerSide, ClientSide, Selector} {
		for _, cache := range []int{0, 1} {
			for _, mega := range []int{0, 24} {
				name := how.String() + map[int]string{0: "", 1: "-cached"}[cache] + map[int]string{0: "", 24: "-megasplits"}[mega]
				t.Run(name, func(t *testing.T) { testAgainstAMap(t, how, cache, mega) })
			}
		}
	}
}

func testAgainstAMap(t *testing.T, how Search, cache, mega int) {
	{
		{
			{
				const keys = 3000
				// Meganode splits: regions small enough that half of them
				// fill, so that halves move to other servers too.
				slots := map[bool]uint64{false: 4096, true: 1024}[mega > 0]
				l, f := newLocal(t, 3, 7, keys, slots, mega)
				l.CacheLevel = cache
				rng := rand.New(rand.NewPCG(1, uint64(how)))
				clock := int64(0)
				c := &Client{L: l, F: f, Search: how, Now: func() int64 { clock += 100; return clock }, Rand: rng.Uint64}
				model := map[uint64]uint64{}
				for i := range 20_000 {
					k := rng.Uint64N(keys)
					switch x := rng.IntN(10); {
					case x < 5:
						v := uint64(i + 1)
						if err := c.Put(k, v); err != nil {
							t.Fatal(err)
						}
						model[k] = v
					case x < 6:
						ok, err := c.Delete(k)
						_, want := model[k]
						if err != nil || ok != want {
							t.Fatalf("delete %d: %v %v, want %v", k, ok, err, want)
						}
						delete(model, k)
					case x < 9:
						v, ok, err := c.Get(k)
						w, want := model[k]
						if err != nil || ok != want || v != w {
							t.Fatalf("op %d: get %d: %d %v %v, want %d %v", i, k, v, ok, err, w, want)
						}
					default:
						to := k + 1 + rng.Uint64N(40)
						var got, want []uint64
						if err := c.Scan(k, to, func(k, _ uint64) bool { got = append(got, k); return true }); err != nil {
							t.Fatal(err)
						}
						for j := k; j < to; j++ {
							if _, ok := model[j]; ok {
								want = append(want, j)
							}
						}
						if !slices.Equal(got, want) {
							t.Fatalf("scan [%d, %d): %v, want %v", k, to, got, want)
						}
					}
				}
				f.settle(t)
				ks, vs, err := CheckTree(l, f.mem)
				if err != nil {
					t.Fatal(err)
				}
				if len(ks) != len(model) {
					t.Fatalf("the tree holds %d keys, the map %d", len(ks), len(model))
				}
				for i, k := range ks {
					if model[k] != vs[i] {
						t.Fatalf("key %d holds %d, want %d", k, vs[i], model[k])
					}
				}
				var splits uint64
				for _, s := range f.servers {
					splits += s.Splits
				}
				if splits < 100 {
					t.Fatalf("only %d splits: the test does not reach the split paths", splits)
				}
				if how == Selector && (c.Stats.ServerSearches == 0 || c.Stats.ClientSearches == 0) {
					t.Fatalf("the selector used one method only: %+v", c.Stats)
				}
				var megaSplits, adopted uint64
				for _, s := range f.servers {
					megaSplits, adopted = megaSplits+s.MegaSplits, adopted+s.Adopted
				}
				if mega > 0 && (megaSplits < 20 || adopted == 0 || adopted == megaSplits || c.Stats.Restarts == 0) {
					t.Fatalf("%d meganode splits (%d to another server), %d restarts: the test does not reach the meganode split's paths",
						megaSplits, adopted, c.Stats.Restarts)
				}
				if mega == 0 && megaSplits > 0 {
					t.Fatalf("%d meganode splits with MegaNodes 0", megaSplits)
				}
			}
		}
	}
}

// TestConcurrentReadsSeeNoTornNode: client-side searches run against a
// server splitting nodes under them; every get finds what was put before
// it began.
func TestConcurrentReadsSeeNoTornNode(t *testing.T) {
	const keys = 4000
	l, f := newLocal(t, 2, 3, keys, 8192, 0)
	l.CacheLevel = 1
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &Client{L: l, F: f, Search: ClientSide}
			for k := uint64(w); k < keys; k += 4 {
				if err := c.Put(k, k+1); err != nil {
					t.Error(err)
					return
				}
				if v, ok, err := c.Get(k); err != nil || !ok || v != k+1 {
					t.Errorf("get %d after its put: %d %v %v", k, v, ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if ks, _, err := CheckTree(l, f.mem); err != nil || len(ks) != keys {
		t.Fatalf("%d keys, %v", len(ks), err)
	}
}

// TestBadInput: requests that are malformed or name what is not a node of
// the server are refused; pointers out of range are refused by the
// client; a full server refuses a put that needs a node and loses nothing.
func TestBadInput(t *testing.T) {
	l, f := newLocal(t, 2, 2, 100, 16, 0)
	s := f.servers[0]
	var rep reply
	req := func(r request) []byte { return r.encode(nil) }
	bad := map[string][]byte{
		"short":          {1, 2, 3},
		"unknown op":     req(request{op: 9}),
		"reserved bytes": append([]byte{1, 1}, make([]byte, 40-2)...),
		"empty scan":     req(request{op: opScan, key: 5, a: 5, b: 1}),
		"huge scan":      req(request{op: opScan, key: 5, a: 9, b: maxScanEntries + 1}),
		"foreign node":   req(request{op: opSearch, key: 1, a: uint64(nam.MakePtr(1, 1))}),
		"header slot":    req(request{op: opSearch, key: 1, a: uint64(nam.MakePtr(0, 0))}),
		"unused slot":    req(request{op: opPut, key: 1, b: uint64(nam.MakePtr(0, 15))}),
		"nil pointer":    req(request{op: opDelete, key: 1}),
		// A server's calls to servers (a meganode split's), from a peer
		// that is wrong or lies.
		"adopt without its node":    req(request{op: opAdopt, key: 5, a: 1}),
		"adopt into no reservation": append(req(request{op: opAdopt, key: 5, a: 1}), make([]byte, nam.NodeSize)...),
		"a node after a non-adopt":  append(req(request{op: opUnlock, key: 5}), make([]byte, nam.NodeSize)...),
		"unlock of nothing":         req(request{op: opUnlock, key: 5}),
		"reserve of no slot":        req(request{op: opReserve, key: 5}),
		"reserve with a bad flag":   req(request{op: opReserve, key: 5, a: 1, c: 2}),
		"link to a nil root":        req(request{op: opLink, key: 5}),
	}
	for name, b := range bad {
		if err := decodeReply(s.Handle(b, nil), &rep); err != nil || rep.status != StatusBad {
			t.Errorf("%s: status %d, %v; want StatusBad", name, rep.status, err)
		}
	}
	// Replies to calls the server did not make are errors, not panics.
	for _, r := range []reply{{leaf: uint64(opReserve), value: 5}, {leaf: uint64(opAdopt)}, {leaf: uint64(opUnlock)}, {leaf: uint64(opSearch)}, {leaf: uint64(opLink), status: StatusBad}} {
		if err := s.HandleReply(r.encode(nil)); err == nil {
			t.Errorf("an unexpected reply %+v was taken", r)
		}
	}
	if err := s.HandleReply([]byte{1, 2}); err == nil {
		t.Error("a malformed reply was taken")
	}
	c := &Client{L: l, F: f, Search: ClientSide}
	if _, err := c.region(nam.MakePtr(7, 1)); err == nil {
		t.Error("a pointer to server 7 of 2 was taken")
	}
	if _, err := c.region(nam.MakePtr(0, 1<<40)); err == nil {
		t.Error("a slot past the region was taken")
	}
	// Fill the small servers until they refuse.
	var full error
	n := uint64(0)
	for ; n < 100 && full == nil; n++ {
		full = c.Put(n, n+10)
	}
	if !errors.Is(full, errFull) {
		t.Fatalf("after %d puts into 16-slot servers: %v, want errFull", n, full)
	}
	for k := range n - 1 {
		if v, ok, err := c.Get(k); err != nil || !ok || v != k+10 {
			t.Fatalf("key %d after the refusal: %d %v %v", k, v, ok, err)
		}
	}
	if _, _, err := CheckTree(l, f.mem); err != nil {
		t.Fatal(err)
	}
	// A torn node is retried, then refused, never trusted.
	binary.LittleEndian.PutUint32(f.mem[0][nam.NodeSize+8:], 0xdead)
	c2 := &Client{L: l, F: f, Search: ClientSide}
	if _, _, err := c2.Get(0); !errors.Is(err, errRetries) {
		t.Fatalf("a get through a corrupt node: %v", err)
	}
}

// TestSplitsSpreadAFullServer: every key goes to one meganode of server
// 0, whose region holds a fraction of them. Without meganode splits the
// server fills and refuses; with them, halves of the growing meganode
// move to the other servers, and every key goes in.
func TestSplitsSpreadAFullServer(t *testing.T) {
	const keys = 3000
	for _, mega := range []int{0, 16} {
		l, f := newLocal(t, 3, 3, 3*keys, 1000, mega)
		c := &Client{L: l, F: f, Search: ServerSide}
		var err error
		n := 0
		for order := rand.New(rand.NewPCG(3, 3)).Perm(keys); n < keys && err == nil; n++ {
			k := uint64(order[n])
			err = c.Put(k, k+1) // all below keys: meganode 0, on server 0
		}
		f.settle(t)
		if mega == 0 {
			if !errors.Is(err, errFull) {
				t.Fatalf("without splits, %d puts into one meganode of a 1,000-slot region: %v, want errFull", n, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("with splits, put number %d: %v", n, err)
		}
		ks, _, err := CheckTree(l, f.mem)
		if err != nil || len(ks) != keys {
			t.Fatalf("%d keys after the puts, %v", len(ks), err)
		}
		if f.servers[1].Adopted == 0 || f.servers[2].Adopted == 0 {
			t.Fatalf("meganodes moved to servers 1 and 2: %d and %d, want some to each", f.servers[1].Adopted, f.servers[2].Adopted)
		}
		for k := range uint64(keys) {
			if v, ok, err := c.Get(k); err != nil || !ok || v != k+1 {
				t.Fatalf("get %d: %d %v %v", k, v, ok, err)
			}
		}
	}
}

// FuzzServerHandle: whatever bytes a peer sends, a server answers with a
// well-formed reply and never panics; its memory stays a tree at rest.
func FuzzServerHandle(f *testing.F) {
	enc := func(r request) []byte { return r.encode(nil) }
	f.Add(enc(request{op: opSearch, key: 3, a: uint64(nam.MakePtr(0, 1))}))
	f.Add(enc(request{op: opPut, key: 3, a: 9, b: uint64(nam.MakePtr(0, 2))}))
	f.Add(enc(request{op: opReserve, key: 50, a: 3}))
	f.Add(append(enc(request{op: opAdopt, key: 12, a: 50}), make([]byte, nam.NodeSize)...))
	f.Add(enc(request{op: opUnlock, key: 50}))
	f.Add(enc(request{op: opLink, key: 40, a: uint64(nam.MakePtr(1, 3))}))
	f.Fuzz(func(t *testing.T, b []byte) {
		l := &Layout{Slots: 64}
		mem := [][]byte{make([]byte, 64*nam.NodeSize), make([]byte, 64*nam.NodeSize)}
		servers := []*Server{{MegaNodes: 8}, {MegaNodes: 8}}
		l.Regions = []transport.Region{{Node: 0, Len: 64 * nam.NodeSize}, {Node: 1, Len: 64 * nam.NodeSize}}
		if err := Format(l, mem, servers, Lows(2, 100), 4); err != nil {
			t.Fatal(err)
		}
		var r reply
		if err := decodeReply(servers[0].Handle(b, nil), &r); err != nil {
			t.Fatalf("reply to %x: %v", b, err)
		}
		if _, _, err := CheckTree(l, mem); err != nil {
			t.Fatalf("after %x: %v", b, err)
		}
	})
}
