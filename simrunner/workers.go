package simrunner

import (
	"errors"

	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/internal/zipf"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
	"github.com/scalestore-go/scalestore/transport/sim"
)

// Keys draws a workload's keys: a zipfian rank (internal/zipf) put on a
// random permutation of the keys, so that hot ranks land on random keys,
// hence on every home.
type Keys struct {
	perm []int
	z    *zipf.Zipf
}

// NewKeys shuffles n keys with w's random numbers (n-1 draws) for ranks
// of skew theta (0: uniform).
func NewKeys(w *sim.World, n int, theta float64) *Keys {
	k := &Keys{perm: make([]int, n), z: zipf.New(uint64(n), theta)}
	for i := range k.perm {
		k.perm[i] = i
	}
	for i := len(k.perm) - 1; i > 0; i-- {
		j := int(w.Intn(int64(i + 1)))
		k.perm[i], k.perm[j] = k.perm[j], k.perm[i]
	}
	return k
}

// UniformKeys draws n keys uniformly, key r mod n of the random number r
// (no permutation, no draws to make).
func UniformKeys(n int) *Keys {
	k := &Keys{perm: make([]int, n), z: zipf.New(uint64(n), 0)}
	for i := range k.perm {
		k.perm[i] = i
	}
	return k
}

// Next is the key of the random number r.
func (k *Keys) Next(r uint64) int { return k.perm[k.z.Next(r)] }

// N is how many keys it draws from.
func (k *Keys) N() int { return len(k.perm) }

// Workers is the worker loop of every simulated run, the generic runner's
// and the built-in ones' (ScaleStore's, SELCC's, the index designs'): each
// worker of the register and rmw workloads (Spawn) starts
// accesses while fewer than Ops have started, draws each access's key and
// kind from the world's seeded random numbers, hands it to its Accessor on
// its own coroutine (a protocol's blocking entry, protocolapi.Blocking, or
// the runner's adapter that steps an event-driven role), and writes what
// it returned into the history. The draws, in order: the pause before the
// access (when OpNanos is 0), the locality coin (when Locality is above 0
// and the worker has a previous key), the key, the read-or-write coin.
// The tree workloads (SpawnTree) share its counters, keys and hooks.
type Workers struct {
	W *sim.World
	// Ops is the accesses across the run; ReadRatio their share of reads;
	// Locality the chance that an access is to the worker's previous key
	// (0: none, and no draw); RMW makes every write a read-modify-write.
	Ops       int
	ReadRatio float64
	Locality  float64
	RMW       bool
	// OpNanos, when above 0, is an access's CPU on the worker's core
	// (WriteNanos, when above 0, a write's), slept between its call and
	// the protocol's part, without the 0-2 us pause otherwise taken
	// before each access.
	OpNanos, WriteNanos int64
	// StartSpread, when above 0, starts each worker after a random delay
	// below it (one draw when it is spawned).
	StartSpread int64
	// SingleWriter: node 0's workers only write and the others' only read
	// (the coin is still drawn).
	SingleWriter bool
	Keys         *Keys
	Hist         *checker.History
	Fail         func(format string, args ...any)

	// Window, if set, is when node's workers work, in accesses started:
	// they idle until join and stop at leave (elastic membership).
	Window func(node protocol.NodeID) (join, leave int)
	// BeforeOp, if set, runs when an access has started (Started counts
	// it), before its draws: a crash that is due.
	BeforeOp func()
	// MapKey, if set, maps a drawn key for node's workers (a partitioned
	// workload); a key repeated for locality is not mapped again.
	MapKey func(key int, node protocol.NodeID) int
	// Mix is the tree workload's mix (SpawnTree), ScanLen the index mix's
	// longest scan (0: DefaultScanLen).
	Mix     TreeMix
	ScanLen int

	// Started counts the accesses started, Completed the ones returned
	// (whether recorded, failed or cut by a crash); Unavailable the ones
	// that failed for the fault plan's reason (out of the history).
	Started, Completed, Unavailable int
	// LastOp is when an access last returned (sim.Drive's watchdog).
	LastOp int64
	// Value is the last value written: every write writes the next.
	Value uint64

	clients   []inFlight       // per client
	cos       []*sim.Coroutine // per client spawned: its coroutine
	clientsOf [][]int          // per node: its clients spawned, in order
	active    []int            // per node: its workers still running
	opIDs     []uint64         // per node: the last op id
}

// inFlight is a client's access under way, for a crash that abandons it.
type inFlight struct {
	op     checker.Op
	active bool
}

// Spawn starts worker id's loop on a new coroutine of its node, which bind
// binds to the worker's Accessor (at once: bind must not draw).
func (l *Workers) Spawn(id protocolapi.Worker, bind func(co *sim.Coroutine) protocolapi.Accessor) *sim.Coroutine {
	var acc protocolapi.Accessor
	co := l.spawnBody(id, func(co *sim.Coroutine) { l.run(co, id, acc) })
	acc = bind(co)
	return co
}

// spawnBody starts body as worker id on a new coroutine of its node
// (after StartSpread, counted in Active while it runs, stopped with its
// node by StopNode): the loop of Spawn or of SpawnTree.
func (l *Workers) spawnBody(id protocolapi.Worker, body func(co *sim.Coroutine)) *sim.Coroutine {
	var delay int64
	if l.StartSpread > 0 {
		delay = l.W.Intn(l.StartSpread)
	}
	l.grow(id)
	l.active[id.Node]++
	co := l.W.Spawn(id.Node, delay, func(co *sim.Coroutine) {
		defer func() { l.active[id.Node]-- }()
		body(co)
	})
	for len(l.cos) <= id.Client {
		l.cos = append(l.cos, nil)
	}
	l.cos[id.Client] = co
	l.clientsOf[id.Node] = append(l.clientsOf[id.Node], id.Client)
	return co
}

