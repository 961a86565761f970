//go:build ibverbs

package ibverbs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/transporttest"
)

// On a host without an RDMA device (the machine this was written on) Open
// fails naming the missing device.
func TestOpenWithoutDevice(t *testing.T) {
	if Available() {
		t.Skip("this host has an RDMA device")
	}
	_, err := Open(Config{Self: 0, Addrs: map[protocol.NodeID]string{0: "127.0.0.1:0", 1: "127.0.0.1:0"},
		Handler: func(protocol.NodeID, []byte, []byte) {}})
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "no RDMA device") {
		t.Fatalf("Open without a device: %v", err)
	}
	if _, err := OpenDevice(DeviceConfig{Name: "mlx5_0"}); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("OpenDevice without a device: %v", err)
	}
}

// hardwareFactory builds a cluster whose nodes all open the same real
// device (IBVERBS_DEVICE, IBVERBS_GID_INDEX pick it): their queue pairs
// talk through the NIC's loopback.
func hardwareFactory(t testing.TB, handlers []transport.Handler) []transport.Transport {
	dc := DeviceConfig{Name: os.Getenv("IBVERBS_DEVICE")}
	if s := os.Getenv("IBVERBS_GID_INDEX"); s != "" {
		dc.UseGIDIndex = true
		if _, err := fmt.Sscan(s, &dc.GIDIndex); err != nil {
			t.Fatalf("IBVERBS_GID_INDEX=%q: %v", s, err)
		}
	}
	n := len(handlers)
	lns := make([]net.Listener, n)
	addrs := map[protocol.NodeID]string{}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], addrs[protocol.NodeID(i)] = ln, ln.Addr().String()
	}
	ts := make([]transport.Transport, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dev, err := OpenDevice(dc)
			if err != nil {
				errs[i] = err
				return
			}
			ts[i], errs[i] = New(dev, Config{Self: protocol.NodeID(i), Addrs: addrs, Listener: lns[i], Handler: handlers[i],
				ConnectTimeout: 20 * time.Second, PeerTimeout: 5 * time.Second})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, tr := range ts {
				if tr != nil {
					tr.Close()
				}
			}
			t.Fatalf("node %d: %v", i, err)
		}
	}
	t.Cleanup(func() {
		for _, tr := range ts {
			tr.Close()
		}
	})
	return ts
}

// TestHardwareConformance runs the conformance suite on the real device
// when there is one (never on the machine this was written on).
func TestHardwareConformance(t *testing.T) {
	if !Available() {
		t.Skip("no RDMA device: the hardware conformance run needs one")
	}
	transporttest.Run(t, hardwareFactory)
}
