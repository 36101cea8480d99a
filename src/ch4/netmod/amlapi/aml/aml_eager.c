/*
 * Eager protocol: an ordered multi-packet message. The first packet carries the user header
 * and the first chunk; the header handler picks the landing buffer (or an unpack function)
 * and every later chunk is placed by its offset. Packets from one peer are handled in
 * sequence order, and aml_xfer issues all chunks of a message at once, so at most one eager
 * message per peer is under assembly at the receiver. A message naming no counter (every MPI
 * message) has 24-byte compact headers (aml_mpkt_t), so a 16 KiB MPI message is two packets.
 */
#include "aml_impl.h"
#include "aml_rx_fast.h"
#include <stdlib.h>
#include <string.h>

/* d's header for the packet whose chunk starts at off: compact (no counter, under 4 GiB) or
 * full; assigns the packet's sequence number. The chunk goes as the packet's payload. */
static void eager_hdr(aml_t * aml, aml_sdesc_t * d, const aml_xfer_t * x, bool compact,
                      uint64_t id, size_t off)
{
    if (compact) {
        aml_mpkt_set(aml, d, x, off ? AML_PKT_EAGER_SCONT : AML_PKT_EAGER_SFIRST, id, off);
        return;
    }
    aml_pkt_init(aml, &d->u.pkt, off ? AML_PKT_EAGER_CONT : AML_PKT_EAGER_FIRST, x->peer);
    d->u.pkt.proto = AML_PROTO_EAGER;
    d->u.pkt.msg_len = x->len;
    d->u.pkt.msg_id = id;
    d->u.pkt.addr = off;
    if (off == 0)
        aml_pkt_set_first(d, x, x->cmpl_cntr != NULL);
    else
        d->hdr_len = sizeof(aml_pkt_t);
    d->u.pkt.seq = aml->peers[x->peer].tx_seq++;
}

int aml_eager_send(aml_t * aml, const aml_xfer_t * x)
{
    aml_smsg_t *m = aml_smsg_new(aml, x, AML_PROTO_EAGER);
    bool compact = aml_mpkt_ok(aml, x);
    size_t hsize = compact ? sizeof(aml_mpkt_t) : sizeof(aml_pkt_t);
    size_t off = 0, first;
    uint64_t id = aml->next_msg_id++;
    int rc = AML_OK;

    if (!m)
        return AML_ERR_NOMEM;
    first = aml->peers[x->peer].pkt_size - hsize - x->uhdr_len;
    if (first > x->len)
        first = x->len;
    if (x->cmpl_cntr) {
        m->pending++;   /* until the target's CMPL */
        aml_htab_put(&aml->waits, &m->h, id);
    }
    aml_stat(aml, AML_PROTO_EAGER, x->len);

    do {
        aml_sdesc_t *d = aml_sdesc_get_uhdr(aml, off ? 0 : x->uhdr_len);
        size_t chunk;
        if (!d) {
            rc = AML_ERR_NOMEM;
            break;
        }
        d->op.peer = x->peer;
        d->msg = m;
        eager_hdr(aml, d, x, compact, id, off);
        if (off == 0) {
            chunk = first;
        } else {
            chunk = aml->peers[x->peer].pkt_size - hsize;
            if (chunk > x->len - off)
                chunk = x->len - off;
        }
        m->pending++;
        m->org_pending++;
        rc = aml_send_desc_flags(aml, d, aml->peers[x->peer].ep,
                                 chunk ? (const char *) x->data + off : NULL, chunk, 0);
        if (rc != AML_OK) {
            m->pending--;
            m->org_pending--;
            aml_sdesc_put(aml, d);
            break;
        }
        off += chunk;
    } while (off < x->len);

    if (rc != AML_OK)
        aml_fatal(aml, "eager send to rank %d failed after %zu of %zu bytes: %s", x->peer, off,
                  x->len, aml_strerror(rc));
    aml_smsg_event_done(aml, m, true);  /* drop the guard */
    return AML_OK;
}

static void eager_finish(aml_t * aml, aml_peer_t * p, aml_rmsg_t * r)
{
    p->eager_rx = NULL;
    aml_rx_complete(aml, r->src, r->tgt_cntr, &r->recv, r->want_cmpl, r->msg_id, true);
    aml_rmsg_free(aml, r);
}

void aml_eager_recv_first(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                          const void *data, size_t len)
{
    aml_peer_t *p = &aml->peers[pkt->src];
    aml_rmsg_t *r;
    aml_cntr_t *tgt;

    if (p->eager_rx)
        aml_fatal_pkt(aml, pkt, "new eager message %llu while message %llu is incomplete",
                      (unsigned long long) pkt->msg_id,
                      (unsigned long long) p->eager_rx->msg_id);
    if (len > pkt->msg_len || (len == 0 && pkt->msg_len != 0))
        aml_fatal_pkt(aml, pkt, "first chunk of %zu bytes for a %llu-byte message", len,
                      (unsigned long long) pkt->msg_len);
    if (pkt->addr != 0)
        aml_fatal_pkt(aml, pkt, "first chunk at offset %llu", (unsigned long long) pkt->addr);
    tgt = aml_check_cntr(aml, pkt);
    r = aml_rmsg_start(aml, (int) pkt->src, AML_PKT_EAGER_FIRST, pkt->msg_id, pkt->msg_len);
    r->tgt_cntr = tgt;
    r->want_cmpl = pkt->flags & AML_PKTF_CMPL;
    /* the whole message may fit the first packet when eager is forced */
    aml_call_handler(aml, pkt, uhdr, len == pkt->msg_len ? data : NULL, &r->recv, NULL);
    aml_deliver(aml, &r->recv, 0, data, len);
    r->received = len;
    p->eager_rx = r;
    aml_rx_count(aml, r->src);
    if (r->received == r->len)
        eager_finish(aml, p, r);
}

void aml_eager_recv_cont(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                         const void *data, size_t len)
{
    aml_peer_t *p = &aml->peers[pkt->src];
    aml_rmsg_t *r = p->eager_rx;

    if (!r || r->msg_id != pkt->msg_id)
        aml_fatal_pkt(aml, pkt, "continuation of message %llu, which is not under assembly",
                      (unsigned long long) pkt->msg_id);
    if (pkt->addr != r->received)
        aml_fatal_pkt(aml, pkt, "chunk at offset %llu, expected %zu",
                      (unsigned long long) pkt->addr, r->received);
    if (len == 0 || len > r->len - r->received || pkt->msg_len != r->len)
        aml_fatal_pkt(aml, pkt, "chunk of %zu bytes at offset %zu overruns the %zu-byte message",
                      len, r->received, r->len);
    aml_deliver(aml, &r->recv, r->received, data, len);
    r->received += len;
    if (r->received == r->len)
        eager_finish(aml, p, r);
}
