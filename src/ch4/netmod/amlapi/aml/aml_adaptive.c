/*
 * Adaptive eager protocol (Almási et al. 2005, Table 1, "adaptive eager"): an eager message whose data
 * packets carry no ordering requirement. BG/L sent them over adaptively routed links; here
 * they are spread over the peer's lanes (several endpoints, aml_config.lanes) and placed
 * by offset, in whatever order they arrive.
 *
 * MPI order is kept because the first packet (packet header, user header and first chunk)
 * is sequenced like every other aml packet: header handlers still run in the sender's order.
 * Data packets may overtake it; they are held in a staging buffer until the handler has
 * chosen the landing.
 *
 * Flow control: the receiver returns credits once a message no longer holds receiver memory
 * (it landed where its handler said, or an embedder that deferred it accepted or rejected
 * it). A sender keeps at most aml_config.adaptive_credits unconfirmed adaptive messages per
 * peer; without a credit, aml_xfer sends the message by rendezvous, so only its header waits
 * at the receiver. This bounds the memory that unmatched eager data can take at a receiver
 * flooded by many senders: credits x eager limit per sender.
 *
 * Credits go back batched, one TOKEN packet naming how many: when half of a peer's credits
 * are owed, or when a poll finds nothing to do (aml_poll), and before quiesce's second
 * round. A TOKEN per message put one more packet ahead of every reply, which slowed a 16 KiB
 * ping-pong between two hosts over TCP (docs/benchmarks/2026-11-26-two-hosts.md).
 */
#include "aml_impl.h"
#include "aml_rx_fast.h"
#include "aml_poll.h"
#include <stdlib.h>
#include <string.h>

/* Whether an adaptive message to peer may go now. Out of credits, poll once first (aml_poll
 * does not from inside a handler): tokens for messages the peer already took may be
 * waiting. */
bool aml_adaptive_credit(aml_t * aml, int peer)
{
    aml_peer_t *p = &aml->peers[peer];
    if (AML_LIKELY(p->adapt_out < aml->adaptive_credits))
        return true;
    aml_poll(aml);
    return p->adapt_out < aml->adaptive_credits;
}

/* ---- sender --------------------------------------------------------------------------- */

static void send_first(aml_t * aml, const aml_xfer_t * x, aml_smsg_t * m, uint64_t id,
                       size_t first)
{
    aml_sdesc_t *d = aml_sdesc_get_uhdr(aml, x->uhdr_len);
    int rc;
    if (!d)
        aml_fatal(aml, "out of memory sending to rank %d", x->peer);
    d->op.peer = x->peer;
    d->msg = m;
    m->pending++;
    m->org_pending++;
    if (aml_mpkt_ok(aml, x)) {
        aml_mpkt_set(aml, d, x, AML_PKT_ADAPT_SFIRST, id, 0);
        rc = aml_send_desc_flags(aml, d, aml->peers[x->peer].ep, x->data, first, 0);
    } else {
        aml_pkt_init(aml, &d->u.pkt, AML_PKT_ADAPT_FIRST, x->peer);
        d->u.pkt.proto = AML_PROTO_ADAPTIVE;
        d->u.pkt.msg_len = x->len;
        d->u.pkt.msg_id = id;
        aml_pkt_set_first(d, x, x->cmpl_cntr != NULL);
        rc = aml_send_desc(aml, d, x->data, first);
    }
    if (rc != AML_OK)
        aml_fatal(aml, "adaptive first packet to rank %d failed: %s", x->peer, aml_strerror(rc));
}

