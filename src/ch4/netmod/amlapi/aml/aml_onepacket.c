/*
 * One-packet protocol (seed 002 Table 1): packet header, user header and data fit one
 * packet. The data is copied (into the send descriptor, or into the transport at once), so
 * the origin buffer is reusable when the send returns ("completes at injection"); no request
 * object, no allocation beyond the descriptor free list on either side. The copy is what keeps
 * this nonblocking: sending from the caller's buffer and waiting while UCX holds it
 * (backpressure from a receiver that does not poll) blocked MPI_Isend, which MPICH's
 * pt2pt/sendrecv3 catches; it saved ~3% at 8 KB. The receiver's header handler sees the data
 * in place and may consume it directly.
 *
 * A small message naming no counter (every small MPI message) travels as a compact packet
 * (aml_spkt_t): it keeps small MPI messages inside UCX's inline limit, and it has lean paths
 * on both sides (aml_amsend_small, aml_onepacket_recv_compact).
 */
#include "aml_impl.h"
#include <string.h>

/* A compact packet, [aml_spkt_t | uhdr | data] as UCX's AM header with no UCX payload: one
 * contiguous header, so UCX's inline send copies two pieces (its own header and ours), and the
 * receiver finds the user header 8-byte aligned. Built on the stack and sent with
 * UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL: UCX either copies it into the transport at once or refuses
 * (full FIFO, or above the inline size); only then does it go by a send descriptor, which
 * lives until UCX completes it. */
static int send_compact(aml_t * aml, int peer, unsigned handler, const void *uhdr,
                        size_t uhdr_len, const void *data, size_t len)
{
    uint64_t buf[AML_COMPACT_MAX / 8];
    aml_spkt_t *s = (aml_spkt_t *) buf;
    aml_peer_t *p = &aml->peers[peer];
    size_t total = sizeof(*s) + uhdr_len + len;
    ucp_request_param_t param;
    ucs_status_ptr_t r;
    aml_sdesc_t *d;

    s->type = AML_PKT_ONE_SHORT;
    s->handler = (uint8_t) handler;
    s->uhdr_len = (uint8_t) uhdr_len;
    s->src_hi = (uint8_t) (aml->rank >> 16);
    s->src_lo = (uint16_t) aml->rank;
    s->seq = (uint16_t) p->tx_seq++;
    if (uhdr_len)
        memcpy(s + 1, uhdr, uhdr_len);
    if (len)
        memcpy((char *) (s + 1) + uhdr_len, data, len);
    aml_stat(aml, AML_PROTO_ONEPACKET, len);
    p->dirty = true;

    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    r = ucp_am_send_nbx(p->ep, AML_UCP_AM_ID, buf, total, NULL, 0, &param);
    if (AML_LIKELY(r == NULL))
        return AML_OK;
    if (UCS_PTR_STATUS(r) != UCS_ERR_NO_RESOURCE)
        return AML_ERR_TRANSPORT;
    d = aml_sdesc_get(aml);
    if (AML_UNLIKELY(!d))
        return AML_ERR_NOMEM;
    memcpy(&d->u.pkt, buf, total);      /* the descriptor has a packet's room after u.pkt */
    d->peer = peer;
    d->hdr_len = total;
    return aml_send_desc_flags(aml, d, p->ep, NULL, 0, UCP_AM_SEND_FLAG_EAGER);
}

int aml_amsend_small(aml_t * aml, int peer, unsigned handler, const void *uhdr,
                     size_t uhdr_len, const void *data, size_t len)
{
    if (AML_UNLIKELY(!aml || !aml->connected || peer < 0 || peer >= aml->size ||
                     handler >= AML_MAX_HANDLERS || uhdr_len > aml->max_uhdr ||
                     (uhdr_len && !uhdr) || (len && !data) ||
                     sizeof(aml_pkt_t) + uhdr_len + len > aml->packet_size))
        return AML_ERR_INVAL;
    if (AML_LIKELY(sizeof(aml_spkt_t) + uhdr_len + len <= aml->compact_max &&
                   uhdr_len <= UINT8_MAX && aml->protocol == AML_PROTO_AUTO))
        return send_compact(aml, peer, handler, uhdr, uhdr_len, data, len);
    /* the general path copies one-packet data too: the buffers are free on return */
    aml_xfer_t x = { peer, handler, uhdr, uhdr_len, data, len, NULL, NULL, NULL, NULL, NULL,
        AML_PROTO_AUTO
    };
    if (aml->protocol != AML_PROTO_AUTO && aml->protocol != AML_PROTO_ONEPACKET)
        return AML_ERR_INVAL;   /* a forced protocol may keep the data: use aml_xfer */
    return aml_onepacket_send(aml, &x);
}

