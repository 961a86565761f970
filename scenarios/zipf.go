package scenarios

import "github.com/scalestore-go/scalestore/internal/zipf"

// zipfDist is YCSB's zipfian distribution (internal/zipf), shared with the
// generic runner.
type zipfDist struct{ z *zipf.Zipf }

func newZipf(n uint64, theta float64) *zipfDist { return &zipfDist{zipf.New(n, theta)} }

func (z *zipfDist) next(r uint64) uint64 { return z.z.Next(r) }
