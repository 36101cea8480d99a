/*
 * The UCX transport (aml_tport.h): UCP active messages carry the packets (one AM id, the aml
 * packet header as UCP's AM header), UCP's AM rendezvous is the transport rendezvous, and
 * ucp_get_nbx/ucp_put_nbx move rendezvous data. The only file of aml that calls UCX.
 */
#include "aml_impl.h"
#include "aml_ucx_keepalive.h"
#include <ucp/api/ucp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One UCP active-message id carries every aml packet; the aml packet type is in the header. */
#define AML_UCP_AM_ID 7

struct aml_ucx {
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr;
    size_t addr_len;
    ucp_address_t *net_addr;    /* network devices only: for processes of other jobs */
    size_t net_addr_len;
    int efd;                    /* interrupt mode: the worker's event fd, else -1 */
    aml_tport_rx_fn_t rx;
    struct aml_ucx_ka *ka;      /* keepalive on accepted sockets (aml_ucx_keepalive.c) */
};

/* This transport's state in aml (aml_tports.h): a load at a fixed offset, as a field was */
static inline struct aml_ucx *ucx_of(const aml_t * aml)
{
    return aml->tport_state[AML_TPORT_UCX];
}

/* rx returns 0 or AML_TPORT_RX_KEPT, which are UCX's UCS_OK and UCS_INPROGRESS */
_Static_assert(UCS_OK == 0 && UCS_INPROGRESS == AML_TPORT_RX_KEPT, "rx results are UCX's");

/* Anyone who reaches the worker (another job given a port name, anyone reaching its TCP port)
 * can send it packets, so every packet starts with the receiver's token for its sender
 * (aml_token_src): a rank of the job stamps the receiver's token, which travels only in the
 * job's own address exchange, xor its rank; a process of another job stamps the token the
 * receiver gave it in its CONNECT. The sender is the one the token names, whatever the header
 * says; a packet with no token of ours is from outside the job. */
static ucs_status_t am_recv_cb(void *arg, const void *header, size_t header_length,
                               void *data, size_t length, const ucp_am_recv_param_t * param)
{
    aml_t *aml = arg;
    unsigned flags = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? AML_TPORT_RX_RNDV : 0;
    uint64_t stamp;
    if (AML_UNLIKELY(header_length < sizeof(stamp))) {
        aml->refused++;
        return UCS_OK;  /* a rendezvous descriptor not kept is dropped by UCX */
    }
    memcpy(&stamp, header, sizeof(stamp));
    /* a rendezvous descriptor handed on or kept persists when we return UCS_INPROGRESS */
    return (ucs_status_t) ucx_of(aml)->rx(aml, (const char *) header + sizeof(stamp),
                                          header_length - sizeof(stamp), data, length, flags,
                                          aml_token_src(aml, stamp));
}

_Static_assert(AML_TPORT_HEADROOM == sizeof(uint64_t), "the token fills the headroom");

/* The packet header with the token for peer in the headroom before it. */
static const void *stamped(const aml_peer_t * p, const void *hdr)
{
    char *h = (char *) hdr - AML_TPORT_HEADROOM;
    memcpy(h, &p->tx_token, sizeof(p->tx_token));
    return h;
}

/* ---- setup ---------------------------------------------------------------------------- */

static void ucx_fini(aml_t * aml)
{
    struct aml_ucx *u = ucx_of(aml);
    if (!u)
        return;
    aml_ucx_ka_free(u->ka);
    if (u->addr)
        ucp_worker_release_address(u->worker, u->addr);
    if (u->net_addr)
        ucp_worker_release_address(u->worker, u->net_addr);
    if (u->worker)
        ucp_worker_destroy(u->worker);
    if (u->ctx)
        ucp_cleanup(u->ctx);
    free(u);
    aml->tport_state[AML_TPORT_UCX] = NULL;
}

/* How a rank finds that a host is gone (measured with UCX 1.13.1 between two network
 * namespaces): a dead process is seen at once (its connections are reset), but a host that
 * stops answering is seen only by TCP keepalive probes, which the kernel sends on a connection
 * with no unacknowledged data (UCX arms them on the sockets it connects, and
 * aml_ucx_keepalive.c on those it accepts). UCX's defaults take 28 s (10 s idle, 9 probes 2 s
 * apart); so the keepalive is made keepalive_ms idle, 3 probes keepalive_ms apart (whole
 * seconds, UCX's granularity): about 4 s at 1000 ms. UCP's own keepalive is turned off: over
 * TCP it only leaves an unacknowledged check message queued to a dead host, which stops the
 * kernel's probes until its retransmission limit (tcp_retries2, about 15 minutes); it would
 * help over InfiniBand, where UCX_KEEPALIVE_INTERVAL turns it back on. The kernel's probes are
 * answered by the peer's kernel, so a rank that computes for long without calling MPI is never
 * taken for dead. Variables the user set are left alone. The TCP keys go without their TCP_
 * prefix: ucp_config_modify accepts "TCP_KEEPIDLE" and silently ignores it. *ours is set when
 * the TCP settings are ours (then accepted sockets get them too). */
