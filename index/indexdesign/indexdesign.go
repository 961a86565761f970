// Package indexdesign names the index designs of the seed papers as they
// are registered (package protocols) and says what each is: a NAM-tree
// design (which one, and whether it has head nodes) or Cell. Code outside
// the index designs' packages that must tell them apart (the output of
// `scalestore sim`) asks here instead of spelling their names.
//
// It imports nothing, so that any package may ask it (the mutation
// catalogue, which imports failpoint only, does).
package indexdesign

// The registered names of the index designs.
const (
	NAMCoarse = "nam-cg"
	NAMFine   = "nam-fg"
	NAMHybrid = "nam-hybrid"
	Cell      = "cell"
)

// OptionMemoryNodes is the index designs' option (protocolapi.Option,
// `sim --opt memory-nodes=M`) of how many memory servers hold the index;
// DefaultMemoryNodes its default.
const (
	OptionMemoryNodes  = "memory-nodes"
	DefaultMemoryNodes = 2
)

// IsNAM reports whether name is one of the NAM-tree's designs.
func IsNAM(name string) bool { return name == NAMCoarse || name == NAMFine || name == NAMHybrid }

// IsCell reports whether name is Cell (whose leaf meganodes split).
func IsCell(name string) bool { return name == Cell }

// HeadNodes reports whether name is a NAM-tree design with head nodes on
// its leaf level (the fine-grained and the hybrid: the coarse-grained
// tree's leaves are the servers').
func HeadNodes(name string) bool { return name == NAMFine || name == NAMHybrid }
