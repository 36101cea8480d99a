/*
 * Rendezvous, put-based variant (aml_config.rndv_put), for transports where a remote get is
 * poor: the receiver pushes nothing and pulls nothing; it tells the sender where to write.
 *
 *   sender                                  receiver
 *   RNDV_SCOUT (uhdr, flag PUT, no rkey) ->  header handler picks the landing (or defers;
 *                                            aml_accept later does the same)
 *                                       <-   RNDV_RTR: landing address + its packed rkey
 *   ucp_put_nbx into the landing, then
 *   ucp_ep_flush_nbx (remote completion)
 *   RNDV_FIN                             ->  data is in place: complete the message
 *                                       <-   RNDV_DONE (target completion: completion counter)
 *
 * The sender's buffer is reusable once the flush completed. A rejected message gets DONE
 * without an RTR. Both directions validate the message id, the peer, lengths and the rkey.
 */
#include "aml_impl.h"
#include <stdlib.h>
#include <string.h>

static uint64_t rx_key(aml_t * aml, int src, uint64_t msg_id)
{
    return msg_id * (uint64_t) aml->size + (uint64_t) src;
}

/* ---- sender --------------------------------------------------------------------------- */

int aml_rndv_put_send(aml_t * aml, const aml_xfer_t * x)
{
    aml_sdesc_t *d;
    /* DONE follows target completion: no CMPL */
    aml_smsg_t *m = aml_rndv_scout_new(aml, x, AML_PKTF_PUT, false, &d);
    int rc;

    if (!m)
        return AML_ERR_NOMEM;
    m->aml = aml;
    m->put_state = AML_PUT_WAIT_RTR;
    m->data = x->data;
    m->len = x->len;

    /* events: the scout's send and the data phase (flush, or a DONE without RTR) gate buffer
     * reuse; the DONE does not; plus the guard */
    m->pending += 3;
    m->org_pending += 2;
    aml_htab_put(&aml->waits, &m->h, d->u.pkt.msg_id);
    aml_stat(aml, AML_PROTO_RNDV, x->len);
    rc = aml_send_desc(aml, d, NULL, 0);
    if (rc != AML_OK)
        aml_fatal(aml, "rendezvous scout to rank %d failed: %s", x->peer, aml_strerror(rc));
    aml_smsg_event_done(aml, m, true);  /* drop the guard */
    return AML_OK;
}

static void flush_cb(void *request, ucs_status_t status, void *user_data)
{
    aml_smsg_t *m = user_data;
    aml_t *aml = m->aml;
    if (status != UCS_OK)
        aml_fatal(aml, "rendezvous put of %zu bytes to rank %d failed: %s", m->len, m->peer,
                  ucs_status_string(status));
    ucp_request_free(request);
    aml->in_dispatch++;
    aml_rndv_put_flushed(aml, m);
    aml->in_dispatch--;
}

/* The data is at the target: tell it, and the origin buffer is free. */
void aml_rndv_put_flushed(aml_t * aml, aml_smsg_t * m)
{
    ucp_rkey_destroy(m->put_rkey);
    m->put_rkey = NULL;
    m->put_state = AML_PUT_WAIT_DONE;
    if (aml_send_ctrl(aml, m->peer, AML_PKT_RNDV_FIN, m->h.key, 0) != AML_OK)
        aml_fatal(aml, "cannot send RNDV_FIN to rank %d", m->peer);
    aml_smsg_event_done(aml, m, true);
}

void aml_rndv_put_recv_rtr(aml_t * aml, const aml_pkt_t * pkt, const void *data, size_t len)
{
    aml_hent_t *e = aml_htab_get(&aml->waits, pkt->msg_id);
    aml_smsg_t *m = e ? AML_CONTAINER(e, aml_smsg_t, h) : NULL;
    aml_peer_t *p = &aml->peers[pkt->src];
    ucp_request_param_t param;
    ucs_status_ptr_t req;

    if (!m || m->peer != (int) pkt->src || m->put_state != AML_PUT_WAIT_RTR)
        aml_fatal_pkt(aml, pkt, "ready-to-receive for message %llu, which awaits none from "
                      "this peer", (unsigned long long) pkt->msg_id);
    if (pkt->msg_len != m->len || pkt->aux0 == 0 || pkt->aux0 != len)
        aml_fatal_pkt(aml, pkt, "ready-to-receive of %llu bytes with a %zu-byte rkey (header "
                      "says %llu) for a %zu-byte message", (unsigned long long) pkt->msg_len,
                      len, (unsigned long long) pkt->aux0, m->len);
    if (pkt->addr + m->len < pkt->addr)
        aml_fatal_pkt(aml, pkt, "landing range wraps around");
    if (ucp_ep_rkey_unpack(p->ep, data, &m->put_rkey) != UCS_OK)
        aml_fatal_pkt(aml, pkt, "rkey does not unpack");
    m->put_state = AML_PUT_PUTTING;

    memset(&param, 0, sizeof(param));
    req = ucp_put_nbx(p->ep, m->data, m->len, pkt->addr, m->put_rkey, &param);
    if (UCS_PTR_IS_ERR(req))
        aml_fatal(aml, "rendezvous put to rank %d failed: %s", m->peer,
                  ucs_status_string(UCS_PTR_STATUS(req)));
    if (req)
        ucp_request_free(req);  /* the flush below tells when it is done */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = flush_cb;
    param.user_data = m;
    req = ucp_ep_flush_nbx(p->ep, &param);
    if (UCS_PTR_IS_ERR(req))
        aml_fatal(aml, "flushing the rendezvous put to rank %d failed: %s", m->peer,
                  ucs_status_string(UCS_PTR_STATUS(req)));
    if (req == NULL)
        aml_rndv_put_flushed(aml, m);
}

