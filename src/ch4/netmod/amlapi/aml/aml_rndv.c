/*
 * Rendezvous protocol, get variant, and the receiver of every rendezvous scout.
 *
 * Get: the sender registers its buffer and sends an ordered scout carrying the user header,
 * the buffer's address and its packed rkey. The receiver's header handler picks the landing
 * buffer; the receiver pulls the data straight into it with the transport's get (into a
 * bounce buffer when the handler asked for unpacking), completes the message and sends DONE,
 * which releases the sender's buffer. DONE follows target completion, so it also drives the
 * sender's completion counter.
 *
 * The scout of each variant (get, put: aml_rndv_put.c, transport rendezvous:
 * aml_rndv_tport.c) is received here; once the landing is known (from the header handler, or
 * aml_accept of a deferred message) the variant moves the data.
 */
#include "aml_impl.h"
#include <stdlib.h>
#include <string.h>

#define AML_RKEY_MAX 4096

/* ---- sender --------------------------------------------------------------------------- */

int aml_rndv_get_send(aml_t * aml, const aml_xfer_t * x)
{
    const aml_tport_t *t = aml->peers[x->peer].tport;
    aml_smsg_t *m;
    size_t rkey_len;
    aml_sdesc_t *d;
    int rc;

    m = aml_smsg_new(aml, x, AML_PROTO_RNDV);
    if (!m)
        return AML_ERR_NOMEM;
    if (t->mem_map(aml, (void *) x->data, x->len, &m->memh) != AML_OK) {
        free(m);
        return AML_ERR_TRANSPORT;
    }
    if (t->rkey_pack(aml, m->memh, &m->rkey_buf, &rkey_len) != AML_OK ||
        rkey_len > AML_RKEY_MAX) {
        aml_smsg_release(aml, m);
        return AML_ERR_TRANSPORT;
    }
    d = aml_sdesc_get_uhdr(aml, x->uhdr_len);
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
    d->op.peer = x->peer;
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

void aml_rndv_recv_done(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                        const void *data, size_t len)
{
    aml_hent_t *e = aml_htab_get(&aml->waits, pkt->msg_id);
    aml_smsg_t *m = e ? AML_CONTAINER(e, aml_smsg_t, h) : NULL;

    if (!m || m->peer != (int) pkt->src || m->proto != AML_PROTO_RNDV)
        aml_fatal_pkt(aml, pkt, "no rendezvous message %llu is waiting for this peer",
                      (unsigned long long) pkt->msg_id);
    if (m->tport_rndv)
        aml_fatal_pkt(aml, pkt, "done for message %llu, which %s moves itself",
                      (unsigned long long) pkt->msg_id, aml->peers[m->peer].tport->name);
    if (m->put_state != AML_PUT_NONE) {
        aml_rndv_put_recv_done(aml, pkt, m);
        return;
    }
    aml_htab_del(&aml->waits, pkt->msg_id);
    aml_cntr_incr(m->cmpl_cntr);
    aml_smsg_event_done(aml, m, true);
}

/* ---- receiver ------------------------------------------------------------------------- */

static void pulled(aml_t * aml, aml_rmsg_t * r)
{
    aml->peers[r->src].tport->rkey_destroy(aml, r->rkey);
    aml_rmsg_landed(aml, r, false);
    if (aml_send_ctrl(aml, r->src, AML_PKT_RNDV_DONE, r->msg_id, 0) != AML_OK)
        aml_fatal(aml, "cannot send RNDV_DONE to rank %d", r->src);
    aml_rmsg_free(aml, r);
}

static void pulled_op_done(aml_tport_op_t * op)
{
    pulled(op->aml, AML_CONTAINER(op, aml_rmsg_t, op));
}

/* Starts the pull of r into the landing its handler (or aml_accept) chose. */
static void pull(aml_t * aml, aml_rmsg_t * r)
{
    aml_peer_t *p = &aml->peers[r->src];
    void *dst = aml_rmsg_landing(aml, r, true);
    r->op.done = pulled_op_done;
    r->op.aml = aml;
    r->op.peer = r->src;
    r->op.len = r->moved;
    if (r->moved == 0 ||
        p->tport->get(p->ep, dst, r->src_addr, r->rkey, &r->op) == AML_TPORT_DONE)
        pulled(aml, r);
}

/* Moves a rendezvous message's data into the landing that is now known. */
static void move(aml_t * aml, aml_rmsg_t * r)
{
    if (r->tport_desc)
        aml_rndv_tport_recv(aml, r);
    else if (r->put)
        aml_rndv_put_ready(aml, r);
    else
        pull(aml, r);
}

/* A full-header scout of any variant, or a compact one that missed the fast path. */
void aml_rndv_recv_scout(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                         const void *data, size_t len)
{
    aml_peer_t *p = &aml->peers[pkt->src];
    aml_rmsg_t *r;
    aml_cntr_t *tgt;
    aml_tport_rkey_t rkey = NULL;

    bool put = pkt->flags & AML_PKTF_PUT, tport = pkt->flags & AML_PKTF_TRNDV;

    if (!aml_scout_len_ok(pkt->msg_len))
        aml_fatal_pkt(aml, pkt, "rendezvous for an empty message");
    if (tport) {
        if (!aml_trndv_len_ok(len, pkt->msg_len, pkt->aux0))
            aml_fatal_pkt(aml, pkt, "%s offers %zu bytes, header says %llu", p->tport->name,
                          len, (unsigned long long) pkt->msg_len);
    } else if (put ? pkt->aux0 || len :
               (pkt->aux0 == 0 || pkt->aux0 > AML_RKEY_MAX || pkt->aux0 != len)) {
        aml_fatal_pkt(aml, pkt, "rkey of %zu bytes, header says %llu", len,
                      (unsigned long long) pkt->aux0);
    }
    if (pkt->addr + pkt->msg_len < pkt->addr)
        aml_fatal_pkt(aml, pkt, "source range wraps around");
    /* every check before the record exists */
    tgt = aml_check_cntr(aml, pkt);
    if (!tport && !put && p->tport->rkey_unpack(p->ep, data, len, &rkey) != AML_OK)
        aml_fatal_pkt(aml, pkt, "rkey does not unpack");
    r = aml_rmsg_start(aml, (int) pkt->src, AML_PKT_RNDV_SCOUT, pkt->msg_id, pkt->msg_len);
    r->src_addr = pkt->addr;
    r->tgt_cntr = tgt;
    r->put = put;
    r->want_cmpl = pkt->flags & AML_PKTF_CMPL;
    r->rkey = rkey;
    if (tport)
        r->tport_desc = (void *) data;
    aml_rx_count(aml, r->src);
    aml_call_handler(aml, pkt, uhdr, NULL, &r->recv, r);
    if (r->recv.defer) {
        aml_defer_add(aml, r);
        return;
    }
    move(aml, r);
}

/* aml_accept of a deferred rendezvous message (already out of aml->deferred). */
void aml_rndv_accept(aml_t * aml, aml_rmsg_t * r, const aml_recv_t * recv)
{
    r->recv = *recv;
    move(aml, r);
}

/* Drops r without landing it; its sender completes as if it had been delivered, and a fence
 * waiting for it may be acknowledged. */
void aml_rndv_reject(aml_t * aml, aml_rmsg_t * r)
{
    const aml_tport_t *t = aml->peers[r->src].tport;
    if (r->tport_desc) {
        /* the transport completes the sender's send; its completion counter counts it as
         * delivered */
        t->rndv_release(aml, r->tport_desc);
        if (r->want_cmpl && aml_send_ctrl(aml, r->src, AML_PKT_CMPL, r->msg_id, 0) != AML_OK)
            aml_fatal(aml, "cannot send CMPL to rank %d", r->src);
    } else {
        if (r->rkey)
            t->rkey_destroy(aml, r->rkey);
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
        const aml_tport_t *t = aml->peers[r->src].tport;
        r->deferred = false;
        if (r->type == AML_PKT_ADAPT_FIRST)
            continue;
        if (r->rkey)
            t->rkey_destroy(aml, r->rkey);
        if (r->tport_desc)
            t->rndv_release(aml, r->tport_desc);
        free(r);
    }
}
