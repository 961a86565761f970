//go:build ibverbs

#include "shim.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int mtu_bytes(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256: return 256;
	case IBV_MTU_512: return 512;
	case IBV_MTU_1024: return 1024;
	case IBV_MTU_2048: return 2048;
	case IBV_MTU_4096: return 4096;
	}
	return 1024;
}

static enum ibv_mtu mtu_enum(int bytes)
{
	if (bytes >= 4096) return IBV_MTU_4096;
	if (bytes >= 2048) return IBV_MTU_2048;
	if (bytes >= 1024) return IBV_MTU_1024;
	if (bytes >= 512) return IBV_MTU_512;
	return IBV_MTU_256;
}

int ssib_device_count(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		return 0;
	ibv_free_device_list(list);
	return n;
}

static int is_ipv4_mapped(const uint8_t *g)
{
	for (int i = 0; i < 10; i++)
		if (g[i])
			return 0;
	return g[10] == 0xff && g[11] == 0xff;
}

static int is_zero(const uint8_t *g)
{
	for (int i = 0; i < 16; i++)
		if (g[i])
			return 0;
	return 1;
}

/* pick_roce_gid chooses the source GID of a RoCE port: a RoCE v2 entry
 * (routable over IP), preferring an IPv4-mapped one, else RoCE v1. */
static int pick_roce_gid(struct ibv_context *ctx, uint8_t port, int tbl_len)
{
	int v2 = -1, v2ip4 = -1, v1 = -1;
	for (int i = 0; i < tbl_len; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, port, i, &e, 0))
			continue; /* empty entry */
		if (is_zero(e.gid.raw))
			continue;
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2) {
			if (v2 < 0)
				v2 = i;
			if (v2ip4 < 0 && is_ipv4_mapped(e.gid.raw))
				v2ip4 = i;
		} else if (e.gid_type == IBV_GID_TYPE_ROCE_V1 && v1 < 0) {
			v1 = i;
		}
	}
	if (v2ip4 >= 0)
		return v2ip4;
	if (v2 >= 0)
		return v2;
	return v1;
}

int ssib_open(const char *name, int port, int gid_index, struct ssib_dev *d, char *err, size_t errlen)
{
	int n = 0;
	memset(d, 0, sizeof(*d));
	errno = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		snprintf(err, errlen, "ibv_get_device_list: %s", strerror(errno));
		return errno == ENOSYS ? SSIB_NODEV : SSIB_ERR;
	}
	if (n == 0) {
		ibv_free_device_list(list);
		snprintf(err, errlen, "ibv_get_device_list returned no devices");
		return SSIB_NODEV;
	}
	struct ibv_device *dev = NULL;
	for (int i = 0; i < n; i++) {
		if (!name[0] || strcmp(ibv_get_device_name(list[i]), name) == 0) {
			dev = list[i];
			break;
		}
	}
	if (!dev) {
		int off = snprintf(err, errlen, "no device named %s (have:", name);
		for (int i = 0; i < n && off > 0 && (size_t)off < errlen; i++)
			off += snprintf(err + off, errlen - off, " %s", ibv_get_device_name(list[i]));
		if (off > 0 && (size_t)off < errlen)
			snprintf(err + off, errlen - off, ")");
		ibv_free_device_list(list);
		return SSIB_NOTFOUND;
	}
	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(dev));
	d->ctx = ibv_open_device(dev);
	ibv_free_device_list(list); /* the opened context stays valid */
	if (!d->ctx) {
		snprintf(err, errlen, "ibv_open_device(%s): %s", d->name, strerror(errno));
		return SSIB_ERR;
	}
	struct ibv_device_attr da;
	if (ibv_query_device(d->ctx, &da)) {
		snprintf(err, errlen, "ibv_query_device(%s): %s", d->name, strerror(errno));
		goto fail;
	}
	d->max_rd_atomic = da.max_qp_init_rd_atom < 16 ? da.max_qp_init_rd_atom : 16;
	d->max_dest_rd_atomic = da.max_qp_rd_atom < 16 ? da.max_qp_rd_atom : 16;
	d->atomic_cap = da.atomic_cap == IBV_ATOMIC_NONE ? 0 : da.atomic_cap == IBV_ATOMIC_HCA ? 1 : 2;
	struct ibv_port_attr pa;
	if (port < 1 || port > da.phys_port_cnt) {
		snprintf(err, errlen, "%s has ports 1..%d, not %d", d->name, da.phys_port_cnt, port);
		goto fail;
	}
	d->port = (uint8_t)port;
	if (ibv_query_port(d->ctx, d->port, &pa)) {
		snprintf(err, errlen, "ibv_query_port(%s, %d): %s", d->name, port, strerror(errno));
		goto fail;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		snprintf(err, errlen, "port %d of %s is %s, not ACTIVE (cable, subnet manager?)", port, d->name,
			 ibv_port_state_str(pa.state));
		goto fail;
	}
	d->lid = pa.lid;
	d->ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	d->active_mtu = mtu_bytes(pa.active_mtu);
	if (gid_index < 0 && d->ethernet) {
		gid_index = pick_roce_gid(d->ctx, d->port, pa.gid_tbl_len);
		if (gid_index < 0) {
			snprintf(err, errlen, "port %d of %s has no RoCE GID (is an IP address configured on its netdev?)",
				 port, d->name);
			goto fail;
		}
	}
	d->gid_index = gid_index;
	union ibv_gid gid;
	if (ibv_query_gid(d->ctx, d->port, gid_index < 0 ? 0 : gid_index, &gid)) {
		snprintf(err, errlen, "ibv_query_gid(%s, port %d, index %d): %s", d->name, port, gid_index,
			 strerror(errno));
		goto fail;
	}
	if (gid_index >= 0 && is_zero(gid.raw)) {
		snprintf(err, errlen, "GID index %d of port %d of %s is empty (show_gids lists them)", gid_index, port,
			 d->name);
		goto fail;
	}
	memcpy(d->gid, gid.raw, 16);
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		snprintf(err, errlen, "ibv_alloc_pd(%s): %s", d->name, strerror(errno));
		goto fail;
	}
	return SSIB_OK;
