package cell

// The locality selector (paper §2.5): per server, moving averages of the
// latency of a server-side search, of one READ, and of the READs a
// client-side search of its meganodes takes; a search goes server-side
// when its expected latency is the lower, and 1% of searches take the
// other method so that both estimates follow the load.
type estimate struct {
	ls, lr, m float64
	ns, nr    uint64
}

// alpha weighs a new sample against the moving average: about the last 16
// samples count.
const alpha = 1.0 / 16

// explore is one in how many searches take the method estimated worse.
const explore = 100

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
	case e.ns == 0:
		return ServerSide
	case e.nr == 0:
		return ClientSide
	}
	better, worse := ServerSide, ClientSide
	if e.ls > e.m*e.lr {
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
	avg := func(old *float64, n uint64, x float64) {
		if n == 0 {
			*old = x
			return
		}
		*old += alpha * (x - *old)
	}
	if how == ServerSide {
		avg(&e.ls, e.ns, float64(ns))
		e.ns++
		return
	}
	if reads == 0 {
		return // all from the cache: nothing learned of the network
	}
	avg(&e.lr, e.nr, float64(ns)/float64(reads))
	avg(&e.m, e.nr, float64(reads))
	e.nr++
}
