/*
 * Rendezvous protocol: the sender registers its buffer and sends an ordered scout carrying
 * the user header, the buffer's address and its packed rkey. The receiver's header handler
 * picks the landing buffer; the receiver pulls the data straight into it with ucp_get_nbx
 * (into a bounce buffer when the handler asked for unpacking), completes the message and
 * sends DONE, which releases the sender's buffer. DONE follows target completion, so it also
 * drives the sender's completion counter.
 */
#include "aml_impl.h"
#include <stdlib.h>
#include <string.h>

#define AML_RKEY_MAX 4096

static int rndv_ucx_send(aml_t * aml, const aml_xfer_t * x);
static void rndv_move(aml_t * aml, aml_rmsg_t * r);

int aml_rndv_send(aml_t * aml, const aml_xfer_t * x)
{
    aml_smsg_t *m;
    ucp_mem_map_params_t mp;
    size_t rkey_len;
    aml_sdesc_t *d;
    int rc;

    if (aml->cfg.rndv_ucx)
        return rndv_ucx_send(aml, x);
    if (aml->cfg.rndv_put)
        return aml_rndv_put_send(aml, x);
    m = aml_smsg_new(aml, x, AML_PROTO_RNDV);
    if (!m)
        return AML_ERR_NOMEM;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = (void *) x->data;
    mp.length = x->len;
    if (ucp_mem_map(aml->ctx, &mp, &m->memh) != UCS_OK) {
        free(m);
        return AML_ERR_TRANSPORT;
    }
    if (ucp_rkey_pack(aml->ctx, m->memh, &m->rkey_buf, &rkey_len) != UCS_OK ||
        rkey_len > AML_RKEY_MAX) {
        aml_smsg_release(aml, m);
        return AML_ERR_TRANSPORT;
    }
    d = aml_sdesc_get(aml);
    if (!d) {
        aml_smsg_release(aml, m);
        return AML_ERR_NOMEM;
    }
    aml_pkt_init(aml, &d->u.pkt, AML_PKT_RNDV_SCOUT, x->peer);
    d->u.pkt.proto = AML_PROTO_RNDV;
    d->u.pkt.msg_len = x->len;
    d->u.pkt.msg_id = aml->next_msg_id++;
    d->u.pkt.addr = (uintptr_t) x->data;
    d->u.pkt.aux0 = rkey_len;
    aml_pkt_set_first(d, x, false);     /* DONE follows target completion */
    d->peer = x->peer;
    d->msg = m;

    /* events: the scout's send, the DONE (both gate buffer reuse), plus the guard */
    m->pending += 2;
    m->org_pending += 2;
    aml_htab_put(&aml->waits, &m->h, d->u.pkt.msg_id);
    aml_stat(aml, AML_PROTO_RNDV, x->len);
    rc = aml_send_desc(aml, d, m->rkey_buf, rkey_len);
    if (rc != AML_OK)
        aml_fatal(aml, "rendezvous scout to rank %d failed: %s", x->peer, aml_strerror(rc));
    aml_smsg_event_done(aml, m, true);  /* drop the guard */
    return AML_OK;
}

/* UCX rendezvous: the scout is one UCP active message sent with UCP_AM_SEND_FLAG_RNDV, so UCX
 * moves the data with its own tuned protocol (zero copy where it can, no registration of ours)
 * once the receiver's handler has chosen the landing; the send completes when the receiver has
 * the data. The completion counter goes through CMPL, as for eager. */
/* The send-side record and scout of a rendezvous message (UCX and put variants). */
aml_smsg_t *aml_rndv_scout_new(aml_t * aml, const aml_xfer_t * x, uint8_t flags, bool want_cmpl,
                               aml_sdesc_t ** dp)
{
    aml_smsg_t *m = aml_smsg_new(aml, x, AML_PROTO_RNDV);
    aml_sdesc_t *d;

    if (!m)
        return NULL;
    d = aml_sdesc_get(aml);
    if (!d) {
        free(m);
        return NULL;
    }
    aml_pkt_init(aml, &d->u.pkt, AML_PKT_RNDV_SCOUT, x->peer);
    d->u.pkt.proto = AML_PROTO_RNDV;
    d->u.pkt.flags = flags;
    d->u.pkt.msg_len = x->len;
    d->u.pkt.msg_id = aml->next_msg_id++;
    aml_pkt_set_first(d, x, want_cmpl);
    d->peer = x->peer;
    d->msg = m;
    *dp = d;
    return m;
}

