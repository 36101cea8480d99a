/*
 * aml send side, below the protocols: send descriptors (a packet handed to the transport) and
 * send records (a message's bookkeeping), header filling, handing packets to the peer's
 * transport with their sequence numbers, control packets, and the packets debug_reorder
 * holds back (aml_poll, aml_impl.h, is the pass over the transports).
 */
#include "aml_impl.h"
#include <stdlib.h>
#include <string.h>

/* ---- send records --------------------------------------------------------------------- */

aml_smsg_t *aml_smsg_new(aml_t * aml, const aml_xfer_t * x, int proto)
{
    aml_smsg_t *m = aml_rec_get(&aml->free_smsg, sizeof(aml_smsg_t));
    if (!m)
        return NULL;
    m->peer = x->peer;
    m->proto = proto;
    m->pending = 1;     /* guard: released by the protocol once it issued everything */
    m->org_pending = 1;
    m->org_cntr = x->org_cntr;
    m->org_fn = x->org_fn;
    m->org_arg = x->org_arg;
    m->cmpl_cntr = x->cmpl_cntr;
    return m;
}

void aml_smsg_org_complete(aml_t * aml, aml_smsg_t * m)
{
    if (m->org_done)
        return;
    m->org_done = true;
    aml_org_done(aml, m->org_cntr, m->org_fn, m->org_arg);
}

/* One of the message's events finished: a packet send or the rendezvous DONE (org_event:
 * they gate reuse of the origin buffer), or the target's CMPL. */
void aml_smsg_event_done(aml_t * aml, aml_smsg_t * m, bool org_event)
{
    if (org_event && --m->org_pending == 0)
        aml_smsg_org_complete(aml, m);
    if (--m->pending == 0)
        aml_smsg_release(aml, m);
}

void aml_smsg_release(aml_t * aml, aml_smsg_t * m)
{
    if (m->memh) {
        const aml_tport_t *t = aml->peers[m->peer].tport;
        if (m->rkey_buf)
            t->rkey_buf_release(aml, m->rkey_buf);
        t->mem_unmap(aml, m->memh);
    }
    aml_rec_put(&aml->free_smsg, m);
}

/* ---- send descriptors ----------------------------------------------------------------- */

static void send_done(aml_t * aml, aml_sdesc_t * d)
{
    aml_smsg_t *m = d->msg;
    aml_cntr_t *org_cntr = d->org_cntr;
    aml_compl_fn_t org_fn = d->org_fn;
    void *org_arg = d->org_arg;
    aml->tx_inflight--;
    aml_sdesc_put(aml, d);
    if (m)
        aml_smsg_event_done(aml, m, true);
    aml_org_done(aml, org_cntr, org_fn, org_arg);     /* zero-copy compact packet */
}

/* The transport completed a send after it returned (from progress, in_dispatch raised). */
static void send_op_done(aml_tport_op_t * op)
{
    send_done(op->aml, AML_CONTAINER(op, aml_sdesc_t, op));
}

/* Two sizes of descriptor, each with its free list: small ones (a header with a short user
 * header, or a short inline packet) for nearly every packet, since the data goes from the
 * caller's buffer; and ones with a packet's room for those that copy their data (full-header
 * one-packet messages, the put rendezvous's rkey) or have a long user header. */
static aml_sdesc_t *sdesc_get(aml_t * aml, aml_sdesc_t ** list, size_t room)
{
    aml_sdesc_t *d = *list;
    if (AML_LIKELY(d != NULL)) {
        *list = d->next;
    } else {
        d = malloc(offsetof(aml_sdesc_t, u) + room);
        if (!d)
            return NULL;
        /* what the transport reads of every send, fixed for the descriptor's life */
        d->op.aml = aml;
        d->op.done = send_op_done;
        d->op.hdr = &d->u.pkt;
        d->op.len = 0;
        d->room = room;
    }
    d->msg = NULL;
    d->org_cntr = NULL;
    d->org_fn = NULL;
    return d;
}

aml_sdesc_t *aml_sdesc_get(aml_t * aml)
{
    return sdesc_get(aml, &aml->free_sdesc, aml->sdesc_small);
}

aml_sdesc_t *aml_sdesc_get_big(aml_t * aml)
{
    return sdesc_get(aml, &aml->free_sdesc_big, aml->sdesc_big);
}

/* One for a packet header and a user header of uhdr_len bytes. */
aml_sdesc_t *aml_sdesc_get_uhdr(aml_t * aml, size_t uhdr_len)
{
    return sizeof(aml_pkt_t) + uhdr_len <= aml->sdesc_small ? aml_sdesc_get(aml) :
        aml_sdesc_get_big(aml);
}

void aml_sdesc_put(aml_t * aml, aml_sdesc_t * d)
{
    aml_sdesc_t **list = d->room == aml->sdesc_small ? &aml->free_sdesc : &aml->free_sdesc_big;
    d->next = *list;
    *list = d;
}

