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

// The index designs' options (protocolapi.Option, `sim --opt name=value`):
// their registrations declare them, their simulated runs read them.
const (
	// OptionMemoryNodes is how many memory servers hold the index
	// (DefaultMemoryNodes); every design has it, and OptionScanLen, the
	// most keys a scan covers.
	OptionMemoryNodes  = "memory-nodes"
	DefaultMemoryNodes = 2
	OptionScanLen      = "scan-len"
	// OptionHeadNodes (on or off) puts head nodes of OptionHeadGroup
	// leaves on the leaf level (the designs of HeadNodes).
	OptionHeadNodes = "head-nodes"
	OptionHeadGroup = "head-group"
	// Cell's: how clients search leaf meganodes (selector, server or
	// client), the lowest level of meganode nodes they cache, and the
	// size above which a leaf meganode splits (0: never).
	OptionCellSearch     = "cell-search"
	OptionCellCacheLevel = "cell-cache-level"
	OptionCellMegaNodes  = "cell-mega-nodes"
)

// IsNAM reports whether name is one of the NAM-tree's designs.
func IsNAM(name string) bool { return name == NAMCoarse || name == NAMFine || name == NAMHybrid }

// IsCell reports whether name is Cell (whose leaf meganodes split).
func IsCell(name string) bool { return name == Cell }

// HeadNodes reports whether name is a NAM-tree design with head nodes on
// its leaf level (the fine-grained and the hybrid: the coarse-grained
// tree's leaves are the servers').
func HeadNodes(name string) bool { return name == NAMFine || name == NAMHybrid }
