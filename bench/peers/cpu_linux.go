package peers

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// cpuSample is the machine's busy CPU time and this process's CPU time at
// one instant: their difference over a run is what other processes took.
type cpuSample struct {
	at          time.Time
	machine, us time.Duration
}

// sampleCPU reads /proc/stat and getrusage; ok is false if either fails.
func sampleCPU() (s cpuSample, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || string(f[0]) != "cpu" {
		return s, false
	}
	var busy uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			return s, false
		}
		busy += n
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return s, false
	}
	// /proc/stat counts in USER_HZ, which is 100 on every Linux port Go
	// runs on.
	s.machine = time.Duration(busy) * 10 * time.Millisecond
	s.us = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	s.at = time.Now()
	return s, true
}
