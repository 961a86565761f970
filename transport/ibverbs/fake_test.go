package ibverbs

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pair is two fake devices with one connected RC queue pair each: A is the
// requester side of the tests, B the responder whose memory they target.
type pair struct {
	a, b       *FakeDevice
	cqA, cqB   CQ
	qa, qb     QP
	memA, memB []byte
	mrA, mrB   MR
	psnA, psnB uint32
}

func newPair(t *testing.T, opt FakeOptions, sendWR int, accessB Access) *pair {
	t.Helper()
	fab := NewFabric()
	p := &pair{a: fab.NewDevice("a", opt), b: fab.NewDevice("b", opt), psnA: 0x1234, psnB: 0xabcdef}
	var err error
	if p.memA, err = mapMemory(1 << 16); err != nil {
		t.Fatal(err)
	}
	if p.memB, err = mapMemory(1 << 16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmapMemory(p.memA); unmapMemory(p.memB) })
	// Registered last, so it runs first: no QP touches unmapped memory.
	t.Cleanup(func() { p.a.Close(); p.b.Close() })
	if p.mrA, err = p.a.Register(p.memA, addrOf(p.memA), AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if p.mrB, err = p.b.Register(p.memB, 0, accessB); err != nil {
		t.Fatal(err)
	}
	if p.cqA, err = p.a.CreateCQ(1024); err != nil {
		t.Fatal(err)
	}
	if p.cqB, err = p.b.CreateCQ(1024); err != nil {
		t.Fatal(err)
	}
	if p.qa, err = p.a.CreateQP(p.cqA, QPCap{MaxSendWR: sendWR, MaxInline: 64}); err != nil {
		t.Fatal(err)
	}
	if p.qb, err = p.b.CreateQP(p.cqB, QPCap{MaxSendWR: sendWR, MaxInline: 64}); err != nil {
		t.Fatal(err)
	}
	p.connect(t)
	return p
}

func (p *pair) info(d *FakeDevice, q QP, psn uint32) QPInfo {
	port := d.Port()
	return QPInfo{LID: port.LID, GID: port.GID, QPN: q.Num(), PSN: psn, MTU: port.MTU}
}

func (p *pair) connect(t *testing.T) {
	t.Helper()
	if err := p.qa.Connect(p.psnA, p.info(p.b, p.qb, p.psnB)); err != nil {
		t.Fatal(err)
	}
	if err := p.qb.Connect(p.psnB, p.info(p.a, p.qa, p.psnA)); err != nil {
		t.Fatal(err)
	}
}

// write is an RDMA write of local bytes [loff, loff+n) to remote offset roff.
func (p *pair) write(id uint64, loff, n int, roff uint64, flags SendFlags) WorkRequest {
	return WorkRequest{ID: id, Op: OpWrite, Flags: flags, LocalAddr: p.mrA.Addr + uint64(loff), Length: uint32(n),
		LKey: p.mrA.LKey, RemoteAddr: roff, RKey: p.mrB.RKey}
}

func (p *pair) atomicWR(id uint64, op Opcode, loff int, roff, a, b uint64) WorkRequest {
	return WorkRequest{ID: id, Op: op, Flags: FlagSignaled, LocalAddr: p.mrA.Addr + uint64(loff), Length: 8,
		LKey: p.mrA.LKey, RemoteAddr: roff, RKey: p.mrB.RKey, CompareAdd: a, Swap: b}
}

func post(t *testing.T, q QP, wrs ...WorkRequest) {
	t.Helper()
	if err := q.Post(wrs); err != nil {
		t.Fatal(err)
	}
}

// waitN polls cq until it has want completions.
func waitN(t *testing.T, cq CQ, want int) []Completion {
	t.Helper()
	var got []Completion
	buf := make([]Completion, 16)
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < want {
		n, err := cq.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
		if n == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("got %d completions, want %d: %+v", len(got), want, got)
			}
			runtime.Gosched()
		}
	}
	return got
}

// pollN is waitN that also makes sure no more completions arrive for a
// while.
func pollN(t *testing.T, cq CQ, want int) []Completion {
	t.Helper()
	got := waitN(t, cq, want)
	time.Sleep(20 * time.Millisecond)
	var buf [4]Completion
	if n, err := cq.Poll(buf[:]); err != nil || n != 0 {
		t.Fatalf("after the %d expected completions: %d more (%+v), err %v", want, n, buf[:n], err)
	}
	return got
}