static void free_list(aml_sdesc_t ** list)
{
    for (aml_sdesc_t * d = *list, *n; d; d = n) {
        n = d->next;
        free(d);
    }
    *list = NULL;
}

void aml_sdesc_free_all(aml_t * aml)
{
    free_list(&aml->free_sdesc);
    free_list(&aml->free_sdesc_big);
}

/* ---- headers -------------------------------------------------------------------------- */

void aml_pkt_init(aml_t * aml, aml_pkt_t * pkt, int type, int peer)
{
    memset(pkt, 0, sizeof(*pkt));
    pkt->type = (uint8_t) type;
    pkt->src = aml->peers[peer].me;
}

/* The fields a message's first packet carries: handler, user header (copied into d), target
 * counter, and whether the origin wants a CMPL. */
void aml_pkt_set_first(aml_sdesc_t * d, const aml_xfer_t * x, bool want_cmpl)
{
    d->u.pkt.handler = (uint16_t) x->handler;
    d->u.pkt.uhdr_len = (uint32_t) x->uhdr_len;
    d->u.pkt.cntr = (uintptr_t) x->tgt_cntr;
    if (want_cmpl)
        d->u.pkt.flags |= AML_PKTF_CMPL;
    if (x->uhdr_len)
        memcpy(AML_SDESC_PAYLOAD(d), x->uhdr, x->uhdr_len);
    d->hdr_len = sizeof(aml_pkt_t) + x->uhdr_len;
}

void aml_mpkt_set(aml_t * aml, aml_sdesc_t * d, const aml_xfer_t * x, int type, uint64_t id,
                  size_t off)
{
    aml_mpkt_t *m = (aml_mpkt_t *) & d->u.pkt;
    unsigned f = aml_pkt_type((unsigned) type)->flags;
    bool first = f & PK_HANDLER;
    size_t uhdr_len = first ? x->uhdr_len : 0;
    aml_spkt_fill(&m->s, &aml->peers[x->peer], f & PK_SEQ, type, first ? x->handler : 0,
                  uhdr_len);
    m->msg_len = (uint32_t) x->len;
    m->off = (uint32_t) off;
    m->msg_id = id;
    if (uhdr_len)
        memcpy(m + 1, x->uhdr, uhdr_len);
    d->hdr_len = sizeof(*m) + uhdr_len;
}

/* The send-side record and full-header scout of a rendezvous message (get, put and transport
 * variants): the caller adds what its variant carries. */
aml_smsg_t *aml_rndv_scout_new(aml_t * aml, const aml_xfer_t * x, uint8_t flags, bool want_cmpl,
                               aml_sdesc_t ** dp)
{
    aml_smsg_t *m = aml_smsg_new(aml, x, AML_PROTO_RNDV);
    aml_sdesc_t *d;

    if (!m)
        return NULL;
    d = aml_sdesc_get_uhdr(aml, x->uhdr_len);
    if (!d) {
        free(m);
        return NULL;
    }
    aml_pkt_init(aml, &d->u.pkt, AML_PKT_RNDV_SCOUT, x->peer);
    d->u.pkt.proto = AML_PROTO_RNDV;
    d->u.pkt.flags = flags;
    d->u.pkt.msg_len = x->len;
    d->u.pkt.msg_id = aml->next_msg_id++;
    aml_pkt_set_first(d, x, want_cmpl);
    d->op.peer = x->peer;
    d->msg = m;
    *dp = d;
    return m;
}

/* ---- sending -------------------------------------------------------------------------- */

/* Hands d to the peer's transport; it is sent or the job ends (aml_send_failed says why a
 * failed send is fatal). */
static void send_now(aml_t * aml, aml_sdesc_t * d, aml_tport_ep_t ep, const void *data,
                     size_t len, unsigned flags)
{
    aml_peer_t *p = &aml->peers[d->op.peer];

    if (AML_UNLIKELY(!ep))
        aml_send_failed(aml, d->op.peer, &d->u.pkt,
                        "the endpoint is closed (after aml_quiesce)");
#ifdef AML_TEST_HOOKS
    if (AML_UNLIKELY(aml->debug_fail_sends) && --aml->debug_fail_sends == 0)
        aml_send_failed(aml, d->op.peer, &d->u.pkt, "injected by aml_debug_fail_send");
#endif
    p->dirty = true;
    aml->tx_inflight++;
    if (AML_LIKELY(p->tport->send(ep, &d->op, d->hdr_len, data, len, flags) == AML_TPORT_DONE))
        send_done(aml, d);
}

static void send_held(aml_t * aml, aml_peer_t * p)
{
    aml_sdesc_t *h = p->held;
    p->held = NULL;
    aml->nheld--;
    aml->tx_inflight--;
    send_now(aml, h, p->ep, h->held_len ? (char *) &h->u.pkt + h->hdr_len : NULL, h->held_len,
             0);
}

