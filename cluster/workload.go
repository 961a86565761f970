package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/scalestore-go/scalestore/actors"
	"github.com/scalestore-go/scalestore/checker"
	"github.com/scalestore-go/scalestore/ycsb"
)

// Workload is the YCSB mix the workers of one node run.
type Workload struct {
	Records   int           `json:"records"`
	ReadRatio float64       `json:"read_ratio"`
	Zipf      float64       `json:"zipf"`
	Threads   int           `json:"threads"`
	Duration  time.Duration `json:"duration"`
	Seed      int64         `json:"seed"`
	// Nodes and Index place this node for partitioned runs: with
	// Partitioned, node Index works only on its share of the keys (the
	// paper's partitioned setting); ShiftEvery moves every node's share
	// to the next node periodically (paper §6.5, workload shift).
	Nodes       int           `json:"nodes"`
	Index       int           `json:"index"`
	Partitioned bool          `json:"partitioned"`
	ShiftEvery  time.Duration `json:"shift_every"`
	// History records every operation for the linearizability check.
	History bool `json:"history"`
	// Hashed uses the hashed key order (ycsb.HashedKey), as the load did.
	Hashed bool `json:"hashed"`
	// An elastic schedule (paper §6.6): StartAt (Unix ns) is when the
	// cluster's schedule starts; the workers start Delay after it (the node
	// joins) and stop after Duration; with Leave the node then hands back
	// every page it holds (Local.Leave). The result counts the operations
	// completed in each second of the schedule (PerSecond).
	StartAt int64         `json:"start_at,omitempty"`
	Delay   time.Duration `json:"delay,omitempty"`
	Leave   bool          `json:"leave,omitempty"`
	// ScanLen bounds the keys a scan of the index workloads covers (1 to
	// ScanLen; 0: 12).
	ScanLen int `json:"scan_len,omitempty"`
	// A plug-in protocol's workload (RunPlugin): RMW makes every write a
	// read-modify-write; FinalRead reads every key once instead of the
	// run.
	RMW       bool `json:"rmw,omitempty"`
	FinalRead bool `json:"final_read,omitempty"`
}

// leaveLimit bounds how long a leaving node may take to hand its pages back.
const leaveLimit = 10 * time.Second

// RunResult is what one node's workers measured.
type RunResult struct {
	Ops       int64                  `json:"ops"`
	Seconds   float64                `json:"seconds"`
	Latencies *hdrhistogram.Snapshot `json:"latencies"`
	// Fetches are the latencies of ownership requests for pages whose
	// directory is another node (a remote page fetch or upgrade).
	Fetches *hdrhistogram.Snapshot `json:"fetches"`
	Stats   Stats                  `json:"stats"`
	// Trace breaks the remote fetches into hops (NodeConfig.Trace).
	Trace  *actors.RemoteTrace `json:"trace,omitempty"`
	Errors []string            `json:"errors,omitempty"`
	// PerSecond counts the operations completed in each second of an
	// elastic schedule (Workload.StartAt).
	PerSecond []int64 `json:"per_second,omitempty"`
	// PagesHanded is how many pages the node held when it left
	// (Workload.Leave), FramesLeft how many it still held after (0).
	PagesHanded int `json:"pages_handed,omitempty"`
	FramesLeft  int `json:"frames_left,omitempty"`
	// Unavailable counts the operations that failed because a node was out
	// of the view (membership: a page of a dead node, or a write the view
	// change cut); the run goes on. A cut write is in the history with
	// Return UnknownReturn: it may or may not have happened.
	Unavailable int64 `json:"unavailable,omitempty"`
	// The index workloads: the scans completed, their latencies' sum, the
	// round trips their threads waited for (a batch of READs in flight
	// together is one) and the READs they issued.
	Scans     uint64 `json:"scans,omitempty"`
	ScanNanos uint64 `json:"scan_ns,omitempty"`
	ScanWaits uint64 `json:"scan_waits,omitempty"`
	ScanReads uint64 `json:"scan_reads,omitempty"`
}

// UnknownReturn marks a history's write whose outcome is unknown (a view
// change cut it): the checker lets it take effect any time after its call,
// or never.
const UnknownReturn = math.MaxInt64

// unavailable reports whether err is a node's being out of the view, which
// a run with membership goes on after.
func unavailable(err error) bool {
	return errors.Is(err, actors.ErrDirectoryDown) || errors.Is(err, actors.ErrWriteThrough) || errors.Is(err, actors.ErrAllocationCut)
}

// Load inserts records [from, to) with unique write ids, recording the
// writes in hist when it is not nil; hashed chooses the key order
// (ycsb.HashedKey, else ycsb.Key).
func (n *Node) Load(from, to int, hashed bool, hist *checker.History) error {
	keyOf := ycsb.Key
	if hashed {
		keyOf = ycsb.HashedKey
	}
	val := make([]byte, ycsb.ValueSize)
	var kb [8]byte
	for i := from; i < to; i++ {
		id := writeID(n.ID, 255, uint64(i))
		binary.LittleEndian.PutUint64(val, id)
		call := time.Now().UnixNano()
		if err := n.Put(keyOf(kb[:], int64(i)), val); err != nil {
			return fmt.Errorf("cluster: node %d: loading record %d: %w", n.ID, i, err)
		}
		if hist != nil {
			hist.Add(checker.Op{Client: int(n.ID)<<8 | 255, Page: uint64(i), Kind: checker.KindWrite, Value: id, Call: call, Return: time.Now().UnixNano()})
		}
	}
	return nil
}

