/*
 * The dispatcher: every packet from every transport comes to aml_rx (the transports' rx
 * function). It decodes the header by the packet table (its sender, its format's length,
 * what its type may carry: a bad packet is a fatal error naming the peer and the type),
 * keeps each peer's packets in sequence (stashing early ones and replaying them when the gap
 * fills) and calls the type's receive function. Two fast paths, for a compact one-packet
 * message and a compact transport-rendezvous scout in sequence (the 1-byte and 16 KiB
 * latency paths), skip the decoding but use the same checks; anything they do not take,
 * including every malformed packet, goes the decoding path.
 *
 * Also here: the deferred messages of both protocols that defer (aml_accept, aml_reject).
 */
#include "aml_impl.h"
#include "aml_rx_fast.h"
#include <stdlib.h>
#include <string.h>

#define AML_RX_FN(t, fmt, flags, proto, fn) [AML_PKT_##t] = fn,
static const aml_rx_fn_t rx_fns[AML_PKT_TYPE_MAX] = { AML_PKT_TABLE(AML_RX_FN) };

/* ---- decoding: what is checked from a header before a packet is handled or stashed ---- */

static void check_handler(aml_t * aml, const aml_pkt_t * pkt)
{
    if (!aml_handler_ok(aml, pkt->handler))
        aml_fatal_pkt(aml, pkt, "handler %u is not registered", pkt->handler);
    if (!aml_uhdr_len_ok(aml, pkt->uhdr_len))
        aml_fatal_pkt(aml, pkt, "user header of %u bytes exceeds the limit %zu", pkt->uhdr_len,
                      aml->max_uhdr);
}

/* What a decoded packet may carry, by its type: user header bytes as the header says,
 * a registered handler, no user header or data where the type has none. */
static void check_shape(aml_t * aml, const aml_pkt_t * pkt, size_t uhdr_avail, size_t len)
{
    unsigned f = aml_pkt_type(pkt->type)->flags;
    if (!aml_uhdr_avail_ok(uhdr_avail, pkt->uhdr_len))
        aml_fatal_pkt(aml, pkt, "header carries %zu user-header bytes, packet says %u",
                      uhdr_avail, pkt->uhdr_len);
    if (f & PK_HANDLER)
        check_handler(aml, pkt);
    else if (pkt->uhdr_len && !(f & PK_UHDR))
        aml_fatal_pkt(aml, pkt, "carries a %u-byte user header", pkt->uhdr_len);
    if (len && !(f & PK_DATA))
        aml_fatal_pkt(aml, pkt, "control packet carries %u header and %zu data bytes",
                      pkt->uhdr_len, len);
}

static void unknown_src(aml_t * aml, uint32_t src, int type) __attribute__ ((noreturn));
static void unknown_src(aml_t * aml, uint32_t src, int type)
{
    aml_fatal(aml, "malformed packet from an unknown rank: source %u out of range (%d peers), "
              "type %s", src, aml->npeers, aml_pkt_name(type));
}

/* The compact one-packet header (aml_spkt_t). Its data follows the user header inside the
 * transport's header, or is the payload (see split). */
static void decode_short(aml_t * aml, const void *header, size_t header_length, size_t length,
                         aml_pkt_t * pkt)
{
    aml_spkt_t s;
    memcpy(&s, header, sizeof(s));
    pkt->src = AML_SPKT_SRC(&s);
    if (AML_UNLIKELY(!aml_src_ok(aml, pkt->src)))
        unknown_src(aml, pkt->src, s.type);
    pkt->handler = s.handler;
    pkt->uhdr_len = s.uhdr_len;
    pkt->seq = aml_seq_extend(aml->peers[pkt->src].rx_seq, s.seq);
    if (AML_UNLIKELY(!aml_spkt_split_ok(header_length, s.uhdr_len, length)))
        aml_fatal_pkt(aml, pkt, "%zu-byte header with a %u-byte user header and %zu bytes "
                      "of %s payload: data in both", header_length, s.uhdr_len, length,
                      aml->peers[pkt->src].tport->name);
    pkt->msg_len = length ? length : header_length - sizeof(s) - s.uhdr_len;
}

