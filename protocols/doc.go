// Package protocols is the one list of registrations: the only place
// that names the protocol packages. Registry builds a protocolapi.Registry
// holding every protocol ScaleStore-Go knows: the plug-in protocols (each
// package's Protocol, run by simrunner) and the built-in systems that
// still run through their own run loops in scenarios (described here by
// name, what they support and their mutants, so `scalestore protocols`
// lists them). Adding a protocol is a package of its own and one line in
// list.go.
//
// It imports protocolapi, mutation (the built-ins' mutant names) and the
// protocol packages; nothing imports it but the CLI and tests.
package protocols
