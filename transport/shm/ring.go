//go:build linux

package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

// A record in a ring:
//
//	[0,4)    payload length n, little endian
//	[4]      kind: kindMsg, kindVerbReq or kindVerbResp
//	[5,8)    zero
//	[8,72)   the 64-byte frame (a protocol frame, or a verb header)
//	[72,72+n) the payload
//
// padded to a multiple of 8 bytes. The producer writes the whole record and
// then publishes it by advancing tail; the consumer reads records up to the
// tail it loaded and then advances head. Records never straddle anything: the
// ring is mapped twice back to back, so a record starting near the end runs
// on into the second mapping, which is the ring's start.
const (
	recHeader = 8
	recFixed  = recHeader + protocol.FrameSize

	kindMsg      = 1
	kindVerbReq  = 2
	kindVerbResp = 3

	// verbChunk bounds the data of one verb request or response; longer
	// Reads and Writes go in several.
	verbChunk = 16 << 10
)

// errCorrupt marks a ring whose shared words or records are impossible:
// the peer is broken or hostile. The link is dropped; we never index outside
// the mapping on the peer's word.
var errCorrupt = errors.New("shm: corrupt ring")

// recordSize is the ring space of a record with n payload bytes.
func recordSize(n int) uint64 { return (uint64(recFixed+n) + 7) &^ 7 }

// maxPayload is the largest payload a record of kind may carry, 0 and false
// for an unknown kind.
func maxPayload(kind byte) (int, bool) {
	switch kind {
	case kindMsg:
		return transport.MaxPayload, true
	case kindVerbReq, kindVerbResp:
		return verbChunk, true
	}
	return 0, false
}

// ring is one direction's view: its control block and its doubly mapped
// data.
type ring struct {
	ctl  *ringCtl
	data []byte // 2*size bytes
	size uint64
	mask uint64
}

func newRing(ctl *ringCtl, data []byte) ring {
	size := uint64(len(data) / 2)
	return ring{ctl: ctl, data: data, size: size, mask: size - 1}
}

// producer writes records into a ring. Senders of this process serialize on
// mu; the one sender holding it is the ring's only producer.
type producer struct {
	mu sync.Mutex
	ring
	tail uint64 // next write position; equals ctl.tail outside put
	head uint64 // the consumer's head as last read (a lower bound: L5's sender_read)

	spin    time.Duration
	timeout time.Duration
	// stop reports why the ring must not be used any more (the link is
	// down or closed), nil while it is usable. Checked under mu before
	// every write: the link unmaps the ring only under mu after stop
	// turned non-nil.
	stop func() error
}

func (p *producer) init(r ring, spin, timeout time.Duration, stop func() error) {
	p.ring, p.spin, p.timeout, p.stop = r, spin, timeout, stop
}

// put appends one record. It waits while the ring is full (spin, then park),
// at most p.timeout; it fails if stop reports an error.
func (p *producer) put(kind byte, frame, payload []byte) error {
	_, err := p.write(kind, frame, payload, true)
	return err
}

// tryPut is put that never waits: false when the ring has no room now.
func (p *producer) tryPut(kind byte, frame, payload []byte) (bool, error) {
	return p.write(kind, frame, payload, false)
}

