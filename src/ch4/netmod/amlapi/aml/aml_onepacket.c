/*
 * One-packet protocol (seed 002 Table 1): packet header, user header and data fit one
 * packet; no request object, no allocation beyond the descriptor free list on either side.
 * The receiver's header handler sees the data in place and may consume it directly.
 * A full-header packet (a counter is named) copies the data into its send descriptor, so the
 * origin completes at injection. Small compact packets are copied into the transport at once
 * (send_inline), so they complete at injection too; larger ones go from the caller's buffer
 * and complete when UCX has taken the data: an embedder must not wait for that inside a call
 * that has to return (MPI_Isend: the glue keeps a request, see MPICH's pt2pt/sendrecv3).
 *
 * A message naming no counter (every MPI message) travels as a compact packet (aml_spkt_t):
 * it keeps small MPI messages inside UCX's inline limit and within one cache line, it has lean
 * paths on both sides (aml_amsend_small, aml_onepacket_recv_compact), and above the inline
 * size it goes from the caller's buffer without a copy of ours (send_zcopy): the origin then
 * completes when UCX has taken the data, at once unless the peer's FIFO is full.
 */
#include "aml_impl.h"
#include <string.h>

/* An inline compact packet, [aml_spkt_t | uhdr | data] as UCX's AM header with no UCX
 * payload: one contiguous header, so UCX's inline send copies two pieces (its own header and
 * ours), and the receiver finds the user header right after ours. Built on the stack and sent
 * with UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL: UCX either copies it into the transport at once or
 * refuses (full FIFO, or above the inline size); only then does it go by a send descriptor,
 * which lives until UCX completes it. Either way the caller's buffers are free on return. */
static int send_inline(aml_t * aml, int peer, unsigned handler, const void *uhdr,
                       size_t uhdr_len, const void *data, size_t len)
{
    uint64_t buf[AML_COMPACT_MAX / 8];
    aml_spkt_t *s = (aml_spkt_t *) buf;
    aml_peer_t *p = &aml->peers[peer];
    size_t total = sizeof(*s) + uhdr_len + len;
    ucp_request_param_t param;
    ucs_status_ptr_t r;
    aml_sdesc_t *d;

    aml_spkt_fill(aml, s, p, AML_PKT_ONE_SHORT, handler, uhdr_len);
    if (uhdr_len)
        memcpy(s + 1, uhdr, uhdr_len);
    if (len)
        memcpy((char *) (s + 1) + uhdr_len, data, len);
    aml_stat(aml, AML_PROTO_ONEPACKET, len);
    p->dirty = true;

    if (AML_LIKELY(!aml->cfg.debug_reorder)) {
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
        param.flags = UCP_AM_SEND_FLAG_EAGER;
        r = ucp_am_send_nbx(p->ep, AML_UCP_AM_ID, buf, total, NULL, 0, &param);
        if (AML_LIKELY(r == NULL))
            return AML_OK;
        if (UCS_PTR_STATUS(r) != UCS_ERR_NO_RESOURCE)
            aml_send_failed(aml, peer, buf, ucs_status_string(UCS_PTR_STATUS(r)));
    }
    d = aml_sdesc_get(aml);
    if (AML_UNLIKELY(!d)) {
        /* never handed to UCX: give the sequence number back, or the peer waits for it */
        p->tx_seq--;
        aml->msgs[AML_PROTO_ONEPACKET]--;
        aml->bytes[AML_PROTO_ONEPACKET] -= (int64_t) len;
        return AML_ERR_NOMEM;
    }
    memcpy(&d->u.pkt, buf, total);      /* the descriptor has a packet's room after u.pkt */
    d->peer = peer;
    d->hdr_len = total;
    return aml_send_desc_flags(aml, d, p->ep, NULL, 0, UCP_AM_SEND_FLAG_EAGER);
}

/* A compact packet above the inline size: [aml_spkt_t | uhdr] in a descriptor, the data sent
 * as UCX's payload straight from the caller's buffer. UCX copies it into the transport at
 * once unless the peer's FIFO is full; the origin completes when UCX is done with it, which
 * is before this returns in the common case (no copy of ours, unlike the full-header path). */
