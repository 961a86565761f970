package scenarios

import (
	"slices"

	"github.com/scalestore-go/scalestore/protocol"
)

// copies counts the valid copies of a page that crossCheck finds.
type copies struct{ x, s int }

// crossState is what crossCheck keeps between its runs: the pages it
// checks and, for each, its counts (cleared at every run).
type crossState struct {
	pids   []protocol.PID
	index  map[protocol.PID]*copies
	counts []copies
}

// crossCheck recomputes, from the frames themselves, the valid copies of
// every page and compares them with the ghost state the invariant checker
// keeps from the nodes' reports: a node that changed a copy without saying
// so would otherwise hide from the single-writer check. It also checks every
// valid copy against the last completed write. It runs every
// crossCheckInterval steps, and after every step in builds with -tags
// invariants.
//
// It walks each node's frames once, not every page on every node, so its
// cost is the cluster's frames plus the pages (not their product): at 256
// nodes the product made the check most of the simulator's time.
// crossCheckInterval is how many steps apart crossCheck runs in a cluster
// of frames frames: crossCheckEvery, stretched to 4 steps a frame in large
// clusters so that its cost per step stays bounded (a quarter of a frame)
// whatever the node count. Builds with -tags invariants keep every step.
func crossCheckInterval(frames int) uint64 {
	if crossCheckEvery == 1 {
		return 1
	}
	return uint64(max(crossCheckEvery, 4*frames))
}

func (c *cluster) crossCheck(pids []protocol.PID) {
	x := &c.cross
	if !slices.Equal(x.pids, pids) {
		// The pages of a run do not change: their index is made once.
		x.pids = slices.Clone(pids)
		x.index = make(map[protocol.PID]*copies, len(pids))
		x.counts = make([]copies, len(pids))
		for i, pid := range pids {
			x.index[pid] = &x.counts[i]
		}
	}
	clear(x.counts)
	held := x.index
	for _, n := range c.nodes {
		if n.Dead() {
			continue // its copies went with it (Crash told the checker)
		}
		cache := n.Cache()
		for i := range cache.Frames() {
			f := cache.Frame(i)
			if f.Mode != protocol.ModeExclusive && f.Mode != protocol.ModeShared {
				continue
			}
			cnt := held[f.PID]
			if cnt == nil || f.Evicting || cache.Lookup(f.PID) != f {
				continue // not a checked page, on its way out, or not the frame the node looks up
			}
			if f.Mode == protocol.ModeExclusive {
				cnt.x++
			} else {
				cnt.s++
			}
			if f.Latch.HeldExclusive() || f.Unreadable {
				continue // a writer is at work on it, or there is no value to check
			}
			if ok, why := c.inv.Matches(f.PID, cache.Page(f)); !ok {
				c.inv.Fail("page %v: node %d holds a valid %v copy that is not the last write: %s", f.PID, n.ID(), f.Mode, why)
			}
		}
	}
	for _, pid := range pids {
		cnt := held[pid]
		if gx, gs := c.inv.Copies(pid); gx != cnt.x || gs != cnt.s {
			c.inv.Fail("page %v: frames hold %d exclusive and %d shared copies, the nodes reported %d and %d", pid, cnt.x, cnt.s, gx, gs)
		}
	}
}