int aml_onepacket_send(aml_t * aml, const aml_xfer_t * x)
{
    aml_sdesc_t *d;
    char *payload;
    int rc;

    if (!x->cmpl_cntr && !x->tgt_cntr && x->handler <= UINT8_MAX && x->uhdr_len <= UINT8_MAX &&
        sizeof(aml_spkt_t) + x->uhdr_len + x->len <= aml->compact_max) {
        rc = send_compact(aml, x->peer, x->handler, x->uhdr, x->uhdr_len, x->data, x->len);
        if (rc != AML_OK)
            return rc;
        aml_cntr_incr(x->org_cntr);
        if (x->org_fn)
            x->org_fn(aml, x->org_arg);
        return AML_OK;
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
    aml_cntr_incr(x->org_cntr);
    if (x->org_fn)
        x->org_fn(aml, x->org_arg);
    return AML_OK;
}

/* The dispatcher's fast path: a compact packet, in sequence, whose handler and lengths it
 * checked. rest = user header then data. No counter, no CMPL, no aml_pkt_t to fill. */
void aml_onepacket_recv_compact(aml_t * aml, const aml_spkt_t * s, const char *rest,
                                size_t rest_len)
{
    const aml_handler_t *h = &aml->handlers[s->handler];
    uint64_t aligned[AML_MAX_UHDR / 8];
    aml_msg_info_t info;
    aml_recv_t recv;
    const char *uhdr = rest;

    if (((uintptr_t) uhdr & 7) && s->uhdr_len) {
        memcpy(aligned, uhdr, s->uhdr_len);
        uhdr = (const char *) aligned;
    }
    info.src = (int) AML_SPKT_SRC(s);
    info.uhdr = s->uhdr_len ? uhdr : NULL;
    info.uhdr_len = s->uhdr_len;
    info.msg_len = rest_len - s->uhdr_len;
    info.data = rest + s->uhdr_len;
    info.protocol = AML_PROTO_ONEPACKET;
    info.msg = NULL;
    recv.buf = NULL;
    recv.unpack = NULL;
    recv.compl_fn = NULL;
    recv.defer = 0;
    if (AML_UNLIKELY(h->fn(aml, h->ctx, &info, &recv) != 0 || recv.defer))
        aml_fatal(aml, "header handler %u %s a %s message of %zu bytes from rank %u",
                  s->handler, recv.defer ? "deferred" : "refused",
                  aml_pkt_name(AML_PKT_ONE_SHORT), info.msg_len, AML_SPKT_SRC(s));
    if (info.msg_len) {
        if (recv.buf)
            memcpy(recv.buf, info.data, info.msg_len);
        else if (recv.unpack)
            recv.unpack(recv.unpack_arg, 0, info.data, info.msg_len);
    }
    if (recv.compl_fn)
        recv.compl_fn(aml, recv.compl_arg);
}

void aml_onepacket_recv(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr, const void *data,
                        size_t len)
{
    const aml_handler_t *h = aml_check_handler(aml, pkt);
    aml_cntr_t *tgt = aml_check_cntr(aml, pkt);
    aml_recv_t recv;

    if (pkt->msg_len != len)
        aml_fatal_pkt(aml, pkt, "carries %zu data bytes, header says %llu", len,
                      (unsigned long long) pkt->msg_len);
    aml_call_handler(aml, pkt, h, uhdr, data, &recv, NULL);
    aml_deliver(aml, &recv, 0, data, len);
    aml_rx_complete(aml, (int) pkt->src, tgt, &recv, pkt->flags & AML_PKTF_CMPL, pkt->msg_id,
                    false);
}