/* The medium compact header (aml_mpkt_t). */
static void decode_medium(aml_t * aml, const aml_pkt_type_t * pt, const void *header,
                          size_t header_length, aml_pkt_t * pkt)
{
    aml_mpkt_t m;
    memcpy(&m.s, header, sizeof(m.s));
    pkt->src = AML_SPKT_SRC(&m.s);
    if (AML_UNLIKELY(!aml_src_ok(aml, pkt->src)))
        unknown_src(aml, pkt->src, m.s.type);
    if (AML_UNLIKELY(header_length < pt->hmin))
        aml_fatal_pkt(aml, pkt, "%zu-byte header is shorter than a medium compact header (%u)",
                      header_length, pt->hmin);
    memcpy(&m, header, sizeof(m));
    pkt->handler = m.s.handler;
    pkt->uhdr_len = m.s.uhdr_len;
    if (pt->flags & PK_TRNDV) {
        pkt->flags = AML_PKTF_TRNDV;    /* a compact scout always comes by transport rendezvous */
        if (AML_UNLIKELY(!aml_scout_off_ok(m.off)))
            aml_fatal_pkt(aml, pkt, "scout at offset %u", m.off);
    }
    pkt->msg_len = m.msg_len;
    pkt->addr = m.off;
    pkt->msg_id = m.msg_id;
    if (pt->flags & PK_SEQ)
        pkt->seq = aml_seq_extend(aml->peers[pkt->src].rx_seq, m.s.seq);
    if (AML_UNLIKELY(!(pt->flags & PK_HANDLER) && (m.s.handler || m.s.uhdr_len)))
        aml_fatal_pkt(aml, pkt, "continuation names handler %u and a %u-byte user header",
                      m.s.handler, m.s.uhdr_len);
}

/* The full header (aml_pkt_t), also of every unknown type. */
static void decode_full(aml_t * aml, const aml_pkt_type_t * pt, const void *header,
                        size_t header_length, aml_pkt_t * pkt)
{
    if (AML_UNLIKELY(header_length < pt->hmin)) {
        /* name the sender if the bytes that would hold it arrived */
        uint32_t src = (uint32_t) -1;
        if (header_length >= offsetof(aml_pkt_t, src) + sizeof(src))
            memcpy(&src, (const char *) header + offsetof(aml_pkt_t, src), sizeof(src));
        if (aml_src_ok(aml, src))
            aml_fatal(aml, "malformed packet from rank %u: type %s (%u): %zu-byte header is "
                      "shorter than an aml packet header (%u)", src,
                      aml_pkt_name(*(const uint8_t *) header), *(const uint8_t *) header,
                      header_length, pt->hmin);
        aml_fatal(aml, "malformed packet from an unknown rank: %zu-byte header is shorter than "
                  "an aml packet header (%u)", header_length, pt->hmin);
    }
    memcpy(pkt, header, sizeof(*pkt));
    /* a CONNECT comes from a process this one may not know yet: its body names it */
    if (AML_UNLIKELY(!aml_src_ok(aml, pkt->src)) &&
        !(pkt->type == AML_PKT_CONNECT && pkt->src == AML_SRC_NONE))
        unknown_src(aml, pkt->src, pkt->type);
    if (AML_UNLIKELY(pkt->type == 0 || pkt->type >= AML_PKT_TYPE_MAX))
        aml_fatal_pkt(aml, pkt, "unknown packet type");
}

/* Reads a wire header of the format its type's row names into *pkt, checking what the header
 * alone tells; returns the format's size (before the user header). Each format names its
 * sender before anything else is checked. */
static size_t decode(aml_t * aml, const void *header, size_t header_length, size_t length,
                     aml_pkt_t * pkt)
{
    const aml_pkt_type_t *pt;
    if (AML_UNLIKELY(header_length < sizeof(aml_spkt_t)))
        aml_fatal(aml, "malformed packet from an unknown rank: %zu-byte header is shorter than "
                  "the smallest aml packet header (%zu)", header_length, sizeof(aml_spkt_t));
    pt = aml_pkt_type(*(const uint8_t *) header);
    if (pt->format == AML_FMT_FULL) {
        decode_full(aml, pt, header, header_length, pkt);
        return sizeof(*pkt);
    }
    memset(pkt, 0, sizeof(*pkt));
    pkt->type = *(const uint8_t *) header;
    pkt->proto = pt->proto;
    if (pt->format == AML_FMT_SHORT)
        decode_short(aml, header, header_length, length, pkt);
    else
        decode_medium(aml, pt, header, header_length, pkt);
    return pt->hmin;
}