static void send_data(aml_t * aml, const aml_xfer_t * x, aml_smsg_t * m, uint64_t id,
                      size_t off, size_t n)
{
    aml_peer_t *p = &aml->peers[x->peer];
    aml_sdesc_t *d = aml_sdesc_get(aml);
    int rc;
    if (!d)
        aml_fatal(aml, "out of memory sending to rank %d", x->peer);
    if (aml_mpkt_ok(aml, x)) {
        aml_mpkt_set(aml, d, x, AML_PKT_ADAPT_SDATA, id, off);
    } else {
        aml_pkt_init(aml, &d->u.pkt, AML_PKT_ADAPT_DATA, x->peer);
        d->u.pkt.proto = AML_PROTO_ADAPTIVE;
        d->u.pkt.msg_len = x->len;
        d->u.pkt.msg_id = id;
        d->u.pkt.addr = off;
        d->hdr_len = sizeof(aml_pkt_t);
    }
    d->op.peer = x->peer;
    d->msg = m;
    m->pending++;
    m->org_pending++;
    rc = aml_send_desc_lane(aml, d, aml_lane(aml, x->peer, p->next_lane++),
                            (const char *) x->data + off, n);
    if (rc != AML_OK)
        aml_fatal(aml, "adaptive data packet to rank %d failed: %s", x->peer, aml_strerror(rc));
}

/* The caller checked aml_adaptive_credit. */
int aml_adaptive_send(aml_t * aml, const aml_xfer_t * x)
{
    aml_peer_t *p = &aml->peers[x->peer];
    aml_smsg_t *m = aml_smsg_new(aml, x, AML_PROTO_ADAPTIVE);
    uint64_t id = aml->next_msg_id++;
    size_t hsize = aml_mpkt_ok(aml, x) ? sizeof(aml_mpkt_t) : sizeof(aml_pkt_t);
    size_t first, chunk = aml->peers[x->peer].pkt_size - hsize, ndata;
    bool reorder = aml_reorder(aml);

    if (!m)
        return AML_ERR_NOMEM;
    first = aml->peers[x->peer].pkt_size - hsize - x->uhdr_len;
    if (first > x->len)
        first = x->len;
    ndata = (x->len - first + chunk - 1) / chunk;
    if (x->cmpl_cntr) {
        m->pending++;   /* until the target's CMPL */
        aml_htab_put(&aml->waits, &m->h, id);
    }
    p->adapt_out++;
    aml_stat(aml, AML_PROTO_ADAPTIVE, x->len);

    /* debug_reorder sends the data packets last to first, ahead of the first packet, so the
     * receiver's out-of-order paths run */
    if (!reorder)
        send_first(aml, x, m, id, first);
    for (size_t i = 0; i < ndata; i++) {
        size_t off = first + (reorder ? ndata - 1 - i : i) * chunk;
        send_data(aml, x, m, id, off, x->len - off < chunk ? x->len - off : chunk);
    }
    if (reorder)
        send_first(aml, x, m, id, first);
    aml_smsg_event_done(aml, m, true);  /* drop the guard */
    return AML_OK;
}

/* aux0: how many of our messages the peer confirms */
void aml_adaptive_recv_token(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                             const void *data, size_t len)
{
    aml_peer_t *p = &aml->peers[pkt->src];
    if (pkt->aux0 == 0 || pkt->aux0 > (uint64_t) p->adapt_out)
        aml_fatal_pkt(aml, pkt, "token for %llu adaptive messages, %d unconfirmed",
                      (unsigned long long) pkt->aux0, p->adapt_out);
    p->adapt_out -= (int) pkt->aux0;
}

static void send_token(aml_t * aml, int peer)
{
    aml_peer_t *p = &aml->peers[peer];
    if (aml_send_ctrl(aml, peer, AML_PKT_ADAPT_TOKEN, 0, (uint64_t) p->tok_owed) != AML_OK)
        aml_fatal(aml, "cannot send an adaptive token to rank %d", peer);
    p->tok_owed = 0;
}

/* Sends every credit owed. */
void aml_adaptive_flush_tokens(aml_t * aml)
{
    while (aml->tok_head >= 0) {
        int i = aml->tok_head;
        aml->tok_head = aml->peers[i].tok_next;
        aml->peers[i].tok_listed = false;
        if (aml->peers[i].tok_owed)
            send_token(aml, i);
    }
}

/* ---- receiver ------------------------------------------------------------------------- */

