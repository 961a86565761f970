package tsc

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

var (
	base = time.Now()
	// useTSC is decided at the first use, not at start-up: it reads two
	// files, which a program that never times anything should not pay.
	useTSC     bool
	decideOnce sync.Once
)

func decide() { decideOnce.Do(func() { useTSC = trusted() }) }

// Source names the clock Ticks reads: "tsc" or "monotonic".
func Source() string {
	decide()
	if useTSC {
		return "tsc"
	}
	return "monotonic"
}

// Ticks is the clock now. Only differences of Ticks mean something; a Span
// converts them to time. Call Source or Begin once before the first Ticks
// (it keeps the monotonic clock until then).
func Ticks() uint64 {
	if useTSC {
		return rdtsc()
	}
	return uint64(time.Since(base))
}

// trusted reports whether the time-stamp counter can time intervals on any
// CPU: amd64, a counter that runs at a constant rate in every power state,
// and a kernel that uses it as its own clock (it checks that the CPUs'
// counters agree before it does).
func trusted() bool {
	if runtime.GOARCH != "amd64" || !haveRDTSC {
		return false
	}
	src, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil || strings.TrimSpace(string(src)) != "tsc" {
		return false
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(info), "\n") {
		if strings.HasPrefix(line, "flags") {
			f := " " + line + " "
			return strings.Contains(f, " constant_tsc ") && strings.Contains(f, " nonstop_tsc ")
		}
	}
	return false
}

// A Span relates ticks to time over an interval: begin it where the timed
// interval begins, and ask it for the rate once the interval is over.
type Span struct {
	t0 time.Time
	c0 uint64
}

// Begin starts a span.
func Begin() Span {
	decide()
	return Span{t0: time.Now(), c0: Ticks()}
}

// PerNano is how many ticks a nanosecond held between Begin and now: 1
// for the monotonic clock, the counter's rate in GHz for the TSC. It is 0
// if no time has passed.
func (s Span) PerNano() float64 {
	c := Ticks()
	d := time.Since(s.t0)
	if d <= 0 || c <= s.c0 {
		return 0
	}
	return float64(c-s.c0) / float64(d.Nanoseconds())
}
