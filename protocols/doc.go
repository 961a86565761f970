// Package protocols is the one list of registrations: the only place
// that names the protocol packages. Entries lists every protocol
// ScaleStore-Go knows, and Registry puts them into a protocolapi.Registry:
// the plug-in protocols (each package's Protocol, run by simrunner) and the
// built-in systems that still run through their own run loops in
// scenarios (described here by name, what they support and their mutants,
// so `scalestore protocols` lists them). Each Entry says where its
// protocol's packages are (Dirs: outside them and list.go no file names
// it, TestNamesStayHome) and carries its optional hooks beyond
// protocolapi: a built-in's code for real processes (a cluster.Design,
// which `scalestore cluster`, `node` and `bench cluster` find by name) and
// its runs for `make swarm` and `make mutants`. Adding a protocol is a
// package of its own and one line in list.go.
//
// It imports protocolapi, cluster (the Design type), mutation (the
// built-ins' mutant names) and the protocol packages; nothing imports it
// but the CLI and tests (not package cluster's own: they would make a
// cycle).
package protocols
