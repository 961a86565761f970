// Package protocols is the one list of registrations: the only place
// that names the protocol packages. Entries lists every protocol
// ScaleStore-Go knows, and Registry puts them into a protocolapi.Registry:
// the plug-in protocols (each package's Protocol, run by simrunner) and the
// built-in systems whose nodes own their simulated world (described here by
// name, what they support, their options and their mutants, so `scalestore
// protocols` lists them). Each Entry says where its protocol's packages are
// (Dirs: outside them and list.go no file names it, TestNamesStayHome) and
// carries its optional hooks beyond protocolapi: a built-in's simulated
// world (a simrunner.World, scenarios' run loop, which `scalestore sim`
// runs through simrunner.RunWorld), its code for real processes (a
// cluster.Design, which `scalestore cluster`, `node` and `bench cluster`
// find by name) and its runs for `make swarm` and `make mutants`. Adding a
// protocol is a package of its own and one line in list.go.
//
// It imports protocolapi, simrunner (the World type), scenarios (the
// built-ins' worlds and ScaleStore's option names), cluster (the Design
// type), mutation (the built-ins' mutant names) and the protocol
// packages; nothing imports it but the CLI and tests (not those of
// package cluster or scenarios: they would make a cycle).
package protocols
