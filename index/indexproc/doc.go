// Package indexproc is the index designs of the seed papers (the
// NAM-tree's nam-cg, nam-fg and nam-hybrid, and Cell) on real processes:
// memory servers register their node slots and answer index calls on the
// transport's handler; compute nodes run clients over the transport's
// one-sided verbs and calls, each waiting for its reply on a channel.
// Every process lays the tree out with the same deterministic Format (a
// memory server keeps its own region of it; a compute node keeps the
// layout). Design is what `scalestore cluster --workload NAME` and `node
// --protocol NAME` run, attached to the designs' registrations (package
// protocols); the control commands are package cluster's (ServeRegions).
//
// It imports cluster, index/nam, index/cell and transport; never the
// simulator, the CLI or the registry.
package indexproc
