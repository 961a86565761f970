package resp

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// bigValue is n bytes that differ from one chunk to the next (a chunk
// read in the wrong place shows).
func bigValue(n int, seed byte) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte((i/7+int(seed))%26)
	}
	return string(b)
}

// Values of 1 KiB to 256 KiB through go-redis: stored in chunks when they
// do not fit an entry, read back whole; overwritten by large and small
// values and deleted, each time leaving exactly the entries of the live
// values (no chunk left behind); APPEND and SETRANGE growing a value past
// an entry; GETRANGE and STRLEN of one; EXPIRE of one; MSET, MULTI/EXEC
// and WATCH with them; KEYS, SCAN and DBSIZE never show a chunk; a key in
// the chunks' space is refused.
func TestLargeValues(t *testing.T) {
	s, e := startServer(t, Config{})
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2})
	defer rc.Close()
	ctx := context.Background()
	entries := func() int { return e.len() }
	chunks := func(n int) int { return (n + defaultMaxEntry - chunkKeyLen - 1) / (defaultMaxEntry - chunkKeyLen) }
	sizes := []int{1000, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10}
	want := 0
	for i, n := range sizes {
		k := fmt.Sprintf("big%d", i)
		v := bigValue(n, byte(i))
		if err := rc.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatalf("SET of %d bytes: %v", n, err)
		}
		got, err := rc.Get(ctx, k).Result()
		if err != nil || got != v {
			t.Fatalf("GET of a %d-byte value: %d bytes, %v", n, len(got), err)
		}
		want++
		if len(k)+n > defaultMaxEntry {
			want += chunks(n)
		}
		if entries() != want {
			t.Fatalf("after SET of %d bytes: %d entries, want %d", n, entries(), want)
		}
	}
	if n, err := rc.DBSize(ctx).Result(); err != nil || n != int64(len(sizes)) {
		t.Fatalf("DBSIZE %d %v, want %d", n, err, len(sizes))
	}
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil || len(keys) != len(sizes) {
		t.Fatalf("KEYS *: %q %v", keys, err)
	}
	scanned, _, err := rc.Scan(ctx, 0, "", 10000).Result()
	if err != nil || len(scanned) != len(sizes) {
		t.Fatalf("SCAN: %d keys %v, want %d", len(scanned), err, len(sizes))
	}

	// Overwrites: large by large, large by small, small by large; DEL.
	big4 := bigValue(64<<10, 9)
	mustSet := func(k, v string) {
		t.Helper()
		if err := rc.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatalf("SET %s of %d bytes: %v", k, len(v), err)
		}
		if got, err := rc.Get(ctx, k).Result(); err != nil || got != v {
			t.Fatalf("GET %s after SET of %d bytes: %d bytes, %v", k, len(v), len(got), err)
		}
	}
	mustSet("big5", big4) // 256 KiB -> 64 KiB
	want += chunks(64<<10) - chunks(256<<10)
	mustSet("big4", "small") // 64 KiB -> 5 bytes
	want -= chunks(64 << 10)
	mustSet("big0", bigValue(8<<10, 3)) // 1000 bytes -> 8 KiB
	want += chunks(8 << 10)
	if entries() != want {
		t.Fatalf("after the overwrites: %d entries, want %d", entries(), want)
	}
	if n, err := rc.Del(ctx, "big5", "big0").Result(); err != nil || n != 2 {
		t.Fatalf("DEL of two large values: %d %v", n, err)
	}
	want -= 2 + chunks(64<<10) + chunks(8<<10)
	if entries() != want {
		t.Fatalf("after DEL: %d entries, want %d", entries(), want)
	}
	if err := rc.Get(ctx, "big5").Err(); err != redis.Nil {
		t.Fatalf("GET of a deleted large value: %v", err)
	}

	// APPEND past an entry, then past more chunks; SETRANGE; GETRANGE.
	v := strings.Repeat("x", 1000)
	mustSet("grow", v)
	for range 5 {
		part := bigValue(700, byte(len(v)))
		n, err := rc.Append(ctx, "grow", part).Result()
		v += part
		if err != nil || n != int64(len(v)) {
			t.Fatalf("APPEND: %d %v, want length %d", n, err, len(v))
		}
	}
	if got, _ := rc.Get(ctx, "grow").Result(); got != v {
		t.Fatalf("after APPENDs: %d bytes, want %d", len(got), len(v))
	}
	if n, err := rc.SetRange(ctx, "grow", 10000, "END").Result(); err != nil || n != 10003 {
		t.Fatalf("SETRANGE past the end: %d %v", n, err)
	}
	v += strings.Repeat("\x00", 10000-len(v)) + "END"
	if got, _ := rc.Get(ctx, "grow").Result(); got != v {
		t.Fatalf("after SETRANGE: %d bytes, want %d", len(got), len(v))
	}
	if got, err := rc.GetRange(ctx, "grow", 990, 1010).Result(); err != nil || got != v[990:1011] {
		t.Fatalf("GETRANGE across chunks: %q %v, want %q", got, err, v[990:1011])
	}
	if n, err := rc.StrLen(ctx, "grow").Result(); err != nil || n != int64(len(v)) {
		t.Fatalf("STRLEN %d %v, want %d", n, err, len(v))
	}

	// EXPIRE on a large value: its TTL reads back, and it goes when due.
	if ok, err := rc.Expire(ctx, "grow", 100*time.Second).Result(); err != nil || !ok {
		t.Fatalf("EXPIRE: %v %v", ok, err)
	}
	if ttl, err := rc.TTL(ctx, "grow").Result(); err != nil || ttl < 99*time.Second {
		t.Fatalf("TTL %v %v", ttl, err)
	}
	if got, _ := rc.Get(ctx, "grow").Result(); got != v {
		t.Fatalf("after EXPIRE: %d bytes, want %d", len(got), len(v))
	}
	if err := rc.PExpire(ctx, "grow", time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if err := rc.Get(ctx, "grow").Err(); err != redis.Nil {
		t.Fatalf("GET of an expired large value: %v", err)
	}

	// MSET, MGET, MULTI/EXEC, WATCH.
	a, b := bigValue(20<<10, 1), bigValue(30<<10, 2)
	if err := rc.MSet(ctx, "ma", a, "mb", b).Err(); err != nil {
		t.Fatalf("MSET of large values: %v", err)
	}
	vs, err := rc.MGet(ctx, "ma", "mb").Result()
	if err != nil || vs[0] != a || vs[1] != b {
		t.Fatalf("MGET of large values: %v", err)
	}
	err = rc.Watch(ctx, func(tx *redis.Tx) error {
		got, err := tx.Get(ctx, "ma").Result()
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "mb", got+"!", 0)
			p.Append(ctx, "ma", "?")
			return nil
		})
		return err
	}, "ma")
	if err != nil {
		t.Fatalf("WATCH, MULTI/EXEC with large values: %v", err)
	}
	if got, _ := rc.Get(ctx, "mb").Result(); got != a+"!" {
		t.Fatalf("after EXEC: mb is %d bytes, want %d", len(got), len(a)+1)
	}
	if got, _ := rc.Get(ctx, "ma").Result(); got != a+"?" {
		t.Fatalf("after EXEC: ma is %d bytes, want %d", len(got), len(a)+1)
	}

	// The chunks' space is not the users'.
	reserved := string(chunkSpace[:]) + "x"
	if err := rc.Set(ctx, reserved, "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("SET of a key in the chunks' space: %v", err)
	}
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 0 {
		t.Fatalf("FLUSHALL left %d entries", n)
	}
}