func TestFakeUnsignaledNoCompletion(t *testing.T) {
	p := newPair(t, FakeOptions{}, 16, AccessRemoteWrite)
	for i := range 6 {
		binary.LittleEndian.PutUint64(p.memA[8*i:], uint64(100+i))
	}
	for i := range 5 {
		post(t, p.qa, p.write(uint64(i), 8*i, 8, uint64(8*i), 0))
	}
	post(t, p.qa, p.write(5, 40, 8, 40, FlagSignaled))
	got := pollN(t, p.cqA, 1)
	if got[0].ID != 5 || got[0].Status != StatusSuccess || got[0].Op != OpWrite || got[0].QPN != p.qa.Num() {
		t.Fatalf("completion %+v, want the signaled write 5", got[0])
	}
	for i := range 6 {
		if v := binary.LittleEndian.Uint64(p.memB[8*i:]); v != uint64(100+i) {
			t.Fatalf("word %d is %d: an unsignaled write was not executed", i, v)
		}
	}
	pollN(t, p.cqB, 0)
}

// The send queue is released only by polled completions: a caller that
// never signals fills it, exactly as on hardware.
func TestFakeSendQueueBound(t *testing.T) {
	p := newPair(t, FakeOptions{}, 8, AccessRemoteWrite)
	for i := range 8 {
		post(t, p.qa, p.write(uint64(i), 0, 8, 0, 0))
	}
	time.Sleep(10 * time.Millisecond)
	if err := p.qa.Post([]WorkRequest{p.write(8, 0, 8, 0, 0)}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("ninth post on an 8-entry queue without completions: %v, want ErrQueueFull", err)
	}
	// Reset empties it; signaling one in eight keeps it flowing.
	if err := p.qa.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := p.qb.Reset(); err != nil {
		t.Fatal(err)
	}
	p.connect(t)
	for round := range 20 {
		for i := range 8 {
			flags := SendFlags(0)
			if i == 7 {
				flags = FlagSignaled
			}
			post(t, p.qa, p.write(uint64(round*8+i), 0, 8, 0, flags))
		}
		waitN(t, p.cqA, 1)
	}
}

// RC ordering: a read posted right behind a write to the same address sees
// the write, and writes land in post order.
func TestFakeOrdering(t *testing.T) {
	p := newPair(t, FakeOptions{}, 64, AccessRemoteWrite|AccessRemoteRead)
	for i := range uint64(300) {
		binary.LittleEndian.PutUint64(p.memA[0:], i)
		post(t, p.qa,
			p.write(2*i, 0, 8, 64, FlagInline),
			WorkRequest{ID: 2*i + 1, Op: OpRead, Flags: FlagSignaled, LocalAddr: p.mrA.Addr + 8, Length: 8,
				LKey: p.mrA.LKey, RemoteAddr: 64, RKey: p.mrB.RKey})
		c := waitN(t, p.cqA, 1)[0]
		if c.ID != 2*i+1 || c.Status != StatusSuccess {
			t.Fatalf("completion %+v", c)
		}
		if v := binary.LittleEndian.Uint64(p.memA[8:]); v != i {
			t.Fatalf("read after write %d returned %d", i, v)
		}
	}
	// Many writes of one word, in order: the last one wins.
	for i := range 40 {
		binary.LittleEndian.PutUint64(p.memA[8*i:], uint64(i))
	}
	for i := range 40 {
		flags := SendFlags(0)
		if i == 39 {
			flags = FlagSignaled
		}
		post(t, p.qa, p.write(uint64(i), 8*i, 8, 128, flags))
	}
	pollN(t, p.cqA, 1)
	if v := binary.LittleEndian.Uint64(p.memB[128:]); v != 39 {
		t.Fatalf("after 40 ordered writes the word is %d, want 39", v)
	}
}

