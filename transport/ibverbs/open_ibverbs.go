//go:build ibverbs

package ibverbs

import (
	"fmt"

	"github.com/scalestore-go/scalestore/transport"
)

// Open opens the RDMA device cfg names (Device, Port, GID), registers
// the mailboxes and connects every node of cfg.Addrs. On a host without an
// RDMA device it fails with an error wrapping ErrNoDevice.
func Open(cfg Config) (transport.Transport, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dev, err := OpenDevice(DeviceConfig{Name: c.Device, Port: c.Port, UseGIDIndex: c.UseGIDIndex, GIDIndex: c.GIDIndex})
	if err != nil {
		return nil, err
	}
	name := dev.Name() // New closes dev if it fails
	t, err := New(dev, c)
	if err != nil {
		return nil, fmt.Errorf("ibverbs: on %s: %w", name, err)
	}
	return t, nil
}

// Built reports whether this binary was built with the ibverbs tag (and so
// links libibverbs): true here.
const Built = true

// Available reports whether libibverbs sees at least one RDMA device.
func Available() bool { return deviceCount() > 0 }
