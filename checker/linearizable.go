package checker

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is the outcome of Check.
type Result struct {
	Ok         bool     // true when every partition is linearizable
	Unknown    bool     // true when porcupine timed out on some partition (treat as not proven)
	BadPages   []uint64 // pages whose partition is not linearizable, sorted ascending
	Partitions int      // number of partitions (distinct pages) checked
	Decided    int      // partitions decided by zones (unique writes), without porcupine
}

// regOp is what the model sees of one operation. It is both the porcupine
// Input and, for a read, the result: carrying a read's returned value in the
// input lets Step compare without unboxing a separate Output.
//
// Model states are *regOp too: the state after a step is the operation that
// was just linearized (its value is the register's value). Pointers into a
// slice built once per Check are stored in interfaces without allocating, so
// Init, Step, Equal and Hash never allocate.
type regOp struct {
	page  uint64
	value uint64 // written (write, rmw) or returned (read)
	read  uint64 // rmw: the value it read
	write bool
	rmw   bool
}

// initialState is the register before any write: value 0. Never modified.
var initialState = &regOp{}

func registerStep(state, input, _ any) (bool, any) {
	in := input.(*regOp)
	switch {
	case in.rmw:
		return in.read == state.(*regOp).value, in
	case in.write:
		return true, in
	}
	return in.value == state.(*regOp).value, in
}

func registerEqual(a, b any) bool { return a.(*regOp).value == b.(*regOp).value }