/* RNDV_DONE for a put-variant message: the target completed it, or rejected it unseen. */
void aml_rndv_put_recv_done(aml_t * aml, const aml_pkt_t * pkt, aml_smsg_t * m)
{
    if (m->put_state == AML_PUT_PUTTING)
        aml_fatal_pkt(aml, pkt, "done for message %llu before its data was put",
                      (unsigned long long) pkt->msg_id);
    aml_htab_del(&aml->waits, pkt->msg_id);
    if (m->put_state == AML_PUT_WAIT_RTR)
        aml_smsg_event_done(aml, m, true);      /* rejected: no data phase */
    /* target completion, or a rejection, which counts as delivered (as for the other
     * variants) */
    aml_cntr_incr(m->cmpl_cntr);
    aml_smsg_event_done(aml, m, false);
}

/* ---- receiver ------------------------------------------------------------------------- */

/* The landing is known (header handler or aml_accept): expose it and ask for the data. */
void aml_rndv_put_ready(aml_t * aml, aml_rmsg_t * r)
{
    ucp_mem_map_params_t mp;
    void *rkey_buf = NULL, *dst = aml_rndv_landing(aml, r);
    size_t rkey_len;
    aml_sdesc_t *d;

    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = dst;
    mp.length = r->len;
    if (ucp_mem_map(aml->ctx, &mp, &r->memh) != UCS_OK ||
        ucp_rkey_pack(aml->ctx, r->memh, &rkey_buf, &rkey_len) != UCS_OK ||
        rkey_len > aml->packet_size - sizeof(aml_pkt_t))
        aml_fatal(aml, "cannot expose a %zu-byte landing to rank %d for a rendezvous put",
                  r->len, r->src);
    d = aml_sdesc_get(aml);
    if (!d)
        aml_fatal(aml, "out of memory sending to rank %d", r->src);
    aml_pkt_init(aml, &d->u.pkt, AML_PKT_RNDV_RTR, r->src);
    d->u.pkt.msg_id = r->msg_id;
    d->u.pkt.msg_len = r->len;
    d->u.pkt.addr = (uintptr_t) dst;
    d->u.pkt.aux0 = rkey_len;
    d->peer = r->src;
    d->hdr_len = sizeof(aml_pkt_t);
    /* the descriptor outlives the send, the packed rkey need not */
    memcpy(AML_SDESC_PAYLOAD(d), rkey_buf, rkey_len);
    ucp_rkey_buffer_release(rkey_buf);
    aml_htab_put(&aml->put_rx, &r->h, rx_key(aml, r->src, r->msg_id));
    if (aml_send_desc(aml, d, AML_SDESC_PAYLOAD(d), rkey_len) != AML_OK)
        aml_fatal(aml, "cannot send RNDV_RTR to rank %d", r->src);
}

void aml_rndv_put_recv_fin(aml_t * aml, const aml_pkt_t * pkt)
{
    aml_hent_t *e = aml_htab_del(&aml->put_rx, rx_key(aml, (int) pkt->src, pkt->msg_id));
    aml_rmsg_t *r;
    if (!e)
        aml_fatal_pkt(aml, pkt, "data put for message %llu, which awaits none from this peer",
                      (unsigned long long) pkt->msg_id);
    r = AML_CONTAINER(e, aml_rmsg_t, h);
    ucp_mem_unmap(aml->ctx, r->memh);
    if (r->bounce) {
        aml_deliver(aml, &r->recv, 0, r->bounce, r->len);
        free(r->bounce);
    }
    aml_rx_complete(aml, r->src, r->tgt_cntr, &r->recv, false, r->msg_id, true);
    if (aml_send_ctrl(aml, r->src, AML_PKT_RNDV_DONE, r->msg_id, 0) != AML_OK)
        aml_fatal(aml, "cannot send RNDV_DONE to rank %d", r->src);
    aml_rmsg_free(aml, r);
}

/* At finalize: landings exposed to senders that never put (an aborted program). */
void aml_rndv_put_free_all(aml_t * aml)
{
    for (aml_hent_t * e; (e = aml_htab_pop(&aml->put_rx));) {
        aml_rmsg_t *r = AML_CONTAINER(e, aml_rmsg_t, h);
        ucp_mem_unmap(aml->ctx, r->memh);
        free(r->bounce);
        free(r);
    }
}
