package scenarios

import (
	"github.com/scalestore-go/scalestore/protocol"
)

// crossCheck recomputes, from the frames themselves, the valid copies of
// every page and compares them with the ghost state the invariant checker
// keeps from the nodes' reports: a node that changed a copy without saying
// so would otherwise hide from the single-writer check. It also checks every
// valid copy against the last completed write. It runs every
// crossCheckEvery steps, and after every step in builds with -tags
// invariants.
func (c *cluster) crossCheck(pids []protocol.PID) {
	for _, pid := range pids {
		x, s := 0, 0
		for _, n := range c.nodes {
			f := n.Cache().Lookup(pid)
			if f == nil || f.Evicting {
				continue
			}
			switch f.Mode {
			case protocol.ModeExclusive:
				x++
			case protocol.ModeShared:
				s++
			default:
				continue
			}
			if f.Latch.HeldExclusive() || f.Unreadable {
				continue // a writer is at work on it, or there is no value to check
			}
			if ok, why := c.inv.Matches(pid, n.Cache().Page(f)); !ok {
				c.inv.Fail("page %v: node %d holds a valid %v copy that is not the last write: %s", pid, n.ID(), f.Mode, why)
			}
		}
		if gx, gs := c.inv.Copies(pid); gx != x || gs != s {
			c.inv.Fail("page %v: frames hold %d exclusive and %d shared copies, the nodes reported %d and %d", pid, x, s, gx, gs)
		}
	}
}
