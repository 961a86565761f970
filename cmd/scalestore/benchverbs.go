package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/scalestore-go/scalestore/linecache"
	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
	"github.com/scalestore-go/scalestore/transport/shm"
	"github.com/scalestore-go/scalestore/transport/tcp"
	"golang.org/x/sys/unix"
)

// The one-sided verbs of 'bench transport': this process (node 0) issues
// READ, CAS and FAA, and a SELCC miss's pair (FAA, then READ of the line),
// one at a time, on a region of the peer process (node 1), over tcp and
// over shm both ways: "shm" on memory the peer allocated from the
// transport (AllocMemory: mapped here, so the calling thread does the
// access), "shm-ring" on memory it did not (served by the peer's reader,
// as every shm verb was before).

// benchVerbRegion is the size of each region the peer registers.
const benchVerbRegion = 64 << 10

// benchVerbNames are the measured verbs, in the table's order.
var benchVerbNames = []string{"read", "cas", "faa", "faa_read"}

// benchVerbTransports are the rows, in the table's order.
var benchVerbTransports = []string{"tcp", "shm-ring", "shm"}

// verbRegions are the peer's regions: shm (allocated from the transport),
// shm-ring (plain memory) and tcp, each benchVerbRegion bytes.
// cold is an allocated shm region of benchColdLines lines (SELCC's
// stride), each read once in a random order: a miss of a line no CPU
// cache holds.
type verbRegions struct{ shm, shmRing, tcp, cold uint32 }

func (v verbRegions) String() string {
	return fmt.Sprintf("%d,%d,%d,%d", v.shm, v.shmRing, v.tcp, v.cold)
}

// benchColdLines lines of SELCC's layout (a latch word, then the line)
// make the cold region: 136 MB, more than any CPU cache.
const benchColdLines = 32768

func parseVerbRegions(s string) (verbRegions, error) {
	var v verbRegions
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return v, fmt.Errorf("regions %q: want four keys", s)
	}
	for i, p := range []*uint32{&v.shm, &v.shmRing, &v.tcp, &v.cold} {
		k, err := strconv.ParseUint(parts[i], 10, 32)
		if err != nil {
			return v, fmt.Errorf("regions %q: %v", s, err)
		}
		*p = uint32(k)
	}
	return v, nil
}

// benchVerbsOn measures every verb on region r for d each (after warm),
// and records its p50 and p99 under name.
func benchVerbsOn(name string, v transport.OneSided, r transport.Region, d, warm time.Duration, res map[string]float64) error {
	line := make([]byte, protocol.PageSize)
	var word uint64
	ops := map[string]func() error{
		"read": func() error { return v.Read(line, r, 64) },
		"cas": func() error {
			prev, err := v.CompareAndSwap(r, 8, word, word+1)
			if err == nil && prev != word {
				err = fmt.Errorf("CAS expected %d, found %d", word, prev)
			}
			word++
			return err
		},
		"faa": func() error { _, err := v.FetchAndAdd(r, 16, 1); return err },
		"faa_read": func() error {
			if _, err := v.FetchAndAdd(r, 24, 1); err != nil {
				return err
			}
			return v.Read(line, r, 64)
		},
	}
	for _, verb := range benchVerbNames {
		op := ops[verb]
		h, err := timeVerb(op, warm)
		if err == nil {
			h, err = timeVerb(op, d)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", name, verb, err)
		}
		res[name+"."+verb+"_p50_us"] = usAt(h, 50)
		res[name+"."+verb+"_p99_us"] = usAt(h, 99)
	}
	return nil
}

// timeVerb runs op back to back for d and returns its latencies.
func timeVerb(op func() error, d time.Duration) (*hdrhistogram.Histogram, error) {
	h := newLatencyHist()
	deadline := time.Now().Add(d)
	for {
		start := time.Now()
		if err := op(); err != nil {
			return h, err
		}
		now := time.Now()
		h.RecordValue(max(now.Sub(start).Nanoseconds(), 1))
		if now.After(deadline) {
			return h, nil
		}
	}
}

// benchVerbsShm measures both shm rows on tr, once the peer's allocated
// region is mapped here.
func benchVerbsShm(tr *shm.Transport, regions verbRegions, d, warm time.Duration, res map[string]float64) error {
	r := transport.Region{Node: 1, Key: regions.shm, Len: benchVerbRegion}
	for deadline := time.Now().Add(5 * time.Second); !tr.Direct(r); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the peer's region %#x was not mapped within 5s", r.Key)
		}
	}
	if err := benchVerbsOn("shm", tr, r, d, warm, res); err != nil {
		return err
	}
	if err := benchColdMisses(tr, transport.Region{Node: 1, Key: regions.cold, Len: benchColdLines * linecache.Stride}, d, res); err != nil {
		return err
	}
	return benchVerbsOn("shm-ring", tr, transport.Region{Node: 1, Key: regions.shmRing, Len: benchVerbRegion}, d, warm, res)
}

