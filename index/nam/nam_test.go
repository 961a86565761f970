package nam

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// localFabric reaches the servers' memory and handlers directly, under one
// lock per verb (so each verb is atomic, as the simulator's are).
// Waits counts the round trips a client waited for (a batch of READs is
// one).
type localFabric struct {
	mu      *sync.Mutex
	mem     [][]byte
	servers []*Server
	waits   *uint64
}

func (f localFabric) Read(dst []byte, r transport.Region, off uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.waits++
	copy(dst, f.mem[r.Node][off:])
	return nil
}

func (f localFabric) ReadBatch(ops []ReadOp) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.waits++
	for _, op := range ops {
		copy(op.Dst, f.mem[op.Region.Node][op.Off:])
	}
}
func (f localFabric) Write(r transport.Region, off uint64, src []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.waits++
	copy(f.mem[r.Node][off:], src)
	return nil
}
func (f localFabric) CompareAndSwap(r transport.Region, off, old, new uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.waits++
	w := f.mem[r.Node][off:]
	prev := binary.LittleEndian.Uint64(w)
	if prev == old {
		binary.LittleEndian.PutUint64(w, new)
	}
	return prev, nil
}
func (f localFabric) FetchAndAdd(r transport.Region, off, delta uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.waits++
	w := f.mem[r.Node][off:]
	prev := binary.LittleEndian.Uint64(w)
	binary.LittleEndian.PutUint64(w, prev+delta)
	return prev, nil
}
func (f localFabric) Call(server int, req, out []byte) ([]byte, error) {
	f.mu.Lock()
	*f.waits++
	f.mu.Unlock()
	return f.servers[server].Handle(req, out), nil
}

func newLocal(t *testing.T, d Design, servers int, keys uint64) (*Layout, localFabric) {
	t.Helper()
	l := &Layout{Design: d, Slots: 4096, Bounds: Bounds(servers, keys, false), Fanout: 5}
	f := localFabric{mu: &sync.Mutex{}, waits: new(uint64)}
	for i := range servers {
		l.Regions = append(l.Regions, transport.Region{Node: protocol.NodeID(i), Len: l.Slots * NodeSize})
		f.mem = append(f.mem, make([]byte, l.Slots*NodeSize))
		f.servers = append(f.servers, &Server{})
	}
	if err := Format(l, f.mem, f.servers); err != nil {
		t.Fatal(err)
	}
	return l, f
}

// TestAgainstAMap: each design, one client, random puts, deletes, gets and
// scans against a map; then the tree at rest holds exactly the map.
func TestAgainstAMap(t *testing.T) {
	for _, d := range []Design{CoarseGrained, FineGrained, Hybrid} {
		t.Run(string(d), func(t *testing.T) {
			const keys = 2000
			l, f := newLocal(t, d, 3, keys)
			c := &Client{L: l, F: f}
			model := map[uint64]uint64{}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range 20_000 {
				k := rng.Uint64N(keys)
				switch rng.IntN(10) {
				case 0, 1, 2, 3:
					v := uint64(i + 1)
					if err := c.Put(k, v); err != nil {
						t.Fatal(err)
					}
					model[k] = v
				case 4:
					found, err := c.Delete(k)
					if err != nil {
						t.Fatal(err)
					}
					if _, ok := model[k]; ok != found {
						t.Fatalf("delete %d: found %v, model %v", k, found, ok)
					}
					delete(model, k)
				case 5:
					to := k + rng.Uint64N(300) + 1
					var got []uint64
					if err := c.Scan(k, to, func(key, v uint64) bool {
						if model[key] != v {
							t.Fatalf("scan: key %d = %d, model %d", key, v, model[key])
						}
						got = append(got, key)
						return true
					}); err != nil {
						t.Fatal(err)
					}
					var want []uint64
					for key := range model {
						if key >= k && key < to {
							want = append(want, key)
						}
					}
					slices.Sort(want)
					if !slices.Equal(got, want) {
						t.Fatalf("scan [%d, %d): %v, want %v", k, to, got, want)
					}
				default:
					v, ok, err := c.Get(k)
					if err != nil {
						t.Fatal(err)
					}
					if mv, mok := model[k]; mok != ok || mv != v {
						t.Fatalf("get %d: %d %v, model %d %v", k, v, ok, mv, mok)
					}
				}
			}
			if d == CoarseGrained {
				return
			}
			ks, _, err := CheckTree(l, f.mem)
			if err != nil {
				t.Fatal(err)
			}
			if len(ks) != len(model) {
				t.Fatalf("the tree holds %d keys, the model %d", len(ks), len(model))
			}
		})
	}
}

// TestBadInput: malformed requests and pointers get errors, not panics or
// wrong answers.
func TestBadInput(t *testing.T) {
	l, f := newLocal(t, Hybrid, 2, 100)
	s := f.servers[0]
	var r reply
	for _, req := range [][]byte{nil, make([]byte, 31), append([]byte{99}, make([]byte, 31)...),
		(&request{op: opScan, key: 5, a: 5, b: 1}).encode(nil),
		(&request{op: opRegister, key: 1, a: 0}).encode(nil),
		(&request{op: opGet, key: 1}).encode(nil),     // a hybrid server keeps no values
		(&request{op: opLocate, key: 99}).encode(nil), // server 1's key
	} {
		if err := decodeReply(s.Handle(req, nil), &r); err != nil || r.status == statusOK {
			t.Fatalf("request % x: status %d, %v", req, r.status, err)
		}
	}
	c := &Client{L: l, F: f}
	var n Node
	for _, p := range []Ptr{0, MakePtr(7, 1), MakePtr(0, 0), MakePtr(0, l.Slots)} {
		if err := c.read(p, &n); err == nil {
			t.Fatalf("pointer %v read without an error", p)
		}
	}
	if err := decodeReply(make([]byte, 10), &r); err == nil {
		t.Fatal("a short reply decoded")
	}
}

// FuzzServerHandle: whatever bytes a compute node sends, a memory server
// of each design answers with a well-formed reply and never panics, and
// its tree stays whole.
func FuzzServerHandle(f *testing.F) {
	enc := func(r request) []byte { return r.encode(nil) }
	f.Add(uint8(0), enc(request{op: opGet, key: 3}))
	f.Add(uint8(1), enc(request{op: opPut, key: 3, a: 9}))
	f.Add(uint8(2), enc(request{op: opScan, key: 3, a: 90, b: 5}))
	f.Add(uint8(2), enc(request{op: opLocate, key: 70}))
	f.Add(uint8(2), enc(request{op: opRegister, key: 60, a: uint64(MakePtr(1, 1))}))
	f.Fuzz(func(t *testing.T, design uint8, b []byte) {
		d := []Design{CoarseGrained, FineGrained, Hybrid}[design%3]
		l, lf := newLocal(t, d, 2, 100)
		var r reply
		if err := decodeReply(lf.servers[0].Handle(b, nil), &r); err != nil {
			t.Fatalf("%s: reply to %x: %v", d, b, err)
		}
		if d != CoarseGrained {
			if _, _, err := CheckTree(l, lf.mem); err != nil {
				t.Fatalf("%s: after %x: %v", d, b, err)
			}
		}
	})
}
