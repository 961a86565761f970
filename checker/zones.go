package checker

import (
	"cmp"
	"math"
	"slices"

	"github.com/anishathalye/porcupine"
)

// Deciding a register whose writes are unique, by zones.
//
// When every write of a register stores a value no other write stores (and
// none stores the initial 0), each read names the one write it read from,
// and linearizability can be decided in O(n log n) instead of searched for
// (Gibbons and Korach, "Testing shared memories", SIAM J. Comput. 1997).
// Group each write with the reads of its value into a cluster; the initial
// value's cluster has a virtual write before everything. For a cluster, let
// r be the earliest return and c the latest call among its operations:
//
//   - r < c: a forward zone (r, c). Some operation of the cluster is over
//     at r, so its write took effect before r; another has not begun at c,
//     so the value was still there after c. The value is the register's
//     throughout (r, c).
//   - c < r: a backward zone [c, r]. All of the cluster's operations are
//     running at once there; the cluster can take effect at one instant in
//     it, and must, somewhere in it.
//
// The history is linearizable if and only if no read returns before its
// write is called, no two forward zones overlap (two values cannot both be
// current), and no backward zone lies inside a forward zone (its write
// would overwrite a value that is still needed).
//
// Times follow porcupine's reading of the history (Check): intervals are
// closed and, at one timestamp, calls come before returns, which is the
// same as comparing calls at 2t and returns at 2t+1. The zones use those
// rescaled times: a call and a return never tie, so r and c never tie
// either, and every comparison below is strict.

// zoneTime is a rescaled time: calls even, returns odd.
type zoneTime = int64

func callTime(t int64) zoneTime   { return 2 * t }
func returnTime(t int64) zoneTime { return 2*t + 1 }

type cluster struct {
	minReturn, maxCall zoneTime
	writeCall          zoneTime // the write's call; math.MinInt64 for the initial value
	readFirstReturn    zoneTime // the earliest return of a read of the value
	written, read      bool
}

type zone struct{ from, to zoneTime }

// decideByZones decides one page's operations. decided is false when the
// page is not eligible (a value written twice, a write of 0, an rmw): then
// porcupine must decide it.
func decideByZones(part []porcupine.Operation) (ok, decided bool) {
	clusters := make(map[uint64]*cluster, len(part)/2+1)
	get := func(v uint64) *cluster {
		c := clusters[v]
		if c == nil {
			c = &cluster{minReturn: math.MaxInt64, maxCall: math.MinInt64, readFirstReturn: math.MaxInt64}
			clusters[v] = c
		}
		return c
	}
	// The initial value: written before anything else happened.
	initial := get(0)
	initial.written, initial.writeCall, initial.minReturn, initial.maxCall = true, math.MinInt64, math.MinInt64, math.MinInt64
	for _, op := range part {
		in := op.Input.(*regOp)
		if op.Call < -math.MaxInt64/4 || op.Return > math.MaxInt64/4 {
			return false, false // too close to the ends of int64 to rescale
		}
		c := get(in.value)
		call, ret := callTime(op.Call), returnTime(op.Return)
		switch {
		case in.rmw:
			return false, false
		case in.write:
			if c.written {
				return false, false // a value written twice (or a write of 0)
			}
			c.written, c.writeCall = true, call
		default:
			c.read = true
			c.readFirstReturn = min(c.readFirstReturn, ret)
		}
		c.minReturn = min(c.minReturn, ret)
		c.maxCall = max(c.maxCall, call)
	}

	var forward, backward []zone
	for _, c := range clusters {
		if !c.written {
			return false, true // a read of a value nobody wrote (a torn or stale value)
		}
		if c.read && c.readFirstReturn < c.writeCall {
			return false, true // a read over before its write began
		}
		switch {
		case c.writeCall == math.MinInt64 && !c.read:
			// The initial value, never read: no constraint.
		case c.minReturn < c.maxCall:
			forward = append(forward, zone{c.minReturn, c.maxCall})
		default:
			backward = append(backward, zone{c.maxCall, c.minReturn})
		}
	}
	// Map order does not matter past this point: the zones are sorted.
	slices.SortFunc(forward, func(a, b zone) int { return cmp.Compare(a.from, b.from) })
	for i := 1; i < len(forward); i++ {
		// Sorted by start, forward zones are disjoint iff each starts at or
		// after the end of the one before (the ends then increase too).
		// Open intervals (r, c): touching at an end point is no overlap,
		// though rescaled r and c never tie anyway.
		if forward[i].from < forward[i-1].to {
			return false, true
		}
	}
	for _, b := range backward {
		// The only forward zone that can contain b is the last one that
		// starts before it.
		i, _ := slices.BinarySearchFunc(forward, b.from, func(z zone, t zoneTime) int { return cmp.Compare(z.from, t) })
		if i > 0 && forward[i-1].from < b.from && b.to < forward[i-1].to {
			return false, true
		}
	}
	return true, true
}
