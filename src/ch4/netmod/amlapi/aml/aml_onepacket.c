/*
 * One-packet protocol (Almási et al. 2005, Table 1): packet header, user header and data fit one
 * packet; no request object, no allocation beyond the descriptor free list on either side.
 * The receiver's header handler sees the data in place and may consume it directly.
 * A full-header packet (a counter is named) copies the data into its send descriptor, so the
 * origin completes at injection. Small compact packets are copied into the transport at once
 * (send_inline), so they complete at injection too; larger ones go from the caller's buffer
 * and complete when the transport has taken the data: an embedder must not wait for that
 * inside a call that has to return (MPI_Isend: the glue keeps a request, see MPICH's
 * pt2pt/sendrecv3).
 *
 * A message naming no counter (every MPI message) travels as a compact packet (aml_spkt_t):
 * it keeps small MPI messages inside UCX's inline limit and within one cache line, it has lean
 * paths on both sides (aml_amsend_small, aml_onepacket_recv_compact), and above the inline
 * size it goes from the caller's buffer without a copy of ours (send_zcopy): the origin then
 * completes when the transport has taken the data, at once unless the peer's FIFO is full.
 */
#include "aml_impl.h"
#include "aml_rx_fast.h"
#include <string.h>

/* An inline compact packet, [aml_spkt_t | uhdr | data] as the transport's packet header with
 * no payload: one contiguous header, so UCX's inline send copies two pieces (its own header
 * and ours), and the receiver finds the user header right after ours. Written in place where
 * the transport offers that (vnode's reserve/commit: into the ring, no copy), else built on
 * the stack and offered to the transport's send_inline, which copies it at once or refuses
 * (full FIFO, or above its inline size); only then does it go by a send descriptor, which
 * lives until the transport completes it. Either way the caller's buffers are free on return. */
static int send_inline(aml_t * aml, int peer, unsigned handler, const void *uhdr,
                       size_t uhdr_len, const void *data, size_t len)
{
    uint64_t buf[(AML_TPORT_HEADROOM + AML_COMPACT_MAX) / 8];
    void *pkt = (char *) buf + AML_TPORT_HEADROOM;
    aml_spkt_t *s = pkt;
    aml_peer_t *p = &aml->peers[peer];
    size_t total = sizeof(*s) + uhdr_len + len;
    aml_sdesc_t *d;
    void *at = NULL;

    /* written straight into the transport (vnode's ring) when it offers that */
    if (p->tport->reserve && !aml_reorder(aml))
        at = p->tport->reserve(aml, p, total);
    if (at)
        s = at;
    aml_spkt_fill(s, p, true, AML_PKT_ONE_SHORT, handler, uhdr_len);
    aml_copy_small(s + 1, uhdr, uhdr_len);
    aml_copy_small((char *) (s + 1) + uhdr_len, data, len);
    aml_stat(aml, AML_PROTO_ONEPACKET, len);
    p->dirty = true;
    if (at) {
        p->tport->commit(aml, p);
        return AML_OK;
    }

    if (!aml_reorder(aml) &&
        AML_LIKELY(p->tport->send_inline(aml, p, pkt, total) == AML_TPORT_DONE))
        return AML_OK;
    d = total <= aml->sdesc_small ? aml_sdesc_get(aml) : aml_sdesc_get_big(aml);
    if (AML_UNLIKELY(!d)) {
        /* never handed to the transport: give the sequence number back, or the peer waits for
         * it */
        p->tx_seq--;
        aml->msgs[AML_PROTO_ONEPACKET]--;
        aml->bytes[AML_PROTO_ONEPACKET] -= (int64_t) len;
        return AML_ERR_NOMEM;
    }
    memcpy(&d->u.pkt, pkt, total);
    d->op.peer = peer;
    d->hdr_len = total;
    return aml_send_desc_flags(aml, d, p->ep, NULL, 0, 0);
}

/* A compact packet above the inline size: [aml_spkt_t | uhdr] in a descriptor, the data sent
 * as the payload straight from the caller's buffer. UCX copies it at once unless the peer's
 * FIFO is full; the origin completes when the transport is done with it, which is before
 * this returns in the common case (no copy of ours, unlike the full-header path). */
static int send_zcopy(aml_t * aml, const aml_xfer_t * x)
{
    aml_sdesc_t *d = aml_sdesc_get_uhdr(aml, x->uhdr_len);
    aml_peer_t *p = &aml->peers[x->peer];
    aml_spkt_t *s;

    if (AML_UNLIKELY(!d))
        return AML_ERR_NOMEM;
    s = (aml_spkt_t *) & d->u.pkt;
    aml_spkt_fill(s, p, true, AML_PKT_ONE_SHORT, x->handler, x->uhdr_len);
    if (x->uhdr_len)
        memcpy(s + 1, x->uhdr, x->uhdr_len);
    d->op.peer = x->peer;
    d->hdr_len = sizeof(*s) + x->uhdr_len;
    d->org_cntr = x->org_cntr;
    d->org_fn = x->org_fn;
    d->org_arg = x->org_arg;
    aml_stat(aml, AML_PROTO_ONEPACKET, x->len);
    return aml_send_desc_flags(aml, d, p->ep, x->data, x->len, 0);
}