static int keepalive_config(aml_t * aml, ucp_config_t * ucfg, bool *ours)
{
    static const struct {
        const char *env, *key;
    } keys[] = {
        {"UCX_KEEPALIVE_INTERVAL", "KEEPALIVE_INTERVAL"},
        {"UCX_TCP_KEEPIDLE", "KEEPIDLE"},
        {"UCX_TCP_KEEPINTVL", "KEEPINTVL"},
        {"UCX_TCP_KEEPCNT", "KEEPCNT"}
    };
    int secs = (aml->cfg.keepalive_ms + 999) / 1000;
    char v[4][32];
    snprintf(v[0], sizeof(v[0]), "inf");
    snprintf(v[1], sizeof(v[1]), "%ds", secs);
    snprintf(v[2], sizeof(v[2]), "%ds", secs);
    snprintf(v[3], sizeof(v[3]), "%d", AML_KEEPALIVE_PROBES);
    *ours = true;
    for (int i = 0; i < 4; i++) {
        if (getenv(keys[i].env)) {
            if (i > 0)
                *ours = false;  /* the user tunes UCX's TCP keepalive: not ours to copy */
            continue;
        }
        if (ucp_config_modify(ucfg, keys[i].key, v[i]) != UCS_OK)
            return AML_ERR_TRANSPORT;
    }
    return AML_OK;
}

static int ucx_init(aml_t * aml, aml_tport_rx_fn_t rx, size_t * max_hdr)
{
    ucp_config_t *ucfg = NULL;
    ucp_params_t params;
    ucp_worker_params_t wparams;
    ucp_worker_attr_t wattr;
    ucp_am_handler_param_t hparam;
    struct aml_ucx *u = calloc(1, sizeof(*u));
    bool ka_ours = false;

    if (!u)
        return AML_ERR_NOMEM;
    aml->tport_state[AML_TPORT_UCX] = u;
    u->rx = rx;
    u->efd = -1;
    if (ucp_config_read(NULL, NULL, &ucfg) != UCS_OK)
        return AML_ERR_TRANSPORT;
    /* Unless the user chose UCX's transports, never its posix shared memory: it zero-fills a
     * named /dev/shm file before unlinking it, and a rank killed meanwhile (a job torn down
     * while ranks still initialise) leaves the file behind. sysv serves the same FIFOs and
     * removes its segment right after attaching it. When vnode carries every peer on this
     * host, none of UCX's FIFOs: each would cost this rank a segment and never be used. */
    if (!getenv("UCX_TLS") &&
        ucp_config_modify(ucfg, "TLS", aml->cfg.ucx_onnode ? "^posix" : "^mm") != UCS_OK) {
        ucp_config_release(ucfg);
        return AML_ERR_TRANSPORT;
    }
    if (aml->cfg.keepalive_ms > 0 && keepalive_config(aml, ucfg, &ka_ours) != AML_OK) {
        ucp_config_release(ucfg);
        return AML_ERR_TRANSPORT;
    }
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA;
    if (aml->cfg.progress_mode == AML_PROGRESS_INTERRUPT)
        params.features |= UCP_FEATURE_WAKEUP;
    params.estimated_num_eps = aml->cfg.size;
    if (ucp_init(&params, ucfg, &u->ctx) != UCS_OK) {
        ucp_config_release(ucfg);
        return AML_ERR_TRANSPORT;
    }
    ucp_config_release(ucfg);

    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    if (ka_ours && !(u->ka = aml_ucx_ka_mark((aml->cfg.keepalive_ms + 999) / 1000)))
        return AML_ERR_NOMEM;
    if (ucp_worker_create(u->ctx, &wparams, &u->worker) != UCS_OK)
        return AML_ERR_TRANSPORT;
    if (u->ka)
        aml_ucx_ka_listeners(u->ka);      /* the worker's TCP interfaces listen now */
    if (ucp_worker_get_address(u->worker, &u->addr, &u->addr_len) != UCS_OK)
        return AML_ERR_TRANSPORT;
    if (aml->cfg.progress_mode == AML_PROGRESS_INTERRUPT &&
        ucp_worker_get_efd(u->worker, &u->efd) != UCS_OK)
        return AML_ERR_TRANSPORT;

    /* the user header travels in UCX's AM header together with our packet header */
    wattr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    if (ucp_worker_query(u->worker, &wattr) != UCS_OK)
        return AML_ERR_TRANSPORT;
    *max_hdr = wattr.max_am_header - AML_TPORT_HEADROOM;

    memset(&hparam, 0, sizeof(hparam));
    hparam.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
        UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hparam.id = AML_UCP_AM_ID;
    hparam.cb = am_recv_cb;
    hparam.arg = aml;
    hparam.flags = UCP_AM_FLAG_WHOLE_MSG;
    if (ucp_worker_set_am_recv_handler(u->worker, &hparam) != UCS_OK)
        return AML_ERR_TRANSPORT;
    return AML_OK;
}