/* The lean case: no completion counter, under 4 GiB. A medium compact scout, and no send
 * record: the descriptor carries the origin completion, fired when UCX completes the send
 * (the receiver took the data), as for a one-packet send from the caller's buffer. */
static int rndv_ucx_send_compact(aml_t * aml, const aml_xfer_t * x)
{
    aml_sdesc_t *d = aml_sdesc_get(aml);
    int rc;

    if (AML_UNLIKELY(!d))
        return AML_ERR_NOMEM;
    d->peer = x->peer;
    d->org_cntr = x->org_cntr;
    d->org_fn = x->org_fn;
    d->org_arg = x->org_arg;
    aml_mpkt_set(aml, d, x, AML_PKT_RNDV_SSCOUT, aml->next_msg_id++, 0);
    aml_stat(aml, AML_PROTO_RNDV, x->len);
    rc = aml_send_desc_flags(aml, d, aml->peers[x->peer].ep, x->data, x->len,
                             UCP_AM_SEND_FLAG_RNDV);
    if (rc != AML_OK)
        aml_fatal(aml, "rendezvous to rank %d failed: %s", x->peer, aml_strerror(rc));
    return AML_OK;
}

static int rndv_ucx_send(aml_t * aml, const aml_xfer_t * x)
{
    aml_sdesc_t *d;
    aml_smsg_t *m;
    int rc;

    if (aml_mpkt_ok(aml, x))
        return rndv_ucx_send_compact(aml, x);
    m = aml_rndv_scout_new(aml, x, AML_PKTF_UCX, x->cmpl_cntr != NULL, &d);
    if (!m)
        return AML_ERR_NOMEM;
    m->ucx_rndv = true;
    m->pending++;       /* the send: completes when the receiver took the data */
    m->org_pending++;
    if (x->cmpl_cntr) {
        m->pending++;   /* until the target's CMPL */
        aml_htab_put(&aml->waits, &m->h, d->u.pkt.msg_id);
    }
    aml_stat(aml, AML_PROTO_RNDV, x->len);
    d->u.pkt.seq = aml->peers[x->peer].tx_seq++;
    rc = aml_send_desc_flags(aml, d, aml->peers[x->peer].ep, x->data, x->len,
                             UCP_AM_SEND_FLAG_RNDV);
    if (rc != AML_OK)
        aml_fatal(aml, "rendezvous to rank %d failed: %s", x->peer, aml_strerror(rc));
    aml_smsg_event_done(aml, m, true);  /* drop the guard */
    return AML_OK;
}

/* The data is in the landing: complete the message (handlers run as in the dispatcher). */
static void ucx_landed(aml_t * aml, aml_rmsg_t * r)
{
    aml->in_dispatch++;
    if (r->bounce) {
        aml_deliver(aml, &r->recv, 0, r->bounce, r->len);
        free(r->bounce);
    }
    aml_rx_complete(aml, r->src, r->tgt_cntr, &r->recv, r->want_cmpl, r->msg_id, true);
    aml_rmsg_free(aml, r);
    aml->in_dispatch--;
}

static void ucx_recvd(void *request, ucs_status_t status, size_t length, void *user_data)
{
    aml_rmsg_t *r = user_data;
    if (status != UCS_OK || length != r->len)
        aml_fatal(r->aml, "rendezvous receive of %zu bytes from rank %d failed: %s (%zu bytes)",
                  r->len, r->src, ucs_status_string(status), length);
    ucp_request_free(request);
    ucx_landed(r->aml, r);
}