func TestFakeAtomics(t *testing.T) {
	p := newPair(t, FakeOptions{}, 64, AccessRemoteAtomic|AccessRemoteRead)
	binary.LittleEndian.PutUint64(p.memB[16:], 5)
	steps := []struct {
		op         Opcode
		a, b       uint64
		prev, word uint64
	}{
		{OpCompareSwap, 4, 9, 5, 5}, // fails: returns the value, changes nothing
		{OpCompareSwap, 5, 9, 5, 9},
		{OpFetchAdd, 3, 0, 9, 12},
		{OpFetchAdd, ^uint64(0), 0, 12, 11}, // wraps: adds -1
	}
	for i, s := range steps {
		post(t, p.qa, p.atomicWR(uint64(i), s.op, 0, 16, s.a, s.b))
		c := waitN(t, p.cqA, 1)[0]
		if c.Status != StatusSuccess || c.Op != s.op {
			t.Fatalf("step %d: %+v", i, c)
		}
		if prev, word := binary.LittleEndian.Uint64(p.memA), binary.LittleEndian.Uint64(p.memB[16:]); prev != s.prev || word != s.word {
			t.Fatalf("step %d %v(%d, %d): prev %d word %d, want %d and %d", i, s.op, s.a, s.b, prev, word, s.prev, s.word)
		}
	}
}

// Fetch-and-add from two requesters and the owner's own sync/atomic adds
// lose no update.
func TestFakeConcurrentFetchAdd(t *testing.T) {
	fab := NewFabric()
	owner := fab.NewDevice("owner", FakeOptions{})
	mem, err := mapMemory(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer unmapMemory(mem)
	defer owner.Close()
	mr, err := owner.Register(mem, 0, AccessRemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	ocq, _ := owner.CreateCQ(16)
	const n = 2048 // a multiple of the batch
	var wg sync.WaitGroup
	for r := range 2 {
		dev := fab.NewDevice("req", FakeOptions{})
		defer dev.Close()
		local, err := mapMemory(4096)
		if err != nil {
			t.Fatal(err)
		}
		defer unmapMemory(local)
		lmr, _ := dev.Register(local, addrOf(local), AccessLocalWrite)
		cq, _ := dev.CreateCQ(256)
		q, _ := dev.CreateQP(cq, QPCap{MaxSendWR: 64})
		resp, _ := owner.CreateQP(ocq, QPCap{MaxSendWR: 1})
		op, rp := owner.Port(), dev.Port()
		if err := q.Connect(7, QPInfo{LID: op.LID, GID: op.GID, QPN: resp.Num(), PSN: 9}); err != nil {
			t.Fatal(err)
		}
		if err := resp.Connect(9, QPInfo{LID: rp.LID, GID: rp.GID, QPN: q.Num(), PSN: 7}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]Completion, 32)
			for i := 0; i < n; i += 32 {
				var wrs []WorkRequest
				for j := range 32 {
					wrs = append(wrs, WorkRequest{ID: uint64(i + j), Op: OpFetchAdd, Flags: FlagSignaled,
						LocalAddr: lmr.Addr + uint64(8*j), Length: 8, LKey: lmr.LKey, RKey: mr.RKey, CompareAdd: 1})
				}
				for k := 0; k < len(wrs); k += MaxPostBatch {
					if err := q.Post(wrs[k : k+MaxPostBatch]); err != nil {
						t.Errorf("requester %d: %v", r, err)
						return
					}
				}
				for got := 0; got < 32; {
					m, err := cq.Poll(buf)
					if err != nil {
						t.Error(err)
						return
					}
					if m == 0 {
						runtime.Gosched()
					}
					for _, c := range buf[:m] {
						if c.Status != StatusSuccess {
							t.Errorf("requester %d: %+v", r, c)
							return
						}
					}
					got += m
				}
			}
		}()
	}
	for range n {
		atomic.AddUint64(word(mem), 1)
	}
	wg.Wait()
	if v := binary.LittleEndian.Uint64(mem); v != 3*n {
		t.Fatalf("word is %d after %d adds from each of two requesters and the owner, want %d", v, n, 3*n)
	}
}

