//go:build linux

package shm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scalestore-go/scalestore/protocol"
	"github.com/scalestore-go/scalestore/transport"
)

const helperEnv = "SHM_TEST_PEER_DIR"

// TestHelperPeer is the second process of TestTwoProcesses (node 1): it
// echoes every message back, exposes a region whose key it prints, and exits
// when its stdin closes. Run alone it skips.
func TestHelperPeer(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("the peer process of TestTwoProcesses")
	}
	var tr *Transport
	var mu sync.Mutex
	echo := func(from protocol.NodeID, frame, payload []byte) {
		mu.Lock()
		defer mu.Unlock()
		if err := tr.Send(from, frame, payload); err != nil {
			fmt.Fprintln(os.Stderr, "peer: echo:", err)
		}
	}
	mu.Lock()
	paths := sockPaths(dir, 2)
	var err error
	tr, err = New(Config{Self: 1, SocketPath: paths[1], Peers: paths, ClusterID: 42, Handler: echo, RingSize: MinRingSize})
	mu.Unlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
	mem, err := syscall.Mmap(-1, 0, 4*pageSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
	r, err := tr.Register(mem)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
	fmt.Printf("region %d %d\n", r.Key, r.Len)
	io.Copy(io.Discard, os.Stdin) // until the parent closes stdin or dies
	tr.Close()
	os.Exit(0)
}

// Two real processes: messages both ways in order, verbs on the other
// process's memory, and a killed peer makes Send fail promptly.
func TestTwoProcesses(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("inside the helper")
	}
	dir := sockDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPeer$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			stdin.Close()
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("peer stderr:\n%s", stderr.String())
		}
	}()

	type echoed struct {
		seq     uint64
		payload []byte
	}
	got := make(chan echoed, 4096)
	handler := func(_ protocol.NodeID, frame, payload []byte) {
		got <- echoed{binary.LittleEndian.Uint64(frame[8:]), bytes.Clone(payload)}
	}
	log, _ := testLogger(t)
	paths := sockPaths(dir, 2)
	tr, err := New(Config{Self: 0, SocketPath: paths[0], Peers: paths, ClusterID: 42, Handler: handler,
		Logger: log, RingSize: MinRingSize, PeerTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("peer did not start: %v", err)
	}
	var key uint32
	var rlen uint64
	if _, err := fmt.Sscanf(line, "region %d %d", &key, &rlen); err != nil {
		t.Fatalf("peer said %q: %v", line, err)
	}
	region := transport.Region{Node: 1, Key: key, Len: rlen}

	const n = 3000
	payload := func(i uint64) []byte {
		p := make([]byte, int(i*37)%(transport.MaxPayload+1))
		for j := range p {
			p[j] = byte(i ^ uint64(j))
		}
		return p
	}
	sendErr := make(chan error, 1)
	go func() {
		for i := range uint64(n) {
			if err := tr.Send(1, seqFrame(i), payload(i)); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	for i := range uint64(n) {
		select {
		case m := <-got:
			if m.seq != i || !bytes.Equal(m.payload, payload(i)) {
				t.Fatalf("echo %d: seq %d, %d payload bytes (want %d)", i, m.seq, len(m.payload), len(payload(i)))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("echo %d never came", i)
		}
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}

	// One-sided verbs on the other process's memory.
	src := bytes.Repeat([]byte("two processes "), 700)[:2*pageSize+5]
	if err := tr.Write(region, 3, src); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(src))
	if err := tr.Read(back, region, 3); err != nil || !bytes.Equal(back, src) {
		t.Fatalf("read back: %v", err)
	}
	if prev, err := tr.FetchAndAdd(region, 3*pageSize, 10); err != nil || prev != 0 {
		t.Fatalf("FAA: %d %v", prev, err)
	}
	if prev, err := tr.CompareAndSwap(region, 3*pageSize, 10, 77); err != nil || prev != 10 {
		t.Fatalf("CAS: %d %v", prev, err)
	}
	bad := region
	bad.Key++
	if _, err := tr.FetchAndAdd(bad, 0, 1); !errors.Is(err, transport.ErrAccess) {
		t.Fatalf("wrong key: %v", err)
	}

	// Kill the peer: Send fails within a bound, it never hangs.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waited = true
	start := time.Now()
	for {
		err := tr.Send(1, seqFrame(0), nil)
		if errors.Is(err, transport.ErrPeerDown) {
			t.Logf("send failed %v after the kill: %v", time.Since(start), err)
			break
		}
		if err != nil {
			t.Fatalf("send to the killed peer: %v, want ErrPeerDown", err)
		}
		if time.Since(start) > 3*time.Second {
			t.Fatal("sends to a killed peer still succeed after 3s")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := tr.FetchAndAdd(region, 0, 1); !errors.Is(err, transport.ErrPeerDown) {
		t.Fatalf("verb to the killed peer: %v", err)
	}
}
