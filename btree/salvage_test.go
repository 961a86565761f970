package btree

import (
	"bytes"
	"testing"
)

// successor is the smallest key after b: a salvage resumes there after a
// leaf whose upper fence is b, so it must skip no key and repeat none.
func TestSuccessorIsTheNextKey(t *testing.T) {
	long := func(tail ...byte) []byte { return append(bytes.Repeat([]byte{'k'}, MaxKey-len(tail)), tail...) }
	for _, tc := range []struct {
		b, want []byte
	}{
		{[]byte("a"), []byte("a\x00")},
		{[]byte{0xff}, []byte{0xff, 0}},
		{long('a'), long('b')},
		{long('a', 0xff, 0xff), append(bytes.Repeat([]byte{'k'}, MaxKey-3), 'b')},
		{bytes.Repeat([]byte{0xff}, MaxKey), nil},
	} {
		got := successor(nil, tc.b)
		if !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("successor(%q) = %q, want %q", tc.b, got, tc.want)
		}
		if got != nil && (bytes.Compare(got, tc.b) <= 0 || len(got) > MaxKey) {
			t.Errorf("successor(%q) = %q: not a key after it", tc.b, got)
		}
	}
}
