//go:build !ibverbs

package ibverbs

import (
	"errors"
	"strings"
	"testing"

	"github.com/scalestore-go/scalestore/protocol"
)

func TestOpenWithoutTag(t *testing.T) {
	tr, err := Open(Config{Self: 0, Addrs: map[protocol.NodeID]string{0: "127.0.0.1:0"}, Handler: func(protocol.NodeID, []byte, []byte) {}})
	if tr != nil || !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "ibverbs") {
		t.Fatalf("Open in a build without the ibverbs tag: %v, %v", tr, err)
	}
	if Available() {
		t.Fatal("Available without the ibverbs tag")
	}
}
