// Package selccproc is SELCC on real processes: a memory node registers
// its lines and does nothing else (no handler: a message to it is logged
// as an error and dropped); a compute node runs a linecache over the
// transport's one-sided verbs and answers invalidations on a handler
// goroutine. Design is what `scalestore cluster --protocol selcc`, `node`
// and `bench cluster` run, attached to SELCC's registration (package
// protocols); the control commands are package cluster's (ServeRegions).
//
// It imports cluster, linecache, protocol/selcc and transport; never the
// simulator, the CLI or the registry.
package selccproc