/* ---- dispatch ------------------------------------------------------------------------- */

/* The fast path of a compact one-packet message (aml_rx, with the sender vnode's FIFO names): a well-formed
 * compact one-packet message in sequence, to the handler's small-message handler, else its
 * header handler. known_src: the rank the transport knows
 * sent the packet, or -1. Any other packet returns false with nothing changed, and takes
 * the decoding path, which reports what is wrong with a malformed one. Inline, with the
 * checks of aml_rx's decoding, so that a small message costs one call (the transport's rx
 * function) between the transport's receive and its handler (the receive side of a
 * message-rate run is the bound). */
static inline __attribute__ ((always_inline))
bool rx_onepacket(aml_t * aml, const void *header, size_t header_length, const void *data,
                      size_t length, int64_t known_src)
{
    const aml_handler_t *h;
    const char *uhdr;
    aml_peer_t *p;
    aml_spkt_t s;
    uint32_t src;

    if (header_length < sizeof(s) || *(const uint8_t *) header != AML_PKT_ONE_SHORT)
        return false;
    memcpy(&s, header, sizeof(s));
    src = AML_SPKT_SRC(&s);
    if (known_src >= 0 ? src != (uint64_t) known_src : !aml_src_ok(aml, src))
        return false;
    if (!aml_handler_ok(aml, s.handler) || !aml_uhdr_len_ok(aml, s.uhdr_len) ||
        !aml_spkt_split_ok(header_length, s.uhdr_len, length))
        return false;
    p = &aml->peers[src];
    if (s.seq != (uint16_t) p->rx_seq || p->ooo)
        return false;
    uhdr = (const char *) header + sizeof(s);
    if (!length) {
        data = uhdr + s.uhdr_len;
        length = header_length - sizeof(s) - s.uhdr_len;
    }
    h = &aml->handlers[s.handler];
    p->rx_seq++;
    aml->in_dispatch++;
    if (!h->small || !h->small(aml, h->ctx, (int) src, uhdr, s.uhdr_len, data, length))
        aml_onepacket_recv_compact(aml, &s, uhdr, (const char *) data, length);
    aml->in_dispatch--;
    return true;
}


/* Where a decoded packet's user header and data are: the user header follows the wire header
 * in the transport's header, the data is the payload; a compact one-packet packet without
 * payload carries its data after the user header. */
typedef struct parts {
    const char *uhdr;
    size_t uhdr_avail;
    const void *data;
    size_t len;
} parts_t;

static void split(const aml_pkt_t * pkt, size_t hsize, const char *header, size_t header_length,
                  const void *data, size_t len, parts_t * pp)
{
    pp->uhdr = header + hsize;
    if (aml_pkt_type(pkt->type)->format == AML_FMT_SHORT && !len) {
        pp->uhdr_avail = pkt->uhdr_len;
        pp->data = pp->uhdr + pkt->uhdr_len;
        pp->len = pkt->msg_len;
    } else {
        pp->uhdr_avail = header_length - hsize;
        pp->data = data;
        pp->len = len;
    }
}

static void dispatch(aml_t * aml, const aml_pkt_t * pkt, const parts_t * pp)
{
    check_shape(aml, pkt, pp->uhdr_avail, pp->len);
    rx_fns[pkt->type] (aml, pkt, pp->uhdr, pp->data, pp->len);
}

/* Keeps a packet that came ahead of its sequence number, checked, until the gap fills: a copy
 * of its header and data, or the transport's rendezvous descriptor (kept, not copied). */
