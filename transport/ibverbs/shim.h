//go:build ibverbs

// The C side of the libibverbs shim. ibv_post_send and ibv_poll_cq are
// static inline functions in <infiniband/verbs.h> (they jump through the
// provider's ops table), so cgo cannot call them directly: these helpers
// wrap them, and build the work requests and read the completions in C, so
// that no Go memory holding pointers ever crosses into C.
#ifndef SCALESTORE_IBVERBS_SHIM_H
#define SCALESTORE_IBVERBS_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

enum {
	SSIB_OK = 0,
	SSIB_ERR = -1,
	SSIB_NODEV = -2,   /* no device at all (or no kernel support) */
	SSIB_NOTFOUND = -3 /* no device of the requested name */
};

enum { SSIB_MAX_POST = 16, SSIB_MAX_POLL = 64 };

/* Opcodes and flags: the values of the Go constants. */
enum { SSIB_OP_WRITE = 1, SSIB_OP_READ = 2, SSIB_OP_CAS = 3, SSIB_OP_FAA = 4 };
enum { SSIB_SIGNALED = 1, SSIB_INLINE = 2 };
enum {
	SSIB_ACC_LOCAL_WRITE = 1,
	SSIB_ACC_REMOTE_WRITE = 2,
	SSIB_ACC_REMOTE_READ = 4,
	SSIB_ACC_REMOTE_ATOMIC = 8
};
/* Completion statuses: the values of the Go Status constants. */
enum {
	SSIB_WC_SUCCESS = 0,
	SSIB_WC_FLUSHED,
	SSIB_WC_REM_ACCESS,
	SSIB_WC_REM_INVALID,
	SSIB_WC_REM_OP,
	SSIB_WC_RETRY_EXC,
	SSIB_WC_LOC_PROT,
	SSIB_WC_LOC_LEN,
	SSIB_WC_OTHER
};

struct ssib_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t port;
	int gid_index; /* -1: no global route header (InfiniBand by LID) */
	uint16_t lid;
	uint8_t gid[16];
	int ethernet;
	int active_mtu; /* bytes */
	int max_rd_atomic;
	int max_dest_rd_atomic;
	int atomic_cap; /* 0 none, 1 HCA, 2 global */
	char name[64];
};

struct ssib_wr {
	uint64_t id;
	uint64_t local_addr;
	uint64_t remote_addr;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t length;
	uint32_t lkey;
	uint32_t rkey;
	uint8_t opcode;
	uint8_t flags;
	uint8_t pad[2];
};

struct ssib_wc {
	uint64_t id;
	uint32_t qpn;
	uint32_t vendor_err;
	uint32_t raw_status;
	uint8_t status;
	uint8_t opcode;
	uint8_t pad[2];
};

struct ssib_remote {
	uint16_t lid;
	uint8_t gid[16];
	uint32_t qpn;
	uint32_t psn;
	int mtu; /* bytes */
};

int ssib_device_count(void);
int ssib_open(const char *name, int port, int gid_index, struct ssib_dev *d, char *err, size_t errlen);
void ssib_close(struct ssib_dev *d);
struct ibv_mr *ssib_reg(struct ssib_dev *d, uintptr_t addr, size_t len, uint64_t iova, int access);
int ssib_dereg(struct ibv_mr *mr);
struct ibv_cq *ssib_create_cq(struct ssib_dev *d, int entries);
int ssib_destroy_cq(struct ibv_cq *cq);
struct ibv_qp *ssib_create_qp(struct ssib_dev *d, struct ibv_cq *cq, uint32_t max_send_wr, uint32_t max_inline,
			      uint32_t *got_inline);
int ssib_destroy_qp(struct ibv_qp *qp);
int ssib_qp_connect(struct ssib_dev *d, struct ibv_qp *qp, uint32_t local_psn, const struct ssib_remote *r, char *err,
		    size_t errlen);
int ssib_qp_set_state(struct ibv_qp *qp, int reset);
int ssib_qp_state(struct ibv_qp *qp);
int ssib_post(struct ibv_qp *qp, const struct ssib_wr *w, int n);
int ssib_poll(struct ibv_cq *cq, struct ssib_wc *out, int n);

#endif
