package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestAutoShape: the shape fits the cores (a core per busy worker), with
// two nodes at least; the warning comes exactly when the workers outnumber
// the cores, and names the cost.
func TestAutoShape(t *testing.T) {
	for _, c := range []struct{ cores, nodes, threads int }{{1, 2, 1}, {2, 2, 1}, {4, 2, 2}, {6, 3, 2}, {16, 3, 5}} {
		n, th := autoShape(c.cores)
		if n != c.nodes || th != c.threads {
			t.Errorf("%d cores: %d x %d, want %d x %d", c.cores, n, th, c.nodes, c.threads)
		}
		if c.cores >= 2 && n*th > c.cores {
			t.Errorf("%d cores: %d x %d oversubscribes", c.cores, n, th)
		}
		if s := describeAutoShape(n, th, c.cores); !strings.Contains(s, "cores") {
			t.Errorf("the shape's reason: %q", s)
		}
	}
	var b bytes.Buffer
	warnOversubscribed(&b, 2, 1, 2)
	warnOversubscribed(&b, 1, 4, 2) // one node: nothing moves between nodes
	if b.Len() != 0 {
		t.Fatalf("warned for a shape that fits: %s", b.String())
	}
	warnOversubscribed(&b, 3, 2, 2)
	if !strings.Contains(b.String(), "6 busy threads on 2 cores") || !strings.Contains(b.String(), "--auto-shape") {
		t.Fatalf("the warning: %s", b.String())
	}
}