static int ucx_address(aml_t * aml, const void **addr, size_t * len)
{
    struct aml_ucx *u = ucx_of(aml);
    *addr = u->addr;
    *len = u->addr_len;
    return AML_OK;
}

/* The worker's address with its network devices only: UCX's full address also describes
 * shared memory and every device, about three times as long, and a
 * process of another job must fit in an MPI port name (256 characters, hex-encoded). */
static int ucx_net_address(aml_t * aml, const void **addr, size_t * len)
{
    struct aml_ucx *u = ucx_of(aml);
    if (!u->net_addr) {
        ucp_worker_attr_t wattr;
        wattr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS;
        wattr.address_flags = UCP_WORKER_ADDRESS_FLAG_NET_ONLY;
        if (ucp_worker_query(u->worker, &wattr) != UCS_OK)
            return AML_ERR_TRANSPORT;
        u->net_addr = wattr.address;
        u->net_addr_len = wattr.address_length;
    }
    *addr = u->net_addr;
    *len = u->net_addr_len;
    return AML_OK;
}

/* A process of another job failed (ended, or its host is gone): its peer is marked, so that
 * a connection in progress fails and finalize does not wait for it; a send to it still fails
 * fatally (aml_send_failed). */
static void dyn_ep_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    aml_t *aml = arg;
    (void) status;
    for (int i = aml->size; i < aml->npeers; i++) {
        aml_peer_t *p = &aml->peers[i];
        bool mine = p->ep == ep;
        for (int l = 1; l < aml->lanes && !mine; l++)
            mine = aml_lane(aml, i, (unsigned) l) == ep;
        if (mine)
            p->dyn = AML_DYN_FAILED;
    }
}

/* A rank on another host failed: its process died (the connection was reset) or its host
 * stopped answering UCX's keepalive. Fatal while the job runs: every peer blocked on it would
 * wait forever. After aml_quiesce (connected is false) ranks end at different times, and an
 * endpoint to one that already did may fail: nothing is owed to it then. */
static void remote_ep_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    aml_t *aml = arg;
    if (!aml->connected)
        return;
    for (int i = 0; i < aml->size; i++) {
        bool mine = aml->peers[i].ep == ep;
        for (int l = 1; l < aml->lanes && !mine; l++)
            mine = aml_lane(aml, i, (unsigned) l) == ep;
        if (mine)
            aml_fatal(aml, "rank %d on host %s failed or cannot be reached any more (UCX: %s)",
                      i, aml_peer_host(aml, i), ucs_status_string(status));
    }
}

/* Several endpoints to the same worker: adaptive data is spread over them. */
static int ucx_connect(aml_t * aml, int peer, const void *addr, aml_tport_ep_t * eps, int neps,
                       unsigned flags)
{
    ucp_ep_params_t ep;
    (void) peer;
    memset(&ep, 0, sizeof(ep));
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = addr;
    if (flags & (AML_TPORT_CONN_DYNAMIC | AML_TPORT_CONN_REMOTE)) {
        ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        ep.err_handler.cb = (flags & AML_TPORT_CONN_DYNAMIC) ? dyn_ep_failed : remote_ep_failed;
        ep.err_handler.arg = aml;
        /* a peer on another host: from now on, this rank's accepted sockets are watched too */
        aml_ucx_ka_start(ucx_of(aml)->ka);
    }
    for (int l = 0; l < neps; l++) {
        ucp_ep_h h;
        if (ucp_ep_create(ucx_of(aml)->worker, &ep, &h) != UCS_OK)
            return AML_ERR_TRANSPORT;
        eps[l] = h;
    }
    return AML_OK;
}

