package simrunner

import (
	"errors"
	"slices"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// The B-tree workload's shares: of the operations, scans (when the tree
// has them); of the reads, batches (when it has them); of the writes,
// puts (the rest deletes, when it has them); a batch gets 2 to
// treeBatchMax keys, a scan at most treeScanLen from its key on.
const (
	treeScanShare  = 0.02
	treeBatchShare = 0.2
	treePutShare   = 0.8
	treeBatchMax   = 8
	treeScanLen    = 50
)

// TreeMix is the mix of a tree workload's operations (Workers.Mix).
type TreeMix uint8

const (
	// MixBTree is the B-tree workload's: 2% scans, out of the history
	// (their keys checked for order and bounds); a fifth of the reads in
	// batches of 2 to 8 keys; a fifth of the writes deletes.
	MixBTree TreeMix = iota
	// MixIndex is the index designs' (NAM-tree, Cell): a fifth of the
	// reads scans of 1 to ScanLen keys, each a read in the history of
	// every key it covers (0 for an absent one); a fifth of the writes
	// deletes.
	MixIndex
)

// SpawnTree starts worker id's tree workload loop (runTree, in Mix) on a
// new coroutine, as Spawn starts the register loop; bind's Accessor must
// implement protocolapi.Tree.
func (l *Workers) SpawnTree(id protocolapi.Worker, bind func(co *sim.Coroutine) protocolapi.Accessor) *sim.Coroutine {
	var acc protocolapi.Accessor
	co := l.spawnBody(id, func(co *sim.Coroutine) {
		t, ok := acc.(protocolapi.Tree)
		if !ok {
			l.Fail("node %d worker %d: its accessor offers no tree (protocolapi.Tree)", id.Node, id.Slot)
			return
		}
		l.runTree(co, id, t)
	})
	acc = bind(co)
	return co
}

// runTree runs gets and puts (and deletes, batches and scans, when the
// tree has them) of keys drawn as for registers, until the run's budget
// is used up. Each worker pauses 0-2 us before each operation (OpNanos is
// not charged). The draws, in order: BeforeOp's, the pause, the key, the
// scan coin (with scans), the batch coins (with batches: a read, and one
// of treeBatchShare), the read coin, the put coin (with deletes).
func (l *Workers) runTree(co *sim.Coroutine, id protocolapi.Worker, t protocolapi.Tree) {
	w := l.W
	deleter, _ := t.(protocolapi.TreeDeleter)
	batcher, _ := t.(protocolapi.TreeBatcher)
	scanner, _ := t.(protocolapi.TreeScanner)
	for l.Started < l.Ops {
		l.Started++
		if l.BeforeOp != nil {
			l.BeforeOp()
		}
		co.Sleep(w.Intn(2_000))
		key := uint64(l.Keys.Next(w.Rand()))
		if l.Mix == MixIndex {
			if !l.indexOp(id, t, deleter, scanner, key) {
				return
			}
			continue
		}
		if scanner != nil && w.Chance(treeScanShare) {
			l.scan(id, scanner, key)
			continue
		}
		op := checker.Op{Client: id.Client, Page: key, Call: w.Now()}
		if batcher != nil && w.Chance(l.ReadRatio) && w.Chance(treeBatchShare) {
			l.batch(id, batcher, key)
			continue
		}
		var err error
		switch {
		case w.Chance(l.ReadRatio):
			op.Kind = checker.KindRead
			l.begin(op)
			var v uint64
			var found bool
			if v, found, err = t.Get(key); found {
				op.Value = v // (an absent key reads 0)
			}
		case deleter == nil || w.Chance(treePutShare):
			l.Value++
			op.Kind, op.Value = checker.KindWrite, l.Value
			l.begin(op)
			err = t.Put(key, op.Value)
		default:
			op.Kind = checker.KindWrite // a delete writes 0
			l.begin(op)
			err = deleter.Delete(key)
		}
		op.Return = w.Now()
		if !l.end(id.Client) {
			// A crash cut it (and kept it if it may have taken effect).
			l.Completed++
			l.LastOp = op.Return
			continue
		}
		if err != nil {
			if !errors.Is(err, protocolapi.ErrUnavailable) {
				l.Fail("node %d worker %d: %s of key %d: %v", id.Node, id.Slot, op.Kind, key, err)
				return
			}
			l.Unavailable++
			l.Completed++
			l.LastOp = op.Return
			continue
		}
		l.Hist.Add(op)
		l.Completed++
		l.LastOp = op.Return
	}
}

// indexOp runs one operation of the index mix on key (the draws, in
// order: the read coin, the scan coin and the scan's length with scans,
// or the put coin with deletes) and records it; false after a violation.
func (l *Workers) indexOp(id protocolapi.Worker, t protocolapi.Tree, deleter protocolapi.TreeDeleter, scanner protocolapi.TreeScanner, key uint64) bool {
	w := l.W
	call := w.Now()
	add := func(k uint64, kind string, v uint64) {
		l.Hist.Add(checker.Op{Client: id.Client, Page: k, Kind: kind, Value: v, Call: call, Return: w.Now()})
	}
	var err error
	switch {
	case w.Chance(l.ReadRatio):
		if scanner == nil || w.Chance(indexGetShare) {
			var v uint64
			var found bool
			if v, found, err = t.Get(key); err == nil {
				if !found {
					v = 0
				}
				add(key, checker.KindRead, v)
			}
			break
		}
		scanLen := int64(l.ScanLen)
		if scanLen <= 0 {
			scanLen = DefaultScanLen
		}
		to := min(uint64(l.Keys.N()), key+1+uint64(w.Intn(scanLen)))
		seen := map[uint64]uint64{}
		if err = scanner.Scan(key, to, func(k, v uint64) bool { seen[k] = v; return true }); err == nil {
			for k := key; k < to; k++ {
				add(k, checker.KindRead, seen[k])
			}
		}
	case deleter == nil || w.Chance(treePutShare):
		l.Value++
		v := l.Value
		if err = t.Put(key, v); err == nil {
			add(key, checker.KindWrite, v)
		}
	default:
		if err = deleter.Delete(key); err == nil {
			add(key, checker.KindWrite, 0) // the value of an absent key
		}
	}
	if err != nil && !errors.Is(err, protocolapi.ErrUnavailable) {
		l.Fail("node %d worker %d: key %d: %v", id.Node, id.Slot, key, err)
		return false
	}
	if err != nil {
		l.Unavailable++
	}
	l.Completed++
	l.LastOp = w.Now()
	return true
}

// The index mix's share of gets among reads (the rest scans), and a
// scan's most keys unless Workers.ScanLen says.
const (
	indexGetShare  = 0.8
	DefaultScanLen = 12
)

// FinalGets starts, at once on a coroutine of id's node, a get of every
// key once more after a tree workload (a lost write cannot pass it), as
// worker id, which bind binds to its Accessor (a protocolapi.Tree). The
// coroutine is not one of the workers (Done, Active).
func (l *Workers) FinalGets(id protocolapi.Worker, bind func(co *sim.Coroutine) protocolapi.Accessor) *sim.Coroutine {
	var acc protocolapi.Accessor
	co := l.W.Spawn(id.Node, 0, func(*sim.Coroutine) {
		t, ok := acc.(protocolapi.Tree)
		if !ok {
			l.Fail("node %d worker %d: its accessor offers no tree (protocolapi.Tree)", id.Node, id.Slot)
			return
		}
		for key := range l.Keys.N() {
			l.TreeGet(id, t, uint64(key))
		}
	})
	acc = bind(co)
	return co
}

// TreeGet gets key from t on worker id's coroutine and records it as a
// read (a crash may cut it, as an access).
func (l *Workers) TreeGet(id protocolapi.Worker, t protocolapi.Tree, key uint64) {
	op := checker.Op{Client: id.Client, Page: key, Call: l.W.Now(), Kind: checker.KindRead}
	l.begin(op)
	v, found, err := t.Get(key)
	op.Return = l.W.Now()
	l.LastOp = op.Return
	if !l.end(id.Client) {
		return
	}
	if err != nil {
		l.failed(err, "node %d worker %d: the final get of key %d", id.Node, id.Slot, key)
		return
	}
	if found {
		op.Value = v
	}
	l.Hist.Add(op)
}

// failed reports an operation's error: one the fault plan caused is
// counted, any other is a violation.
func (l *Workers) failed(err error, format string, args ...any) {
	if errors.Is(err, protocolapi.ErrUnavailable) {
		l.Unavailable++
		return
	}
	l.Fail(format+": %v", append(args, err)...)
}

// batch gets key and a few more in one batch: every key answered is a
// read in the history, called when the batch starts and returned when it
// ends (the batch counts as one operation of the run).
func (l *Workers) batch(id protocolapi.Worker, b protocolapi.TreeBatcher, key uint64) {
	w := l.W
	n := 2 + w.Intn(treeBatchMax-1)
	keys := make([]uint64, n)
	vals := make([]uint64, n)
	found := make([]bool, n)
	for i := range keys {
		if i > 0 {
			key = uint64(l.Keys.Next(w.Rand()))
		}
		keys[i] = key
	}
	call := w.Now()
	failed, err := b.GetBatch(keys, vals, found)
	if err != nil {
		l.failed(err, "node %d worker %d: a batch of %d keys from key %d", id.Node, id.Slot, n, keys[0])
		if failed == nil {
			l.Completed++
			l.LastOp = w.Now()
			return
		}
	}
	ret := w.Now()
	for i, k := range keys {
		if slices.Contains(failed, i) {
			continue
		}
		op := checker.Op{Client: id.Client, Page: k, Call: call, Return: ret, Kind: checker.KindRead}
		if found[i] {
			op.Value = vals[i]
		}
		l.Hist.Add(op)
	}
	l.Completed++
	l.LastOp = ret
}

// scan reads up to treeScanLen keys from key on and checks they come in
// order and within bounds (scans are not part of the history).
func (l *Workers) scan(id protocolapi.Worker, s protocolapi.TreeScanner, from uint64) {
	to := from + treeScanLen
	var last uint64
	n := 0
	err := s.Scan(from, to, func(key, _ uint64) bool {
		if key < from || key >= to || n > 0 && key <= last {
			l.Fail("node %d worker %d: scan [%d, %d): key %d out of order or bounds (previous %d)", id.Node, id.Slot, from, to, key, last)
			return false
		}
		last = key
		n++
		return n < treeScanLen
	})
	if err != nil {
		l.failed(err, "node %d worker %d: scan from key %d", id.Node, id.Slot, from)
	}
	l.Completed++
	l.LastOp = l.W.Now()
}
