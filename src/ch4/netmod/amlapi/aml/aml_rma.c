/*
 * One-sided operations on registered memory (LAPI_Put/Get/Rmw). Put is an active message
 * to an internal handler whose landing buffer is the target address; get asks the target to
 * send the range back to an internal handler whose landing buffer is the origin address. So
 * both reuse the point-to-point protocols (one-packet, eager, rendezvous pull) by size.
 * Every remote address is checked against the target's registered memory, and replies are
 * accepted only for requests this process has outstanding.
 */
#include "aml_impl.h"
#include "aml_peer_ready.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t addr;
} put_hdr_t;

typedef struct {
    uint64_t id;
} get_reply_hdr_t;

static int put_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    put_hdr_t h;
    (void) ctx;
    if (info->uhdr_len != sizeof(h))
        aml_fatal(aml, "malformed put from rank %d: %zu-byte header", info->src, info->uhdr_len);
    memcpy(&h, info->uhdr, sizeof(h));
    if (!aml_range_registered(aml, (uintptr_t) h.addr, info->msg_len))
        aml_fatal(aml, "put from rank %d to [0x%llx, +%zu) outside registered memory",
                  info->src, (unsigned long long) h.addr, info->msg_len);
    recv->buf = (void *) (uintptr_t) h.addr;
    return 0;
}

static void get_reply_done(aml_t * aml, void *arg)
{
    aml_reply_wait_t *w = arg;
    aml->peers[w->peer].replies_pending--;
    aml_cntr_incr(w->org_cntr);
    free(w);
}

static aml_reply_wait_t *take_reply(aml_t * aml, int src, uint64_t id, int kind)
{
    aml_hent_t *e = aml_htab_get(&aml->replies, id);
    aml_reply_wait_t *w = e ? AML_CONTAINER(e, aml_reply_wait_t, h) : NULL;
    if (!w || w->peer != src || w->kind != kind)
        return NULL;
    aml_htab_del(&aml->replies, id);
    return w;
}

static int get_reply_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                             aml_recv_t * recv)
{
    get_reply_hdr_t h;
    aml_reply_wait_t *w;
    (void) ctx;
    if (info->uhdr_len != sizeof(h))
        aml_fatal(aml, "malformed get reply from rank %d: %zu-byte header", info->src,
                  info->uhdr_len);
    memcpy(&h, info->uhdr, sizeof(h));
    w = take_reply(aml, info->src, h.id, AML_PKT_GET_REQ);
    if (!w)
        aml_fatal(aml, "get reply %llu from rank %d answers no outstanding get",
                  (unsigned long long) h.id, info->src);
    if (info->msg_len != w->len)
        aml_fatal(aml, "get reply from rank %d carries %zu bytes, %zu were asked for",
                  info->src, info->msg_len, w->len);
    recv->buf = w->org_addr;
    recv->compl_fn = get_reply_done;
    recv->compl_arg = w;
    return 0;
}

int aml_rma_init(aml_t * aml)
{
    aml->handlers[AML_H_PUT].fn = put_handler;
    aml->handlers[AML_H_GET_REPLY].fn = get_reply_handler;
    return AML_OK;
}

int aml_put(aml_t * aml, int peer, void *tgt_addr, const void *org_addr, size_t len,
            aml_cntr_t * tgt_cntr, aml_cntr_t * org_cntr, aml_cntr_t * cmpl_cntr)
{
    put_hdr_t h = { (uintptr_t) tgt_addr };
    aml_xfer_t x = { peer, AML_H_PUT, &h, sizeof(h), org_addr, len, tgt_cntr, org_cntr,
        cmpl_cntr, NULL, NULL, AML_PROTO_AUTO
    };
    if (!aml || (len && (!tgt_addr || !org_addr)))
        return AML_ERR_INVAL;
    return aml_xfer_internal(aml, &x);
}

/* Sends a GET_REQ or RMW_REQ (want->kind) to want->peer, whose reply is awaited by a copy of
 * want. The caller checked its arguments. */
static int send_req(aml_t * aml, const aml_reply_wait_t * want, uint64_t addr, uint64_t len,
                    uint64_t cntr, int op, uint64_t aux0, uint64_t aux1)
{
    aml_reply_wait_t *w;
    aml_sdesc_t *d;
    uint64_t id;
    int rc, peer = want->peer;
    if (!aml->connected)
        return AML_ERR_STATE;
    w = malloc(sizeof(*w));
    if (!w)
        return AML_ERR_NOMEM;
    *w = *want;
    d = aml_sdesc_get(aml);
    if (!d) {
        free(w);
        return AML_ERR_NOMEM;
    }
    id = aml->next_msg_id++;
    aml_pkt_init(aml, &d->u.pkt, w->kind, peer);
    d->u.pkt.handler = (uint16_t) op;
    d->u.pkt.msg_id = id;
    d->u.pkt.addr = addr;
    d->u.pkt.msg_len = len;
    d->u.pkt.cntr = cntr;
    d->u.pkt.aux0 = aux0;
    d->u.pkt.aux1 = aux1;
    d->op.peer = peer;
    d->hdr_len = sizeof(aml_pkt_t);
    aml_htab_put(&aml->replies, &w->h, id);
    aml->peers[peer].replies_pending++;
    rc = aml_send_desc(aml, d, NULL, 0);
    if (rc != AML_OK) {
        aml_htab_del(&aml->replies, id);
        aml->peers[peer].replies_pending--;
        free(w);
    }
    return rc;
}