static void stash(aml_t * aml, aml_peer_t * p, const aml_pkt_t * pkt, const void *header,
                  size_t hlen, void *data, size_t len, bool by_rndv)
{
    aml_ooo_t *o, **q = &p->ooo;
    bool copy = data && !by_rndv;
    char *buf;
    while (*q && (int32_t) ((*q)->seq - pkt->seq) < 0)
        q = &(*q)->next;
    if (*q && (*q)->seq == pkt->seq)
        aml_fatal_pkt(aml, pkt, "duplicate sequence number %u", pkt->seq);
    o = malloc(sizeof(*o));
    buf = malloc(hlen + (copy ? len : 0) + 1);
    aml->stashed++;
    if (!o || !buf)
        aml_fatal(aml, "out of memory holding an early packet from rank %u", pkt->src);
    memcpy(buf, header, hlen);
    if (len && copy)
        memcpy(buf + hlen, data, len);
    o->seq = pkt->seq;
    o->tport_desc = by_rndv;
    o->hdr = buf;
    o->hdr_len = hlen;
    o->data = by_rndv ? data : copy ? buf + hlen : NULL;
    o->len = len;
    o->next = *q;
    *q = o;
    p->nstashed++;
}

/* At finalize: early packets whose gap never filled, and an eager message never finished (an
 * aborted peer). */
void aml_dispatch_free_stash(aml_t * aml)
{
    for (int i = 0; i < aml->npeers; i++) {
        aml_rmsg_t *r = aml->peers[i].eager_rx;
        if (r) {
            free(r->bounce);
            aml_rmsg_free(aml, r);
            aml->peers[i].eager_rx = NULL;
        }
        for (aml_ooo_t * o = aml->peers[i].ooo, *n; o; o = n) {
            n = o->next;
            if (o->tport_desc)
                aml->peers[i].tport->rndv_release(aml, o->data);
            free(o->hdr);
            free(o);
        }
        aml->peers[i].ooo = NULL;
    }
}

/* The decoding path: every packet the fast paths did not take. */
static int rx_decode(aml_t * aml, const void *header, size_t header_length, void *data,
                     size_t length, bool by_rndv)
{
    aml_pkt_t pkt;
    parts_t pp;
    size_t hsize = decode(aml, header, header_length, length, &pkt);
    const aml_pkt_type_t *pt = aml_pkt_type(pkt.type);
    aml_peer_t *p;

    /* only a transport-rendezvous scout comes by the transport's rendezvous; then data is
     * its descriptor */
    if (AML_UNLIKELY(!aml_delivery_ok(pt->flags, pkt.flags, by_rndv)))
        aml_fatal_pkt(aml, &pkt, "%s delivered it %s, the packet says otherwise",
                      aml_src_ok(aml, pkt.src) ? aml->peers[pkt.src].tport->name :
                      "the transport", by_rndv ? "by rendezvous" : "eagerly");
    split(&pkt, hsize, header, header_length, data, length, &pp);

    if (!(pt->flags & PK_SEQ)) {
        /* outside the sequence: placed by offset whenever it comes */
        aml->in_dispatch++;
        dispatch(aml, &pkt, &pp);
        aml->in_dispatch--;
        return 0;
    }
    p = &aml->peers[pkt.src];
    if (AML_UNLIKELY(pkt.seq != p->rx_seq)) {
        int32_t ahead = (int32_t) (pkt.seq - p->rx_seq);
        if (ahead < 0)
            aml_fatal_pkt(aml, &pkt, "stale sequence number %u (expected %u)", pkt.seq,
                          p->rx_seq);
        /* early packets wait for the gap to fill: they are checked before they are kept, and
         * only so many, so far ahead (packets leave their endpoint's order only briefly) */
        if (ahead >= AML_SEQ_WINDOW || p->nstashed >= AML_STASH_MAX)
            aml_fatal_pkt(aml, &pkt, "sequence number %u is %d ahead of %u with %d packets "
                          "held (limits %d ahead, %d held)", pkt.seq, ahead, p->rx_seq,
                          p->nstashed, AML_SEQ_WINDOW, AML_STASH_MAX);
        check_shape(aml, &pkt, pp.uhdr_avail, pp.len);
        stash(aml, p, &pkt, header, header_length, data, length, by_rndv);
        return by_rndv ? AML_TPORT_RX_KEPT : 0;
    }

    aml->in_dispatch++;
    p->rx_seq++;
    dispatch(aml, &pkt, &pp);
    while (p->ooo && p->ooo->seq == p->rx_seq) {
        aml_ooo_t *o = p->ooo;
        p->ooo = o->next;
        hsize = decode(aml, o->hdr, o->hdr_len, o->len, &pkt);
        p->rx_seq++;
        p->nstashed--;
        split(&pkt, hsize, o->hdr, o->hdr_len, o->data, o->len, &pp);
        dispatch(aml, &pkt, &pp);
        free(o->hdr);
        free(o);
    }
    aml->in_dispatch--;
    /* a rendezvous descriptor was handed to rndv_recv or kept (deferred) */
    return by_rndv ? AML_TPORT_RX_KEPT : 0;
}