/* aml_amsend_small (aml_xfer.c) once its arguments are checked and peer is connected */
int aml_onepacket_send_small(aml_t * aml, int peer, unsigned handler, const void *uhdr,
                             size_t uhdr_len, const void *data, size_t len)
{
    return send_inline(aml, peer, handler, uhdr, uhdr_len, data, len);
}

int aml_onepacket_send(aml_t * aml, const aml_xfer_t * x)
{
    aml_sdesc_t *d;
    char *payload;
    int rc;

    if (aml_compact_ok(aml, x)) {
        if (sizeof(aml_spkt_t) + x->uhdr_len + x->len > aml->compact_max)
            return send_zcopy(aml, x);
        rc = send_inline(aml, x->peer, x->handler, x->uhdr, x->uhdr_len, x->data, x->len);
        if (rc == AML_OK)
            aml_org_done(aml, x->org_cntr, x->org_fn, x->org_arg);
        return rc;
    }
    d = aml_sdesc_get_big(aml);       /* the data is copied: the origin completes now */
    if (AML_UNLIKELY(!d))
        return AML_ERR_NOMEM;
    aml_pkt_init(aml, &d->u.pkt, AML_PKT_ONE, x->peer);
    d->u.pkt.proto = AML_PROTO_ONEPACKET;
    d->u.pkt.msg_len = x->len;
    aml_pkt_set_first(d, x, false);     /* CMPL below, with a message id */
    d->op.peer = x->peer;
    payload = AML_SDESC_PAYLOAD(d);
    if (x->len)
        memcpy(payload + x->uhdr_len, x->data, x->len);

    if (x->cmpl_cntr) {
        /* the origin wants to learn about target completion: track until CMPL */
        aml_smsg_t *m = aml_smsg_new(aml, x, AML_PROTO_ONEPACKET);
        if (!m) {
            aml_sdesc_put(aml, d);
            return AML_ERR_NOMEM;
        }
        /* the origin completes below at injection; m only waits for the CMPL */
        m->org_done = true;
        m->org_pending = 0;
        d->u.pkt.flags |= AML_PKTF_CMPL;
        d->u.pkt.msg_id = aml->next_msg_id++;
        aml_htab_put(&aml->waits, &m->h, d->u.pkt.msg_id);
    }

    aml_stat(aml, AML_PROTO_ONEPACKET, x->len);
    rc = aml_send_desc(aml, d, payload + x->uhdr_len, x->len);
    if (rc != AML_OK)
        return rc;
    /* the data was copied: the origin may reuse its buffer now */
    aml_org_done(aml, x->org_cntr, x->org_fn, x->org_arg);
    return AML_OK;
}

/* A compact packet, in sequence, whose handler and lengths the dispatcher's fast path
 * (aml_dispatch.c, rx_onepacket) checked, and which the handler's small-message handler, if
 * any, left to the header handler; data and len: in the transport's header after the user
 * header, or the payload. No counter, no CMPL, no aml_pkt_t to fill. */
void aml_onepacket_recv_compact(aml_t * aml, const aml_spkt_t * s, const char *uhdr,
                                const char *data, size_t len)
{
    aml_recv_t recv;
    aml_handler_run(aml, s->handler, AML_PKT_ONE_SHORT, AML_SPKT_SRC(s), uhdr, s->uhdr_len, len,
                    data, AML_PROTO_ONEPACKET, &recv, NULL);
    aml_deliver(aml, &recv, 0, data, len);
    if (recv.compl_fn)
        recv.compl_fn(aml, recv.compl_arg);
}

void aml_onepacket_recv(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr, const void *data,
                        size_t len)
{
    aml_cntr_t *tgt;
    aml_recv_t recv;

    tgt = aml_check_cntr(aml, pkt);
    if (pkt->msg_len != len)
        aml_fatal_pkt(aml, pkt, "carries %zu data bytes, header says %llu", len,
                      (unsigned long long) pkt->msg_len);
    aml_call_handler(aml, pkt, uhdr, data, &recv, NULL);
    aml_deliver(aml, &recv, 0, data, len);
    aml_rx_complete(aml, (int) pkt->src, tgt, &recv, pkt->flags & AML_PKTF_CMPL, pkt->msg_id,
                    false);
}
