// Package tsc is a cheap clock for timing many short intervals, as a
// benchmark driver times each operation: the CPU's time-stamp counter on
// amd64 when the kernel trusts it (constant and non-stop, and the kernel's
// own clocksource, so synchronised across CPUs), else the monotonic clock.
// A counter read costs about 10 ns in this project's VM, against about
// 30 ns for the monotonic clock (a vDSO call). Counts are in ticks; a Span
// measures how many ticks a nanosecond holds over the interval timed, so
// no frequency is assumed.
//
// It reads the hardware clock: code the simulator runs must never use it.
// It imports nothing of the engine's.
package tsc
