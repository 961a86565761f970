package tsc

const haveRDTSC = true

// rdtsc reads the time-stamp counter.
//
//go:noescape
func rdtsc() uint64
