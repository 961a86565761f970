// Package checker records histories of page reads/writes (and later
// key-value operations) and checks them for linearizability with porcupine,
// partitioned per page. It must never import the simulator, transports or
// storage; it only knows operations.
package checker
