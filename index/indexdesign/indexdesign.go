// Package indexdesign names the index designs of the seed papers as they
// are registered (package protocols) and says what each is: a NAM-tree
// design (which one, and whether it has head nodes) or Cell. Code outside
// the index designs' packages that must tell them apart (the output of
// `scalestore sim`) asks here instead of spelling their names.
//
// It imports index/nam only; never the simulator, a transport or the
// registry.
package indexdesign

import "github.com/scalestore-go/scalestore/index/nam"

// The registered names of the index designs.
const (
	NAMCoarse = "nam-cg"
	NAMFine   = "nam-fg"
	NAMHybrid = "nam-hybrid"
	Cell      = "cell"
)

// namDesigns are the NAM-tree's designs by name.
var namDesigns = map[string]nam.Design{NAMCoarse: nam.CoarseGrained, NAMFine: nam.FineGrained, NAMHybrid: nam.Hybrid}

// NAM returns the NAM-tree design registered as name.
func NAM(name string) (nam.Design, bool) {
	d, ok := namDesigns[name]
	return d, ok
}

// IsCell reports whether name is Cell (whose leaf meganodes split).
func IsCell(name string) bool { return name == Cell }

// HeadNodes reports whether name is a NAM-tree design with head nodes on
// its leaf level (the fine-grained and the hybrid: the coarse-grained
// tree's leaves are the servers').
func HeadNodes(name string) bool {
	d, ok := namDesigns[name]
	return ok && d != nam.CoarseGrained
}
