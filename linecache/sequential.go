package linecache

import "github.com/scalestore-go/scalestore/transport"

// Sequential is a Poster over a blocking transport.OneSided: each verb
// runs when it is posted and done is called before Post returns. Order
// holds trivially; what a batch saves (one round trip for an atomic and
// its READ) is lost.
type Sequential struct{ V transport.OneSided }

// Read implements Poster.
func (s Sequential) Read(dst []byte, r transport.Region, off uint64, done func(error)) {
	done(s.V.Read(dst, r, off))
}

// Write implements Poster.
func (s Sequential) Write(r transport.Region, off uint64, src []byte, done func(error)) {
	done(s.V.Write(r, off, src))
}

// CompareAndSwap implements Poster.
func (s Sequential) CompareAndSwap(r transport.Region, off, old, new uint64, done func(uint64, error)) {
	done(s.V.CompareAndSwap(r, off, old, new))
}

// FetchAndAdd implements Poster.
func (s Sequential) FetchAndAdd(r transport.Region, off, delta uint64, done func(uint64, error)) {
	done(s.V.FetchAndAdd(r, off, delta))
}