/* debug_reorder: every other sequenced packet to a peer is held back (copied whole into its
 * descriptor) and sent right after the next one, or at the next aml_progress, so that the
 * receiver's stash and replay run in ordinary tests. Returns whether d was taken. */
static bool debug_hold(aml_t * aml, aml_sdesc_t * d, aml_tport_ep_t ep, const void *data,
                       size_t len)
{
    aml_peer_t *p = &aml->peers[d->op.peer];
    char *room = (char *) &d->u.pkt + d->hdr_len;

    if (!aml_pkt_sequenced(d->u.pkt.type) || ep != p->ep)
        return false;
    if (p->held) {
        /* d goes first, then the packet it overtakes */
        send_now(aml, d, ep, data, len, 0);
        send_held(aml, p);
        return true;
    }
    if (d->hdr_len + len > d->room)
        return false;           /* does not fit its descriptor: send it now */
    if (len && data != room)
        memmove(room, data, len);
    d->held_len = len;
    p->held = d;
    aml->nheld++;
    aml->tx_inflight++;         /* quiesce waits for it */
    return true;
}

/* Hands one packet to the transport: header = pkt | uhdr (in d), data = [data, data+len).
 * Assigns the packet's sequence number: packets to one peer are handled there in this
 * order. */
int aml_send_desc(aml_t * aml, aml_sdesc_t * d, const void *data, size_t len)
{
    aml_peer_t *p = &aml->peers[d->op.peer];
    d->u.pkt.seq = p->tx_seq++;
    return aml_send_desc_lane(aml, d, p->ep, data, len);
}

/* The same without a sequence number, on any of the peer's endpoints (adaptive data). */
int aml_send_desc_lane(aml_t * aml, aml_sdesc_t * d, aml_tport_ep_t ep, const void *data,
                       size_t len)
{
    return aml_send_desc_flags(aml, d, ep, data, len, 0);
}

/* flags: 0 for aml's own packets; AML_TPORT_SEND_RNDV for a transport-rendezvous scout, whose
 * send completes when the receiver has taken the data. Once called, the packet is sent or the
 * job ends: it never fails back to the caller, so no sequence number is ever left unused. */
int aml_send_desc_flags(aml_t * aml, aml_sdesc_t * d, aml_tport_ep_t ep, const void *data,
                        size_t len, unsigned flags)
{
    if (aml_reorder(aml) && flags == 0 && debug_hold(aml, d, ep, data, len))
        return AML_OK;
    send_now(aml, d, ep, data, len, flags);
    return AML_OK;
}

/* A header-only control packet. */
int aml_send_ctrl(aml_t * aml, int peer, int type, uint64_t msg_id, uint64_t aux0)
{
    aml_sdesc_t *d = aml_sdesc_get(aml);
    if (!d)
        return AML_ERR_NOMEM;
    aml_pkt_init(aml, &d->u.pkt, type, peer);
    d->u.pkt.msg_id = msg_id;
    d->u.pkt.aux0 = aux0;
    d->op.peer = peer;
    d->hdr_len = sizeof(aml_pkt_t);
    return aml_send_desc(aml, d, NULL, 0);
}

/* Sends the packets debug_reorder held back (from aml_poll). */
void aml_release_held(aml_t * aml)
{
    for (int i = 0; i < aml->npeers && aml->nheld; i++)
        if (aml->peers[i].held)
            send_held(aml, &aml->peers[i]);
}

/* ---- test hooks ----------------------------------------------------------------------- */
#ifdef AML_TEST_HOOKS

void aml_debug_fail_send(aml_t * aml, int n)
{
    aml->debug_fail_sends = n;
}

static void raw_sent(aml_tport_op_t * op)
{
    op->len = 1;        /* the flag aml_debug_send_raw waits for */
}

int aml_debug_send_raw(aml_t * aml, int peer, const void *hdr, size_t hdr_len,
                       const void *data, size_t len)
{
    char *h = malloc(AML_TPORT_HEADROOM + hdr_len);
    aml_tport_op_t op = { raw_sent, aml, peer, 0, h + AML_TPORT_HEADROOM };
    aml_peer_t *p;
    if (!aml_peer_ok(aml, peer) || !h) {
        free(h);
        return !h ? AML_ERR_NOMEM : AML_ERR_INVAL;
    }
    memcpy(h + AML_TPORT_HEADROOM, hdr, hdr_len);
    p = &aml->peers[peer];
    if (p->tport->send(p->ep, &op, hdr_len, data, len, 0) == AML_TPORT_PENDING)
        while (!op.len)
            p->tport->progress(aml);
    free(h);
    if (aml_pkt_sequenced(*(const uint8_t *) hdr))
        p->tx_seq++;
    return AML_OK;
}

uint32_t aml_debug_next_seq(aml_t * aml, int peer)
{
    return aml->peers[peer].tx_seq;
}
#endif /* AML_TEST_HOOKS */
