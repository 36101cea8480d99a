/*
 * aml receive side, below the protocols: receive records, header handlers, landing data,
 * target completion (completion handler, target counter, CMPL), the count of incomplete
 * messages per peer that fences wait for, and deferred landings.
 */
#include "aml_impl.h"
#include "aml_rx_fast.h"
#include <stdlib.h>
#include <string.h>

/* The record of message msg_id (len bytes, first packet of this type) from src. */
aml_rmsg_t *aml_rmsg_start(aml_t * aml, int src, int type, uint64_t msg_id, size_t len)
{
    aml_rmsg_t *r = aml_rec_get(&aml->free_rmsg, sizeof(aml_rmsg_t));
    if (!r)
        aml_fatal(aml, "out of memory receiving from rank %d", src);
    r->aml = aml;
    r->src = src;
    r->type = type;
    r->msg_id = msg_id;
    r->len = len;
    return r;
}

void aml_rmsg_free(aml_t * aml, aml_rmsg_t * r)
{
    if (r->got != r->got_inline)
        free(r->got);
    aml_rec_put(&aml->free_rmsg, r);
}

void aml_run_handler(aml_t * aml, unsigned handler, int type, uint32_t src, const void *uhdr,
                     size_t uhdr_len, uint64_t msg_len, const void *data, int proto,
                     aml_recv_t * recv, aml_rmsg_t * msg)
{
    aml_handler_run(aml, handler, type, src, uhdr, uhdr_len, msg_len, data, proto, recv, msg);
}

/* aml_run_handler for a decoded packet, whose handler the dispatcher checked. */
void aml_call_handler(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr, const void *data,
                      aml_recv_t * recv, aml_rmsg_t * msg)
{
    aml_handler_run(aml, pkt->handler, pkt->type, pkt->src, uhdr, pkt->uhdr_len, pkt->msg_len,
                    data, pkt->proto, recv, msg);
}

/* All data of a message landed: completion handler, target counter, CMPL to the origin. */
void aml_rx_complete(aml_t * aml, int src, aml_cntr_t * tgt_cntr, const aml_recv_t * recv,
                     bool want_cmpl, uint64_t msg_id, bool counted)
{
    if (recv->compl_fn)
        recv->compl_fn(aml, recv->compl_arg);
    aml_cntr_incr(tgt_cntr);
    if (want_cmpl && aml_send_ctrl(aml, src, AML_PKT_CMPL, msg_id, 0) != AML_OK)
        aml_fatal(aml, "cannot send CMPL to rank %d", src);
    if (counted)
        aml_rx_counted_done(aml, src);
}

/* ---- fences: what is still incomplete per peer ---------------------------------------- */

/* A message counted by aml_rx_count is complete or dropped: fences waiting for it are
 * acknowledged once nothing from src is incomplete. */
void aml_rx_counted_done(aml_t * aml, int src)
{
    aml_peer_t *p = &aml->peers[src];
    aml->rx_busy--;
    if (--p->rx_incomplete != 0)
        return;
    for (; p->fence_reqs > 0; p->fence_reqs--)
        if (aml_send_ctrl(aml, src, AML_PKT_FENCE_ACK, 0, 0))
            aml_fatal(aml, "cannot acknowledge a fence from rank %d", src);
}

/* FENCE_REQ: it travels in sequence after everything its sender sent before, so the
 * acknowledgement, sent once none of those messages is incomplete here, means "all delivered
 * and handled". */
void aml_rx_fence_req(aml_t * aml, const aml_pkt_t * pkt, const void *uhdr, const void *data,
                      size_t len)
{
    aml_peer_t *p = &aml->peers[pkt->src];
    if (p->rx_incomplete == 0) {
        if (aml_send_ctrl(aml, (int) pkt->src, AML_PKT_FENCE_ACK, 0, 0))
            aml_fatal(aml, "cannot acknowledge a fence from rank %u", pkt->src);
    } else {
        p->fence_reqs++;
    }
}

/* ---- landings ------------------------------------------------------------------------- */

/* A message whose handler deferred its landing (rendezvous or adaptive eager). */
void aml_defer_add(aml_t * aml, aml_rmsg_t * r)
{
    r->deferred = true;
    aml_htab_put(&aml->deferred, &r->dh, r->handle);
}

/* Where the data of r lands: the handler's buffer, or a bounce buffer for an unpack handler,
 * of only the bytes it wants when it said so and the transport lets a rendezvous move part of
 * a message (get and put can; ucx's own rendezvous cannot): a truncated receive of a large
 * message costs no buffer of the message's size. Sets r->moved. */
void *aml_rmsg_landing(aml_t * aml, aml_rmsg_t * r, bool can_part)
{
    r->moved = r->len;
    if (r->recv.buf)
        return r->recv.buf;
    if (can_part && r->recv.partial && r->recv.want < r->len)
        r->moved = r->recv.want;
    r->bounce = malloc(r->moved ? r->moved : 1);
    if (!r->bounce)
        aml_fatal(aml, "out of memory for a %zu-byte bounce buffer", r->moved);
    return r->bounce;
}

/* The data of a counted message is in its landing (rendezvous): unpack it from the bounce
 * buffer if there is one, and complete. */
void aml_rmsg_landed(aml_t * aml, aml_rmsg_t * r, bool want_cmpl)
{
    if (r->bounce) {
        aml_deliver(aml, &r->recv, 0, r->bounce, r->moved);
        free(r->bounce);
    }
    aml_rx_complete(aml, r->src, r->tgt_cntr, &r->recv, want_cmpl, r->msg_id, true);
}
