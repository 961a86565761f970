package scalestore

import (
	"fmt"
	"strings"
	"testing"
)

// A one-node cluster that writes through (it logs records instead,
// nodelog.go), restarted after its leaves split: every page of a split
// reaches its own slot at the clean stop, and the catalog keeps the
// cluster's identity. (Several nodes: TestRESPKillLosesNoAcknowledgedWrite's
// loader, which caught PersistAll writing a split's pages to the
// catalog's slot.)
func TestRestartAfterSplits(t *testing.T) {
	opts := clusterOpts(freePorts(t, 1), []string{t.TempDir()})
	c, err := Join(opts[0])
	if err != nil {
		t.Fatal(err)
	}
	val := strings.Repeat("x", 500)
	const keys = 200 // 8 to a leaf: many splits
	for i := range keys {
		if err := c.Put([]byte(fmt.Sprintf("k%04d", i)), []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err = Join(opts[0])
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer c.Close()
	for i := range keys {
		v, ok, err := c.Get([]byte(fmt.Sprintf("k%04d", i)), nil)
		if err != nil || !ok || string(v) != val {
			t.Fatalf("after the restart, k%04d: found %v, %d bytes, %v", i, ok, len(v), err)
		}
	}
}