func registerHash(state any) uint64 {
	// splitmix64 finalizer: spreads nearby values over the cache buckets.
	x := state.(*regOp).value
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func describeOperation(input, _ any) string {
	in := input.(*regOp)
	if in.rmw {
		return "rmw " + strconv.FormatUint(in.read, 10) + " -> " + strconv.FormatUint(in.value, 10)
	}
	if in.write {
		return "write " + strconv.FormatUint(in.value, 10)
	}
	return "read -> " + strconv.FormatUint(in.value, 10)
}

func describeState(state any) string {
	s := state.(*regOp)
	if s == initialState {
		return "0 (initial)"
	}
	return fmt.Sprintf("page %d = %d", s.page, s.value)
}

func describeMetadata(md any) string {
	if in, ok := md.(*regOp); ok {
		return "page " + strconv.FormatUint(in.page, 10)
	}
	return ""
}

func pageOf(op porcupine.Operation) uint64 { return op.Input.(*regOp).page }

// partitionByPage groups history by page, in ascending page order, keeping
// the history order within a page. Check passes histories already sorted by
// page, for which this only slices runs; otherwise it sorts a copy.
func partitionByPage(history []porcupine.Operation) [][]porcupine.Operation {
	sorted := slices.IsSortedFunc(history, func(a, b porcupine.Operation) int {
		return cmp.Compare(pageOf(a), pageOf(b))
	})
	if !sorted {
		history = slices.Clone(history)
		slices.SortStableFunc(history, func(a, b porcupine.Operation) int {
			return cmp.Compare(pageOf(a), pageOf(b))
		})
	}
	var parts [][]porcupine.Operation
	for start := 0; start < len(history); {
		page := pageOf(history[start])
		end := start + 1
		for end < len(history) && pageOf(history[end]) == page {
			end++
		}
		parts = append(parts, history[start:end:end])
		start = end
	}
	return parts
}

// registerModel is a read/write register per page, initially 0.
var registerModel = porcupine.Model{
	Partition:                 partitionByPage,
	Init:                      func() any { return initialState },
	Step:                      registerStep,
	Equal:                     registerEqual,
	Hash:                      registerHash,
	DescribeOperation:         describeOperation,
	DescribeState:             describeState,
	DescribeOperationMetadata: describeMetadata,
}

// Check checks ops for linearizability as registers, one per page (initial
// value 0; a write stores its value; a read must return the current value;
// an rmw must read the current value and stores its own).
//
// A page whose writes all carry distinct values other than 0, and which
// has no rmw, is decided exactly by the zones of Gibbons and Korach
// (decideByZones), in O(n log n), whatever its size and concurrency; the
// other pages go to porcupine (CheckOperationsVerbose). Result.Decided
// counts the pages decided by zones. A page found bad by zones is still run
// through porcupine (within the timeout) for the returned info, which
// WriteVisualization draws; the verdict is the zones'.
//
// Times are passed to porcupine unchanged. Porcupine (v1.3.1) treats
// [Call, Return] as a closed interval and, at equal timestamps, orders calls
// before returns, so an operation with Call == Return is valid and two
// operations where one returns at the very nanosecond the other is called
// count as concurrent. That is the conservative reading of a simulated tick
// (it can never report a false violation); it is exactly what rescaling
// (2*t for calls, 2*t+1 for returns) would give, so no rescaling is done
// for porcupine; the zones use that rescaling.
//
// Every op must have a known Kind and Return >= Call (as ReadJSONLines
// guarantees); Check panics otherwise, since such a history is a bug in
// whatever recorded it.
//
// When porcupine's result is not Ok, the partitions that porcupine did not
// prove linearizable are re-checked one by one, in ascending page order, to
// fill BadPages; with a timeout, that second phase gets its own budget of
// the same length.
func Check(ops []Op, timeout time.Duration) (Result, porcupine.LinearizationInfo) {
	return check(ops, timeout, true)
}

// CheckPorcupine is Check with every page searched by porcupine, none
// decided by zones: the reference that the zones are compared with
// (`sim --checker porcupine`). It can take minutes where Check takes
// milliseconds.
func CheckPorcupine(ops []Op, timeout time.Duration) (Result, porcupine.LinearizationInfo) {
	return check(ops, timeout, false)
}

func check(ops []Op, timeout time.Duration, zones bool) (Result, porcupine.LinearizationInfo) {
	for i := range ops {
		if err := ops[i].validate(); err != nil {
			panic(fmt.Sprintf("checker.Check: op %d (%+v): %v", i, ops[i], err))
		}
	}
	// Order by page (then by position in ops, for determinism) so that
	// partitionByPage only slices.
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	if !slices.IsSortedFunc(ops, func(a, b Op) int { return cmp.Compare(a.Page, b.Page) }) {
		slices.SortFunc(order, func(a, b int) int {
			if c := cmp.Compare(ops[a].Page, ops[b].Page); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
	}
	ins := make([]regOp, len(ops))
	history := make([]porcupine.Operation, len(ops))
	for j, i := range order {
		op := &ops[i]
		ins[j] = regOp{page: op.Page, value: op.Value, read: op.Read, write: op.Kind != KindRead, rmw: op.Kind == KindRMW}
		history[j] = porcupine.Operation{
			ClientId: op.Client,
			Input:    &ins[j],
			Call:     op.Call,
			Return:   op.Return,
			Metadata: &ins[j],
		}
	}

	parts := partitionByPage(history)
	result := Result{Partitions: len(parts)}
	// Pages appended in ascending order keep both lists sorted by page.
	var rest, badByZones []porcupine.Operation
	for _, part := range parts {
		ok, decided := false, false
		if zones {
			ok, decided = decideByZones(part)
		}
		switch {
		case !decided:
			rest = append(rest, part...)
		case !ok:
			result.Decided++
			result.BadPages = append(result.BadPages, pageOf(part[0]))
			badByZones = append(badByZones, part...)
		default:
			result.Decided++
		}
	}
	var info porcupine.LinearizationInfo
	if len(rest) > 0 {
		r, i := checkWithPorcupine(rest, timeout)
		result.Unknown = r.Unknown
		result.BadPages = append(result.BadPages, r.BadPages...)
		slices.Sort(result.BadPages)
		info = i
	}
	if len(badByZones) > 0 {
		// For the visualization only: the verdict is the zones', so the
		// search gets at most vizTimeout.
		t := vizTimeout
		if timeout > 0 {
			t = min(t, timeout)
		}
		_, info = porcupine.CheckOperationsVerbose(registerModel, badByZones, t)
	}
	result.Ok = len(result.BadPages) == 0 && !result.Unknown
	return result, info
}

// vizTimeout bounds porcupine's search for the drawing of pages the zones
// found bad (on a large page it would search for a linearization that does
// not exist).
const vizTimeout = 10 * time.Second

// checkWithPorcupine checks history (sorted by page) with porcupine.
func checkWithPorcupine(history []porcupine.Operation, timeout time.Duration) (Result, porcupine.LinearizationInfo) {
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, timeout)
	parts := partitionByPage(history) // same partitions, same order as porcupine's
	var result Result
	switch res {
	case porcupine.Ok:
		result.Ok = true
		return result, info
	case porcupine.Unknown:
		// Timed out before any partition was found illegal: nothing is
		// proven bad, and re-checking would only time out again.
		result.Unknown = true
		return result, info
	}

	// Illegal. A partition with a complete linearization in info is proven
	// linearizable; the rest either failed or were cancelled by the timeout.
	partials := info.PartialLinearizations()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for p, part := range parts {
		if p < len(partials) && hasComplete(partials[p], len(part)) {
			continue
		}
		t := time.Duration(0)
		if timeout > 0 {
			if t = time.Until(deadline); t <= 0 {
				result.Unknown = true
				break
			}
		}
		switch porcupine.CheckOperationsTimeout(registerModel, part, t) {
		case porcupine.Illegal:
			result.BadPages = append(result.BadPages, pageOf(part[0]))
		case porcupine.Unknown:
			result.Unknown = true
		}
	}
	return result, info
}

func hasComplete(partials [][]int, n int) bool {
	for _, l := range partials {
		if len(l) == n {
			return true
		}
	}
	return false
}

// WriteVisualization writes porcupine's HTML visualization of info (as
// returned by Check) to path.
func WriteVisualization(path string, info porcupine.LinearizationInfo) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	bw := bufio.NewWriter(f)
	if err := porcupine.Visualize(registerModel, info, bw); err != nil {
		return err
	}
	return bw.Flush()
}
