package protocol

import "testing"

func members(ids ...NodeID) NodeSet {
	var s NodeSet
	for _, id := range ids {
		s.Add(id)
	}
	return s
}

func TestPlacement(t *testing.T) {
	for _, c := range []struct {
		dir             NodeID
		live            NodeSet
		replicas        int
		primary, backup NodeID
		hasBackup, ok   bool
	}{
		{1, members(0, 1, 2, 3), 1, 1, 0, false, true},
		{1, members(0, 2, 3), 1, 1, 0, false, false},
		{1, members(0, 1, 2, 3), 2, 1, 2, true, true},
		{3, members(0, 1, 2, 3), 2, 3, 0, true, true},
		// 1 died: its backup 2 serves, 3 is the new backup.
		{1, members(0, 2, 3), 2, 2, 3, true, true},
		// then 2 died too: 3 (the backup of 2 and of 1) serves both.
		{1, members(0, 3), 2, 3, 0, true, true},
		{2, members(0, 3), 2, 3, 0, true, true},
		{0, members(0, 3), 2, 0, 3, true, true},
		// one member left: no backup.
		{2, members(3), 2, 3, 0, false, true},
		{2, NodeSet{}, 2, 0, 0, false, false},
		{255, members(0, 255), 2, 255, 0, true, true},
	} {
		p, b, hb, ok := Placement(c.dir, c.live, c.replicas)
		if p != c.primary || hb != c.hasBackup || ok != c.ok || (hb && b != c.backup) {
			t.Errorf("Placement(%d, %v, %d) = %d, %d, %v, %v; want %d, %d, %v, %v",
				c.dir, c.live, c.replicas, p, b, hb, ok, c.primary, c.backup, c.hasBackup, c.ok)
		}
	}
}

// A failed primary's successor is its backup, for every view.
func TestPlacementFailsOverToTheBackup(t *testing.T) {
	live := members(0, 1, 2, 3, 4, 5, 6)
	for dir := NodeID(0); dir < 7; dir++ {
		p, b, _, _ := Placement(dir, live, 2)
		after := live
		after.Remove(p)
		p2, _, _, ok := Placement(dir, after, 2)
		if !ok || p2 != b {
			t.Errorf("dir %d: primary %d backup %d; without %d the primary is %d", dir, p, b, p, p2)
		}
	}
}
