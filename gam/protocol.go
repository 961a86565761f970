package gam

import (
	"fmt"
	"strconv"

	"github.com/scalestore-go/scalestore/protocolapi"
)

// Mode is GAM's consistency model.
type Mode uint8

// The modes SELCC's evaluation runs.
const (
	// SEQ: every access waits for its answer (sequential consistency;
	// here linearizable per key, and porcupine checks it).
	SEQ Mode = iota + 1
	// TSO: a write returns once the node's worker queued it and becomes
	// visible later, in the node's order; a thread reads its own writes.
	TSO
)

func (m Mode) String() string {
	switch m {
	case SEQ:
		return "seq"
	case TSO:
		return "tso"
	}
	return "mode?"
}

// Cost is what the node's worker thread spends on each item of its
// serial queue (a worker's access, or a message from another node), in
// simulated ns. The items of one node are served one at a time, so a
// node serves at most 1e9/Service items a second however many threads
// issue them: see the package doc.
type Cost struct {
	Service int64
}

// DefaultCost is 500 ns an item: a worker thread that takes a request off
// its queue, looks the line up in its hash table and answers or posts a
// message serves about 2 million a second (our estimate; GAM's paper
// gives no per-request figure).
var DefaultCost = Cost{Service: 500}

// Options is one registration of GAM.
type Options struct {
	Mode Mode
	Cost Cost
	// MemoryNodes, when above 0, puts that many memory nodes above the
	// compute nodes (Layout.Nodes = Config.Nodes + MemoryNodes), which
	// home every key while the compute nodes only cache: GAM on
	// disaggregated memory as SELCC's evaluation runs it, each memory
	// node with its one serial worker. 0: every node is a home and a
	// cache (GAM's own distributed shared memory).
	MemoryNodes int
	// WriteBuffer bounds, in TSO mode, the writes a thread has been told
	// are done but that are not visible yet; a write beyond it waits.
	WriteBuffer int
}

// DefaultWriteBuffer is the TSO write buffer's default size, in writes.
const DefaultWriteBuffer = 8

// The mutants.
const (
	// MutantGrantWithoutInvalidation: the home grants a writer the line
	// (or writes its own memory) while caches hold it shared, without
	// invalidating them. The single-writer invariant, or the one that
	// every copy holds the last write, catches it at that step.
	MutantGrantWithoutInvalidation = "grant-without-invalidation"
	// MutantLoseWriteBack: the home acknowledges an evicted dirty line
	// without storing its value. The invariant that the home's memory
	// holds the last write once no cache owns the key catches it when
	// the EvictAck frees the line (porcupine would see the stale reads).
	MutantLoseWriteBack = "lose-writeback"
	// MutantEarlyAck (SEQ): a write returns to its thread when queued,
	// before the home granted the line: SEQ becomes TSO without a store
	// buffer. Porcupine sees reads of the old value after the write
	// returned.
	MutantEarlyAck = "early-ack"
	// MutantDrainOutOfOrder (TSO): the write buffer drains a random
	// write instead of the oldest, so one thread's writes of a key
	// become visible out of order. The TSO checker sees a thread read
	// its older write after its newer one.
	MutantDrainOutOfOrder = "drain-out-of-order"
	// MutantReadSkipsBuffer (TSO): a read ignores the thread's buffered
	// writes and reads the cache. The TSO checker sees a thread not read
	// its own write.
	MutantReadSkipsBuffer = "read-skips-buffer"
)

// Names in the registry.
const (
	NameSEQ = "gam-seq"
	NameTSO = "gam-tso"
)

// Protocols returns GAM's two registrations, gam-seq and gam-tso, with
// the default cost.
func Protocols() []protocolapi.Protocol { return []protocolapi.Protocol{ProtocolSEQ(), ProtocolTSO()} }

// ProtocolSEQ is gam-seq with the default cost (one line of a list of
// registrations).
func ProtocolSEQ() protocolapi.Protocol { return New(Options{Mode: SEQ, Cost: DefaultCost}) }

// ProtocolTSO is gam-tso with the default cost and write buffer.
func ProtocolTSO() protocolapi.Protocol {
	return New(Options{Mode: TSO, Cost: DefaultCost, WriteBuffer: DefaultWriteBuffer})
}