// A wrong rkey completes with a remote access error even unsignaled, moves
// both ends to the error state and flushes what follows; RESET and a fresh
// connection recover.
func TestFakeRemoteAccessError(t *testing.T) {
	p := newPair(t, FakeOptions{}, 16, AccessRemoteWrite)
	copy(p.memA, "payload!")
	bad := p.write(1, 0, 8, 0, 0)
	bad.RKey ^= 1
	post(t, p.qa, bad, p.write(2, 0, 8, 8, FlagSignaled), p.write(3, 0, 8, 16, 0))
	got := pollN(t, p.cqA, 3)
	want := []struct {
		id uint64
		st Status
	}{{1, StatusRemoteAccess}, {2, StatusFlushed}, {3, StatusFlushed}}
	for i, w := range want {
		if got[i].ID != w.id || got[i].Status != w.st {
			t.Fatalf("completion %d: %+v, want id %d %v", i, got[i], w.id, w.st)
		}
	}
	if sa, sb := p.qa.State(), p.qb.State(); sa != StateError || sb != StateError {
		t.Fatalf("states after a remote access error: requester %v responder %v, want ERR and ERR", sa, sb)
	}
	for _, b := range p.memB[:24] {
		if b != 0 {
			t.Fatal("a refused or flushed write changed memory")
		}
	}
	// Posting in ERR is accepted and flushed.
	post(t, p.qa, p.write(4, 0, 8, 0, 0))
	if c := pollN(t, p.cqA, 1)[0]; c.Status != StatusFlushed {
		t.Fatalf("post in ERR: %+v", c)
	}
	// Recovery needs both ends.
	if err := p.qa.Reset(); err != nil {
		t.Fatal(err)
	}
	p.psnA++
	if err := p.qa.Connect(p.psnA, p.info(p.b, p.qb, p.psnB)); err != nil {
		t.Fatal(err)
	}
	post(t, p.qa, p.write(5, 0, 8, 0, FlagSignaled))
	if c := pollN(t, p.cqA, 1)[0]; c.Status != StatusRetryExceeded {
		t.Fatalf("write to a responder still in ERR: %+v, want retry exceeded", c)
	}
	for _, q := range []QP{p.qa, p.qb} {
		if err := q.Reset(); err != nil {
			t.Fatal(err)
		}
	}
	p.connect(t)
	post(t, p.qa, p.write(6, 0, 8, 0, FlagSignaled))
	if c := pollN(t, p.cqA, 1)[0]; c.Status != StatusSuccess || string(p.memB[:8]) != "payload!" {
		t.Fatalf("after re-connecting: %+v, memory %q", c, p.memB[:8])
	}
}

func TestFakeAccessChecks(t *testing.T) {
	cases := []struct {
		name   string
		access Access
		wr     func(p *pair) WorkRequest
		st     Status
	}{
		{"out of bounds", AccessRemoteWrite, func(p *pair) WorkRequest { return p.write(1, 0, 16, 1<<16-8, FlagSignaled) }, StatusRemoteAccess},
		{"offset wraps", AccessRemoteWrite, func(p *pair) WorkRequest { return p.write(1, 0, 16, ^uint64(0)-4, FlagSignaled) }, StatusRemoteAccess},
		{"no remote write right", AccessRemoteRead, func(p *pair) WorkRequest { return p.write(1, 0, 8, 0, FlagSignaled) }, StatusRemoteAccess},
		{"no remote atomic right", AccessRemoteWrite | AccessRemoteRead, func(p *pair) WorkRequest { return p.atomicWR(1, OpFetchAdd, 0, 0, 1, 0) }, StatusRemoteAccess},
		{"misaligned atomic", AccessRemoteAtomic, func(p *pair) WorkRequest { return p.atomicWR(1, OpCompareSwap, 0, 4, 0, 1) }, StatusRemoteInvalid},
		{"bad lkey", AccessRemoteWrite, func(p *pair) WorkRequest {
			w := p.write(1, 0, 8, 0, FlagSignaled)
			w.LKey ^= 1
			return w
		}, StatusLocalProtection},
		{"read into read-only local memory", AccessRemoteRead, func(p *pair) WorkRequest {
			return WorkRequest{ID: 1, Op: OpRead, Flags: FlagSignaled, LocalAddr: p.mrB.Addr, Length: 8, LKey: p.mrB.LKey, RKey: p.mrB.RKey}
		}, StatusLocalProtection},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, FakeOptions{}, 16, c.access)
			post(t, p.qa, c.wr(p))
			if got := pollN(t, p.cqA, 1)[0]; got.Status != c.st {
				t.Fatalf("%+v, want %v", got, c.st)
			}
			if p.qa.State() != StateError {
				t.Fatalf("requester in %v after an error, want ERR", p.qa.State())
			}
		})
	}
}