static int rx_packet(aml_t * aml, const void *header, size_t header_length, void *data,
                     size_t length, unsigned flags, int64_t known_src)
{
    bool by_rndv = flags & AML_TPORT_RX_RNDV;
    aml_peer_t *p;

    if (AML_UNLIKELY(known_src == AML_TPORT_SRC_STRANGER))
        return aml_dynamic_rx_stranger(aml, header, header_length, data, length, by_rndv);
    /* fast path: a well-formed compact packet in sequence (from known_src, if given) */
    if (AML_LIKELY(!by_rndv) &&
        rx_onepacket(aml, header, header_length, data, length, known_src))
        return 0;
    if (known_src >= 0) {
        /* a packet naming another peer than the one that sent it; a source out of range is
         * named below as for any transport */
        int64_t claimed = aml_pkt_claimed_src(header, header_length);
        if (AML_UNLIKELY(claimed != known_src && claimed >= 0 && claimed < aml->npeers))
            aml_fatal(aml, "malformed packet from rank %lld (its transport knows the "
                      "sender): type %s (%u) claims to come from rank %lld", (long long) known_src,
                      aml_pkt_name(*(const uint8_t *) header), *(const uint8_t *) header,
                      (long long) claimed);
    }

    /* fast path: a well-formed compact transport-rendezvous scout in sequence */
    if (AML_LIKELY(header_length >= sizeof(aml_mpkt_t) &&
                   *(const uint8_t *) header == AML_PKT_RNDV_SSCOUT &&
                   aml_delivery_ok(AML_PKF_RNDV_SSCOUT, AML_PKTF_TRNDV, by_rndv))) {
        aml_mpkt_t m;
        uint32_t src;
        memcpy(&m, header, sizeof(m));
        src = AML_SPKT_SRC(&m.s);
        if (AML_LIKELY(aml_src_ok(aml, src) && aml_handler_ok(aml, m.s.handler) &&
                       aml_uhdr_len_ok(aml, m.s.uhdr_len) &&
                       aml_uhdr_avail_ok(header_length - sizeof(m), m.s.uhdr_len) &&
                       aml_scout_off_ok(m.off) && aml_scout_len_ok(m.msg_len) &&
                       aml_trndv_len_ok(length, m.msg_len, 0))) {
            p = &aml->peers[src];
            if (AML_LIKELY(m.s.seq == (uint16_t) p->rx_seq && !p->ooo)) {
                p->rx_seq++;
                aml->in_dispatch++;
                aml_rndv_recv_sscout(aml, &m, (const char *) header + sizeof(m), data);
                aml->in_dispatch--;
                return AML_TPORT_RX_KEPT;
            }
        }
    }

    return rx_decode(aml, header, header_length, data, length, by_rndv);
}

/* A rendezvous descriptor dropped while rx handles it goes back as the callback's answer:
 * the transport frees it and completes the sender (aml_rndv_tport.c). */
int aml_rx(aml_t * aml, const void *header, size_t header_length, void *data, size_t length,
           unsigned flags, int64_t known_src)
{
    int rc;
    if (AML_LIKELY(!(flags & AML_TPORT_RX_RNDV)))
        return rx_packet(aml, header, header_length, data, length, flags, known_src);
    aml->rx_desc = data;
    aml->rx_desc_dropped = false;
    rc = rx_packet(aml, header, header_length, data, length, flags, known_src);
    aml->rx_desc = NULL;
    return aml->rx_desc_dropped ? 0 : rc;
}

/* ---- deferred messages ---------------------------------------------------------------- */

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
    aml_rndv_accept(aml, msg, recv);
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
    if (r->type == AML_PKT_ADAPT_FIRST)
        aml_adaptive_reject(aml, r);
    else
        aml_rndv_reject(aml, r);
}
