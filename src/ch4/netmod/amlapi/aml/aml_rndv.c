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

int aml_rndv_send(aml_t * aml, const aml_xfer_t * x)
{
    aml_smsg_t *m = aml_smsg_new(aml, x, AML_PROTO_RNDV);
    ucp_mem_map_params_t mp;
    size_t rkey_len;
    aml_sdesc_t *d;
    int rc;

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
    d->u.pkt.handler = (uint16_t) x->handler;
    d->u.pkt.uhdr_len = (uint32_t) x->uhdr_len;
    d->u.pkt.msg_len = x->len;
    d->u.pkt.msg_id = aml->next_msg_id++;
    d->u.pkt.addr = (uintptr_t) x->data;
    d->u.pkt.cntr = (uintptr_t) x->tgt_cntr;
    d->u.pkt.aux0 = rkey_len;
    d->peer = x->peer;
    d->msg = m;
    d->hdr_len = sizeof(aml_pkt_t) + x->uhdr_len;
    if (x->uhdr_len)
        memcpy(AML_SDESC_PAYLOAD(d), x->uhdr, x->uhdr_len);

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
    free(r);
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

/* Starts the pull of r into the landing its handler (or aml_accept) chose. */
static void rndv_pull(aml_t * aml, aml_rmsg_t * r)
{
    aml_peer_t *p = &aml->peers[r->src];
    ucp_request_param_t param;
    ucs_status_ptr_t req;
    void *dst;

    p->rx_incomplete++;
    aml->rx_busy++;
    if (r->recv.buf) {
        dst = r->recv.buf;
    } else {
        dst = r->bounce = malloc(r->len);
        if (!dst)
            aml_fatal(aml, "out of memory for a %zu-byte bounce buffer", r->len);
    }
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

void aml_rndv_recv_scout(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                         const void *data, size_t len)
{
    const aml_handler_t *h = aml_check_handler(aml, pkt);
    aml_peer_t *p = &aml->peers[pkt->src];
    aml_rmsg_t *r;

    if (pkt->msg_len == 0)
        aml_fatal_pkt(aml, pkt, "rendezvous for an empty message");
    if (pkt->aux0 == 0 || pkt->aux0 > AML_RKEY_MAX || pkt->aux0 != len)
        aml_fatal_pkt(aml, pkt, "rkey of %zu bytes, header says %llu", len,
                      (unsigned long long) pkt->aux0);
    if (pkt->addr + pkt->msg_len < pkt->addr)
        aml_fatal_pkt(aml, pkt, "source range wraps around");
    r = calloc(1, sizeof(*r));
    if (!r)
        aml_fatal(aml, "out of memory receiving from rank %u", pkt->src);
    r->aml = aml;
    r->src = (int) pkt->src;
    r->type = AML_PKT_RNDV_SCOUT;
    r->msg_id = pkt->msg_id;
    r->len = pkt->msg_len;
    r->src_addr = pkt->addr;
    r->tgt_cntr = aml_check_cntr(aml, pkt);
    if (ucp_ep_rkey_unpack(p->ep, data, &r->rkey) != UCS_OK)
        aml_fatal_pkt(aml, pkt, "rkey does not unpack");
    aml_call_handler(aml, pkt, h, uhdr, NULL, &r->recv, r);
    if (r->recv.defer) {
        r->deferred = true;
        r->dnext = aml->deferred;
        if (aml->deferred)
            aml->deferred->dprev = r;
        aml->deferred = r;
        return;
    }
    rndv_pull(aml, r);
}

static int undefer(aml_t * aml, aml_rmsg_t * r)
{
    if (!aml || !r || !r->deferred)
        return AML_ERR_INVAL;
    r->deferred = false;
    if (r->dprev)
        r->dprev->dnext = r->dnext;
    else
        aml->deferred = r->dnext;
    if (r->dnext)
        r->dnext->dprev = r->dprev;
    return AML_OK;
}

int aml_accept(aml_t * aml, aml_msg_t * msg, const aml_recv_t * recv)
{
    if (!recv || (!recv->buf && !recv->unpack) || recv->defer)
        return AML_ERR_INVAL;
    if (undefer(aml, msg) != AML_OK)
        return AML_ERR_INVAL;
    msg->recv = *recv;
    rndv_pull(aml, msg);
    return AML_OK;
}

int aml_reject(aml_t * aml, aml_msg_t * msg)
{
    if (undefer(aml, msg) != AML_OK)
        return AML_ERR_INVAL;
    ucp_rkey_destroy(msg->rkey);
    if (aml_send_ctrl(aml, msg->src, AML_PKT_RNDV_DONE, msg->msg_id, 0) != AML_OK)
        aml_fatal(aml, "cannot send RNDV_DONE to rank %d", msg->src);
    free(msg);
    return AML_OK;
}

/* At finalize: messages nobody received (an erroneous program) are dropped. */
void aml_rndv_free_deferred(aml_t * aml)
{
    while (aml->deferred) {
        aml_rmsg_t *r = aml->deferred;
        aml->deferred = r->dnext;
        ucp_rkey_destroy(r->rkey);
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
    aml_htab_del(&aml->waits, pkt->msg_id);
    aml_cntr_incr(m->cmpl_cntr);
    aml_smsg_event_done(aml, m, true);
}
