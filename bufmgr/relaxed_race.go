//go:build race

package bufmgr

import "sync/atomic"

// storeRelaxed is an atomic store under the race detector (see relaxed.go).
func storeRelaxed(p *atomic.Uint64, v uint64) { p.Store(v) }
