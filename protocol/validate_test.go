package protocol

import "testing"

// TestValidatePlainIsSound: the fast path never accepts what the full
// check refuses. It tries every message over small domains that hold, for
// each field, values every type allows and values some type refuses.
func TestValidatePlainIsSound(t *testing.T) {
	flags := []Flags{0, FlagNoData, FlagFull, FlagDirty, FlagUnreadable, FlagAnyCopy, FlagLast, FlagDirty | FlagNoData, 0x80}
	counts := []uint16{0, 1, MaxEvictBatch + 1}
	tried, plain := 0, 0
	var m Message
	for typ := range typeCount + 1 {
		m.Type = typ
		for from := range NodeID(3) {
			m.From = from
			for to := range NodeID(3) {
				m.To = to
				for mode := range ModeExclusive + 2 {
					m.Mode = mode
					for _, f := range flags {
						m.Flags = f
						for _, c := range counts {
							m.Count = c
							for _, pid := range []PID{0, MakePID(from, 1)} {
								m.PID = pid
								for target := range NodeID(3) {
									m.Target = target
									for kp := range 4 {
										m.K, m.Pred = uint32(kp&1), uint32(kp>>1)
										for set := range 8 {
											m.Set = NodeSet{uint64(set)}
											tried++
											if !m.plain() {
												continue
											}
											plain++
											if err := m.explain(); err != nil {
												t.Fatalf("plain accepts %+v, which explain refuses: %v", m, err)
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	if plain == 0 {
		t.Fatalf("plain accepted none of %d messages", tried)
	}
	t.Logf("%d messages, %d plain", tried, plain)
}

// A start gate's frame carries a question (0) or one of two answers.
func TestValidateTxGate(t *testing.T) {
	for epoch, ok := range map[uint32]bool{0: true, TxGateRolling: true, TxGateRolled: true, 3: false, 1 << 31: false} {
		m := Message{Type: TTxGate, From: 1, To: 2, Epoch: epoch}
		var b [FrameSize]byte
		Encode(b[:], &m)
		_, err := Decode(b[:])
		if (err == nil) != ok {
			t.Fatalf("TTxGate epoch %d: %v", epoch, err)
		}
	}
}