/* Lands a UCX-rendezvous message where its handler (or aml_accept) said. */
static void rndv_ucx_recv(aml_t * aml, aml_rmsg_t * r)
{
    ucp_request_param_t param;
    ucs_status_ptr_t req;
    void *dst = aml_rndv_landing(aml, r);
    size_t got = r->len;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
        UCP_OP_ATTR_FIELD_RECV_INFO;
    param.cb.recv_am = ucx_recvd;
    param.user_data = r;
    param.recv_info.length = &got;
    req = ucp_am_recv_data_nbx(aml->worker, r->ucx_desc, dst, r->len, &param);
    if (UCS_PTR_IS_ERR(req))
        aml_fatal(aml, "rendezvous receive from rank %d failed: %s", r->src,
                  ucs_status_string(UCS_PTR_STATUS(req)));
    if (req == NULL) {
        /* done at once: the length is checked as in ucx_recvd */
        if (got != r->len)
            aml_fatal(aml, "rendezvous receive of %zu bytes from rank %d delivered %zu bytes",
                      r->len, r->src, got);
        ucx_landed(aml, r);
    }
}

static void rndv_pulled(aml_t * aml, aml_rmsg_t * r)
{
    if (r->bounce) {
        aml_deliver(aml, &r->recv, 0, r->bounce, r->len);
        free(r->bounce);
    }
    ucp_rkey_destroy(r->rkey);
    aml_rx_complete(aml, r->src, r->tgt_cntr, &r->recv, false, r->msg_id, true);
    if (aml_send_ctrl(aml, r->src, AML_PKT_RNDV_DONE, r->msg_id, 0) != AML_OK)
        aml_fatal(aml, "cannot send RNDV_DONE to rank %d", r->src);
    aml_rmsg_free(aml, r);
}

static void get_cb(void *request, ucs_status_t status, void *user_data)
{
    aml_rmsg_t *r = user_data;
    aml_t *aml = r->aml;
    if (status != UCS_OK)
        aml_fatal(aml, "rendezvous pull of %zu bytes from rank %d failed: %s", r->len, r->src,
                  ucs_status_string(status));
    ucp_request_free(request);
    aml->in_dispatch++;
    rndv_pulled(aml, r);
    aml->in_dispatch--;
}

/* Where the data of r lands: the handler's buffer, or a bounce buffer for an unpack handler.
 * (r counts as arriving from its scout on: see rx_count.) */
void *aml_rndv_landing(aml_t * aml, aml_rmsg_t * r)
{
    if (r->recv.buf)
        return r->recv.buf;
    r->bounce = malloc(r->len);
    if (!r->bounce)
        aml_fatal(aml, "out of memory for a %zu-byte bounce buffer", r->len);
    return r->bounce;
}

/* Starts the pull of r into the landing its handler (or aml_accept) chose. */
static void rndv_pull(aml_t * aml, aml_rmsg_t * r)
{
    aml_peer_t *p = &aml->peers[r->src];
    ucp_request_param_t param;
    ucs_status_ptr_t req;
    void *dst = aml_rndv_landing(aml, r);

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = get_cb;
    param.user_data = r;
    req = ucp_get_nbx(p->ep, dst, r->len, r->src_addr, r->rkey, &param);
    if (UCS_PTR_IS_ERR(req))
        aml_fatal(aml, "rendezvous pull from rank %d failed: %s", r->src,
                  ucs_status_string(UCS_PTR_STATUS(req)));
    if (req == NULL)
        rndv_pulled(aml, r);
}

/* A rendezvous message counts as incomplete at its receiver from the scout on, deferred or
 * not, so a fence from its sender waits until it landed or was rejected (aml.h). */
static void rx_count(aml_t * aml, int src)
{
    aml->peers[src].rx_incomplete++;
    aml->rx_busy++;
}

