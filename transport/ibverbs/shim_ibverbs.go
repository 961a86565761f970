//go:build ibverbs

package ibverbs

/*
#cgo LDFLAGS: -libverbs
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"
)

// The libibverbs implementation of Device, CQ and QP. Go memory never
// outlives a C call: registered memory is off-heap (mmap) and passed as an
// integer address; work requests and completions travel as flat C structs
// (no pointers) filled or read during the call.

// DeviceConfig selects and configures a device (Config's device fields).
type DeviceConfig struct {
	Name string // empty: the first device
	Port int    // default 1
	// UseGIDIndex and GIDIndex: as in Config (unset: automatic).
	UseGIDIndex bool
	GIDIndex    int
}

// OpenDevice opens an RDMA device with a protection domain on one port.
func OpenDevice(dc DeviceConfig) (Device, error) {
	if dc.Port == 0 {
		dc.Port = 1
	}
	d := &verbsDevice{mrs: make(map[uint32]*C.struct_ibv_mr)}
	d.c = (*C.struct_ssib_dev)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_ssib_dev{}))))
	if d.c == nil {
		return nil, fmt.Errorf("ibverbs: out of memory")
	}
	name := C.CString(dc.Name)
	defer C.free(unsafe.Pointer(name))
	var msg [512]C.char
	gid := -1 // automatic, in the C code
	if dc.UseGIDIndex {
		if dc.GIDIndex < 0 || dc.GIDIndex > 255 {
			return nil, fmt.Errorf("ibverbs: GID index %d (0..255)", dc.GIDIndex)
		}
		gid = dc.GIDIndex
	}
	rc := C.ssib_open(name, C.int(dc.Port), C.int(gid), d.c, &msg[0], C.size_t(len(msg)))
	if rc != C.SSIB_OK {
		C.free(unsafe.Pointer(d.c))
		detail := C.GoString(&msg[0])
		switch rc {
		case C.SSIB_NODEV:
			want := "the first device"
			if dc.Name != "" {
				want = fmt.Sprintf("device %q", dc.Name)
			}
			return nil, fmt.Errorf("%w: wanted %s, port %d (%s): this host has no RDMA NIC or no RDMA kernel driver; ibv_devices lists the devices", ErrNoDevice, want, dc.Port, detail)
		case C.SSIB_NOTFOUND:
			return nil, fmt.Errorf("ibverbs: RDMA device %q not found: %s", dc.Name, detail)
		}
		return nil, fmt.Errorf("ibverbs: opening RDMA device %q: %s", dc.Name, detail)
	}
	d.port = PortInfo{LID: uint16(d.c.lid), LinkLayer: LinkInfiniBand, MTU: int(d.c.active_mtu)}
	if d.c.ethernet != 0 {
		d.port.LinkLayer = LinkEthernet
	}
	for i := range d.port.GID {
		d.port.GID[i] = byte(d.c.gid[i])
	}
	if d.c.atomic_cap == 0 {
		d.Close()
		return nil, fmt.Errorf("ibverbs: device %s does not support atomics (atomic_cap NONE)", d.Name())
	}
	return d, nil
}

// deviceCount is how many RDMA devices libibverbs sees.
func deviceCount() int { return int(C.ssib_device_count()) }

type verbsDevice struct {
	c    *C.struct_ssib_dev
	port PortInfo

	mu  sync.Mutex
	mrs map[uint32]*C.struct_ibv_mr // by lkey
}

func (d *verbsDevice) Name() string {
	if d.c == nil {
		return "(closed)"
	}
	return C.GoString(&d.c.name[0])
}
func (d *verbsDevice) Port() PortInfo { return d.port }

func (d *verbsDevice) Register(mem []byte, iova uint64, access Access) (MR, error) {
	if len(mem) == 0 {
		return MR{}, fmt.Errorf("ibverbs: register an empty buffer")
	}
	mr, err := C.ssib_reg(d.c, C.uintptr_t(addrOf(mem)), C.size_t(len(mem)), C.uint64_t(iova), C.int(access))
	if mr == nil {
		hint := ""
		if err == syscall.ENOMEM || err == syscall.EPERM || err == syscall.EAGAIN {
			hint = " (registration pins memory: raise the memlock limit, ulimit -l / LimitMEMLOCK)"
		}
		return MR{}, fmt.Errorf("ibv_reg_mr of %d bytes on %s: %v%s", len(mem), d.Name(), err, hint)
	}
	d.mu.Lock()
	d.mrs[uint32(mr.lkey)] = mr
	d.mu.Unlock()
	return MR{Addr: iova, Len: uint64(len(mem)), LKey: uint32(mr.lkey), RKey: uint32(mr.rkey)}, nil
}

func (d *verbsDevice) Deregister(m MR) error {
	d.mu.Lock()
	mr := d.mrs[m.LKey]
	delete(d.mrs, m.LKey)
	d.mu.Unlock()
	if mr == nil {
		return fmt.Errorf("ibverbs: deregister unknown lkey %#x", m.LKey)
	}
	if rc := C.ssib_dereg(mr); rc != 0 {
		return fmt.Errorf("ibv_dereg_mr: %v", syscall.Errno(rc))
	}
	return nil
}

func (d *verbsDevice) CreateCQ(entries int) (CQ, error) {
	cq, err := C.ssib_create_cq(d.c, C.int(entries))
	if cq == nil {
		return nil, fmt.Errorf("ibv_create_cq(%d entries) on %s: %v", entries, d.Name(), err)
	}
	return &verbsCQ{cq: cq}, nil
}

func (d *verbsDevice) CreateQP(cq CQ, c QPCap) (QP, error) {
	vc, ok := cq.(*verbsCQ)
	if !ok {
		return nil, fmt.Errorf("ibverbs: completion queue of another device")
	}
	var inline C.uint32_t
	qp, err := C.ssib_create_qp(d.c, vc.cq, C.uint32_t(c.MaxSendWR), C.uint32_t(c.MaxInline), &inline)
	if qp == nil {
		return nil, fmt.Errorf("ibv_create_qp(RC, %d send WRs) on %s: %v", c.MaxSendWR, d.Name(), err)
	}
	return &verbsQP{d: d, qp: qp, inline: int(inline)}, nil
}

func (d *verbsDevice) Close() error {
	if d.c == nil {
		return nil
	}
	d.mu.Lock()
	for k, mr := range d.mrs {
		C.ssib_dereg(mr)
		delete(d.mrs, k)
	}
	d.mu.Unlock()
	C.ssib_close(d.c)
	C.free(unsafe.Pointer(d.c))
	d.c = nil
	return nil
}

type verbsCQ struct {
	cq  *C.struct_ibv_cq
	buf [C.SSIB_MAX_POLL]C.struct_ssib_wc
}

// Poll is called from the completion poller only (buf is not shared).
func (c *verbsCQ) Poll(out []Completion) (int, error) {
	n := min(len(out), len(c.buf))
	if n == 0 {
		return 0, nil
	}
	got := int(C.ssib_poll(c.cq, &c.buf[0], C.int(n)))
	if got < 0 {
		return 0, fmt.Errorf("ibv_poll_cq: %d", got)
	}
	for i := range got {
		w := &c.buf[i]
		out[i] = Completion{ID: uint64(w.id), Status: Status(w.status), Op: Opcode(w.opcode), QPN: uint32(w.qpn),
			Vendor: uint32(w.vendor_err)}
	}
	return got, nil
}

func (c *verbsCQ) Close() error {
	if rc := C.ssib_destroy_cq(c.cq); rc != 0 {
		return fmt.Errorf("ibv_destroy_cq: %v", syscall.Errno(rc))
	}
	return nil
}

type verbsQP struct {
	d      *verbsDevice
	qp     *C.struct_ibv_qp
	inline int
}

func (q *verbsQP) Num() uint32    { return uint32(q.qp.qp_num) }
func (q *verbsQP) MaxInline() int { return q.inline }

func (q *verbsQP) State() QPState {
	s := C.ssib_qp_state(q.qp)
	if s < 0 {
		return StateError
	}
	return QPState(s)
}

func (q *verbsQP) Connect(localPSN uint32, remote QPInfo) error {
	var r C.struct_ssib_remote
	r.lid = C.uint16_t(remote.LID)
	for i, b := range remote.GID {
		r.gid[i] = C.uint8_t(b)
	}
	r.qpn = C.uint32_t(remote.QPN)
	r.psn = C.uint32_t(remote.PSN)
	r.mtu = C.int(remote.MTU)
	var msg [256]C.char
	if C.ssib_qp_connect(q.d.c, q.qp, C.uint32_t(localPSN), &r, &msg[0], C.size_t(len(msg))) != C.SSIB_OK {
		return fmt.Errorf("ibverbs: connect QP %#x to %#x: %s", q.Num(), remote.QPN, C.GoString(&msg[0]))
	}
	return nil
}

func (q *verbsQP) Reset() error {
	if rc := C.ssib_qp_set_state(q.qp, 1); rc != 0 {
		return fmt.Errorf("ibverbs: QP %#x to RESET: %v", q.Num(), syscall.Errno(rc))
	}
	return nil
}

func (q *verbsQP) Fail() error {
	if rc := C.ssib_qp_set_state(q.qp, 0); rc != 0 {
		return fmt.Errorf("ibverbs: QP %#x to ERR: %v", q.Num(), syscall.Errno(rc))
	}
	return nil
}

func (q *verbsQP) Post(wrs []WorkRequest) error {
	if len(wrs) == 0 || len(wrs) > MaxPostBatch {
		return fmt.Errorf("ibverbs: post of %d work requests", len(wrs))
	}
	// A Go array of pointer-free C structs: C reads it during the call only.
	var cw [MaxPostBatch]C.struct_ssib_wr
	for i, w := range wrs {
		cw[i] = C.struct_ssib_wr{
			id: C.uint64_t(w.ID), local_addr: C.uint64_t(w.LocalAddr), remote_addr: C.uint64_t(w.RemoteAddr),
			compare_add: C.uint64_t(w.CompareAdd), swap: C.uint64_t(w.Swap), length: C.uint32_t(w.Length),
			lkey: C.uint32_t(w.LKey), rkey: C.uint32_t(w.RKey), opcode: C.uint8_t(w.Op), flags: C.uint8_t(w.Flags),
		}
	}
	if rc := C.ssib_post(q.qp, &cw[0], C.int(len(wrs))); rc != 0 {
		if rc == C.ENOMEM {
			return fmt.Errorf("%w: ibv_post_send on QP %#x", ErrQueueFull, q.Num())
		}
		return fmt.Errorf("ibv_post_send on QP %#x: %v", q.Num(), syscall.Errno(rc))
	}
	return nil
}

func (q *verbsQP) Close() error {
	if rc := C.ssib_destroy_qp(q.qp); rc != 0 {
		return fmt.Errorf("ibv_destroy_qp %#x: %v", q.Num(), syscall.Errno(rc))
	}
	return nil
}

// Compile-time checks that the Go constants match the C ones.
var (
	_ = [1]struct{}{}[int(OpWrite)-C.SSIB_OP_WRITE]
	_ = [1]struct{}{}[int(OpRead)-C.SSIB_OP_READ]
	_ = [1]struct{}{}[int(OpCompareSwap)-C.SSIB_OP_CAS]
	_ = [1]struct{}{}[int(OpFetchAdd)-C.SSIB_OP_FAA]
	_ = [1]struct{}{}[int(FlagSignaled)-C.SSIB_SIGNALED]
	_ = [1]struct{}{}[int(FlagInline)-C.SSIB_INLINE]
	_ = [1]struct{}{}[int(AccessLocalWrite)-C.SSIB_ACC_LOCAL_WRITE]
	_ = [1]struct{}{}[int(AccessRemoteWrite)-C.SSIB_ACC_REMOTE_WRITE]
	_ = [1]struct{}{}[int(AccessRemoteRead)-C.SSIB_ACC_REMOTE_READ]
	_ = [1]struct{}{}[int(AccessRemoteAtomic)-C.SSIB_ACC_REMOTE_ATOMIC]
	_ = [1]struct{}{}[int(StatusOther)-C.SSIB_WC_OTHER]
	_ = [1]struct{}{}[int(StatusRetryExceeded)-C.SSIB_WC_RETRY_EXC]
	_ = [1]struct{}{}[MaxPostBatch-C.SSIB_MAX_POST]

	_ Device = (*verbsDevice)(nil)
	_ CQ     = (*verbsCQ)(nil)
	_ QP     = (*verbsQP)(nil)
)
