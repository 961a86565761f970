package cell

import "math"

// The locality selector (paper §2.5 and its "coping with transient
// network conditions"): per server, moving averages over the most recent
// samples of the latency of a server-side search, of one READ, and of the
// READs a client-side search of its meganodes takes; a search goes
// server-side when its expected latency is the lower, and 1% of searches
// take the other method so that both estimates follow the load.
//
// Transient conditions do not steer it: a latency sample K standard
// deviations from its window's mean is discarded (once the window has
// enough samples to say what an outlier is), and a window that discards
// more samples than it keeps over one period of historyLen samples is
// emptied (the conditions changed for good: learn them afresh). A server
// not searched for idleExpiry has its history emptied too, so that an
// estimate never describes a past load. Client.NoOutlierRejection and
// NoHistoryExpiry turn the two off (the cell-selector-spikes figure).
type estimate struct {
	ls, lr, m window
}

// The selector's constants, the paper's suggestions: n = 100, K = 3,
// p = 1%, 3 s.
const (
	historyLen     = 100
	outlierK       = 3
	minForOutliers = 10
	explore        = 100
	idleExpiry     = 3_000_000_000
)

// window is a moving window of the most recent samples.
type window struct {
	xs               []float64 // a ring of up to historyLen samples
	next             int
	sum              float64
	kept, discarded  int // in the current period
	last             int64
	resets, rejected uint64
}

func (w *window) len() int { return len(w.xs) }

func (w *window) mean() float64 {
	if len(w.xs) == 0 {
		return 0
	}
	return w.sum / float64(len(w.xs))
}

func (w *window) stddev() float64 {
	mu := w.mean()
	var v float64
	for _, x := range w.xs {
		v += (x - mu) * (x - mu)
	}
	return math.Sqrt(v / float64(len(w.xs)))
}

func (w *window) reset() {
	w.xs, w.next, w.sum, w.kept, w.discarded = w.xs[:0], 0, 0, 0, 0
	w.resets++
}

// add offers sample x taken at now; rejectOutliers and expire say whether
// the two defenses are on. It reports whether x was kept.
func (w *window) add(x float64, now int64, rejectOutliers, expire bool) bool {
	if expire && len(w.xs) > 0 && now-w.last > idleExpiry {
		w.reset()
	}
	w.last = now
	if rejectOutliers && len(w.xs) >= minForOutliers {
		if sd := w.stddev(); sd > 0 && math.Abs(x-w.mean()) >= outlierK*sd {
			w.discarded++
			w.rejected++
			w.endPeriod()
			return false
		}
	}
	if len(w.xs) < historyLen {
		w.xs = append(w.xs, x)
	} else {
		w.sum -= w.xs[w.next]
		w.xs[w.next] = x
		w.next = (w.next + 1) % historyLen
	}
	w.sum += x
	w.kept++
	w.endPeriod()
	return true
}

// endPeriod closes a period of historyLen samples: one that discarded
// more than it kept empties the window.
func (w *window) endPeriod() {
	if w.kept+w.discarded < historyLen {
		return
	}
	if w.discarded > w.kept {
		w.reset()
		return
	}
	w.kept, w.discarded = 0, 0
}

func (c *Client) estimateOf(server int) *estimate {
	for len(c.est) <= server {
		c.est = append(c.est, estimate{})
	}
	return &c.est[server]
}

// choose picks the method of a search of a meganode of server.
func (c *Client) choose(server int) Search {
	if c.Search != Selector {
		return c.Search
	}
	e := c.estimateOf(server)
	switch {
	case e.ls.len() == 0:
		return ServerSide
	case e.lr.len() == 0:
		return ClientSide
	}
	better, worse := ServerSide, ClientSide
	if e.ls.mean() > e.m.mean()*e.lr.mean() {
		better, worse = ClientSide, ServerSide
	}
	if c.Rand != nil && c.Rand()%explore == 0 {
		return worse
	}
	return better
}

// sample records a search's latency (ns) and, client-side, its READs.
func (c *Client) sample(server int, how Search, ns int64, reads uint64) {
	if c.Search != Selector {
		return
	}
	e := c.estimateOf(server)
	now := c.now()
	reject, expire := !c.NoOutlierRejection, !c.NoHistoryExpiry
	if how == ServerSide {
		e.ls.add(float64(ns), now, reject, expire)
		return
	}
	if reads == 0 {
		return // all from the cache: nothing learned of the network
	}
	if e.lr.add(float64(ns)/float64(reads), now, reject, expire) {
		e.m.add(float64(reads), now, false, expire) // a search's READs are its shape, not the network's noise
	}
}

// SelectorStats counts the selector's defenses at work: samples discarded
// as outliers and windows emptied (too many outliers, or idle too long).
func (c *Client) SelectorStats() (rejected, resets uint64) {
	for i := range c.est {
		for _, w := range []*window{&c.est[i].ls, &c.est[i].lr, &c.est[i].m} {
			rejected += w.rejected
			resets += w.resets
		}
	}
	return rejected, resets
}