// New describes GAM in opts' mode and cost to the framework (the figure
// simulations register their own costs this way).
func New(opts Options) protocolapi.Protocol {
	if opts.Mode == TSO && opts.WriteBuffer == 0 {
		opts.WriteBuffer = DefaultWriteBuffer
	}
	shared := []protocolapi.Mutant{
		{Name: MutantGrantWithoutInvalidation, About: "the home grants a writer the line without invalidating its sharers (single writer breaks)"},
		{Name: MutantLoseWriteBack, About: "the home drops an evicted dirty line's value (the home's memory loses the last write)"},
	}
	p := protocolapi.Protocol{
		Codec: codec{},
		Deploy: func(cfg protocolapi.Config) (protocolapi.Cluster, error) {
			o, err := opts.with(cfg)
			if err != nil {
				return nil, err
			}
			return newCluster(o, cfg)
		},
		Options: []protocolapi.Option{
			{Name: OptionService, Default: strconv.FormatInt(opts.Cost.Service, 10), About: "ns a node's serial worker spends on each request or message (0: none)"},
			{Name: OptionMemoryNodes, Default: strconv.Itoa(opts.MemoryNodes), About: "memory nodes that home every key above the compute nodes (0: every node a home and a cache)"},
		},
		Defaults: protocolapi.Config{Nodes: 4, Workers: 3, Keys: 48, CacheLines: 12},
	}
	switch opts.Mode {
	case TSO:
		p.Name = NameTSO
		p.Summary = "GAM (Cai et al., VLDB 2018) in TSO mode as SELCC runs it: RPC directory on home nodes, a cache on every node, one serial worker a node, writes buffered and drained in order"
		p.Supports = protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister}}
		p.Mutants = append(shared,
			protocolapi.Mutant{Name: MutantDrainOutOfOrder, About: "the write buffer drains a random write, not the oldest (a thread's writes of a key land out of order)"},
			protocolapi.Mutant{Name: MutantReadSkipsBuffer, About: "a read skips the thread's buffered writes (it does not read its own write)"})
		p.CheckHistory = CheckTSO
		p.Options = append(p.Options, protocolapi.Option{Name: OptionWriteBuffer, Default: strconv.Itoa(opts.WriteBuffer),
			About: "writes a thread may have told done but not visible before its next write waits"})
		p.Scenarios = []protocolapi.Scenario{scenarioTSO}
	default:
		p.Name = NameSEQ
		p.Summary = "GAM (Cai et al., VLDB 2018) in SEQ mode as SELCC runs it: RPC directory on home nodes, a cache on every node, one serial worker a node, every access waits"
		p.Supports = protocolapi.Supports{Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW}}
		p.Mutants = append(shared,
			protocolapi.Mutant{Name: MutantEarlyAck, About: "a write returns before the home granted the line (porcupine sees the old value read after it)"})
		p.Scenarios = []protocolapi.Scenario{scenarioSEQ}
	}
	return p
}

// The protocol's own options (protocolapi.Option, sim --opt name=value):
// Options' fields by name.
const (
	OptionService     = "service-ns"
	OptionMemoryNodes = "memory-nodes"
	OptionWriteBuffer = "write-buffer"
)

// with returns o with the values cfg's options give.
func (o Options) with(cfg protocolapi.Config) (Options, error) {
	for _, f := range []struct {
		name string
		dst  func(int64)
		min  int64
	}{
		{OptionService, func(v int64) { o.Cost.Service = v }, 0},
		{OptionMemoryNodes, func(v int64) { o.MemoryNodes = int(v) }, 0},
		{OptionWriteBuffer, func(v int64) { o.WriteBuffer = int(v) }, 1},
	} {
		s, ok := cfg.Options[f.name]
		if !ok || o.Mode != TSO && f.name == OptionWriteBuffer {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil || v < f.min {
			return o, fmt.Errorf("gam: option %s=%q: want a whole number of at least %d", f.name, s, f.min)
		}
		f.dst(v)
	}
	return o, nil
}

// The scenarios: key 0's home is node 0.
var (
	scenarioSEQ = protocolapi.Scenario{
		Name: "gam-seq-upgrade",
		About: "nodes 1 and 2 read key 0 (home node 0) and cache it shared; node 1 writes it: the home invalidates node 2 and grants node 1 the line; " +
			"then the home's own thread reads it: the home fetches it from node 1, which writes it back and keeps it shared",
		Nodes: 3, Workers: 1, Keys: 3, Watch: 0,
		Script: []protocolapi.ScriptOp{
			{At: 0, Node: 1, Kind: protocolapi.OpRead, Key: 0},
			{At: 0, Node: 2, Kind: protocolapi.OpRead, Key: 0},
			{At: 30_000, Node: 1, Kind: protocolapi.OpWrite, Key: 0},
			{At: 60_000, Node: 0, Kind: protocolapi.OpRead, Key: 0},
		},
	}
	scenarioTSO = protocolapi.Scenario{
		Name: "gam-tso-buffered-write",
		About: "node 2 caches key 0 (home node 0) shared; node 1 writes it twice and reads it at once: both writes return before they are visible " +
			"and the read returns node 1's own newest write from its buffer; the buffer drains in order: the home invalidates node 2 and grants node 1 the line; " +
			"node 2's later read fetches the last write",
		Nodes: 3, Workers: 1, Keys: 3, Watch: 0,
		Script: []protocolapi.ScriptOp{
			{At: 0, Node: 2, Kind: protocolapi.OpRead, Key: 0},
			{At: 30_000, Node: 1, Kind: protocolapi.OpWrite, Key: 0},
			{At: 30_000, Node: 1, Kind: protocolapi.OpWrite, Key: 0},
			{At: 30_000, Node: 1, Kind: protocolapi.OpRead, Key: 0},
			{At: 30_000, Node: 2, Kind: protocolapi.OpRead, Key: 0},
			{At: 90_000, Node: 2, Kind: protocolapi.OpRead, Key: 0},
		},
	}
)
