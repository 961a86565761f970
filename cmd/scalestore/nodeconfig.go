package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// deployment is a whole cluster in one file (node --config FILE), copied
// to every host; each node picks its own entry with --id. Flags given on
// the command line win over the file.
//
//	cluster_id = 7
//	bootstrap  = 0            # the node that creates the catalog
//	transport  = "tcp"
//	data       = "/var/lib/scalestore"
//	cache      = "4GiB"
//	resp_password = "s3cret"  # or resp_protected_mode = false (see --resp-protected-mode)
//
//	[rdma]                    # transport = "ibverbs" (docs/rdma.md)
//	device    = "mlx5_0"      # empty: the first device
//	port      = 1
//	gid_index = 3             # absent: LID on InfiniBand, a RoCE v2 GID on Ethernet
//	mtu       = 4096          # absent: the port's active MTU
//	mailboxes = 32            # the same on every node
//
//	[[node]]
//	id      = 0
//	address = "10.0.0.1:7000"   # the cluster's port (peers dial it)
//	resp    = "10.0.0.1:6379"   # the Redis protocol (clients)
//	[[node]]
//	id      = 1
//	address = "10.0.0.2:7000"
//	resp    = "10.0.0.2:6379"
type deployment struct {
	ClusterID    uint64 `toml:"cluster_id"`
	Bootstrap    *int   `toml:"bootstrap"`
	Transport    string `toml:"transport"`
	Data         string `toml:"data"`
	Cache        string `toml:"cache"`
	SocketDir    string `toml:"socket_dir"`
	RESPPassword string `toml:"resp_password"`
	// RESPProtectedMode false serves RESP clients from other hosts
	// without a password (--resp-protected-mode).
	RESPProtectedMode *bool            `toml:"resp_protected_mode"`
	TLSCert           string           `toml:"tls_cert"`
	TLSKey            string           `toml:"tls_key"`
	TLSCA             string           `toml:"tls_ca"`
	Timeout           string           `toml:"timeout"`
	Durability        string           `toml:"durability"`
	Etcd              string           `toml:"etcd"`
	Lease             string           `toml:"lease"`
	Replicas          *int             `toml:"replicas"`
	RDMA              deploymentRDMA   `toml:"rdma"`
	Nodes             []deploymentNode `toml:"node"`
}

// deploymentRDMA is the [rdma] table: the ibverbs transport's device.
type deploymentRDMA struct {
	Device    string `toml:"device"`
	Port      *int   `toml:"port"`
	GIDIndex  *int   `toml:"gid_index"`
	MTU       *int   `toml:"mtu"`
	Mailboxes *int   `toml:"mailboxes"`
}

type deploymentNode struct {
	ID      *int   `toml:"id"`
	Address string `toml:"address"`
	Listen  string `toml:"listen"`
	RESP    string `toml:"resp"`
	Data    string `toml:"data"`
	// RDMADevice overrides [rdma] device on a host whose NIC is named
	// otherwise.
	RDMADevice string `toml:"rdma_device"`
}

// applyConfig reads the deployment file into f, leaving alone every flag
// set on the command line (set).
func applyConfig(path string, f *nodeFlags, set map[string]bool) error {
	var d deployment
	md, err := toml.DecodeFile(path, &d)
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		keys := make([]string, len(un))
		for i, k := range un {
			keys[i] = k.String()
		}
		return fmt.Errorf("--config %s: unknown keys %s", path, strings.Join(keys, ", "))
	}
	if len(d.Nodes) == 0 {
		return fmt.Errorf("--config %s: no [[node]] entries", path)
	}
	var peers []string
	var mine *deploymentNode
	seen := map[int]bool{}
	for i := range d.Nodes {
		n := &d.Nodes[i]
		if n.ID == nil || *n.ID < 0 || *n.ID > 255 {
			return fmt.Errorf("--config %s: node entry %d: want id = 0..255", path, i+1)
		}
		if seen[*n.ID] {
			return fmt.Errorf("--config %s: node %d named twice", path, *n.ID)
		}
		seen[*n.ID] = true
		if _, _, err := net.SplitHostPort(n.Address); err != nil {
			return fmt.Errorf("--config %s: node %d: address %q: %v", path, *n.ID, n.Address, err)
		}
		peers = append(peers, fmt.Sprintf("%d=%s", *n.ID, n.Address))
		if *n.ID == f.id {
			mine = n
		}
	}
	if f.id < 0 {
		return fmt.Errorf("--config %s: --id is missing (the file describes %d nodes; each host runs one)", path, len(d.Nodes))
	}
	if mine == nil {
		return fmt.Errorf("--config %s: no [[node]] with id = %d", path, f.id)
	}
	str := func(flag string, dst *string, v string) {
		if !set[flag] && v != "" {
			*dst = v
		}
	}
	str("peers", &f.peers, strings.Join(peers, ","))
	str("listen", &f.listen, mine.Listen)
	str("resp", &f.resp, mine.RESP)
	str("data", &f.data, d.Data)
	str("data", &f.data, mine.Data)
	str("transport", &f.kind, d.Transport)
	str("cache", &f.cache, d.Cache)
	str("socket-dir", &f.socketDir, d.SocketDir)
	str("resp-password", &f.respPassword, d.RESPPassword)
	str("tls-cert", &f.tlsCert, d.TLSCert)
	str("tls-key", &f.tlsKey, d.TLSKey)
	str("tls-ca", &f.tlsCA, d.TLSCA)
	str("durability", &f.durability, d.Durability)
	str("etcd", &f.etcd, d.Etcd)
	str("rdma-device", &f.rdma.Device, d.RDMA.Device)
	str("rdma-device", &f.rdma.Device, mine.RDMADevice)
	num := func(flag string, dst *int, v *int) {
		if !set[flag] && v != nil {
			*dst = *v
		}
	}
	num("rdma-port", &f.rdma.Port, d.RDMA.Port)
	num("rdma-gid-index", &f.rdma.GIDIndex, d.RDMA.GIDIndex)
	num("rdma-mtu", &f.rdma.MTU, d.RDMA.MTU)
	num("rdma-mailboxes", &f.rdma.Mailboxes, d.RDMA.Mailboxes)
	if !set["resp-protected-mode"] && d.RESPProtectedMode != nil {
		f.respProtected = *d.RESPProtectedMode
	}
	if !set["cluster-id"] && d.ClusterID != 0 {
		f.clusterID = d.ClusterID
	}
	num("replicas", &f.replicas, d.Replicas)
	if !set["bootstrap"] && d.Bootstrap != nil {
		f.bootstrap = *d.Bootstrap
	}
	dur := func(flag string, dst *time.Duration, v string) error {
		if set[flag] || v == "" {
			return nil
		}
		t, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("--config %s: %s: %w", path, flag, err)
		}
		*dst = t
		return nil
	}
	if err := dur("timeout", &f.timeout, d.Timeout); err != nil {
		return err
	}
	return dur("lease", &f.lease, d.Lease)
}

// flagsSet lists the flags given on the command line.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// respPasswordFromEnv lets a password stay off the command line.
func respPasswordFromEnv(f *nodeFlags) {
	if f.respPassword == "" {
		f.respPassword = os.Getenv("SCALESTORE_RESP_PASSWORD")
	}
}
