package resp

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"
)

// fill stores key:0000 .. key:(n-1) through the server.
func fill(t *testing.T, rc *redis.Client, n int) []string {
	t.Helper()
	var keys []string
	var args []any
	for i := range n {
		k := fmt.Sprintf("key:%04d", i)
		keys = append(keys, k)
		args = append(args, k, "v"+strconv.Itoa(i))
	}
	res(rc.MSet(ctx, args...).Result()).must(t)
	return keys
}

func TestScanIterator(t *testing.T) {
	s, _ := startServer(t, Config{})
	rc := newRedis(t, s, nil)
	keys := fill(t, rc, 1000)
	res(rc.Set(ctx, "other", "x", 0).Result()).must(t)

	scan := func(match string, count int64) []string {
		t.Helper()
		var got []string
		it := rc.Scan(ctx, 0, match, count).Iterator()
		for it.Next(ctx) {
			got = append(got, it.Val())
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	all := append(slices.Clone(keys), "other")
	for _, count := range []int64{0, 1, 7, 10, 1000, 5000} {
		if got := scan("", count); !slices.Equal(got, all) {
			t.Fatalf("COUNT %d: %d keys, want %d (each once, in order)", count, len(got), len(all))
		}
	}
	// MATCH with a literal prefix, and with a pattern that has none.
	var want []string
	for _, k := range keys {
		if strings.HasPrefix(k, "key:01") {
			want = append(want, k)
		}
	}
	if got := scan("key:01*", 7); !slices.Equal(got, want) {
		t.Fatalf("MATCH key:01*: %v", got)
	}
	want = want[:0]
	for _, k := range keys {
		if strings.HasSuffix(k, "7") && k[len(k)-3] == '9' {
			want = append(want, k)
		}
	}
	if got := scan("*9?7", 50); !slices.Equal(got, want) {
		t.Fatalf("MATCH *9?7: %v, want %v", got, want)
	}
	if got := scan("nomatch*", 10); len(got) != 0 {
		t.Fatalf("MATCH nomatch*: %v", got)
	}
	if got := scan("[o]ther", 10); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("MATCH [o]ther: %v", got)
	}
}

func TestScanRaw(t *testing.T) {
	s, _ := startServer(t, Config{})
	c := dialRaw(t, s.Addr())
	c.send(cmd("MSET", "a", "1", "b", "2", "c", "3"))
	c.expect("+OK\r\n")

	// Cursors are decimal integers; "0" starts and ends.
	c.send(cmd("SCAN", "0", "COUNT", "2"))
	r, err := c.read()
	if err != nil {
		t.Fatal(err)
	}
	var cursor string
	var page []string
	i := 0
	r.ForEach(func(x redcon.RESP) bool {
		if i == 0 {
			cursor = x.String()
		} else {
			x.ForEach(func(k redcon.RESP) bool { page = append(page, k.String()); return true })
		}
		i++
		return true
	})
	if _, err := strconv.ParseUint(cursor, 10, 64); err != nil || cursor == "0" {
		t.Fatalf("cursor %q", cursor)
	}
	if !slices.Equal(page, []string{"a", "b"}) {
		t.Fatalf("first page %v", page)
	}
	c.send(cmd("SCAN", cursor, "COUNT", "2"))
	c.expect("*2\r\n$1\r\n0\r\n*1\r\n$1\r\nc\r\n")
	// A cursor can be used again.
	c.send(cmd("SCAN", cursor))
	c.expect("*2\r\n$1\r\n0\r\n*1\r\n$1\r\nc\r\n")

	c.send(cmd("SCAN", "0", "TYPE", "hash"))
	c.expect("*2\r\n$1\r\n0\r\n*0\r\n")
	c.send(cmd("SCAN", "0", "TYPE", "STRING", "MATCH", "[bc]"))
	c.expect("*2\r\n$1\r\n0\r\n*2\r\n$1\r\nb\r\n$1\r\nc\r\n")

	for _, bad := range []struct{ args []string }{
		{[]string{"SCAN", "abc"}},
		{[]string{"SCAN", "-1"}},
		{[]string{"SCAN", "12345"}},
	} {
		c.send(cmd(bad.args...))
		c.expect("-ERR invalid cursor\r\n")
	}
	c.send(cmd("SCAN", "0", "COUNT", "0") + cmd("SCAN", "0", "COUNT") + cmd("SCAN", "0", "FOO", "1") + cmd("SCAN", "0", "COUNT", "x") + cmd("SCAN"))
	c.expect("-ERR syntax error\r\n")
	c.expect("-ERR syntax error\r\n")
	c.expect("-ERR syntax error\r\n")
	c.expect("-ERR value is not an integer or out of range\r\n")
	c.expect("-ERR wrong number of arguments for 'scan' command\r\n")
}

// The cursor table is bounded: the oldest cursor is dropped.
func TestScanCursorEviction(t *testing.T) {
	s, _ := startServer(t, Config{})
	c := dialRaw(t, s.Addr())
	c.send(cmd("MSET", "a", "1", "b", "2"))
	c.expect("+OK\r\n")
	var b strings.Builder
	for range cursorSlots + 1 {
		b.WriteString(cmd("SCAN", "0", "COUNT", "1"))
	}
	c.send(b.String())
	var cursors []string
	for range cursorSlots + 1 {
		r, err := c.read()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		r.ForEach(func(x redcon.RESP) bool {
			if n == 0 {
				cursors = append(cursors, x.String())
			}
			n++
			return true
		})
	}
	c.send(cmd("SCAN", cursors[0]))
	c.expect("-ERR invalid cursor\r\n")
	c.send(cmd("SCAN", cursors[1]))
	c.expect("*2\r\n$1\r\n0\r\n*1\r\n$1\r\nb\r\n")
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", false}, // Redis's quirk; SCAN MATCH * skips matching
		{"**", "", false},
		{"*", "anything", true},
		{"**", "x", true},
		{"a*", "a", true},
		{"a*", "abc", true},
		{"a*", "ba", false},
		{"*c", "abc", true},
		{"*c", "abcd", false},
		{"a*c*e", "abcde", true},
		{"a*c*e", "abcdf", false},
		{"*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 60), false},
		{"?", "a", true},
		{"?", "", false},
		{"??", "a", false},
		{"h?llo", "hello", true},
		{"h?llo", "hllo", false},
		{"h[ae]llo", "hallo", true},
		{"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true},
		{"h[^e]llo", "hello", false},
		{"h[a-b]llo", "hbllo", true},
		{"h[a-b]llo", "hcllo", false},
		{"h[b-a]llo", "hbllo", true}, // a reversed range still works
		{"[\\]]", "]", true},
		{"[\\-]", "-", true},
		{"[a-]", "-", false}, // "a-]" would be a range; unterminated
		{"[]", "]", false},
		{"[abc", "b", true}, // unterminated set runs to the end
		{"[abc", "bx", false},
		{"\\*", "*", true},
		{"\\*", "a", false},
		{"a\\", "a\\", true}, // trailing backslash is literal
		{"\\?x", "?x", true},
		{"user:[0-9]*", "user:7abc", true},
		{"user:[0-9]*", "user:x7", false},
		{"*[xy]", "abcy", true},
		{"a\x00*", "a\x00b", true},
	}
	for _, tc := range cases {
		if got := globMatch([]byte(tc.pattern), []byte(tc.s)); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestPrefixRange(t *testing.T) {
	for _, tc := range []struct{ pattern, prefix, end string }{
		{"", "", ""},
		{"abc", "abc", "abd"},
		{"ab*", "ab", "ac"},
		{"a?c", "a", "b"},
		{"a[b]", "a", "b"},
		{"a\\*", "a", "b"},
		{"a\xff*", "a\xff", "b"},
		{"\xff\xff*", "\xff\xff", ""},
	} {
		p := literalPrefix([]byte(tc.pattern))
		if string(p) != tc.prefix {
			t.Errorf("literalPrefix(%q) = %q", tc.pattern, p)
		}
		if e := prefixEnd(p); string(e) != tc.end {
			t.Errorf("prefixEnd(%q) = %q, want %q", p, e, tc.end)
		}
	}
}