func TestFakeConnectionChecks(t *testing.T) {
	t.Run("post before RTS", func(t *testing.T) {
		fab := NewFabric()
		d := fab.NewDevice("d", FakeOptions{})
		defer d.Close()
		cq, _ := d.CreateCQ(4)
		q, _ := d.CreateQP(cq, QPCap{MaxSendWR: 4})
		if err := q.Post([]WorkRequest{{Op: OpWrite}}); err == nil {
			t.Fatal("post on a QP in RESET succeeded")
		}
	})
	t.Run("PSN mismatch", func(t *testing.T) {
		p := newPair(t, FakeOptions{}, 16, AccessRemoteWrite)
		for _, q := range []QP{p.qa, p.qb} {
			q.Reset()
		}
		p.qa.Connect(p.psnA+1, p.info(p.b, p.qb, p.psnB)) // B expects psnA
		p.qb.Connect(p.psnB, p.info(p.a, p.qa, p.psnA))
		post(t, p.qa, p.write(1, 0, 8, 0, 0))
		if c := pollN(t, p.cqA, 1)[0]; c.Status != StatusRetryExceeded {
			t.Fatalf("%+v, want retry exceeded", c)
		}
	})
	t.Run("wrong GID", func(t *testing.T) {
		p := newPair(t, FakeOptions{Ethernet: true}, 16, AccessRemoteWrite)
		p.qa.Reset()
		info := p.info(p.b, p.qb, p.psnB)
		info.GID[15] ^= 0xff // another GID table entry, say
		p.qa.Connect(p.psnA, info)
		post(t, p.qa, p.write(1, 0, 8, 0, 0))
		if c := pollN(t, p.cqA, 1)[0]; c.Status != StatusRetryExceeded {
			t.Fatalf("%+v, want retry exceeded", c)
		}
	})
	t.Run("peer closed", func(t *testing.T) {
		p := newPair(t, FakeOptions{}, 16, AccessRemoteWrite)
		p.b.Close()
		post(t, p.qa, p.write(1, 0, 8, 0, 0))
		if c := pollN(t, p.cqA, 1)[0]; c.Status != StatusRetryExceeded {
			t.Fatalf("%+v, want retry exceeded", c)
		}
	})
	t.Run("inline too large", func(t *testing.T) {
		p := newPair(t, FakeOptions{}, 16, AccessRemoteWrite)
		if err := p.qa.Post([]WorkRequest{p.write(1, 0, 65, 0, FlagInline)}); err == nil {
			t.Fatal("inline post beyond the QP's inline size succeeded")
		}
	})
}

func TestFakeBigEndianAtomicReply(t *testing.T) {
	p := newPair(t, FakeOptions{AtomicReplyBigEndian: true}, 16, AccessRemoteAtomic)
	binary.LittleEndian.PutUint64(p.memB, 0x0102)
	post(t, p.qa, p.atomicWR(1, OpFetchAdd, 0, 0, 1, 0))
	pollN(t, p.cqA, 1)
	if prev, word := binary.BigEndian.Uint64(p.memA), binary.LittleEndian.Uint64(p.memB); prev != 0x0102 || word != 0x0103 {
		t.Fatalf("reply %#x (big endian), word %#x", prev, word)
	}
}

// Once Deregister returns, no request touches the region's memory any
// more (the transport unmaps it next: a write landing after that was a
// segfault in the Join test over the fake). Writes stream into B while B
// deregisters its region; B's memory must not change afterwards.
func TestFakeDeregisterWaitsForAccesses(t *testing.T) {
	for round := range 20 {
		p := newPair(t, FakeOptions{}, 256, AccessRemoteWrite)
		for i := range p.memA {
			p.memA[i] = byte(round + 1)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		var landed atomic.Int64
		go func() {
			defer close(done)
			for id := uint64(0); ; id++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := p.qa.Post([]WorkRequest{p.write(id, 0, 1<<16, 0, FlagSignaled)}); err != nil {
					if !errors.Is(err, ErrQueueFull) {
						return // the QP is in error once B's key is gone
					}
				}
				var c [16]Completion
				n, _ := p.cqA.Poll(c[:])
				landed.Add(int64(n))
			}
		}()
		for landed.Load() < int64(10+round) {
			runtime.Gosched()
		}
		if err := p.b.Deregister(p.mrB); err != nil {
			t.Fatal(err)
		}
		snap := append([]byte(nil), p.memB...)
		for i := range p.memB {
			p.memB[i] = 0xEE // the owner reuses its memory at once
		}
		time.Sleep(2 * time.Millisecond)
		close(stop)
		<-done
		for i, v := range p.memB {
			if v != 0xEE {
				t.Fatalf("round %d: byte %d of B's memory changed to %#x after Deregister returned (it held %#x then)", round, i, v, snap[i])
			}
		}
	}
}