// MSET of values that fit an entry reads none of its keys (the engine's
// PutUnless writes them blind), and over values in chunks it still drops
// their chunks: over one, over several, with a key given twice (large
// then small, small then large), leaving exactly the live entries.
func TestMSetOverLargeValues(t *testing.T) {
	s, e := startServer(t, Config{})
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2})
	defer rc.Close()
	ctx := context.Background()
	chunks := func(n int) int { return (n + defaultMaxEntry - chunkKeyLen - 1) / (defaultMaxEntry - chunkKeyLen) }
	mset := func(kv ...string) {
		t.Helper()
		args := make([]any, len(kv))
		for i := range kv {
			args[i] = kv[i]
		}
		if err := rc.MSet(ctx, args...).Err(); err != nil {
			t.Fatalf("MSET: %v", err)
		}
	}
	expect := func(when string, entries int, kv ...string) {
		t.Helper()
		for i := 0; i < len(kv); i += 2 {
			if got, err := rc.Get(ctx, kv[i]).Result(); err != nil || got != kv[i+1] {
				t.Fatalf("%s: GET %s: %d bytes %v, want %d", when, kv[i], len(got), err, len(kv[i+1]))
			}
		}
		if n := e.len(); n != entries {
			t.Fatalf("%s: %d entries, want %d", when, n, entries)
		}
	}

	mset("a", "1", "b", "2", "c", "3")
	if n := e.txReadCount(); n != 0 {
		t.Fatalf("MSET of new small values read %d keys", n)
	}
	mset("a", "4", "b", "5", "c", "6")
	if n := e.txReadCount(); n != 0 {
		t.Fatalf("MSET of small values over small ones read %d keys", n)
	}
	expect("small values", 3, "a", "4", "b", "5", "c", "6")

	big1, big2 := bigValue(10<<10, 1), bigValue(5<<10, 2)
	mset("a", big1, "b", big2)
	expect("large values", 3+chunks(len(big1))+chunks(len(big2)), "a", big1, "b", big2)
	mset("a", "7", "b", "8", "c", "9")
	expect("small over large", 3, "a", "7", "b", "8", "c", "9")

	mset("a", big1)
	mset("a", "x", "a", big2) // small, then large, over large
	expect("a key given twice, large last", 3+chunks(len(big2)), "a", big2)
	mset("a", big1, "a", "y") // large, then small, over large
	expect("a key given twice, small last", 3, "a", "y")
	mset("b", big1, "b", big2, "c", "z")
	expect("a key given twice, both large", 3+chunks(len(big2)), "b", big2, "c", "z")
}

// The manifest format is what big.go says, so that stores written by this
// version read the same in the next.
func TestManifestFormat(t *testing.T) {
	e := newFakeEngine()
	b := bigEngine{raw: e, entry: 64}
	val := appendValue(nil, bytes.Repeat([]byte{'z'}, 100), 1234)
	if err := b.Put([]byte("k"), val); err != nil {
		t.Fatal(err)
	}
	man, ok, _ := e.Get([]byte("k"), nil)
	if !ok || !isManifest(man) {
		t.Fatalf("stored %q, want a manifest", man)
	}
	if _, exp := decodeValue(man); exp != 1234 {
		t.Fatalf("the manifest's expiry reads %d, want 1234", exp)
	}
	got, ok, err := b.Get([]byte("k"), []byte("prefix"))
	if err != nil || !ok || string(got) != "prefix"+string(val) {
		t.Fatalf("Get after a prefix: %q %v %v", got, ok, err)
	}
	if n := e.len(); n != 1+(len(val)+47)/48 {
		t.Fatalf("%d entries for %d bytes in chunks of 48", n, len(val))
	}
}
