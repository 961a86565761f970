package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/scalestore-go/scalestore/transport/ibverbs"
)

// The transports each entry point takes. docs/transports.md shows the same
// table; TestTransportTable checks that the two agree and that every
// refusal is what the command prints.
//
// An entry is "" (accepted), rdmaOnly (accepted by a binary built with
// -tags ibverbs on a host with an RDMA device, refused otherwise with what
// is missing), or the reason the entry point refuses the transport.
var entryTransports = map[string]map[string]string{
	"Join":    {"tcp": "", "shm": "", "auto": "", "ibverbs": rdmaOnly},
	"node":    {"tcp": "", "shm": "", "auto": "", "ibverbs": rdmaOnly},
	"cluster": {"tcp": "", "shm": "", "auto": "", "ibverbs": rdmaOnly},
	"crashtest --cluster": {"tcp": "", "shm": "", "ibverbs": rdmaOnly,
		"auto": "every node of a crashtest runs on this host, where auto is shm: name shm, or both to alternate tcp and shm"},
	"bench cluster": {"tcp": "", "shm": "", "auto": "", "ibverbs": rdmaOnly},
}

// transportEntries lists entryTransports' entry points in the table's
// order; transportKinds its columns.
var (
	transportEntries = []string{"Join", "node", "cluster", "crashtest --cluster", "bench cluster"}
	transportKinds   = []string{"tcp", "shm", "auto", "ibverbs"}
)

const rdmaOnly = "rdma"

// Node processes over RDMA on one host reach each other through the NIC's
// loopback; a host without a device cannot run them, which the entry points
// that start processes say before they start any.
var errNoRDMADevice = errors.New("ibverbs: this host has no RDMA device (ibv_devices lists them; 'scalestore node --transport ibverbs' on each host of an RDMA cluster is the deployment, docs/rdma.md)")

// checkTransport says why entry cannot use transport kind in this binary on
// this host, or nil when it can. Join and node do not probe for a device:
// the transport's own open names the one it did not find.
func checkTransport(entry, kind string) error {
	rules, ok := entryTransports[entry]
	if !ok {
		panic("checkTransport: unknown entry point " + entry) // a programming error, never input
	}
	refused, ok := rules[kind]
	switch {
	case !ok:
		var known []string
		for _, k := range transportKinds {
			if _, ok := rules[k]; ok {
				known = append(known, k)
			}
		}
		return fmt.Errorf("transport %q: want one of %s", kind, strings.Join(known, ", "))
	case refused == "":
		return nil
	case refused != rdmaOnly:
		return fmt.Errorf("transport %q: %s", kind, refused)
	case !ibverbs.Built:
		return ibverbs.ErrNotBuilt
	case entry != "Join" && entry != "node" && !ibverbs.Available():
		return errNoRDMADevice
	}
	return nil
}