int aml_get(aml_t * aml, int peer, const void *tgt_addr, void *org_addr, size_t len,
            aml_cntr_t * tgt_cntr, aml_cntr_t * org_cntr)
{
    aml_reply_wait_t w = {.peer = peer,.kind = AML_PKT_GET_REQ,.org_addr = org_addr,.len = len,
        .org_cntr = org_cntr
    };
    int rc;
    if (!aml || !aml_peer_ok(aml, peer) || (len && (!tgt_addr || !org_addr)))
        return AML_ERR_INVAL;
    if ((rc = aml_peer_ready(aml, peer)) != AML_OK)
        return rc;
    return send_req(aml, &w, (uintptr_t) tgt_addr, len, (uintptr_t) tgt_cntr, 0, 0, 0);
}

static void get_sent(aml_t * aml, void *arg)
{
    (void) aml;
    aml_cntr_incr(arg);
}

void aml_rma_recv_get_req(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                          const void *data, size_t len)
{
    aml_cntr_t *tgt = aml_check_cntr(aml, pkt);
    get_reply_hdr_t h = { pkt->msg_id };
    aml_xfer_t x = { (int) pkt->src, AML_H_GET_REPLY, &h, sizeof(h),
        (const void *) (uintptr_t) pkt->addr, pkt->msg_len, NULL, NULL, NULL, get_sent, tgt,
        AML_PROTO_AUTO
    };
    int rc;
    if (!aml_range_registered(aml, pkt->addr, pkt->msg_len))
        aml_fatal_pkt(aml, pkt, "get of [0x%llx, +%llu) outside registered memory",
                      (unsigned long long) pkt->addr, (unsigned long long) pkt->msg_len);
    rc = aml_xfer_internal(aml, &x);
    if (rc != AML_OK)
        aml_fatal(aml, "cannot answer a get from rank %u: %s", pkt->src, aml_strerror(rc));
}

int aml_rmw(aml_t * aml, int peer, aml_rmw_op_t op, int64_t * tgt_var, const int64_t * in,
            int64_t * prev, aml_cntr_t * org_cntr)
{
    aml_reply_wait_t w = {.peer = peer,.kind = AML_PKT_RMW_REQ,.org_addr = prev,
        .len = sizeof(int64_t),.org_cntr = org_cntr
    };
    int rc;
    if (!aml || !aml_peer_ok(aml, peer) || !tgt_var || !in ||
        ((uintptr_t) tgt_var & 7) || op < AML_RMW_FETCH_ADD || op > AML_RMW_CMP_SWAP)
        return AML_ERR_INVAL;
    if ((rc = aml_peer_ready(aml, peer)) != AML_OK)
        return rc;
    return send_req(aml, &w, (uintptr_t) tgt_var, 0, 0, op, (uint64_t) in[0],
                    op == AML_RMW_CMP_SWAP ? (uint64_t) in[1] : 0);
}

void aml_rma_recv_rmw_req(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                          const void *data, size_t len)
{
    int64_t *var, old;
    if ((pkt->addr & 7) || !aml_range_registered(aml, pkt->addr, sizeof(int64_t)))
        aml_fatal_pkt(aml, pkt, "rmw on 0x%llx: not an aligned registered int64",
                      (unsigned long long) pkt->addr);
    var = (int64_t *) (uintptr_t) pkt->addr;
    old = *var;
    switch (pkt->handler) {
        case AML_RMW_FETCH_ADD:
            *var = (int64_t) ((uint64_t) old + pkt->aux0);
            break;
        case AML_RMW_SWAP:
            *var = (int64_t) pkt->aux0;
            break;
        case AML_RMW_CMP_SWAP:
            if (old == (int64_t) pkt->aux0)
                *var = (int64_t) pkt->aux1;
            break;
        default:
            aml_fatal_pkt(aml, pkt, "unknown rmw operation %u", pkt->handler);
    }
    if (aml_send_ctrl(aml, (int) pkt->src, AML_PKT_RMW_REPLY, pkt->msg_id, (uint64_t) old))
        aml_fatal(aml, "cannot answer an rmw from rank %u", pkt->src);
}

void aml_rma_recv_rmw_reply(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr,
                            const void *data, size_t len)
{
    aml_reply_wait_t *w = take_reply(aml, (int) pkt->src, pkt->msg_id, AML_PKT_RMW_REQ);
    if (!w)
        aml_fatal_pkt(aml, pkt, "reply %llu answers no outstanding rmw",
                      (unsigned long long) pkt->msg_id);
    if (w->org_addr)
        *(int64_t *) w->org_addr = (int64_t) pkt->aux0;
    aml->peers[w->peer].replies_pending--;
    aml_cntr_incr(w->org_cntr);
    free(w);
}
