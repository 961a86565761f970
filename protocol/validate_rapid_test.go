package protocol

import (
	"testing"

	"pgregory.net/rapid"
)

// TestValidatePlainTakesCommonMessages: every well-formed message of a type
// with a rule, without the unreadable flag, takes the fast path (which is
// what it is for).
func TestValidatePlainTakesCommonMessages(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage().Draw(t, "m")
		switch m.Type {
		case TEvict, TEvictReply, THoldings, TRebuilt, TIndexCall, TIndexReply, TAllocReply:
			return
		}
		if m.Flags&FlagUnreadable != 0 {
			return
		}
		if err := m.explain(); err != nil {
			t.Fatalf("genMessage drew %+v, which explain refuses: %v", m, err)
		}
		if !m.plain() {
			t.Fatalf("plain refuses the well-formed %+v", m)
		}
	})
}