/* Data that came before its landing was final (ahead of the first packet, a deferred
 * message, an unpack landing that takes its pieces in order) waits as pieces of the sizes
 * that arrived, sorted by offset: what it costs is what the sender sent, never the length it
 * announced. */
typedef struct aml_piece {
    struct aml_piece *next;
    size_t off, len;
    char data[];
} aml_piece_t;

static void stage(aml_t * aml, aml_rmsg_t * r, size_t off, const void *data, size_t len)
{
    aml_piece_t *n = malloc(sizeof(*n) + len), **q = (aml_piece_t **) & r->pieces;
    if (!n)
        aml_fatal(aml, "out of memory staging %zu bytes of an adaptive message from rank %d",
                  len, r->src);
    n->off = off;
    n->len = len;
    memcpy(n->data, data, len);
    while (*q && (*q)->off < off)
        q = &(*q)->next;
    n->next = *q;
    *q = n;
}

static void free_pieces(aml_rmsg_t * r)
{
    for (aml_piece_t * n = r->pieces, *next; n; n = next) {
        next = n->next;
        free(n);
    }
    r->pieces = NULL;
}

/* Hands the staged pieces to the landing (in offset order: an unpack landing takes them so
 * once all arrived, since the claimed ranges neither overlap nor leave gaps then). */
static void land_pieces(aml_t * aml, aml_rmsg_t * r)
{
    for (aml_piece_t * n = r->pieces; n; n = n->next)
        aml_deliver(aml, &r->recv, n->off, n->data, n->len);
    free_pieces(r);
}

/* The message's data no longer takes receiver memory: tell the sender. */
static void adaptive_release(aml_t * aml, aml_rmsg_t * r)
{
    aml_htab_del_owned(&aml->adapt_rx, r->msg_id, r->src);
    aml->peers[r->src].adapt_in--;
    /* only now, after its handlers ran (or it was rejected), may a fence be acknowledged */
    aml_rx_counted_done(aml, r->src);
    {
        aml_peer_t *p = &aml->peers[r->src];
        p->tok_owed++;
        if (!p->tok_listed) {
            p->tok_listed = true;
            p->tok_next = aml->tok_head;
            aml->tok_head = r->src;
        }
        /* half the credits owed: send now, so a streaming sender never runs dry (the peer
         * stays in the list with nothing owed, which the flush skips) */
        if (p->tok_owed * 2 >= aml->adaptive_credits)
            send_token(aml, r->src);
    }
    free_pieces(r);
    aml_rmsg_free(aml, r);
}

/* All data is in and the landing is known: deliver (the staged pieces, in order, when data came
 * ahead of the landing or the landing unpacks in order) and complete. */
static void adaptive_land(aml_t * aml, aml_rmsg_t * r)
{
    land_pieces(aml, r);
    aml_rx_complete(aml, r->src, r->tgt_cntr, &r->recv, r->want_cmpl, r->msg_id, false);
    adaptive_release(aml, r);
}

static void adaptive_drop(aml_t * aml, aml_rmsg_t * r);

/* Every byte arrived (and the first packet was handled). */
static void adaptive_data_done(aml_t * aml, aml_rmsg_t * r)
{
    r->data_done = true;
    if (r->deferred)
        return;         /* aml_accept or aml_reject finishes */
    if (r->dropped)
        adaptive_drop(aml, r);
    else
        adaptive_land(aml, r);
}

