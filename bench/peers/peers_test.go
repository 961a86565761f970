package peers

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/ycsb"
)

func testOptions(t *testing.T) EngineOptions {
	return EngineOptions{Records: 1000, Cache: 8 << 20, TempDir: t.TempDir()}
}

// Every adapter must store what it is given, copy what it returns, and
// report absent keys as absent.
func TestEnginesRoundTrip(t *testing.T) {
	for _, name := range EngineNames {
		t.Run(name, func(t *testing.T) {
			e, err := Open(name, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := e.Close(); err != nil {
					t.Error(err)
				}
			}()
			var kb [8]byte
			val := make([]byte, ycsb.ValueSize)
			for i := range int64(50) {
				copy(val, fmt.Sprintf("value %d", i))
				if err := e.Put(ycsb.Key(kb[:], i), val); err != nil {
					t.Fatalf("put %d: %v", i, err)
				}
			}
			// Overwriting the caller's buffer must not change stored values.
			clear(val)
			// An update must replace the value.
			copy(val, "updated 7")
			if err := e.Put(ycsb.Key(kb[:], 7), val); err != nil {
				t.Fatalf("update 7: %v", err)
			}
			for i := range int64(50) {
				want := fmt.Sprintf("value %d", i)
				if i == 7 {
					want = "updated 7"
				}
				prefix := []byte("prefix")
				got, ok, err := e.Get(ycsb.Key(kb[:], i), prefix)
				if err != nil || !ok {
					t.Fatalf("get %d: ok %v, err %v", i, ok, err)
				}
				if len(got) != len(prefix)+ycsb.ValueSize || !bytes.HasPrefix(got, prefix) ||
					!bytes.HasPrefix(got[len(prefix):], []byte(want)) {
					t.Fatalf("get %d: %q, want prefix + %q padded to %d bytes", i, got, want, ycsb.ValueSize)
				}
			}
			if got, ok, err := e.Get(ycsb.Key(kb[:], 1000), nil); err != nil || ok || len(got) != 0 {
				t.Fatalf("get of an absent key: %q, ok %v, err %v", got, ok, err)
			}
		})
	}
}

// A tiny comparison must measure every engine on every mix.
func TestTinyRun(t *testing.T) {
	cfg := Config{
		Engines: EngineNames, Mixes: []Mix{Mixes["c"], Mixes["b"], Mixes["a"]}, Threads: []int{1, 2},
		Records: 1000, Duration: 100 * time.Millisecond, Engine: testOptions(t),
	}
	var streamed int
	rows, err := Run(cfg, func(Row) { streamed++ })
	if err != nil {
		t.Fatal(err)
	}
	if want := len(cfg.Engines) * len(cfg.Mixes) * len(cfg.Threads); len(rows) != want || streamed != want {
		t.Fatalf("%d rows (%d streamed), want %d", len(rows), streamed, want)
	}
	for _, r := range rows {
		if r.OpsPerSec <= 0 || r.Ops <= 0 {
			t.Errorf("%s mix %s, %d threads: %.0f ops/s over %d ops", r.Engine, r.Mix, r.Threads, r.OpsPerSec, r.Ops)
		}
	}
	var b strings.Builder
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count("\n"+b.String(), "\n| "); n != len(rows)+1 {
		t.Errorf("table has %d rows after the header, want %d:\n%s", n, len(rows)+1, b.String())
	}
}

func TestParse(t *testing.T) {
	if m, err := ParseMixes("c, B,a"); err != nil || len(m) != 3 || m[1].ReadRatio != 0.95 {
		t.Errorf("ParseMixes: %v, %v", m, err)
	}
	if _, err := ParseMixes("d"); err == nil {
		t.Error("ParseMixes accepted d")
	}
	if _, err := ParseEngines("pebble,rocksdb"); err == nil {
		t.Error("ParseEngines accepted rocksdb")
	}
	if th, err := ParseThreads("1,2"); err != nil || len(th) != 2 {
		t.Errorf("ParseThreads: %v, %v", th, err)
	}
	if n, err := ycsb.ParseSize("64MiB"); err != nil || n != 64<<20 {
		t.Errorf("ParseSize: %d, %v", n, err)
	}
	if got := group(1234567); got != "1,234,567" {
		t.Errorf("group: %s", got)
	}
}
