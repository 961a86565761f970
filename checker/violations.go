package checker

import "fmt"

// ViolationLog collects a run's violations: every one is counted, and the
// first MaxViolations are kept, each with the simulated time it was found
// at. Every simulated run records through one (ScaleStore's invariants,
// SELCC's and the index designs' checks, the plug-in runner's), so their
// reports read alike.
type ViolationLog struct {
	now   func() int64
	list  []string
	count int
}

// NewViolationLog returns an empty log stamped by now (nil: time 0).
func NewViolationLog(now func() int64) ViolationLog { return ViolationLog{now: now} }

// Fail records a violation.
func (l *ViolationLog) Fail(format string, args ...any) {
	l.count++
	if len(l.list) < MaxViolations {
		at := int64(0)
		if l.now != nil {
			at = l.now()
		}
		l.list = append(l.list, fmt.Sprintf("t=%dns: ", at)+fmt.Sprintf(format, args...))
	}
}

// Count is how many violations were recorded.
func (l *ViolationLog) Count() int { return l.count }

// List is the violations kept (at most MaxViolations).
func (l *ViolationLog) List() []string { return l.list }