// Done reports whether every worker spawned has returned (or was
// stopped): sim.Drive's Done, since a restarted node's workers are
// spawned during the run.
func (l *Workers) Done() bool {
	for _, co := range l.cos {
		if co != nil && !co.Done() {
			return false
		}
	}
	return true
}

// StopNode stops every worker node has had, each after abandon(client)
// (its access under way is cut: a crash).
func (l *Workers) StopNode(node protocol.NodeID, abandon func(client int)) {
	if int(node) >= len(l.clientsOf) {
		return
	}
	for _, client := range l.clientsOf[node] {
		abandon(client)
		l.cos[client].Stop()
	}
}

func (l *Workers) grow(id protocolapi.Worker) {
	for len(l.clients) <= id.Client {
		l.clients = append(l.clients, inFlight{})
	}
	for len(l.active) <= int(id.Node) {
		l.active = append(l.active, 0)
		l.opIDs = append(l.opIDs, 0)
		l.clientsOf = append(l.clientsOf, nil)
	}
}

// Active is how many of node's workers are still running.
func (l *Workers) Active(node protocol.NodeID) int {
	if int(node) >= len(l.active) {
		return 0
	}
	return l.active[node]
}

// run is one worker's loop.
func (l *Workers) run(co *sim.Coroutine, id protocolapi.Worker, acc protocolapi.Accessor) {
	w := l.W
	join, leave := 0, l.Ops
	if l.Window != nil {
		join, leave = l.Window(id.Node)
	}
	for l.Started < join {
		co.Sleep(5_000) // not joined yet: an idle node with a cold cache
	}
	prev := -1 // the key of this worker's previous access
	for l.Started < l.Ops && l.Started < leave {
		l.Started++
		if l.BeforeOp != nil {
			l.BeforeOp()
		}
		if l.OpNanos == 0 {
			co.Sleep(w.Intn(2_000))
		}
		var key int
		if prev >= 0 && l.Locality > 0 && w.Chance(l.Locality) {
			key = prev
		} else {
			key = l.Keys.Next(w.Rand())
			if l.MapKey != nil {
				key = l.MapKey(key, id.Node)
			}
		}
		prev = key
		read := w.Chance(l.ReadRatio)
		if l.SingleWriter {
			read = id.Node > 0
		}
		kind, cpu := protocolapi.OpRead, l.OpNanos
		if !read {
			kind = protocolapi.OpWrite
			if l.RMW {
				kind = protocolapi.OpRMW
			}
			if cpu > 0 && l.WriteNanos > 0 {
				cpu = l.WriteNanos
			}
		}
		l.Access(co, id, acc, kind, uint64(key), cpu)
	}
}

// Access runs one access of worker id on its coroutine co, after cpu ns of
// the worker's CPU (which count in its latency), and records it in the
// history (a write with the next value).
func (l *Workers) Access(co *sim.Coroutine, id protocolapi.Worker, acc protocolapi.Accessor, kind protocolapi.OpKind, key uint64, cpu int64) {
	w := l.W
	l.grow(id)
	call := w.Now()
	if cpu > 0 {
		co.Sleep(cpu)
	}
	l.opIDs[id.Node]++
	op := protocolapi.Op{ID: l.opIDs[id.Node], Worker: id.Slot, Kind: kind, Key: key}
	h := checker.Op{Client: id.Client, Page: key, Call: call, Kind: checker.KindRead}
	if kind != protocolapi.OpRead {
		l.Value++
		op.Value = l.Value
		h.Kind, h.Value = checker.KindWrite, op.Value
		if kind == protocolapi.OpRMW {
			h.Kind = checker.KindRMW
		}
	}
	l.begin(h)
	res := acc.Access(op)
	h.Return = w.Now()
	l.LastOp = h.Return
	l.Completed++
	if !l.end(id.Client) {
		return // abandoned by a crash: its outcome is the crash's to record
	}
	if res.Err != nil {
		if errors.Is(res.Err, protocolapi.ErrUnavailable) {
			l.Unavailable++
			return
		}
		l.Fail("node %d worker %d: %v of key %d: %v", id.Node, id.Slot, kind, key, res.Err)
		return
	}
	switch kind {
	case protocolapi.OpRead:
		h.Value = res.Value
	case protocolapi.OpRMW:
		h.Read = res.Value
	}
	l.Hist.Add(h)
}

// begin puts op under way for its client (a crash may abandon it until
// end).
func (l *Workers) begin(op checker.Op) {
	for len(l.clients) <= op.Client {
		l.clients = append(l.clients, inFlight{})
	}
	l.clients[op.Client] = inFlight{op: op, active: true}
}

// end takes client's access out of flight: false if a crash abandoned it
// meanwhile.
func (l *Workers) end(client int) bool {
	if !l.InFlight(client) {
		return false
	}
	l.clients[client].active = false
	return true
}

// InFlight reports whether client has an access under way that no crash
// abandoned.
func (l *Workers) InFlight(client int) bool {
	return client >= 0 && client < len(l.clients) && l.clients[client].active
}

// Abandon takes client's access under way out of the history (its node
// crashed, or its write-through found its home gone) and returns it as it
// was called, without Return; false if the client had none under way.
func (l *Workers) Abandon(client int) (checker.Op, bool) {
	if !l.end(client) {
		return checker.Op{}, false
	}
	return l.clients[client].op, true
}
