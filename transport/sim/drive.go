package sim

// Drive is how a run steps its world: the one run loop of every simulated
// run (ScaleStore's, SELCC's, the index designs' and the plug-in
// runner's). It steps until every coroutine returned, and stops early at
// the first violation, at a deadlock (nothing left to run while
// coroutines wait), or when no operation completed for Watchdog ns of
// simulated time. Looking at the violations and the watchdog does not
// touch the world, so how often it looks (Every) changes no trace.
type Drive struct {
	// Phase names the part of the run in the failure's text.
	Phase string
	// Watchdog is the simulated time without a completed operation after
	// which the run stops (0: 2 s).
	Watchdog int64
	// LastOp is when the last operation completed; the run's workers set
	// it. Drive sets it to now when it starts.
	LastOp *int64
	// Every is how many steps go between looks at the violations, the
	// watchdog and the progress (0: 1024; 1: after every step).
	Every int
	// AfterStep, if set, runs after every step (invariants).
	AfterStep func()
	// Violations is how many violations the run has recorded.
	Violations func() int
	// Fail records a violation.
	Fail func(format string, args ...any)
	// Stuck, if set, describes what is stuck (through Fail) before the
	// coroutines are stopped on a deadlock or a watchdog.
	Stuck func()
	// Done, if set, must also hold for the run to be over (coroutines
	// the run started after the ones passed to Run).
	Done func() bool
	// Progress, if set, is called about every 65,536 steps.
	Progress func()
}

// DefaultWatchdog is Drive's watchdog unless set: 2 s of simulated time.
const DefaultWatchdog = 2_000_000_000

// Run steps w until every coroutine of cos is done (and d.Done holds); it
// reports false, with the coroutines stopped, when the run failed.
func (d Drive) Run(w *World, cos []*Coroutine) bool {
	every := d.Every
	if every <= 0 {
		every = 1024
	}
	watchdog := d.Watchdog
	if watchdog <= 0 {
		watchdog = DefaultWatchdog
	}
	*d.LastOp = w.Now()
	done := func() bool {
		for _, co := range cos {
			if !co.Done() {
				return false
			}
		}
		return d.Done == nil || d.Done()
	}
	for !done() {
		if d.Progress != nil && w.Steps&(1<<16-1) < uint64(every) {
			d.Progress()
		}
		for range every {
			if !w.Step() {
				if done() {
					return true
				}
				d.Fail("%s: deadlock: nothing left to run while workers wait", d.Phase)
				return d.stop(cos)
			}
			if d.AfterStep != nil {
				d.AfterStep()
			}
		}
		if bad := d.Violations(); bad > 0 || w.Now()-*d.LastOp > watchdog {
			if bad == 0 {
				d.Fail("%s: no operation completed for %d ns of simulated time", d.Phase, w.Now()-*d.LastOp)
			}
			return d.stop(cos)
		}
	}
	return true
}

func (d Drive) stop(cos []*Coroutine) bool {
	if d.Stuck != nil {
		d.Stuck()
	}
	for _, co := range cos {
		co.Stop()
	}
	return false
}