static int send_zcopy(aml_t * aml, const aml_xfer_t * x)
{
    aml_sdesc_t *d = aml_sdesc_get(aml);
    aml_peer_t *p = &aml->peers[x->peer];
    aml_spkt_t *s;

    if (AML_UNLIKELY(!d))
        return AML_ERR_NOMEM;
    s = (aml_spkt_t *) & d->u.pkt;
    aml_spkt_fill(aml, s, p, AML_PKT_ONE_SHORT, x->handler, x->uhdr_len);
    if (x->uhdr_len)
        memcpy(s + 1, x->uhdr, x->uhdr_len);
    d->peer = x->peer;
    d->hdr_len = sizeof(*s) + x->uhdr_len;
    d->org_cntr = x->org_cntr;
    d->org_fn = x->org_fn;
    d->org_arg = x->org_arg;
    aml_stat(aml, AML_PROTO_ONEPACKET, x->len);
    return aml_send_desc_flags(aml, d, p->ep, x->data, x->len, UCP_AM_SEND_FLAG_EAGER);
}

int aml_amsend_small(aml_t * aml, int peer, unsigned handler, const void *uhdr,
                     size_t uhdr_len, const void *data, size_t len)
{
    if (AML_UNLIKELY(!aml || !aml->connected || peer < 0 || peer >= aml->size ||
                     handler >= AML_MAX_HANDLERS || uhdr_len > aml->max_uhdr ||
                     (uhdr_len && !uhdr) || (len && !data) || !aml->compact ||
                     uhdr_len > UINT8_MAX || aml->protocol != AML_PROTO_AUTO ||
                     sizeof(aml_spkt_t) + uhdr_len + len > aml->compact_max))
        return AML_ERR_INVAL;
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
    d = aml_sdesc_get(aml);
    if (AML_UNLIKELY(!d))
        return AML_ERR_NOMEM;
    aml_pkt_init(aml, &d->u.pkt, AML_PKT_ONE, x->peer);
    d->u.pkt.proto = AML_PROTO_ONEPACKET;
    d->u.pkt.msg_len = x->len;
    aml_pkt_set_first(d, x, false);     /* CMPL below, with a message id */
    d->peer = x->peer;
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

/* The dispatcher's fast path: a compact packet, in sequence, whose handler and lengths it
 * checked; data and len: in UCX's header after the user header, or UCX's payload. No counter,
 * no CMPL, no aml_pkt_t to fill. */
void aml_onepacket_recv_compact(aml_t * aml, const aml_spkt_t * s, const char *uhdr,
                                const char *data, size_t len)
{
    const aml_handler_t *h = &aml->handlers[s->handler];
    uint64_t aligned[AML_MAX_UHDR / 8];
    aml_msg_info_t info;
    aml_recv_t recv;

    if (((uintptr_t) uhdr & 7) && s->uhdr_len) {
        memcpy(aligned, uhdr, s->uhdr_len);
        uhdr = (const char *) aligned;
    }
    info.src = (int) AML_SPKT_SRC(s);
    info.uhdr = s->uhdr_len ? uhdr : NULL;
    info.uhdr_len = s->uhdr_len;
    info.msg_len = len;
    info.data = data;
    info.protocol = AML_PROTO_ONEPACKET;
    info.msg = AML_HANDLE_NONE;
    recv.buf = NULL;
    recv.unpack = NULL;
    recv.compl_fn = NULL;
    recv.defer = 0;
    if (AML_UNLIKELY(h->fn(aml, h->ctx, &info, &recv) != 0 || recv.defer))
        aml_fatal(aml, "header handler %u %s a %s message of %zu bytes from rank %u",
                  s->handler, recv.defer ? "deferred" : "refused",
                  aml_pkt_name(AML_PKT_ONE_SHORT), info.msg_len, AML_SPKT_SRC(s));
    aml_deliver(aml, &recv, 0, data, len);
    if (recv.compl_fn)
        recv.compl_fn(aml, recv.compl_arg);
}

void aml_onepacket_recv(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr, const void *data,
                        size_t len)
{
    aml_cntr_t *tgt;
    aml_recv_t recv;

    aml_check_handler(aml, pkt);
    tgt = aml_check_cntr(aml, pkt);
    if (pkt->msg_len != len)
        aml_fatal_pkt(aml, pkt, "carries %zu data bytes, header says %llu", len,
                      (unsigned long long) pkt->msg_len);
    aml_call_handler(aml, pkt, uhdr, data, &recv, NULL);
    aml_deliver(aml, &recv, 0, data, len);
    aml_rx_complete(aml, (int) pkt->src, tgt, &recv, pkt->flags & AML_PKTF_CMPL, pkt->msg_id,
                    false);
}