void aml_rndv_recv_scout(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                         const void *data, size_t len)
{
    aml_peer_t *p = &aml->peers[pkt->src];
    aml_rmsg_t *r;

    bool put = pkt->flags & AML_PKTF_PUT, ucx = pkt->flags & AML_PKTF_UCX;

    aml_check_handler(aml, pkt);

    if (pkt->msg_len == 0)
        aml_fatal_pkt(aml, pkt, "rendezvous for an empty message");
    if (ucx) {
        if (len != pkt->msg_len || pkt->aux0)
            aml_fatal_pkt(aml, pkt, "UCX offers %zu bytes, header says %llu", len,
                          (unsigned long long) pkt->msg_len);
    } else if (put ? pkt->aux0 || len :
               (pkt->aux0 == 0 || pkt->aux0 > AML_RKEY_MAX || pkt->aux0 != len)) {
        aml_fatal_pkt(aml, pkt, "rkey of %zu bytes, header says %llu", len,
                      (unsigned long long) pkt->aux0);
    }
    if (pkt->addr + pkt->msg_len < pkt->addr)
        aml_fatal_pkt(aml, pkt, "source range wraps around");
    r = aml_rmsg_new(aml);
    if (!r)
        aml_fatal(aml, "out of memory receiving from rank %u", pkt->src);
    r->aml = aml;
    r->src = (int) pkt->src;
    r->type = AML_PKT_RNDV_SCOUT;
    r->msg_id = pkt->msg_id;
    r->len = pkt->msg_len;
    r->src_addr = pkt->addr;
    r->tgt_cntr = aml_check_cntr(aml, pkt);
    r->put = put;
    r->want_cmpl = pkt->flags & AML_PKTF_CMPL;
    if (ucx)
        r->ucx_desc = (void *) data;
    else if (!put && ucp_ep_rkey_unpack(p->ep, data, &r->rkey) != UCS_OK)
        aml_fatal_pkt(aml, pkt, "rkey does not unpack");
    rx_count(aml, r->src);
    aml_call_handler(aml, pkt, uhdr, NULL, &r->recv, r);
    if (r->recv.defer) {
        aml_defer_add(aml, r);
        return;
    }
    rndv_move(aml, r);
}

/* The dispatcher's fast path: a compact UCX-rendezvous scout in sequence whose source,
 * handler and lengths am_recv_cb checked; desc is UCP's data descriptor. No aml_pkt_t to
 * fill, no counter, no CMPL. */
void aml_rndv_recv_sscout(aml_t * aml, const aml_mpkt_t * m, const char *uhdr, void *desc)
{
    aml_rmsg_t *r = aml_rmsg_new(aml);

    if (!r)
        aml_fatal(aml, "out of memory receiving from rank %u", AML_SPKT_SRC(&m->s));
    r->aml = aml;
    r->src = (int) AML_SPKT_SRC(&m->s);
    r->type = AML_PKT_RNDV_SCOUT;
    r->msg_id = m->msg_id;
    r->len = m->msg_len;
    r->ucx_desc = desc;
    rx_count(aml, r->src);
    aml_run_handler(aml, m->s.handler, AML_PKT_RNDV_SSCOUT, (uint32_t) r->src, uhdr,
                    m->s.uhdr_len, r->len, NULL, AML_PROTO_RNDV, &r->recv, r);
    if (r->recv.defer) {
        aml_defer_add(aml, r);
        return;
    }
    rndv_ucx_recv(aml, r);
}

/* Moves a rendezvous message's data into the landing that is now known. */
static void rndv_move(aml_t * aml, aml_rmsg_t * r)
{
    if (r->ucx_desc)
        rndv_ucx_recv(aml, r);
    else if (r->put)
        aml_rndv_put_ready(aml, r);
    else
        rndv_pull(aml, r);
}

/* A message whose handler deferred its landing (rendezvous or adaptive eager). */
void aml_defer_add(aml_t * aml, aml_rmsg_t * r)
{
    r->deferred = true;
    aml_htab_put(&aml->deferred, &r->dh, r->handle);
}

/* The deferred message behind handle h, taken out of the table; NULL for a stale or foreign
 * handle (nothing is read through it). */
aml_rmsg_t *aml_undefer(aml_t * aml, aml_handle_t h)
{
    aml_hent_t *e = h ? aml_htab_del(&aml->deferred, h) : NULL;
    aml_rmsg_t *r;
    if (!e)
        return NULL;
    r = AML_CONTAINER(e, aml_rmsg_t, dh);
    r->deferred = false;
    return r;
}

