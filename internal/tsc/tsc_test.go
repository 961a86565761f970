package tsc

import (
	"testing"
	"time"
)

// The clock never runs backwards on one goroutine, and a span of a sleep
// gives a rate a real clock can have: 1 tick a nanosecond for the
// monotonic clock, 0.2 to 10 GHz for a time-stamp counter.
func TestTicksAndRate(t *testing.T) {
	t.Logf("source %s", Source())
	s := Begin()
	prev := Ticks()
	for range 100000 {
		c := Ticks()
		if c < prev {
			t.Fatalf("ticks went back from %d to %d", prev, c)
		}
		prev = c
	}
	time.Sleep(50 * time.Millisecond)
	r := s.PerNano()
	t.Logf("%.4f ticks a nanosecond", r)
	switch Source() {
	case "tsc":
		if r < 0.2 || r > 10 {
			t.Errorf("time-stamp counter at %.3f GHz", r)
		}
	case "monotonic":
		if r < 0.999 || r > 1.001 {
			t.Errorf("monotonic clock at %.4f ticks a nanosecond, want 1", r)
		}
	default:
		t.Errorf("source %q", Source())
	}
}

// Forcing the monotonic clock gives it, whatever the machine.
func TestMonotonicFallback(t *testing.T) {
	Source() // decided now, so that it is not decided again over the forced value
	saved := useTSC
	defer func() { useTSC = saved }()
	useTSC = false
	if Source() != "monotonic" {
		t.Fatalf("source %q", Source())
	}
	a := Ticks()
	time.Sleep(time.Millisecond)
	if d := Ticks() - a; d < uint64(time.Millisecond) {
		t.Errorf("a 1 ms sleep took %d ticks of the monotonic clock", d)
	}
}