/* The message's record, created by whichever of its packets comes first. */
static aml_rmsg_t *adaptive_get(aml_t * aml, const aml_pkt_t * pkt)
{
    aml_hent_t *e = aml_htab_get_owned(&aml->adapt_rx, pkt->msg_id, (int) pkt->src);
    aml_peer_t *p = &aml->peers[pkt->src];
    aml_rmsg_t *r;

    if (e) {
        r = AML_CONTAINER(e, aml_rmsg_t, h);
        if (r->len != pkt->msg_len)
            aml_fatal_pkt(aml, pkt, "adaptive message %llu of %llu bytes, earlier packets said "
                          "%zu", (unsigned long long) pkt->msg_id,
                          (unsigned long long) pkt->msg_len, r->len);
        return r;
    }
    if (p->adapt_in >= aml->adaptive_credits)
        aml_fatal_pkt(aml, pkt, "more than %d unconfirmed adaptive messages",
                      aml->adaptive_credits);
    r = aml_rmsg_start(aml, (int) pkt->src, AML_PKT_ADAPT_FIRST, pkt->msg_id, pkt->msg_len);
    aml_htab_put_owned(&aml->adapt_rx, &r->h, r->msg_id, r->src);
    p->adapt_in++;
    aml_rx_count(aml, r->src);
    return r;
}

/* Where a piece of data goes now: the landing buffer once it is known and final (every
 * piece staged before is in it then), else a staged piece. */
static void adaptive_put(aml_t * aml, aml_rmsg_t * r, size_t off, const void *data, size_t len)
{
    if (!len)
        return;
    if (r->have_first && !r->deferred && r->recv.buf) {
        memcpy((char *) r->recv.buf + off, data, len);
        return;
    }
    stage(aml, r, off, data, len);
}

/* Records that pkt brings [off, off+len) of r. Data packets come in any order over several
 * lanes, so the byte total alone cannot tell a duplicate that took the place of a missing
 * chunk: a chunk that overlaps anything already received is a malformed packet. The ranges
 * stay few: correct chunks are adjacent and merge. */
static void adaptive_claim(aml_t * aml, const aml_pkt_t * pkt, aml_rmsg_t * r, size_t off,
                           size_t len)
{
    size_t end = off + len;
    int i = 0;

    if (!r->got) {
        r->got = r->got_inline;
        r->capgot = 2;
    }
    while (i < r->ngot && r->got[i].end <= off)
        i++;
    /* got[i] is the first range ending after off: it must start at or after end */
    if (i < r->ngot && r->got[i].start < end)
        aml_fatal_pkt(aml, pkt, "chunk [%zu, %zu) of adaptive message %llu overlaps bytes "
                      "[%zu, %zu) received before", off, end, (unsigned long long) pkt->msg_id,
                      r->got[i].start, r->got[i].end);
    if (i > 0 && r->got[i - 1].end == off) {
        r->got[i - 1].end = end;        /* extends its predecessor, maybe joins the next */
        if (i < r->ngot && r->got[i].start == end) {
            r->got[i - 1].end = r->got[i].end;
            memmove(&r->got[i], &r->got[i + 1], (r->ngot - i - 1) * sizeof(*r->got));
            r->ngot--;
        }
        return;
    }
    if (i < r->ngot && r->got[i].start == end) {
        r->got[i].start = off;
        return;
    }
    if (r->ngot == r->capgot) {
        int cap = 2 * r->capgot;
        aml_range_t *g = malloc(cap * sizeof(*g));
        if (!g)
            aml_fatal(aml, "out of memory receiving from rank %d", r->src);
        memcpy(g, r->got, r->ngot * sizeof(*g));
        if (r->got != r->got_inline)
            free(r->got);
        r->got = g;
        r->capgot = cap;
    }
    memmove(&r->got[i + 1], &r->got[i], (r->ngot - i) * sizeof(*r->got));
    r->got[i].start = off;
    r->got[i].end = end;
    r->ngot++;
}