fail:
	ibv_close_device(d->ctx);
	d->ctx = NULL;
	return SSIB_ERR;
}

void ssib_close(struct ssib_dev *d)
{
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
	d->pd = NULL;
	d->ctx = NULL;
}

struct ibv_mr *ssib_reg(struct ssib_dev *d, uintptr_t addr, size_t len, uint64_t iova, int access)
{
	int flags = 0;
	if (access & SSIB_ACC_LOCAL_WRITE)
		flags |= IBV_ACCESS_LOCAL_WRITE;
	if (access & SSIB_ACC_REMOTE_WRITE)
		flags |= IBV_ACCESS_REMOTE_WRITE;
	if (access & SSIB_ACC_REMOTE_READ)
		flags |= IBV_ACCESS_REMOTE_READ;
	if (access & SSIB_ACC_REMOTE_ATOMIC)
		flags |= IBV_ACCESS_REMOTE_ATOMIC;
	return ibv_reg_mr_iova(d->pd, (void *)addr, len, iova, flags);
}

int ssib_dereg(struct ibv_mr *mr)
{
	return ibv_dereg_mr(mr);
}

struct ibv_cq *ssib_create_cq(struct ssib_dev *d, int entries)
{
	return ibv_create_cq(d->ctx, entries, NULL, NULL, 0);
}

int ssib_destroy_cq(struct ibv_cq *cq)
{
	return ibv_destroy_cq(cq);
}

struct ibv_qp *ssib_create_qp(struct ssib_dev *d, struct ibv_cq *cq, uint32_t max_send_wr, uint32_t max_inline,
			      uint32_t *got_inline)
{
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof(a));
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0; /* selective signaling */
	a.cap.max_send_wr = max_send_wr;
	a.cap.max_recv_wr = 1; /* messages are RDMA writes: nothing is received */
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = max_inline;
	struct ibv_qp *qp = ibv_create_qp(d->pd, &a);
	if (!qp && max_inline) {
		/* Some devices cap inline data lower, or have none. */
		a.cap.max_inline_data = 0;
		qp = ibv_create_qp(d->pd, &a);
	}
	if (qp)
		*got_inline = a.cap.max_inline_data;
	return qp;
}

int ssib_destroy_qp(struct ibv_qp *qp)
{
	return ibv_destroy_qp(qp);
}

int ssib_qp_connect(struct ssib_dev *d, struct ibv_qp *qp, uint32_t local_psn, const struct ssib_remote *r, char *err,
		    size_t errlen)
{
	struct ibv_qp_attr a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = d->port;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc) {
		snprintf(err, errlen, "RESET->INIT: %s", strerror(rc));
		return SSIB_ERR;
	}

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu_enum(r->mtu < d->active_mtu ? r->mtu : d->active_mtu);
	a.dest_qp_num = r->qpn;
	a.rq_psn = r->psn;
	a.max_dest_rd_atomic = d->max_dest_rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = r->lid;
	a.ah_attr.sl = 0;
	a.ah_attr.src_path_bits = 0;
	a.ah_attr.port_num = d->port;
	if (d->gid_index >= 0) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.traffic_class = 0;
		a.ah_attr.grh.flow_label = 0;
	}
	rc = ibv_modify_qp(qp, &a,
			   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc) {
		snprintf(err, errlen, "INIT->RTR (dest QPN %#x, LID %u, GID index %d): %s", r->qpn, r->lid,
			 d->gid_index, strerror(rc));
		return SSIB_ERR;
	}

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;  /* 4.096 us * 2^14: about 67 ms per attempt */
	a.retry_cnt = 7; /* so a dead peer shows within about half a second */
	a.rnr_retry = 7;
	a.sq_psn = local_psn;
	a.max_rd_atomic = d->max_rd_atomic;
	rc = ibv_modify_qp(qp, &a,
			   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				   IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc) {
		snprintf(err, errlen, "RTR->RTS: %s", strerror(rc));
		return SSIB_ERR;
	}
	return SSIB_OK;
}

