//go:build !ibverbs

package ibverbs

import "github.com/scalestore-go/scalestore/transport"

// Open would open the RDMA device of cfg and connect the cluster; this
// binary was built without the ibverbs tag (no libibverbs linked), so it
// always fails with ErrNotBuilt.
func Open(cfg Config) (transport.Transport, error) {
	return nil, ErrNotBuilt
}

// Built reports whether this binary was built with the ibverbs tag (and so
// links libibverbs): false here.
const Built = false

// Available reports whether this binary can use an RDMA device: never
// without the ibverbs tag.
func Available() bool { return false }
