package protocol

// Placement maps directory dir to the nodes that keep its pages in the view
// whose members are live (docs/replication.md, decision 1): the primary
// serves the directory, the backup keeps a copy of every page. With one
// replica the primary is dir itself and there is no backup (hasBackup
// false); ok is false when dir is not in the view (its pages are out of
// reach). With two, the primary is dir when it is a member, otherwise the
// first member after dir in id order (cyclic), and the backup is the first
// member after the primary; hasBackup is false when the primary is the
// only member. A failed primary's successor is thus its backup, which
// holds the copies, and a directory moves back to dir when dir returns.
func Placement(dir NodeID, live NodeSet, replicas int) (primary, backup NodeID, hasBackup, ok bool) {
	if replicas <= 1 {
		return dir, 0, false, live.Has(dir)
	}
	primary, ok = nextMember(dir, live, true)
	if !ok {
		return 0, 0, false, false
	}
	backup, hasBackup = nextMember(primary, live, false)
	if backup == primary {
		hasBackup = false
	}
	return primary, backup, hasBackup, true
}

// nextMember is the first member of live at or after (inclusive) or after
// from, in id order, wrapping around.
func nextMember(from NodeID, live NodeSet, inclusive bool) (NodeID, bool) {
	start := 1
	if inclusive {
		start = 0
	}
	for i := start; i <= MaxNodes; i++ {
		n := NodeID((int(from) + i) % MaxNodes)
		if live.Has(n) {
			return n, true
		}
	}
	return 0, false
}
