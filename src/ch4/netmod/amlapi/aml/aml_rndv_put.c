/*
 * Rendezvous, put-based variant (aml_config.rndv_put), for transports where a remote get is
 * poor: the receiver pushes nothing and pulls nothing; it tells the sender where to write.
 *
 *   sender                                  receiver
 *   RNDV_SCOUT (uhdr, flag PUT, no rkey) ->  header handler picks the landing (or defers;
 *                                            aml_accept later does the same)
 *                                       <-   RNDV_RTR: landing address + its packed rkey
 *   transport put into the landing
 *   (complete when the data is in place)
 *   RNDV_FIN                             ->  data is in place: complete the message
 *                                       <-   RNDV_DONE (target completion: completion counter)
 *
 * The sender's buffer is reusable once the flush completed. A rejected message gets DONE
 * without an RTR. Both directions validate the message id, the peer, lengths and the rkey.
 */
#include "aml_impl.h"
#include <stdlib.h>
#include <string.h>

/* ---- sender --------------------------------------------------------------------------- */

int aml_rndv_put_send(aml_t * aml, const aml_xfer_t * x)
{
    aml_sdesc_t *d;
    /* DONE follows target completion: no CMPL */
    aml_smsg_t *m = aml_rndv_scout_new(aml, x, AML_PKTF_PUT, false, &d);
    int rc;

    if (!m)
        return AML_ERR_NOMEM;
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

/* The data is at the target: tell it, and the origin buffer is free. */
static void put_flushed(aml_t * aml, aml_smsg_t * m)
{
    aml->peers[m->peer].tport->rkey_destroy(aml, m->put_rkey);
    m->put_rkey = NULL;
    m->put_state = AML_PUT_WAIT_DONE;
    if (aml_send_ctrl(aml, m->peer, AML_PKT_RNDV_FIN, m->h.key, 0) != AML_OK)
        aml_fatal(aml, "cannot send RNDV_FIN to rank %d", m->peer);
    aml_smsg_event_done(aml, m, true);
}

/* The transport completed the put after it returned. */
static void put_op_done(aml_tport_op_t * op)
{
    put_flushed(op->aml, AML_CONTAINER(op, aml_smsg_t, op));
}

void aml_rndv_put_recv_rtr(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                           const void *data, size_t len)
{
    aml_hent_t *e = aml_htab_get(&aml->waits, pkt->msg_id);
    aml_smsg_t *m = e ? AML_CONTAINER(e, aml_smsg_t, h) : NULL;
    aml_peer_t *p = &aml->peers[pkt->src];

    if (!m || m->peer != (int) pkt->src || m->put_state != AML_PUT_WAIT_RTR)
        aml_fatal_pkt(aml, pkt, "ready-to-receive for message %llu, which awaits none from "
                      "this peer", (unsigned long long) pkt->msg_id);
    if (pkt->msg_len > m->len || pkt->aux0 == 0 || pkt->aux0 != len)
        aml_fatal_pkt(aml, pkt, "ready-to-receive of %llu bytes with a %zu-byte rkey (header "
                      "says %llu) for a %zu-byte message", (unsigned long long) pkt->msg_len,
                      len, (unsigned long long) pkt->aux0, m->len);
    if (pkt->addr + pkt->msg_len < pkt->addr)
        aml_fatal_pkt(aml, pkt, "landing range wraps around");
    if (p->tport->rkey_unpack(p->ep, data, len, &m->put_rkey) != AML_OK)
        aml_fatal_pkt(aml, pkt, "rkey does not unpack");
    m->put_state = AML_PUT_PUTTING;
    m->op.done = put_op_done;
    m->op.aml = aml;
    m->op.peer = m->peer;
    m->op.len = pkt->msg_len;  /* less than the message when the receive is truncated */
    if (m->op.len == 0 ||
        p->tport->put(p->ep, m->data, pkt->addr, m->put_rkey, &m->op) == AML_TPORT_DONE)
        put_flushed(aml, m);
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
    const aml_tport_t *t = aml->peers[r->src].tport;
    void *rkey_buf = NULL, *dst = aml_rmsg_landing(aml, r, true);
    size_t rkey_len;
    aml_sdesc_t *d;

    /* an empty landing (nothing wanted) is still exposed, one byte long, to keep one path */
    if (t->mem_map(aml, dst, r->moved ? r->moved : 1, &r->memh) != AML_OK ||
        t->rkey_pack(aml, r->memh, &rkey_buf, &rkey_len) != AML_OK ||
        rkey_len > aml->packet_size - sizeof(aml_pkt_t))
        aml_fatal(aml, "cannot expose a %zu-byte landing to rank %d for a rendezvous put",
                  r->len, r->src);
    d = aml_sdesc_get_big(aml);       /* it carries the rkey */
    if (!d)
        aml_fatal(aml, "out of memory sending to rank %d", r->src);
    aml_pkt_init(aml, &d->u.pkt, AML_PKT_RNDV_RTR, r->src);
    d->u.pkt.msg_id = r->msg_id;
    d->u.pkt.msg_len = r->moved;      /* what the sender puts: all, or what a truncated
                                         * receive keeps */
    d->u.pkt.addr = (uintptr_t) dst;
    d->u.pkt.aux0 = rkey_len;
    d->op.peer = r->src;
    d->hdr_len = sizeof(aml_pkt_t);
    /* the descriptor outlives the send, the packed rkey need not */
    memcpy(AML_SDESC_PAYLOAD(d), rkey_buf, rkey_len);
    t->rkey_buf_release(aml, rkey_buf);
    aml_htab_put_owned(&aml->put_rx, &r->h, r->msg_id, r->src);
    if (aml_send_desc(aml, d, AML_SDESC_PAYLOAD(d), rkey_len) != AML_OK)
        aml_fatal(aml, "cannot send RNDV_RTR to rank %d", r->src);
}

void aml_rndv_put_recv_fin(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                           const void *data, size_t len)
{
    aml_hent_t *e = aml_htab_del_owned(&aml->put_rx, pkt->msg_id, (int) pkt->src);
    aml_rmsg_t *r;
    if (!e)
        aml_fatal_pkt(aml, pkt, "data put for message %llu, which awaits none from this peer",
                      (unsigned long long) pkt->msg_id);
    r = AML_CONTAINER(e, aml_rmsg_t, h);
    aml->peers[r->src].tport->mem_unmap(aml, r->memh);
    aml_rmsg_landed(aml, r, false);
    if (aml_send_ctrl(aml, r->src, AML_PKT_RNDV_DONE, r->msg_id, 0) != AML_OK)
        aml_fatal(aml, "cannot send RNDV_DONE to rank %d", r->src);
    aml_rmsg_free(aml, r);
}

/* At finalize: landings exposed to senders that never put (an aborted program). */
void aml_rndv_put_free_all(aml_t * aml)
{
    for (aml_hent_t * e; (e = aml_htab_pop(&aml->put_rx));) {
        aml_rmsg_t *r = AML_CONTAINER(e, aml_rmsg_t, h);
        aml->peers[r->src].tport->mem_unmap(aml, r->memh);
        free(r->bounce);
        free(r);
    }
}