/* ---- packets -------------------------------------------------------------------------- */

/* With UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL UCX either copies the packet into the transport at once
 * or refuses (full FIFO, or above its inline size). */
static int ucx_send_inline(aml_t * aml, aml_peer_t * p, const void *pkt, size_t len)
{
    ucp_request_param_t param;
    ucs_status_ptr_t r;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    r = ucp_am_send_nbx(p->ep, AML_UCP_AM_ID, stamped(p, pkt), len + AML_TPORT_HEADROOM, NULL,
                        0, &param);
    if (AML_LIKELY(r == NULL))
        return AML_TPORT_DONE;
    if (UCS_PTR_STATUS(r) != UCS_ERR_NO_RESOURCE)
        aml_send_failed(aml, (int) (p - aml->peers), pkt,
                        ucs_status_string(UCS_PTR_STATUS(r)));
    return AML_TPORT_REFUSED;
}

/* Runs a pending operation's completion as the contract says (aml_tport.h). */
static void op_done(aml_tport_op_t * op)
{
    aml_t *aml = op->aml;
    /* done may run user code: it must not progress the worker from here */
    aml->in_dispatch++;
    op->done(op);
    aml->in_dispatch--;
}

/* A pending data move (rendezvous, or a direct put/get) ended: fatal unless it moved
 * op->len bytes. */
static void moved(void *request, ucs_status_t status, aml_tport_op_t * op, const char *what)
{
    if (status != UCS_OK)
        aml_fatal(op->aml, "%s of %zu bytes %s rank %d failed: %s", what, op->len,
                  strcmp(what, "put") ? "from" : "to", op->peer, ucs_status_string(status));
    ucp_request_free(request);
    op_done(op);
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    aml_tport_op_t *op = user_data;
    if (status != UCS_OK)
        aml_send_failed(op->aml, op->peer, op->hdr, ucs_status_string(status));
    ucp_request_free(request);
    op_done(op);
}

/* AML_TPORT_SEND_RNDV: UCX's AM rendezvous; the send completes when the receiver has the
 * data. Else UCP_AM_SEND_FLAG_EAGER: aml's own packets never take UCX's rendezvous. */
static int ucx_send(aml_tport_ep_t ep, aml_tport_op_t * op, size_t hdr_len, const void *data,
                    size_t len, unsigned flags)
{
    ucp_request_param_t param;
    ucs_status_ptr_t r;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
        UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = (flags & AML_TPORT_SEND_RNDV) ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER;
    param.cb.send = send_cb;
    param.user_data = op;
    r = ucp_am_send_nbx(ep, AML_UCP_AM_ID, stamped(&op->aml->peers[op->peer], op->hdr),
                        hdr_len + AML_TPORT_HEADROOM, data, len, &param);
    if (AML_LIKELY(r == NULL))
        return AML_TPORT_DONE;
    if (UCS_PTR_IS_ERR(r))
        aml_send_failed(op->aml, op->peer, op->hdr, ucs_status_string(UCS_PTR_STATUS(r)));
    return AML_TPORT_PENDING;
}

static void rndv_recv_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    aml_tport_op_t *op = user_data;
    if (status != UCS_OK || length != op->len)
        aml_fatal(op->aml, "rendezvous receive of %zu bytes from rank %d failed: %s (%zu bytes)",
                  op->len, op->peer, ucs_status_string(status), length);
    moved(request, status, op, "rendezvous receive");
}

static int ucx_rndv_recv(aml_t * aml, void *desc, void *dst, aml_tport_op_t * op)
{
    ucp_request_param_t param;
    ucs_status_ptr_t req;
    size_t got = op->len;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
        UCP_OP_ATTR_FIELD_RECV_INFO;
    param.cb.recv_am = rndv_recv_cb;
    param.user_data = op;
    param.recv_info.length = &got;
    req = ucp_am_recv_data_nbx(ucx_of(aml)->worker, desc, dst, op->len, &param);
    if (UCS_PTR_IS_ERR(req))
        aml_fatal(aml, "rendezvous receive from rank %d failed: %s", op->peer,
                  ucs_status_string(UCS_PTR_STATUS(req)));
    if (req != NULL)
        return AML_TPORT_PENDING;
    /* done at once: the length is checked as in rndv_recv_cb */
    if (got != op->len)
        aml_fatal(aml, "rendezvous receive of %zu bytes from rank %d delivered %zu bytes",
                  op->len, op->peer, got);
    return AML_TPORT_DONE;
}

