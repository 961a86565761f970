// Package transport will hold the Transport interface shared by the
// simulated, TCP, shared-memory and RDMA transports (two-sided messages, page
// transfers, one-sided verbs). The simulator (transport/sim) comes first; the
// interface is extracted when the real transports arrive (next issue).
package transport
