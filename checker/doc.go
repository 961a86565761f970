// Package checker holds the simulator's checks. It records histories of page
// reads and writes (and later key-value operations) and checks them for
// linearizability with porcupine, partitioned per page; and it keeps the
// ghost state of DESIGN.md §5 (valid copies per page, last completed write,
// the directory's acceptance order) to check the invariants after every
// simulated step.
//
// It imports protocol only (for page ids and modes); never the simulator, a
// transport, storage, or the roles it watches, which reach it through the
// observer methods of Invariants.
package checker