static void ucx_rndv_release(aml_t * aml, void *desc)
{
    ucp_am_data_release(ucx_of(aml)->worker, desc);
}

/* ---- memory --------------------------------------------------------------------------- */

static int ucx_mem_map(aml_t * aml, void *addr, size_t len, aml_tport_memh_t * memh)
{
    ucp_mem_map_params_t mp;
    ucp_mem_h h;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = addr;
    mp.length = len;
    if (ucp_mem_map(ucx_of(aml)->ctx, &mp, &h) != UCS_OK)
        return AML_ERR_TRANSPORT;
    *memh = h;
    return AML_OK;
}

static void ucx_mem_unmap(aml_t * aml, aml_tport_memh_t memh)
{
    ucp_mem_unmap(ucx_of(aml)->ctx, memh);
}

static int ucx_rkey_pack(aml_t * aml, aml_tport_memh_t memh, void **buf, size_t * len)
{
    return ucp_rkey_pack(ucx_of(aml)->ctx, memh, buf, len) == UCS_OK ? AML_OK :
        AML_ERR_TRANSPORT;
}

static void ucx_rkey_buf_release(aml_t * aml, void *buf)
{
    (void) aml;
    ucp_rkey_buffer_release(buf);
}

static int ucx_rkey_unpack(aml_tport_ep_t ep, const void *buf, size_t len,
                           aml_tport_rkey_t * rkey)
{
    ucp_rkey_h h;
    (void) len;         /* UCX's packed rkey describes itself */
    if (ucp_ep_rkey_unpack(ep, buf, &h) != UCS_OK)
        return AML_ERR_TRANSPORT;
    *rkey = h;
    return AML_OK;
}

static void ucx_rkey_destroy(aml_t * aml, aml_tport_rkey_t rkey)
{
    (void) aml;
    ucp_rkey_destroy(rkey);
}

static void get_cb(void *request, ucs_status_t status, void *user_data)
{
    moved(request, status, user_data, "get");
}

static int ucx_get(aml_tport_ep_t ep, void *dst, uint64_t raddr, aml_tport_rkey_t rkey,
                   aml_tport_op_t * op)
{
    ucp_request_param_t param;
    ucs_status_ptr_t req;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = get_cb;
    param.user_data = op;
    req = ucp_get_nbx(ep, dst, op->len, raddr, rkey, &param);
    if (UCS_PTR_IS_ERR(req))
        aml_fatal(op->aml, "get of %zu bytes from rank %d failed: %s", op->len, op->peer,
                  ucs_status_string(UCS_PTR_STATUS(req)));
    return req == NULL ? AML_TPORT_DONE : AML_TPORT_PENDING;
}

static void flush_cb(void *request, ucs_status_t status, void *user_data)
{
    moved(request, status, user_data, "put");
}

/* ucp_put_nbx, then ucp_ep_flush_nbx: complete once the data is in place at the peer. */
static int ucx_put(aml_tport_ep_t ep, const void *src, uint64_t raddr, aml_tport_rkey_t rkey,
                   aml_tport_op_t * op)
{
    ucp_request_param_t param;
    ucs_status_ptr_t req;

    memset(&param, 0, sizeof(param));
    req = ucp_put_nbx(ep, src, op->len, raddr, rkey, &param);
    if (UCS_PTR_IS_ERR(req))
        aml_fatal(op->aml, "put of %zu bytes to rank %d failed: %s", op->len, op->peer,
                  ucs_status_string(UCS_PTR_STATUS(req)));
    if (req)
        ucp_request_free(req);  /* the flush below tells when it is done */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = flush_cb;
    param.user_data = op;
    req = ucp_ep_flush_nbx(ep, &param);
    if (UCS_PTR_IS_ERR(req))
        aml_fatal(op->aml, "flushing the put of %zu bytes to rank %d failed: %s", op->len, op->peer,
                  ucs_status_string(UCS_PTR_STATUS(req)));
    return req == NULL ? AML_TPORT_DONE : AML_TPORT_PENDING;
}

static void quiesce_flush_cb(void *request, ucs_status_t status, void *user_data)
{
    aml_tport_op_t *op = user_data;
    /* a process of another job may have ended before this one: nothing is owed to it */
    if (status != UCS_OK && op->peer < op->aml->size)
        aml_fatal(op->aml, "flushing the endpoint to rank %d at finalize failed: %s", op->peer,
                  ucs_status_string(status));
    ucp_request_free(request);
    op_done(op);
}