// keyRange is the share of keys a node's workers use at a moment.
func (wl *Workload) keyRange(start time.Time) (lo, n int64) {
	if !wl.Partitioned || wl.Nodes <= 1 {
		return 0, int64(wl.Records)
	}
	part := wl.Index
	if wl.ShiftEvery > 0 {
		part = (part + int(time.Since(start)/wl.ShiftEvery)) % wl.Nodes
	}
	per := int64(wl.Records / wl.Nodes)
	return int64(part) * per, per
}

// Run runs the workload's threads for its duration and returns what they
// measured and, with History, every operation.
func (n *Node) Run(wl Workload) (RunResult, []checker.Op) {
	var stop atomic.Bool
	hists := make([]*hdrhistogram.Histogram, wl.Threads)
	histories := make([]*checker.History, wl.Threads)
	counts := make([]int64, wl.Threads)
	unavail := make([]int64, wl.Threads)
	errs := make([]error, wl.Threads)
	var sched time.Time
	var perSecond []atomic.Int64
	if wl.StartAt != 0 {
		sched = time.Unix(0, wl.StartAt)
		time.Sleep(time.Until(sched.Add(wl.Delay))) // join
		perSecond = make([]atomic.Int64, int((wl.Delay+wl.Duration)/time.Second)+2)
	}
	start := time.Now()
	n.RT.Locked(n.fetches.Reset)
	n.RT.Trace() // from here on
	var wg sync.WaitGroup
	for t := range wl.Threads {
		hists[t] = hdrhistogram.New(1, 60_000_000, 3)
		if wl.History {
			histories[t] = checker.NewHistory(1 << 12)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(wl.Seed + int64(n.ID)*1000 + int64(t)))
			lo, span := wl.keyRange(start)
			choose := ycsb.NewChooser(span, wl.Zipf)
			keyOf := ycsb.Key
			if wl.Hashed {
				keyOf = ycsb.HashedKey
			}
			var kb [8]byte
			val := make([]byte, ycsb.ValueSize)
			buf := make([]byte, 0, ycsb.ValueSize)
			client := int(n.ID)<<8 | t
			seq := uint64(0)
			for !stop.Load() {
				if wl.ShiftEvery > 0 {
					if l2, _ := wl.keyRange(start); l2 != lo {
						lo = l2
					}
				}
				k := lo + choose(r)
				key := keyOf(kb[:], k)
				read := r.Float64() < wl.ReadRatio
				var id uint64
				if !read {
					seq++
					id = writeID(n.ID, t, seq)
					r.Read(val[8:])
					binary.LittleEndian.PutUint64(val, id)
				}
				call := time.Now()
				var err error
				if read {
					var ok bool
					buf, ok, err = n.Get(key, buf[:0])
					if err == nil {
						id = 0
						if ok {
							id = valueID(buf)
						}
					}
				} else {
					err = n.Put(key, val)
				}
				if err != nil && unavailable(err) {
					unavail[t]++
					if !read && histories[t] != nil {
						histories[t].Add(checker.Op{Client: client, Page: uint64(k), Kind: checker.KindWrite, Value: id, Call: call.UnixNano(), Return: UnknownReturn})
					}
					time.Sleep(time.Millisecond) // the page's node is down: try other keys
					continue
				}
				if err != nil {
					errs[t] = err
					stop.Store(true)
					return
				}
				ret := time.Now()
				_ = hists[t].RecordValue(int64(ret.Sub(call)))
				counts[t]++
				if perSecond != nil {
					if i := int(ret.Sub(sched) / time.Second); i >= 0 && i < len(perSecond) {
						perSecond[i].Add(1)
					}
				}
				if histories[t] != nil {
					kind := checker.KindWrite
					if read {
						kind = checker.KindRead
					}
					histories[t].Add(checker.Op{Client: client, Page: uint64(k), Kind: kind, Value: id, Call: call.UnixNano(), Return: ret.UnixNano()})
				}
			}
		}()
	}
	deadline := time.NewTimer(wl.Duration)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-deadline.C:
		stop.Store(true)
		<-done
	case <-done:
		deadline.Stop()
	}
	res := RunResult{Seconds: time.Since(start).Seconds()}
	all := hdrhistogram.New(1, 60_000_000, 3)
	var ops []checker.Op
	for t := range wl.Threads {
		res.Ops += counts[t]
		res.Unavailable += unavail[t]
		all.Merge(hists[t])
		if errs[t] != nil {
			res.Errors = append(res.Errors, errs[t].Error())
		}
		if histories[t] != nil {
			ops = append(ops, histories[t].Ops()...)
		}
	}
	res.Latencies = all.Export()
	n.RT.Locked(func() { res.Fetches = n.fetches.Export() })
	if tr, ok := n.RT.Trace(); ok {
		res.Trace = &tr
	}
	res.Stats = n.Stats()
	for i := range perSecond {
		res.PerSecond = append(res.PerSecond, perSecond[i].Load())
	}
	if wl.Leave {
		held, err := n.RT.Leave(leaveLimit)
		res.PagesHanded = held
		n.RT.Locked(func() {
			c := n.RT.Node().Cache()
			res.FramesLeft = c.Frames() - c.FreeFrames()
		})
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
		}
	}
	return res, ops
}
