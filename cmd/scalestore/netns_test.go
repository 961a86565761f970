package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// netns is a throwaway network of namespaces joined by a bridge: one
// "host" per namespace, each with its own address.
type netns struct {
	t      *testing.T
	names  []string
	bridge string
	subnet string // e.g. 10.231.7
}

func (n *netns) ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetns makes hosts namespaces on a bridge, or skips the test saying
// why it cannot.
func newNetns(t *testing.T, hosts int) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the ip command (iproute2) is not installed")
	}
	id := os.Getpid() % 200
	n := &netns{t: t, bridge: fmt.Sprintf("ssbr%d", id), subnet: fmt.Sprintf("10.231.%d", id)}
	t.Cleanup(n.remove)
	if err := n.ip("link", "add", n.bridge, "type", "bridge"); err != nil {
		t.Skipf("cannot make a bridge here: %v", err)
	}
	steps := [][]string{{"addr", "add", n.subnet + ".254/24", "dev", n.bridge}, {"link", "set", n.bridge, "up"}}
	for i := range hosts {
		name := fmt.Sprintf("ss%d-%d", id, i)
		host, peer := fmt.Sprintf("ssv%d-%dh", id, i), fmt.Sprintf("ssv%d-%dn", id, i)
		if err := n.ip("netns", "add", name); err != nil {
			t.Skipf("cannot make a network namespace here: %v", err)
		}
		n.names = append(n.names, name)
		steps = append(steps,
			[]string{"link", "add", host, "type", "veth", "peer", "name", peer},
			[]string{"link", "set", host, "master", n.bridge},
			[]string{"link", "set", host, "up"},
			[]string{"link", "set", peer, "netns", name},
			[]string{"-n", name, "addr", "add", fmt.Sprintf("%s.%d/24", n.subnet, i+1), "dev", peer},
			[]string{"-n", name, "link", "set", peer, "up"},
			[]string{"-n", name, "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if err := n.ip(s...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n *netns) addr(i int, port int) string { return fmt.Sprintf("%s.%d:%d", n.subnet, i+1, port) }

func (n *netns) remove() {
	for _, name := range n.names {
		exec.Command("ip", "netns", "del", name).Run() // removes its veth ends too
	}
	exec.Command("ip", "link", "del", n.bridge).Run()
}

// Three nodes on three "hosts" (namespaces with their own addresses on a
// bridge), started from one config file as docs/deploy.md says: a write
// through one node's RESP port is read through another's, and the cluster
// stops cleanly.
func TestRESPAcrossNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	n := newNetns(t, 3)
	bin := scalestoreBinary(t)
	var cfg strings.Builder
	// The clients connect from another namespace: not loopback.
	fmt.Fprintf(&cfg, "cluster_id = 31\ntransport = \"tcp\"\ncache = \"16MiB\"\nresp_protected_mode = false\n")
	for i := range 3 {
		fmt.Fprintf(&cfg, "[[node]]\nid = %d\naddress = %q\nresp = %q\n", i, n.addr(i, 7000), n.addr(i, 6379))
	}
	path := filepath.Join(t.TempDir(), "cluster.toml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newRESPCluster(t, "ip")
	for i := range 3 {
		c.add([]string{"netns", "exec", n.names[i], bin, "node", "--config", path, "--id", fmt.Sprint(i),
			"--data", t.TempDir(), "--socket-dir", t.TempDir()}, n.addr(i, 6379))
	}
	c.start()
	ctx := context.Background()
	if err := c.client(0).Set(ctx, "across", "hosts", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if err := c.client(i%3).Set(ctx, fmt.Sprintf("k%03d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := c.client(2).Get(ctx, "across").Result(); err != nil || v != "hosts" {
		t.Fatalf("read through node 2: %q %v", v, err)
	}
	start := time.Now()
	c.stop()
	t.Logf("three namespaced nodes stopped cleanly in %v", time.Since(start).Round(time.Millisecond))
}
