/*
 * Synchronization: fences (LAPI_Fence/Gfence), the layer's own barrier and all-gather
 * (LAPI_Address_init), completion notifications, and the quiesce rounds of finalize.
 *
 * A fence request travels in sequence after everything sent to the peer before it; the peer
 * acknowledges once no message from us is still incomplete there (e.g. a rendezvous pull in
 * flight), so the acknowledgement means "all delivered and handled" (aml_rx.c counts the
 * incomplete messages and acknowledges).
 */
#include "aml_impl.h"
#include "aml_peer_ready.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t epoch;
    uint64_t value;             /* barrier: round; address_init: the value */
} coll_hdr_t;

static int coll_hdr(aml_t * aml, const aml_msg_info_t * info, const char *what, coll_hdr_t * h,
                    uint64_t epoch)
{
    if (info->uhdr_len != sizeof(*h) || info->msg_len != 0)
        aml_fatal(aml, "malformed %s message from rank %d", what, info->src);
    memcpy(h, info->uhdr, sizeof(*h));
    /* a peer can be at most one epoch ahead of or behind this process */
    if (h->epoch + 1 < epoch || h->epoch > epoch + 1)
        aml_fatal(aml, "%s message from rank %d for epoch %llu, this rank is at %llu", what,
                  info->src, (unsigned long long) h->epoch, (unsigned long long) epoch);
    return (int) (h->epoch & 1);
}

static int barrier_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                           aml_recv_t * recv)
{
    coll_hdr_t h;
    int par = coll_hdr(aml, info, "barrier", &h, aml->bar_epoch);
    (void) ctx;
    (void) recv;
    if (h.value >= 32)
        aml_fatal(aml, "barrier message from rank %d for round %llu", info->src,
                  (unsigned long long) h.value);
    aml->bar_recv[par][h.value]++;
    return 0;
}

static int addr_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    coll_hdr_t h;
    int par = coll_hdr(aml, info, "address_init", &h, aml->addr_epoch);
    (void) ctx;
    (void) recv;
    aml->addr_tab[par][info->src] = (uintptr_t) h.value;
    aml->addr_count[par]++;
    return 0;
}

int aml_sync_init(aml_t * aml)
{
    aml->handlers[AML_H_BARRIER].fn = barrier_handler;
    aml->handlers[AML_H_ADDR].fn = addr_handler;
    aml->addr_tab[0] = calloc(aml->size, sizeof(uintptr_t));
    aml->addr_tab[1] = calloc(aml->size, sizeof(uintptr_t));
    return aml->addr_tab[0] && aml->addr_tab[1] ? AML_OK : AML_ERR_NOMEM;
}

static int send_coll(aml_t * aml, int peer, unsigned handler, uint64_t epoch, uint64_t value)
{
    coll_hdr_t h = { epoch, value };
    aml_xfer_t x = { peer, handler, &h, sizeof(h), NULL, 0, NULL, NULL, NULL, NULL, NULL,
        AML_PROTO_AUTO
    };
    return aml_xfer_internal(aml, &x);
}

/* Dissemination barrier: ceil(log2 size) rounds. */
int aml_barrier(aml_t * aml)
{
    uint64_t e;
    int par, rc;
    if (!aml || !aml->connected)
        return aml ? AML_ERR_STATE : AML_ERR_INVAL;
    if (aml->in_dispatch)
        return AML_ERR_STATE;
    e = aml->bar_epoch;
    par = (int) (e & 1);
    for (int k = 0, dist = 1; dist < aml->size; k++, dist <<= 1) {
        if ((rc = send_coll(aml, (aml->rank + dist) % aml->size, AML_H_BARRIER, e, k)))
            return rc;
        while (aml->bar_recv[par][k] == 0)
            aml_progress(aml);
        aml->bar_recv[par][k]--;
    }
    aml->bar_epoch++;
    return AML_OK;
}

int aml_address_init(aml_t * aml, uintptr_t mine, uintptr_t * table)
{
    uint64_t e;
    int par, rc;
    if (!aml || !table)
        return AML_ERR_INVAL;
    if (!aml->connected || aml->in_dispatch)
        return AML_ERR_STATE;
    e = aml->addr_epoch;
    par = (int) (e & 1);
    for (int i = 1; i < aml->size; i++)
        if ((rc = send_coll(aml, (aml->rank + i) % aml->size, AML_H_ADDR, e, mine)))
            return rc;
    while (aml->addr_count[par] < aml->size - 1)
        aml_progress(aml);
    memcpy(table, aml->addr_tab[par], aml->size * sizeof(uintptr_t));
    table[aml->rank] = mine;
    aml->addr_count[par] = 0;
    aml->addr_epoch++;
    return AML_OK;
}