// benchColdMisses does SELCC's miss (FAA of a line's latch word, READ of
// the line into a frame) on the cold region's lines in a random order,
// each once, for at most d: the lines and the frames are in no CPU cache
// (each line is read once and the frames span 128 MiB), as for a cold
// miss of the cache.
func benchColdMisses(tr *shm.Transport, r transport.Region, d time.Duration, res map[string]float64) error {
	frames, err := unix.Mmap(-1, 0, benchColdLines*linecache.LineSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(frames)
	h := newLatencyHist()
	deadline := time.Now().Add(d)
	for k, i := range rand.Perm(benchColdLines) {
		start := time.Now()
		if _, err := tr.FetchAndAdd(r, linecache.WordOffset(uint64(i)), 1); err != nil {
			return err
		}
		if err := tr.Read(frames[k*linecache.LineSize:(k+1)*linecache.LineSize], r, linecache.WordOffset(uint64(i))+linecache.DataOffset); err != nil {
			return err
		}
		now := time.Now()
		h.RecordValue(max(now.Sub(start).Nanoseconds(), 1))
		if now.After(deadline) {
			break
		}
	}
	res["shm.faa_read_cold_p50_us"] = usAt(h, 50)
	res["shm.faa_read_cold_p99_us"] = usAt(h, 99)
	return nil
}

// benchVerbsTCP measures the tcp row from tr (node 0) to the peer's
// transport at addr.
func benchVerbsTCP(tr *tcp.Transport, addr string, key uint32, d, warm time.Duration, res map[string]float64) error {
	if err := tr.SetPeerAddr(1, addr); err != nil {
		return err
	}
	return benchVerbsOn("tcp", tr, transport.Region{Node: 1, Key: key, Len: benchVerbRegion}, d, warm, res)
}

// benchPeerRegions registers the peer's regions: one from the shm
// transport's allocator, one of plain memory on shm, one on tcp.
func benchPeerRegions(s *shm.Transport, t *tcp.Transport) (verbRegions, func(), error) {
	var v verbRegions
	plain, err := unix.Mmap(-1, 0, 2*benchVerbRegion, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return v, nil, err
	}
	free := func() { unix.Munmap(plain) }
	mem, err := s.AllocMemory(benchVerbRegion)
	if err == nil {
		var cold []byte
		if cold, err = s.AllocMemory(benchColdLines * linecache.Stride); err == nil {
			var r transport.Region
			r, err = s.Register(cold)
			v.cold = r.Key
		}
	}
	if err != nil {
		free()
		return v, nil, err
	}
	for _, reg := range []struct {
		tr  transport.OneSided
		mem []byte
		key *uint32
	}{{s, mem, &v.shm}, {s, plain[:benchVerbRegion], &v.shmRing}, {t, plain[benchVerbRegion:], &v.tcp}} {
		r, err := reg.tr.Register(reg.mem)
		if err != nil {
			free()
			return v, nil, err
		}
		*reg.key = r.Key
	}
	return v, free, nil
}

func printBenchVerbs(w io.Writer, res map[string]float64) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "one-sided verb\tREAD 4K p50\tp99\tCAS p50\tp99\tFAA p50\tp99\tFAA+READ p50\tp99\t")
	for _, name := range benchVerbTransports {
		fmt.Fprintf(tw, "%s\t", name)
		for _, v := range benchVerbNames {
			fmt.Fprintf(tw, "%.2fµs\t%.2fµs\t", res[name+"."+v+"_p50_us"], res[name+"."+v+"_p99_us"])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nshm, cold: FAA+READ p50 %.2fµs p99 %.2fµs (each line of a 136 MB region once, into 128 MiB of frames: lines no CPU cache holds, as a cold SELCC miss)\n",
		res["shm.faa_read_cold_p50_us"], res["shm.faa_read_cold_p99_us"])
	fmt.Fprintln(w, "one at a time from this process to the peer's registered memory; shm: memory the peer allocated from the transport, which this process maps (the calling thread does the access); shm-ring: memory it did not, each verb served by the peer's reader; FAA+READ is a SELCC miss")
}
