package btree_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scalestore-go/scalestore"
	"github.com/scalestore-go/scalestore/internal/inparallel"
)

// TestConcurrentTree runs the B-tree on the real-world runtime from several
// goroutines at once, each owning a key range it checks against its own
// map, with a cache far smaller than the tree so pages are evicted and
// read back while other goroutines traverse them. Run it with -race.
func TestConcurrentTree(t *testing.T) {
	const workers = 4
	ops := 1500
	if testing.Short() {
		ops = 800
	}
	db, err := scalestore.Open("", scalestore.Options{InMemory: true, CachePages: 16, Slots: 1 << 14})
	if err != nil {
		t.Fatal(err)
	}
	key := func(g, i int) []byte { return fmt.Appendf(nil, "w%d/%06d", g, i) }
	value := func(g, i, n int) []byte { return bytes.Repeat(fmt.Appendf(nil, "%d.%d.%d;", g, i, n), 1+i%12) }
	models := make([]map[string]string, workers)
	for g := range workers {
		models[g] = map[string]string{}
	}
	inparallel.Run(t, workers, func(g int) error {
		m := models[g]
		r := rand.New(rand.NewPCG(uint64(g), 3))
		var buf []byte
		for n := range ops {
			i := r.IntN(1500)
			k := key(g, i)
			switch op := r.IntN(10); {
			case op < 5:
				v := value(g, i, n)
				if err := db.Put(k, v); err != nil {
					return err
				}
				m[string(k)] = string(v)
			case op < 7:
				found, err := db.Delete(k)
				if err != nil {
					return err
				}
				if _, want := m[string(k)]; found != want {
					return fmt.Errorf("delete %s: found %v, model %v", k, found, want)
				}
				delete(m, string(k))
			case op == 8: // a batch of this goroutine's keys, some absent
				var keys, vals [][]byte
				for j := range 1 + r.IntN(40) {
					keys = append(keys, key(g, (i+j*37)%1500))
					vals = append(vals, nil)
				}
				found := make([]bool, len(keys))
				if err := db.GetBatch(keys, vals, found); err != nil {
					return err
				}
				for j, k := range keys {
					if want, in := m[string(k)]; found[j] != in || string(vals[j]) != want {
						return fmt.Errorf("batch get %s: %q %v, model %q %v", k, vals[j], found[j], want, in)
					}
				}
			case op < 9:
				v, ok, err := db.Get(k, buf[:0])
				if err != nil {
					return err
				}
				buf = v
				if want, in := m[string(k)]; ok != in || (ok && string(v) != want) {
					return fmt.Errorf("get %s: %q %v, model %q %v", k, v, ok, want, in)
				}
			default: // a scan across the whole tree: other goroutines' keys change under it
				prev := []byte{}
				var disorder error
				err := db.Scan(nil, nil, func(k, _ []byte) bool {
					if bytes.Compare(k, prev) <= 0 {
						disorder = fmt.Errorf("scan out of order: %q after %q", k, prev)
						return false
					}
					prev = append(prev[:0], k...)
					return true
				})
				if err != nil {
					return err
				}
				if disorder != nil {
					return disorder
				}
			}
		}
		return nil
	})
	total := 0
	for g := range workers {
		total += len(models[g])
		for k, want := range models[g] {
			v, ok, err := db.Get([]byte(k), nil)
			if err != nil || !ok || string(v) != want {
				t.Fatalf("after the run: get %s = %q %v %v, want %q", k, v, ok, err, want)
			}
		}
	}
	n := 0
	if err := db.Scan(nil, nil, func(k, v []byte) bool { n++; return true }); err != nil || n != total {
		t.Fatalf("final scan: %d keys (%v), models hold %d", n, err, total)
	}
	st := db.Stats()
	if st.CacheMisses == 0 {
		t.Error("the tree fit in the cache: no eviction was exercised")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