/* ---- fences --------------------------------------------------------------------------- */

static int fence_start(aml_t * aml, int peer, int64_t * want)
{
    aml_peer_t *p = &aml->peers[peer];
    *want = ++p->fence_sent;
    return aml_send_ctrl(aml, peer, AML_PKT_FENCE_REQ, 0, 0);
}

static void fence_wait(aml_t * aml, int peer, int64_t want)
{
    aml_peer_t *p = &aml->peers[peer];
    while (p->fence_acks < want || p->replies_pending > 0)
        aml_progress(aml);
    p->dirty = false;
}

int aml_fence(aml_t * aml, int peer)
{
    int64_t want;
    int rc;
    if (!aml || !aml_peer_ok(aml, peer))
        return AML_ERR_INVAL;
    if (!aml->connected || aml->in_dispatch)
        return AML_ERR_STATE;
    if ((rc = aml_peer_ready(aml, peer)) != AML_OK)
        return rc;
    while (aml->peers[peer].direct_pending > 0)
        aml_progress(aml);
    if (!aml->peers[peer].dirty && aml->peers[peer].replies_pending == 0)
        return AML_OK;
    if ((rc = fence_start(aml, peer, &want)))
        return rc;
    fence_wait(aml, peer, want);
    return AML_OK;
}

int aml_gfence(aml_t * aml)
{
    int64_t *want;
    int rc = AML_OK;
    if (!aml)
        return AML_ERR_INVAL;
    if (!aml->connected || aml->in_dispatch)
        return AML_ERR_STATE;
    for (int i = 0; i < aml->size; i++)
        while (aml->peers[i].direct_pending > 0)
            aml_progress(aml);
    want = calloc(aml->size, sizeof(*want));
    if (!want)
        return AML_ERR_NOMEM;
    /* fence every peer we talked to at once, then wait for all of them */
    for (int i = 0; i < aml->size && rc == AML_OK; i++)
        if (aml->peers[i].dirty)
            rc = fence_start(aml, i, &want[i]);
    for (int i = 0; i < aml->size && rc == AML_OK; i++)
        if (want[i])
            fence_wait(aml, i, want[i]);
    free(want);
    return rc == AML_OK ? aml_barrier(aml) : rc;
}

void aml_sync_recv_fence_ack(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                             const void *data, size_t len)
{
    aml_peer_t *p = &aml->peers[pkt->src];
    if (p->fence_acks >= p->fence_sent)
        aml_fatal_pkt(aml, pkt, "fence acknowledgement nobody asked for");
    p->fence_acks++;
}

void aml_sync_recv_cmpl(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                        const void *data, size_t len)
{
    aml_hent_t *e = aml_htab_get(&aml->waits, pkt->msg_id);
    aml_smsg_t *m = e ? AML_CONTAINER(e, aml_smsg_t, h) : NULL;
    if (!m || m->peer != (int) pkt->src || (m->proto == AML_PROTO_RNDV && !m->tport_rndv) ||
        !m->cmpl_cntr)
        aml_fatal_pkt(aml, pkt, "completion for message %llu, which awaits none from this peer",
                      (unsigned long long) pkt->msg_id);
    aml_htab_del(&aml->waits, pkt->msg_id);
    aml_cntr_incr(m->cmpl_cntr);
    aml_smsg_event_done(aml, m, false);
}

/* ---- finalize (see aml_quiesce) -------------------------------------------------------- */

void aml_sync_recv_quiesce(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                           const void *data, size_t len)
{
    aml_peer_t *p = &aml->peers[pkt->src];
    if (pkt->aux0 != (uint64_t) p->quiesce_round + 1 || pkt->aux0 > 2)
        aml_fatal_pkt(aml, pkt, "quiesce round %llu after round %d",
                      (unsigned long long) pkt->aux0, p->quiesce_round);
    p->quiesce_round = (int) pkt->aux0;
    aml->quiesce_got[pkt->aux0]++;
}

/* Sends QUIESCE round to every rank (this one too) and waits for everybody's. */
void aml_quiesce_rounds(aml_t * aml, int round)
{
    for (int i = 0; i < aml->size; i++)
        if (aml_send_ctrl(aml, i, AML_PKT_QUIESCE, 0, (uint64_t) round) != AML_OK)
            aml_fatal(aml, "cannot send QUIESCE to rank %d", i);
    while (aml->quiesce_got[round] < aml->size)
        aml_progress(aml);
}
