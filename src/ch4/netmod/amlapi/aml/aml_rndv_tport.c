/*
 * Rendezvous by the transport's own protocol (aml_config.rndv_ucx, the default where the
 * peer's transport offers it: UCX's AM rendezvous). The scout is one packet sent with
 * AML_TPORT_SEND_RNDV, so the transport moves the data with its own tuned protocol (zero copy
 * where it can, no registration of ours) once the receiver's handler has chosen the landing;
 * the send completes when the receiver has the data. The completion counter goes through
 * CMPL, as for eager.
 */
#include "aml_impl.h"
#include <stdlib.h>

/* The lean case: no completion counter, under 4 GiB. A medium compact scout, and no send
 * record: the descriptor carries the origin completion, fired when the transport completes
 * the send (the receiver took the data), as for a one-packet send from the caller's buffer. */
static int send_compact(aml_t * aml, const aml_xfer_t * x)
{
    aml_sdesc_t *d = aml_sdesc_get_uhdr(aml, x->uhdr_len);
    int rc;

    if (AML_UNLIKELY(!d))
        return AML_ERR_NOMEM;
    d->op.peer = x->peer;
    d->org_cntr = x->org_cntr;
    d->org_fn = x->org_fn;
    d->org_arg = x->org_arg;
    aml_mpkt_set(aml, d, x, AML_PKT_RNDV_SSCOUT, aml->next_msg_id++, 0);
    aml_stat(aml, AML_PROTO_RNDV, x->len);
    rc = aml_send_desc_flags(aml, d, aml->peers[x->peer].ep, x->data, x->len,
                             AML_TPORT_SEND_RNDV);
    if (rc != AML_OK)
        aml_fatal(aml, "rendezvous to rank %d failed: %s", x->peer, aml_strerror(rc));
    return AML_OK;
}

int aml_rndv_tport_send(aml_t * aml, const aml_xfer_t * x)
{
    aml_sdesc_t *d;
    aml_smsg_t *m;
    int rc;

    if (aml_mpkt_ok(aml, x))
        return send_compact(aml, x);
    m = aml_rndv_scout_new(aml, x, AML_PKTF_TRNDV, x->cmpl_cntr != NULL, &d);
    if (!m)
        return AML_ERR_NOMEM;
    m->tport_rndv = true;
    m->pending++;       /* the send: completes when the receiver took the data */
    m->org_pending++;
    if (x->cmpl_cntr) {
        m->pending++;   /* until the target's CMPL */
        aml_htab_put(&aml->waits, &m->h, d->u.pkt.msg_id);
    }
    aml_stat(aml, AML_PROTO_RNDV, x->len);
    d->u.pkt.seq = aml->peers[x->peer].tx_seq++;
    rc = aml_send_desc_flags(aml, d, aml->peers[x->peer].ep, x->data, x->len,
                             AML_TPORT_SEND_RNDV);
    if (rc != AML_OK)
        aml_fatal(aml, "rendezvous to rank %d failed: %s", x->peer, aml_strerror(rc));
    aml_smsg_event_done(aml, m, true);  /* drop the guard */
    return AML_OK;
}

/* The data is in the landing: complete the message (handlers run as in the dispatcher). */
static void landed(aml_t * aml, aml_rmsg_t * r)
{
    aml->in_dispatch++;
    aml_rmsg_landed(aml, r, r->want_cmpl);
    aml_rmsg_free(aml, r);
    aml->in_dispatch--;
}

static void landed_op_done(aml_tport_op_t * op)
{
    landed(op->aml, AML_CONTAINER(op, aml_rmsg_t, op));
}

/* Lets the transport drop r's data unmoved; its sender completes as if it had moved. While rx
 * handles that descriptor, rx's answer says so (UCX may not be handed it back during its
 * callback); later, the transport releases it. */
static void drop(aml_t * aml, aml_rmsg_t * r)
{
    if (r->tport_desc == aml->rx_desc)
        aml->rx_desc_dropped = true;
    else
        aml->peers[r->src].tport->rndv_release(aml, r->tport_desc);
    r->tport_desc = NULL;
    r->moved = 0;
}

/* Lands a transport-rendezvous message where its handler (or aml_accept) said. A receiver that
 * wants none of it (a receive of nothing, or with no memory to stage it) costs no buffer:
 * the transport cannot move part of a message, but it can move none. */
void aml_rndv_tport_recv(aml_t * aml, aml_rmsg_t * r)
{
    void *dst;
    if (!r->recv.buf && r->recv.partial && r->recv.want == 0) {
        drop(aml, r);
        landed(aml, r);
        return;
    }
    dst = aml_rmsg_landing(aml, r, false);
    r->op.done = landed_op_done;
    r->op.aml = aml;
    r->op.peer = r->src;
    r->op.len = r->len;
    if (aml->peers[r->src].tport->rndv_recv(aml, r->tport_desc, dst, &r->op) == AML_TPORT_DONE)
        landed(aml, r);
}

/* The dispatcher's fast path: a compact transport-rendezvous scout in sequence whose source,
 * handler and lengths aml_rx checked; desc is the transport's data descriptor. No aml_pkt_t
 * to fill, no counter, no CMPL. */
void aml_rndv_recv_sscout(aml_t * aml, const aml_mpkt_t * m, const char *uhdr, void *desc)
{
    aml_rmsg_t *r = aml_rmsg_start(aml, (int) AML_SPKT_SRC(&m->s), AML_PKT_RNDV_SCOUT,
                                   m->msg_id, m->msg_len);

    r->tport_desc = desc;
    aml_rx_count(aml, r->src);
    aml_run_handler(aml, m->s.handler, AML_PKT_RNDV_SSCOUT, (uint32_t) r->src, uhdr,
                    m->s.uhdr_len, r->len, NULL, AML_PROTO_RNDV, &r->recv, r);
    if (r->recv.defer) {
        aml_defer_add(aml, r);
        return;
    }
    aml_rndv_tport_recv(aml, r);
}
