// Package zipf draws ranks with YCSB's zipfian distribution (Gray et al.,
// "Quickly generating billion-record synthetic databases") from the
// caller's random numbers, so a simulated run stays a function of its
// seed. It imports the standard library only.
package zipf

import "math"

// Zipf draws ranks in [0, n) with constant theta; theta 0 is uniform.
type Zipf struct {
	n                   uint64
	theta, alpha, zetan float64
	eta, halfPowTheta   float64
	uniform             bool
}

// New prepares the distribution over n ranks (O(n) once).
func New(n uint64, theta float64) *Zipf {
	z := &Zipf{n: n, theta: theta}
	if theta <= 0 || n < 2 {
		z.uniform = true
		return z
	}
	zeta := func(k uint64) float64 {
		s := 0.0
		for i := uint64(1); i <= k; i++ {
			s += 1 / math.Pow(float64(i), theta)
		}
		return s
	}
	z.zetan = zeta(n)
	zeta2 := zeta(2)
	z.alpha = 1 / (1 - theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/z.zetan)
	z.halfPowTheta = 1 + math.Pow(0.5, theta)
	return z
}

// Next is the rank drawn from the random number r.
func (z *Zipf) Next(r uint64) uint64 {
	if z.uniform {
		return r % z.n
	}
	u := float64(r>>11) * (1.0 / (1 << 53))
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.halfPowTheta {
		return 1
	}
	k := uint64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	return min(k, z.n-1)
}
