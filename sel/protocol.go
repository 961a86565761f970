package sel

import (
	"fmt"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/protocolapi"
)

// Name is the protocol's name in the registry.
const Name = "sel"

// The mutants: each breaks one rule of the latch.
const (
	// MutantReaderSkipsLatch: a reader READs the line without taking the
	// shared latch. A READ that lands between the head and tail of a WRITE
	// sees a torn line (the reader's own check reports it).
	MutantReaderSkipsLatch = "reader-skips-latch"
	// MutantReleaseBeforeWrite: a writer posts its release ahead of its
	// WRITEs, so the latch is free before the data lands. Check sees a
	// WRITE that has not landed outside its writer's latch at once.
	MutantReleaseBeforeWrite = "release-before-write"
	// MutantWriterFAA: a writer takes the latch with FAA(+tag) instead of
	// CAS and enters when no other writer held it, ignoring the readers
	// (it undoes its FAA when a writer did). Check sees two writers' FAAs
	// summed into a tag that names no writer, or a reader holding the latch
	// beside the writer; a reader's READ may see a torn line.
	MutantWriterFAA = "writer-faa-ignores-readers"
	// MutantUnlockByWrite: a writer releases by a WRITE of 0 to the word
	// instead of FAA(-tag), wiping the +1 of a reader whose acquire is
	// failing; that reader's undo then wraps the word. Check sees a word
	// naming no writer in flight, or readers miscounted.
	MutantUnlockByWrite = "unlock-by-write"
	// MutantReaderKeepsLatch: a reader that finds a writer backs off
	// without undoing its +1, so the count never returns to 0. Check sees
	// more readers counted than can hold the latch.
	MutantReaderKeepsLatch = "reader-keeps-latch-on-backoff"
)

// Options are a deployment's parameters that protocolapi.Config does not
// carry (the figures vary them; the registered protocol uses defaults).
type Options struct {
	// MemoryNodes is how many memory nodes hold the lines (0: 2, as the
	// SELCC runs of scenarios/selccrun.go).
	MemoryNodes int
	// LineSize is a line's data in bytes (0: a page, as SELCC's lines in
	// linecache), a multiple of 16 of at least MinLineSize.
	LineSize int
	// BackoffBase and BackoffMax bound a retry's back-off in ns: after the
	// n-th failed acquire of an access it waits a random time in
	// [d/2, d] with d = min(BackoffMax, BackoffBase<<(n-1)) (0: 1 us and
	// 64 us; Ziegler et al. back off exponentially, the numbers are our
	// decision).
	BackoffBase, BackoffMax int64
}

// The defaults of Options.
const (
	DefaultMemoryNodes = 2
	DefaultLineSize    = protocol.PageSize
	DefaultBackoffBase = 1_000
	DefaultBackoffMax  = 64_000
)

func (o Options) withDefaults() (Options, error) {
	if o.MemoryNodes == 0 {
		o.MemoryNodes = DefaultMemoryNodes
	}
	if o.LineSize == 0 {
		o.LineSize = DefaultLineSize
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = DefaultBackoffBase
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	switch {
	case o.MemoryNodes < 1:
		return o, fmt.Errorf("sel: %d memory nodes, want at least 1", o.MemoryNodes)
	case o.LineSize < MinLineSize || o.LineSize%16 != 0 || o.LineSize > 1<<20:
		return o, fmt.Errorf("sel: a line of %d bytes, want a multiple of 16 from %d to 1 MiB", o.LineSize, MinLineSize)
	case o.BackoffBase < 1 || o.BackoffMax < o.BackoffBase:
		return o, fmt.Errorf("sel: back-off from %d to %d ns, want 1 <= base <= max", o.BackoffBase, o.BackoffMax)
	}
	return o, nil
}

// defaults are the options Protocol uses.
var defaults = Options{MemoryNodes: DefaultMemoryNodes, LineSize: DefaultLineSize,
	BackoffBase: DefaultBackoffBase, BackoffMax: DefaultBackoffMax}

// Protocol describes SEL to the framework with the default options.
func Protocol() protocolapi.Protocol { return describe(defaults) }

// ProtocolWith describes SEL with opts (a figure's memory nodes, line size
// or back-off); it refuses options that make no deployment.
func ProtocolWith(opts Options) (protocolapi.Protocol, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return protocolapi.Protocol{}, err
	}
	return describe(o), nil
}

func describe(o Options) protocolapi.Protocol {
	return protocolapi.Protocol{
		Name: Name,
		Summary: "SEL (Ziegler et al. 2023, SELCC's baseline): one-sided READ/WRITE under a shared-exclusive " +
			"latch word per line on passive memory nodes (CAS exclusive, FAA shared, back-off), no cache",
		Supports: protocolapi.Supports{
			Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW},
		},
		// No Codec: SEL sends no messages, every access is verbs.
		Deploy: func(cfg protocolapi.Config) (protocolapi.Cluster, error) { return deploy(cfg, o) },
		Mutants: []protocolapi.Mutant{
			{Name: MutantReaderSkipsLatch, About: "a reader READs without the shared latch (a torn line: the reader's check)"},
			{Name: MutantReleaseBeforeWrite, About: "a writer releases before its WRITEs land (Check: a WRITE in flight outside its latch; porcupine in rmw)"},
			{Name: MutantWriterFAA, About: "a writer takes the latch by FAA and ignores the readers (Check: two writers' FAAs sum their tags into a word naming no writer, or a reader holds beside the writer; torn lines)"},
			{Name: MutantUnlockByWrite, About: "a writer releases by WRITE of 0, wiping failing readers' counts (Check: a word naming no writer, readers miscounted)"},
			{Name: MutantReaderKeepsLatch, About: "a reader backs off without undoing its +1 (Check: readers miscounted; a latch never free)"},
		},
		Scenarios: []protocolapi.Scenario{
			{
				Name: "sel-conflict",
				About: "node 0 reads key 0 (memory node 3) while node 1 writes it: the writer's CAS meets the reader's count " +
					"and backs off, retries after the reader's release, writes the head and the tail and releases; then node 2's read " +
					"meets the writer's tag, undoes its +1 and retries",
				Nodes: 3, Workers: 1, Keys: 1, Watch: 0,
				Script: []protocolapi.ScriptOp{
					{At: 0, Node: 0, Kind: protocolapi.OpRead, Key: 0},
					{At: 500, Node: 1, Kind: protocolapi.OpWrite, Key: 0},
					{At: 6_000, Node: 2, Kind: protocolapi.OpRead, Key: 0},
				},
			},
		},
		Defaults: protocolapi.Config{Nodes: 4, Workers: 3, Keys: 48},
	}
}
