package msi

import "github.com/scalestore-go/scalestore/protocolapi"

// The mutants.
const (
	// MutantGrantWithoutInvalidation: the home grants M to a writer while
	// other caches hold the line in S, without invalidating them. The
	// single-writer invariant catches it at the step of the grant; stale
	// reads of the old sharers would fail porcupine.
	MutantGrantWithoutInvalidation = "grant-m-without-invalidation"
	// MutantForgetWriteBack: the home acknowledges an evicting owner's
	// PutM without storing its value, so the write is lost. Porcupine
	// catches the reads of the older value that follow (and the final
	// read of every key).
	MutantForgetWriteBack = "forget-writeback"
)

// Name is the protocol's name in the registry.
const Name = "msi"

// Protocol describes MSI to the framework.
func Protocol() protocolapi.Protocol {
	return protocolapi.Protocol{
		Name:    Name,
		Summary: "textbook MSI directory protocol (examples/msi, docs/new-protocol.md): a home per key, blocking directory, owner write-back",
		Supports: protocolapi.Supports{
			Workloads: []string{protocolapi.WorkloadRegister, protocolapi.WorkloadRMW},
		},
		Codec:  codec{},
		Deploy: deploy,
		Mutants: []protocolapi.Mutant{
			{Name: MutantGrantWithoutInvalidation, About: "the home grants M without invalidating the sharers (single writer breaks)"},
			{Name: MutantForgetWriteBack, About: "the home drops an evicted line's value (porcupine sees the lost write)"},
		},
		Scenarios: []protocolapi.Scenario{
			{
				Name:  "msi-invalidate",
				About: "nodes 1 and 2 read key 0 (home node 0), then node 0 writes it: the home invalidates both sharers, collects their acks and grants M",
				Nodes: 3, Workers: 1, Keys: 3, Watch: 0,
				Script: []protocolapi.ScriptOp{
					{At: 0, Node: 1, Kind: protocolapi.OpRead, Key: 0},
					{At: 0, Node: 2, Kind: protocolapi.OpRead, Key: 0},
					{At: 20_000, Node: 0, Kind: protocolapi.OpWrite, Key: 0},
				},
			},
			{
				Name:  "msi-fetch",
				About: "node 1 writes key 0 (home node 0), then node 2 reads it: the home fetches it from the owner, which writes it back and keeps a shared copy",
				Nodes: 3, Workers: 1, Keys: 3, Watch: 0,
				Script: []protocolapi.ScriptOp{
					{At: 0, Node: 1, Kind: protocolapi.OpWrite, Key: 0},
					{At: 20_000, Node: 2, Kind: protocolapi.OpRead, Key: 0},
				},
			},
		},
		Defaults: protocolapi.Config{Nodes: 4, Workers: 3, Keys: 48, CacheLines: 12},
	}
}
