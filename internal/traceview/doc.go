// Package traceview writes a protocol trace as one self-contained HTML
// file for teaching: a sequence diagram of the messages between the nodes,
// the watched page's directory state after every step, and stepping with
// the keyboard (right and left arrows, j and k, Home and End). The file
// loads nothing from the network: its script and style are inline, and the
// trace is embedded as JSON.
//
// It knows nothing of the protocol: it takes steps (from, to, a label, the
// state after). It must never import the simulator or the protocol
// packages, only the standard library.
package traceview
