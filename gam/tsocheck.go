package gam

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/scalestore-go/scalestore/checker"
)

// maxTSOViolations bounds what CheckTSO reports.
const maxTSOViolations = 100

// CheckTSO checks a history against what TSO promises per key (the
// package doc says what it cannot see). A history's Client is a thread;
// values written are unique and keys start at 0. Each string is one
// violation:
//   - a read returns 0 or a value some write of that key wrote, and not
//     a write issued only after the read returned;
//   - one thread's reads of a key never go back: once it saw (read or
//     wrote) a value, it never reads a value it saw before that one, so a
//     thread sees its own writes and then only later ones;
//   - the threads agree on one order of each key's writes: the orders
//     each thread saw, with its own writes in program order, have no
//     cycle (coherence).
func CheckTSO(ops []checker.Op) []string {
	var out []string
	report := func(format string, args ...any) {
		if len(out) < maxTSOViolations {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	byKey := map[uint64][]int{}
	var keys []uint64
	for i, op := range ops {
		if _, ok := byKey[op.Page]; !ok {
			keys = append(keys, op.Page)
		}
		byKey[op.Page] = append(byKey[op.Page], i)
	}
	slices.Sort(keys)
	for _, key := range keys {
		checkKey(ops, key, byKey[key], report)
	}
	return out
}

// checkKey checks one key's operations (indexes into ops).
func checkKey(ops []checker.Op, key uint64, idx []int, report func(string, ...any)) {
	// The values written, each a vertex of the order graph; 0 is vertex 0.
	vertex := map[uint64]int{0: 0}
	writer := []int{-1}
	for _, i := range idx {
		op := ops[i]
		switch op.Kind {
		case checker.KindWrite:
			if _, dup := vertex[op.Value]; dup {
				report("key %d: value %d written twice (or the initial 0 written): values must be unique", key, op.Value)
				continue
			}
			vertex[op.Value] = len(writer)
			writer = append(writer, i)
		case checker.KindRead:
		default:
			report("key %d: a %q by thread %d, which TSO's check does not take", key, op.Kind, op.Client)
		}
	}
	edges := make([][]int, len(writer))
	for v := 1; v < len(writer); v++ {
		edges[0] = append(edges[0], v) // every write follows the initial value
	}
	// Each thread's operations in its program order.
	byThread := map[int][]int{}
	var threads []int
	for _, i := range idx {
		c := ops[i].Client
		if _, ok := byThread[c]; !ok {
			threads = append(threads, c)
		}
		byThread[c] = append(byThread[c], i)
	}
	slices.Sort(threads)
	for _, c := range threads {
		mine := byThread[c]
		slices.SortStableFunc(mine, func(a, b int) int { return cmp.Compare(ops[a].Call, ops[b].Call) })
		seen := map[uint64]bool{0: true}
		cur := uint64(0)
		curWrote := false
		for _, i := range mine {
			op := ops[i]
			if op.Kind != checker.KindRead && op.Kind != checker.KindWrite {
				continue
			}
			v, ok := vertex[op.Value]
			if !ok {
				report("key %d: thread %d read %d, which no write of the key wrote", key, c, op.Value)
				continue
			}
			if op.Kind == checker.KindRead && v > 0 && op.Return < ops[writer[v]].Call {
				report("key %d: thread %d read %d at %d, before thread %d issued that write at %d", key, c, op.Value, op.Return, ops[writer[v]].Client, ops[writer[v]].Call)
			}
			if op.Value == cur {
				continue
			}
			if op.Kind == checker.KindRead && seen[op.Value] {
				if curWrote {
					report("key %d: thread %d wrote %d, then read %d, which it had seen before (a thread must see its own writes)", key, c, cur, op.Value)
				} else {
					report("key %d: thread %d read %d after it had seen %d, which came after %d (its reads went back)", key, c, op.Value, cur, op.Value)
				}
			}
			edges[vertex[cur]] = append(edges[vertex[cur]], v)
			seen[op.Value] = true
			cur, curWrote = op.Value, op.Kind == checker.KindWrite
		}
	}
	if cycle := findCycle(edges); cycle != nil {
		vals := make([]uint64, len(cycle))
		for i, v := range cycle {
			if v > 0 {
				vals[i] = ops[writer[v]].Value
			}
		}
		report("key %d: the threads saw its writes in orders no single order agrees with: %v then %d again", key, vals, vals[0])
	}
}

// findCycle returns the vertices of a cycle of the graph, or nil.
func findCycle(edges [][]int) []int {
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(edges))
	parent := make([]int, len(edges))
	type frame struct{ v, next int }
	for root := range edges {
		if color[root] != white {
			continue
		}
		stack := []frame{{root, 0}}
		color[root] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(edges[top.v]) {
				color[top.v] = black
				stack = stack[:len(stack)-1]
				continue
			}
			w := edges[top.v][top.next]
			top.next++
			switch color[w] {
			case white:
				color[w], parent[w] = grey, top.v
				stack = append(stack, frame{w, 0})
			case grey:
				// w is on the stack: the cycle is w ... top.v.
				cycle := []int{top.v}
				for u := top.v; u != w; {
					u = parent[u]
					cycle = append(cycle, u)
				}
				slices.Reverse(cycle)
				return cycle
			}
		}
	}
	return nil
}