func (p *producer) write(kind byte, frame, payload []byte, wait bool) (bool, error) {
	n := recordSize(len(payload))
	if n > p.size/2 {
		// Callers bound payloads (MaxPayload, verbChunk) below this.
		return false, fmt.Errorf("shm: record of %d bytes for a ring of %d", n, p.size)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.stop(); err != nil {
		return false, err
	}
	if p.tail-p.head+n > p.size {
		if !wait {
			if err := p.loadHead(); err != nil {
				return false, err
			}
			if p.tail-p.head+n > p.size {
				return false, nil
			}
		} else if err := p.waitSpace(n); err != nil {
			return false, err
		}
	}
	pos := p.tail & p.mask
	rec := p.data[pos : pos+n : pos+n]
	binary.LittleEndian.PutUint32(rec[0:], uint32(len(payload)))
	rec[4], rec[5], rec[6], rec[7] = kind, 0, 0, 0
	copy(rec[recHeader:recFixed], frame)
	copy(rec[recFixed:], payload)
	p.tail += n
	raceRelease()
	// The release store publishes the record: the consumer's acquire load
	// of tail orders its reads of the record after our writes above.
	p.ctl.tail.Store(p.tail)
	wake(&p.ctl.consWaiting)
	return true, nil
}

// loadHead refreshes the cached consumer head, checking that the peer's word
// is possible (between the old head and our tail).
func (p *producer) loadHead() error {
	h := p.ctl.head.Load()
	if h-p.head > p.tail-p.head {
		return fmt.Errorf("%w: consumer head %d outside [%d, %d]", errCorrupt, h, p.head, p.tail)
	}
	p.head = h
	return nil
}

// waitSpace waits until n bytes are free.
func (p *producer) waitSpace(n uint64) error {
	var bad error
	ready := func() bool {
		if bad = p.loadHead(); bad != nil {
			return true
		}
		return p.tail-p.head+n <= p.size
	}
	stopped := func() bool { return p.stop() != nil }
	deadline := time.Now().Add(p.timeout)
	for {
		if ok, _ := spinUntil(ready, p.spin, nil); ok {
			return bad
		}
		if err := p.stop(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: ring full for %v (peer not consuming)", transport.ErrPeerDown, p.timeout)
		}
		park(&p.ctl.prodWaiting, ready, stopped, parkTimeout)
		if bad != nil {
			return bad
		}
	}
}

// consumer reads records from a ring; one goroutine (the link's reader)
// owns it.
type consumer struct {
	ring
	head  uint64 // next read position
	tail  uint64 // the producer's tail as last read
	kinds uint8  // bit 1<<kind set for each record kind this ring carries
	spin  spinner
	// idle counts the parks in a row that ended with nothing to read (up
	// to maxIdleShift): the park timeout doubles with each.
	idle uint
	// ownCPU is where this consumer publishes its CPU during long waits,
	// peerCPU where the peer's reader publishes its own (nil: no check).
	ownCPU, peerCPU *cpuWord
}

// next returns the record at head without consuming it: its kind, frame and
// payload (nil when empty) alias the ring and stay valid until release. n is
// 0 when no record is published. A corrupt ring is an error, never a panic:
// every length comes from the peer and is checked before slicing.
func (c *consumer) next() (kind byte, frame, payload []byte, n uint64, err error) {
	if c.head == c.tail {
		t := c.ctl.tail.Load() // acquire: pairs with the producer's release store
		if t == c.head {
			return 0, nil, nil, 0, nil
		}
		if t-c.head > c.size || (t-c.head)%8 != 0 {
			return 0, nil, nil, 0, fmt.Errorf("%w: producer tail %d, consumer head %d, size %d", errCorrupt, t, c.head, c.size)
		}
		c.tail = t
		raceAcquire()
	}
	avail := c.tail - c.head
	if avail < recFixed {
		return 0, nil, nil, 0, fmt.Errorf("%w: %d bytes published, less than a record", errCorrupt, avail)
	}
	pos := c.head & c.mask
	rec := c.data[pos : pos+avail : pos+avail] // pos < size and avail <= size: inside the double mapping
	plen := binary.LittleEndian.Uint32(rec[0:])
	kind = rec[4]
	limit, ok := maxPayload(kind)
	if !ok || c.kinds&(1<<kind) == 0 {
		return 0, nil, nil, 0, fmt.Errorf("%w: record kind %d", errCorrupt, kind)
	}
	if uint64(plen) > uint64(limit) {
		return 0, nil, nil, 0, fmt.Errorf("%w: payload of %d bytes in a kind %d record", errCorrupt, plen, kind)
	}
	n = recordSize(int(plen))
	if n > avail {
		return 0, nil, nil, 0, fmt.Errorf("%w: record of %d bytes, %d published", errCorrupt, n, avail)
	}
	frame = rec[recHeader:recFixed:recFixed]
	if plen > 0 {
		end := recFixed + uint64(plen)
		payload = rec[recFixed:end:end]
	}
	return kind, frame, payload, n, nil
}

// release consumes n bytes (the record next returned) and wakes a producer
// waiting for space.
func (c *consumer) release(n uint64) {
	c.head += n
	c.ctl.head.Store(c.head)
	wake(&c.ctl.prodWaiting)
}

// wait waits for a record: it polls for the adaptive window (less if the
// peer's reader shares our CPU or we get descheduled; see wait.go), then
// parks once (at most parkTimeout). The caller loops on next. It reports
// whether it parked.
func (c *consumer) wait(stopped func() bool) bool {
	// head as released, not c.head: a poller may consume meanwhile.
	ready := func() bool { return c.ctl.tail.Load() != c.ctl.head.Load() }
	var check func() bool
	if c.peerCPU != nil {
		check = c.apart
	}
	ok, start := spinUntil(ready, c.spin.cur, check)
	if ok || stopped() {
		return false
	}
	park(&c.ctl.consWaiting, ready, stopped, parkTimeout<<c.idle)
	got := ready()
	c.spin.parked(got, time.Since(start))
	if got {
		c.idle = 0
	} else if c.idle < maxIdleShift {
		c.idle++
	}
	return true
}

// spinOnly polls like wait but never parks; it reports whether a record
// came.
func (c *consumer) spinOnly(stopped func() bool) bool {
	ready := func() bool { return c.ctl.tail.Load() != c.ctl.head.Load() }
	var check func() bool
	if c.peerCPU != nil {
		check = c.apart
	}
	ok, _ := spinUntil(ready, c.spin.cur, check)
	return ok || stopped()
}

// apart publishes our CPU and reports whether the peer's reader was last
// seen on another one.
func (c *consumer) apart() bool {
	cpu := currentCPU()
	if cpu == 0 {
		return true
	}
	if c.ownCPU.Load() != cpu {
		c.ownCPU.Store(cpu)
	}
	return c.peerCPU.Load() != cpu
}
