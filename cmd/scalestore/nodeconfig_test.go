package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cluster.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const threeHosts = `
cluster_id = 7
bootstrap  = 2
transport  = "tcp"
data       = "/var/lib/scalestore"
cache      = "1GiB"
timeout    = "3s"
resp_password = "s3cret"
etcd       = "http://10.0.0.9:2379,http://10.0.0.10:2379"
lease      = "3s"
replicas   = 2

[[node]]
id      = 0
address = "10.0.0.1:7000"
resp    = "10.0.0.1:6379"
[[node]]
id      = 1
address = "10.0.0.2:7000"
resp    = "10.0.0.2:6379"
listen  = "0.0.0.0:7000"
[[node]]
id      = 2
address = "10.0.0.3:7000"
resp    = "10.0.0.3:6379"
`

// One file describes the deployment; each node takes its own entry, and
// flags given on the command line win.
func TestNodeConfigFile(t *testing.T) {
	p := writeConfig(t, threeHosts)
	f := nodeFlags{id: 1, kind: "tcp", cache: "256MiB", clusterID: 1}
	if err := applyConfig(p, &f, map[string]bool{"cache": true}); err != nil {
		t.Fatal(err)
	}
	if f.peers != "0=10.0.0.1:7000,1=10.0.0.2:7000,2=10.0.0.3:7000" || f.listen != "0.0.0.0:7000" || f.resp != "10.0.0.2:6379" ||
		f.clusterID != 7 || f.bootstrap != 2 || f.data != "/var/lib/scalestore" || f.respPassword != "s3cret" || f.timeout != 3*time.Second ||
		f.etcd != "http://10.0.0.9:2379,http://10.0.0.10:2379" || f.lease != 3*time.Second || f.replicas != 2 {
		t.Fatalf("applied %+v", f)
	}
	if f.cache != "256MiB" {
		t.Fatalf("--cache on the command line lost to the file: %q", f.cache)
	}
	for _, c := range []struct{ body, id, want string }{
		{threeHosts, "5", "no [[node]] with id = 5"},
		{"foo = 1\n" + threeHosts, "0", "unknown keys foo"},
		{"[[node]]\nid = 0\naddress = \"nohost\"\n", "0", "address \"nohost\""},
		{"[[node]]\nid = 0\naddress = \"a:1\"\n[[node]]\nid = 0\naddress = \"b:1\"\n", "0", "node 0 named twice"},
		{"cluster_id = \"x\"\n", "0", "cluster_id"},
		{"", "0", "no [[node]] entries"},
	} {
		g := nodeFlags{}
		g.id = -1
		if c.id != "" {
			g.id = int(c.id[0] - '0')
		}
		err := applyConfig(writeConfig(t, c.body), &g, map[string]bool{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %q: %v, want an error containing %q", c.body, err, c.want)
		}
	}
	var g nodeFlags
	g.id = -1
	if err := applyConfig(p, &g, nil); err == nil || !strings.Contains(err.Error(), "--id is missing") {
		t.Fatalf("no --id: %v", err)
	}
}

// The [rdma] table sets the ibverbs transport's device for every node; a
// node's rdma_device overrides it, and flags on the command line win.
func TestNodeConfigRDMA(t *testing.T) {
	body := `transport = "ibverbs"
[rdma]
device    = "mlx5_0"
port      = 2
gid_index = 3
mtu       = 4096
mailboxes = 32
[[node]]
id = 0
address = "10.0.0.1:7000"
[[node]]
id = 1
address = "10.0.0.2:7000"
rdma_device = "mlx5_1"
`
	p := writeConfig(t, body)
	f := nodeFlags{id: 0}
	f.rdma.GIDIndex = -1
	if err := applyConfig(p, &f, map[string]bool{"rdma-mtu": true}); err != nil {
		t.Fatal(err)
	}
	if f.kind != "ibverbs" || f.rdma.Device != "mlx5_0" || f.rdma.Port != 2 || f.rdma.GIDIndex != 3 || f.rdma.MTU != 0 || f.rdma.Mailboxes != 32 {
		t.Fatalf("node 0 applied %+v (the flag --rdma-mtu must win over the file)", f.rdma)
	}
	g := nodeFlags{id: 1}
	if err := applyConfig(p, &g, nil); err != nil || g.rdma.Device != "mlx5_1" {
		t.Fatalf("node 1's rdma_device: %q %v", g.rdma.Device, err)
	}
	if err := applyConfig(writeConfig(t, "[rdma]\nspeed = 1\n[[node]]\nid = 0\naddress = \"a:1\"\n"), &nodeFlags{}, nil); err == nil || !strings.Contains(err.Error(), "rdma.speed") {
		t.Fatalf("an unknown [rdma] key: %v", err)
	}
}
