//go:build !linux

package peers

import "time"

type cpuSample struct {
	at          time.Time
	machine, us time.Duration
}

// sampleCPU is not implemented off Linux: runs report no other CPU use.
func sampleCPU() (cpuSample, bool) { return cpuSample{}, false }