int aml_accept(aml_t * aml, aml_handle_t h, const aml_recv_t * recv)
{
    aml_hent_t *e;
    aml_rmsg_t *msg;
    if (!aml || !recv || recv->defer || !(e = aml_htab_get(&aml->deferred, h)))
        return AML_ERR_INVAL;
    /* an empty message needs no landing */
    msg = AML_CONTAINER(e, aml_rmsg_t, dh);
    if (!recv->buf && !recv->unpack && msg->len)
        return AML_ERR_INVAL;
    aml_undefer(aml, h);
    if (msg->type == AML_PKT_ADAPT_FIRST)
        return aml_adaptive_accept(aml, msg, recv);
    msg->recv = *recv;
    rndv_move(aml, msg);
    return AML_OK;
}

int aml_reject(aml_t * aml, aml_handle_t h)
{
    aml_rmsg_t *msg = aml ? aml_undefer(aml, h) : NULL;
    if (!msg)
        return AML_ERR_INVAL;
    aml_rmsg_reject(aml, msg);
    return AML_OK;
}

/* Drops r (out of the deferred table) without landing it; its sender completes as if it had
 * been delivered, and a fence waiting for it may be acknowledged. */
void aml_rmsg_reject(aml_t * aml, aml_rmsg_t * r)
{
    if (r->type == AML_PKT_ADAPT_FIRST) {
        aml_adaptive_reject(aml, r);
        return;
    }
    if (r->ucx_desc) {
        /* UCX completes the sender's send; its completion counter counts it as delivered */
        ucp_am_data_release(aml->worker, r->ucx_desc);
        if (r->want_cmpl && aml_send_ctrl(aml, r->src, AML_PKT_CMPL, r->msg_id, 0) != AML_OK)
            aml_fatal(aml, "cannot send CMPL to rank %d", r->src);
    } else {
        if (r->rkey)
            ucp_rkey_destroy(r->rkey);
        if (aml_send_ctrl(aml, r->src, AML_PKT_RNDV_DONE, r->msg_id, 0) != AML_OK)
            aml_fatal(aml, "cannot send RNDV_DONE to rank %d", r->src);
    }
    aml_rx_counted_done(aml, r->src);
    aml_rmsg_free(aml, r);
}

/* At finalize: rendezvous messages nobody received (an erroneous program) are dropped; their
 * rkeys go before the endpoints. Deferred adaptive messages stay in aml->adapt_rx, which
 * aml_adaptive_free_all empties. */
void aml_rndv_free_deferred(aml_t * aml)
{
    for (aml_hent_t * e; (e = aml_htab_pop(&aml->deferred));) {
        aml_rmsg_t *r = AML_CONTAINER(e, aml_rmsg_t, dh);
        r->deferred = false;
        if (r->type == AML_PKT_ADAPT_FIRST)
            continue;
        if (r->rkey)
            ucp_rkey_destroy(r->rkey);
        if (r->ucx_desc)
            ucp_am_data_release(aml->worker, r->ucx_desc);
        free(r);
    }
}

void aml_rndv_recv_done(aml_t * aml, const aml_pkt_t * pkt)
{
    aml_hent_t *e = aml_htab_get(&aml->waits, pkt->msg_id);
    aml_smsg_t *m = e ? AML_CONTAINER(e, aml_smsg_t, h) : NULL;

    if (!m || m->peer != (int) pkt->src || m->proto != AML_PROTO_RNDV)
        aml_fatal_pkt(aml, pkt, "no rendezvous message %llu is waiting for this peer",
                      (unsigned long long) pkt->msg_id);
    if (m->ucx_rndv)
        aml_fatal_pkt(aml, pkt, "done for message %llu, which UCX moves itself",
                      (unsigned long long) pkt->msg_id);
    if (m->put_state != AML_PUT_NONE) {
        aml_rndv_put_recv_done(aml, pkt, m);
        return;
    }
    aml_htab_del(&aml->waits, pkt->msg_id);
    aml_cntr_incr(m->cmpl_cntr);
    aml_smsg_event_done(aml, m, true);
}