void aml_adaptive_recv_first(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                             const void *data, size_t len)
{
    aml_rmsg_t *r;
    bool direct = false;

    /* user headers take at most half a packet, so a first chunk is never empty */
    if (len > pkt->msg_len || (len == 0 && pkt->msg_len != 0))
        aml_fatal_pkt(aml, pkt, "first chunk of %zu bytes for a %llu-byte message", len,
                      (unsigned long long) pkt->msg_len);
    if (pkt->addr != 0)
        aml_fatal_pkt(aml, pkt, "first chunk at offset %llu", (unsigned long long) pkt->addr);
    r = adaptive_get(aml, pkt);
    if (r->have_first)
        aml_fatal_pkt(aml, pkt, "second first packet of adaptive message %llu",
                      (unsigned long long) pkt->msg_id);
    if (len > r->len - r->received)
        aml_fatal_pkt(aml, pkt, "first chunk of %zu bytes overruns the %zu-byte message", len,
                      r->len);
    if (len)
        adaptive_claim(aml, pkt, r, 0, len);
    r->tgt_cntr = aml_check_cntr(aml, pkt);
    r->want_cmpl = pkt->flags & AML_PKTF_CMPL;
    aml_call_handler(aml, pkt, uhdr, len == r->len ? data : NULL, &r->recv, r);
    r->have_first = true;
    if (r->recv.defer) {
        /* nobody wants it yet: aml keeps the data (this is what credits bound) */
        aml_defer_add(aml, r);
    } else if (r->recv.buf) {
        land_pieces(aml, r);            /* what came ahead goes to the landing now */
    } else if (len == r->len) {
        /* all in hand: unpack it now (or the handler consumed it) */
        aml_deliver(aml, &r->recv, 0, data, len);
        direct = true;
    }
    /* else unpack wants the pieces in order: staged until all came */
    if (!direct)
        adaptive_put(aml, r, 0, data, len);
    r->received += len;
    if (r->received == r->len)
        adaptive_data_done(aml, r);
}

/* Outside the sequence, whenever it comes; the dispatcher checked its shape (no user
 * header). */
void aml_adaptive_recv_data(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                            const void *data, size_t len)
{
    aml_rmsg_t *r;
    if (len == 0 || pkt->msg_len == 0 || pkt->addr >= pkt->msg_len ||
        len > pkt->msg_len - pkt->addr)
        aml_fatal_pkt(aml, pkt, "chunk of %zu bytes at offset %llu overruns the %llu-byte "
                      "message", len, (unsigned long long) pkt->addr,
                      (unsigned long long) pkt->msg_len);
    r = adaptive_get(aml, pkt);
    if (len > r->len - r->received)
        aml_fatal_pkt(aml, pkt, "adaptive message %llu receives more than its %zu bytes",
                      (unsigned long long) pkt->msg_id, r->len);
    adaptive_claim(aml, pkt, r, pkt->addr, len);
    adaptive_put(aml, r, pkt->addr, data, len);
    r->received += len;
    if (r->have_first && r->received == r->len)
        adaptive_data_done(aml, r);
}

/* aml_accept of a deferred adaptive message (already out of aml->deferred) */
int aml_adaptive_accept(aml_t * aml, aml_rmsg_t * r, const aml_recv_t * recv)
{
    r->recv = *recv;
    if (r->data_done)
        adaptive_land(aml, r);
    else if (r->recv.buf)
        land_pieces(aml, r);    /* the rest lands directly (adaptive_put) */
    /* else the pieces wait for all the data; adaptive_data_done lands them */
    return AML_OK;
}

/* A rejected message counts as delivered for the sender's completion counter, as in the
 * rendezvous variants. */
static void adaptive_drop(aml_t * aml, aml_rmsg_t * r)
{
    if (r->want_cmpl && aml_send_ctrl(aml, r->src, AML_PKT_CMPL, r->msg_id, 0) != AML_OK)
        aml_fatal(aml, "cannot send CMPL to rank %d", r->src);
    adaptive_release(aml, r);
}

int aml_adaptive_reject(aml_t * aml, aml_rmsg_t * r)
{
    if (r->data_done)
        adaptive_drop(aml, r);
    else
        r->dropped = true;
    return AML_OK;
}

/* At finalize: adaptive messages that never completed (an erroneous or aborted program). */
void aml_adaptive_free_all(aml_t * aml)
{
    for (aml_hent_t * e; (e = aml_htab_pop(&aml->adapt_rx));) {
        aml_rmsg_t *r = AML_CONTAINER(e, aml_rmsg_t, h);
        free_pieces(r);
        if (r->got != r->got_inline)
            free(r->got);
        free(r);
    }
}