/* Completes what UCX still owes on an endpoint (a TCP connection being set up, queued data)
 * while every peer progresses: aml_quiesce calls it before its second round, and then leaves
 * the endpoints to ucp_worker_destroy (aml_context.c says why). */
static int ucx_flush(aml_tport_ep_t ep, aml_tport_op_t * op)
{
    ucp_request_param_t param;
    ucs_status_ptr_t req;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = quiesce_flush_cb;
    param.user_data = op;
    req = ucp_ep_flush_nbx(ep, &param);
    if (UCS_PTR_IS_ERR(req) && op->peer < op->aml->size)
        aml_fatal(op->aml, "flushing the endpoint to rank %d at finalize failed: %s", op->peer,
                  ucs_status_string(UCS_PTR_STATUS(req)));
    return req == NULL || UCS_PTR_IS_ERR(req) ? AML_TPORT_DONE : AML_TPORT_PENDING;
}

/* ---- progress ------------------------------------------------------------------------- */

static int ucx_progress(aml_t * aml)
{
    return (int) ucp_worker_progress(ucx_of(aml)->worker);
}

static int ucx_arm(aml_t * aml)
{
    ucs_status_t st = ucp_worker_arm(ucx_of(aml)->worker);
    if (st == UCS_OK)
        return AML_OK;
    if (st == UCS_ERR_BUSY)
        return AML_ERR_STATE;
    return AML_ERR_TRANSPORT;
}

static int ucx_event_fd(aml_t * aml, int *fd)
{
    struct aml_ucx *u = ucx_of(aml);
    if (u->efd < 0)
        return AML_ERR_STATE;
    *fd = u->efd;
    return AML_OK;
}

/* Whether UCX carries get and put on ep in software the peer's progress runs: no lane for
 * RMA at all (UCX then emulates it over active messages: between the test hosts, whose only
 * transport is tcp), or only tcp lanes. UCX 1.13 has no query for an endpoint's transports
 * but ucp_ep_print_info's lane lines, "lane[i]:  n:tcp/eth0.0 md[..] -> ... rma_bw#0 ...":
 * an RMA lane of another transport (rc, dc, cma, ...), or nothing to read, answers 0. Asked
 * at a window's first large transfer, after its creation talked to the peer, so the lanes
 * are the endpoint's own, not a connection's first ones. */
static int ucx_rma_soft(aml_tport_ep_t ep)
{
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;
    int lanes = 0, rma = 0, soft = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return 0;
    ucp_ep_print_info((ucp_ep_h) ep, f);
    if (fclose(f) != 0 || !text) {
        free(text);
        return 0;
    }
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *colon, *slash;
        if (!strstr(line, "lane["))
            continue;
        lanes++;
        if (!strstr(line, " rma_bw#") && !strstr(line, " rma#"))
            continue;
        rma++;
        /* the transport name sits between the lane's "N:" and the first '/' */
        colon = strstr(line, "]:");
        colon = colon ? strchr(colon + 2, ':') : NULL;
        slash = colon ? strchr(colon, '/') : NULL;
        if (slash && slash - colon == 4 && !strncmp(colon + 1, "tcp", 3))
            soft++;
    }
    free(text);
    return lanes > 0 && soft == rma;
}

const aml_tport_t aml_ucx_tport = {
    .name = "UCX",
    .slot = AML_TPORT_UCX,
    .caps = AML_TPORT_CAP_RNDV | AML_TPORT_CAP_GET | AML_TPORT_CAP_PUT,
    .init = ucx_init,
    .address = ucx_address,
    .net_address = ucx_net_address,
    .connect = ucx_connect,
    .flush = ucx_flush,
    .fini = ucx_fini,
    .send_inline = ucx_send_inline,
    .send = ucx_send,
    .rndv_recv = ucx_rndv_recv,
    .rndv_release = ucx_rndv_release,
    .mem_map = ucx_mem_map,
    .mem_unmap = ucx_mem_unmap,
    .rkey_pack = ucx_rkey_pack,
    .rkey_buf_release = ucx_rkey_buf_release,
    .rkey_unpack = ucx_rkey_unpack,
    .rkey_destroy = ucx_rkey_destroy,
    .get = ucx_get,
    .put = ucx_put,
    .rma_soft = ucx_rma_soft,
    .progress = ucx_progress,
    .arm = ucx_arm,
    .event_fd = ucx_event_fd,
};
