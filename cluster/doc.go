// Package cluster runs ScaleStore on real processes: one Node per process
// (the protocol roles on the real-world runtime, hosted by hollywood, over a
// transport), the YCSB table as one B-tree shared by all nodes, YCSB workers
// running inside the nodes (as in the paper, §6.1), and the control
// protocol by which `scalestore cluster` drives child `scalestore node`
// processes and gathers their results and histories.
//
// It may import actors, btree, bufmgr, checker, protocol, storage, transport
// and ycsb; never the simulator.
package cluster