int ssib_qp_set_state(struct ibv_qp *qp, int reset)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = reset ? IBV_QPS_RESET : IBV_QPS_ERR;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

int ssib_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	switch (a.qp_state) {
	case IBV_QPS_RESET: return 0;
	case IBV_QPS_INIT: return 1;
	case IBV_QPS_RTR: return 2;
	case IBV_QPS_RTS: return 3;
	default: return 4;
	}
}

int ssib_post(struct ibv_qp *qp, const struct ssib_wr *w, int n)
{
	struct ibv_send_wr wrs[SSIB_MAX_POST];
	struct ibv_sge sges[SSIB_MAX_POST];
	struct ibv_send_wr *bad = NULL;

	if (n < 1 || n > SSIB_MAX_POST)
		return EINVAL;
	memset(wrs, 0, sizeof(wrs[0]) * (size_t)n);
	for (int i = 0; i < n; i++) {
		struct ibv_send_wr *wr = &wrs[i];
		sges[i].addr = w[i].local_addr;
		sges[i].length = w[i].length;
		sges[i].lkey = w[i].lkey;
		wr->wr_id = w[i].id;
		wr->next = i + 1 < n ? &wrs[i + 1] : NULL;
		wr->sg_list = w[i].length ? &sges[i] : NULL;
		wr->num_sge = w[i].length ? 1 : 0;
		if (w[i].flags & SSIB_SIGNALED)
			wr->send_flags |= IBV_SEND_SIGNALED;
		if (w[i].flags & SSIB_INLINE)
			wr->send_flags |= IBV_SEND_INLINE;
		switch (w[i].opcode) {
		case SSIB_OP_WRITE:
		case SSIB_OP_READ:
			wr->opcode = w[i].opcode == SSIB_OP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
			wr->wr.rdma.remote_addr = w[i].remote_addr;
			wr->wr.rdma.rkey = w[i].rkey;
			break;
		case SSIB_OP_CAS:
		case SSIB_OP_FAA:
			wr->opcode = w[i].opcode == SSIB_OP_CAS ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr->wr.atomic.remote_addr = w[i].remote_addr;
			wr->wr.atomic.rkey = w[i].rkey;
			wr->wr.atomic.compare_add = w[i].compare_add;
			wr->wr.atomic.swap = w[i].swap;
			break;
		default:
			return EINVAL;
		}
	}
	return ibv_post_send(qp, wrs, &bad);
}

static uint8_t wc_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS: return SSIB_WC_SUCCESS;
	case IBV_WC_WR_FLUSH_ERR: return SSIB_WC_FLUSHED;
	case IBV_WC_REM_ACCESS_ERR: return SSIB_WC_REM_ACCESS;
	case IBV_WC_REM_INV_REQ_ERR: return SSIB_WC_REM_INVALID;
	case IBV_WC_REM_OP_ERR: return SSIB_WC_REM_OP;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR: return SSIB_WC_RETRY_EXC;
	case IBV_WC_LOC_PROT_ERR: return SSIB_WC_LOC_PROT;
	case IBV_WC_LOC_LEN_ERR: return SSIB_WC_LOC_LEN;
	default: return SSIB_WC_OTHER;
	}
}

static uint8_t wc_opcode(enum ibv_wc_opcode o)
{
	switch (o) {
	case IBV_WC_RDMA_WRITE: return SSIB_OP_WRITE;
	case IBV_WC_RDMA_READ: return SSIB_OP_READ;
	case IBV_WC_COMP_SWAP: return SSIB_OP_CAS;
	case IBV_WC_FETCH_ADD: return SSIB_OP_FAA;
	default: return 0;
	}
}

int ssib_poll(struct ibv_cq *cq, struct ssib_wc *out, int n)
{
	struct ibv_wc wc[SSIB_MAX_POLL];
	if (n > SSIB_MAX_POLL)
		n = SSIB_MAX_POLL;
	int got = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++) {
		out[i].id = wc[i].wr_id;
		out[i].qpn = wc[i].qp_num;
		out[i].vendor_err = wc[i].vendor_err;
		out[i].raw_status = wc[i].status;
		out[i].status = wc_status(wc[i].status);
		/* The opcode of an error completion is undefined. */
		out[i].opcode = wc[i].status == IBV_WC_SUCCESS ? wc_opcode(wc[i].opcode) : 0;
	}
	return got;
}
