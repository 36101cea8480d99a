/*
 * Native point-to-point: matching. The header handler of MPIDI_AMLAPI_H_P2P matches a message
 * on its first packet against the posted-receive queue, or queues it as an early arrival, and
 * says where its data lands (the queues and the design: amlapi_p2p_impl.h).
 */

#include "mpidimpl.h"
#include "amlapi_p2p_impl.h"

/* ---- the posted queue's lookup on arrival --------------------------------------------- */

static inline __attribute__ ((always_inline))
MPIR_Request *posted_find(const MPIDI_AMLAPI_p2p_hdr_t * h)
{
    for (MPIR_Request * r = MPIDI_AMLAPI_p2p.posted_head; r; r = REQ(r).next)
        if (MPIDI_AMLAPI_envelope_match(REQ(r).rank, REQ(r).tag, REQ(r).context_id, h))
            return r;
    return NULL;
}

/* ---- the header handler: matching on arrival ------------------------------------------ */

static void ue_data_done(aml_t * aml, void *arg)
{
    MPIDI_AMLAPI_ue_t *ue = arg;
    (void) aml;
    ue->complete = 1;
    if (ue->rreq) {
        /* matched while arriving: hand over now */
        MPIDI_AMLAPI_recv_copy_out(ue->rreq, ue->buf, ue->len);
        MPIDI_AMLAPI_recv_complete(ue->rreq);
        MPL_free(ue);
    }
}

int MPIDI_AMLAPI_p2p_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                             aml_recv_t * recv)
{
    MPIDI_AMLAPI_p2p_hdr_t h;
    MPIR_Request *rreq;
    (void) ctx;

    if (unlikely(info->uhdr_len != MPIDI_AMLAPI_P2P_HDR_NOID && info->uhdr_len != sizeof(h)))
        MPIDI_AMLAPI_fatal("malformed MPI message from rank %d: %zu-byte envelope, expected %zu "
                           "or %zu", info->src, info->uhdr_len,
                           (size_t) MPIDI_AMLAPI_P2P_HDR_NOID, sizeof(h));
    /* fixed sizes, so the copy is two or three moves and not a call of memcpy (whose
     * stores the loads of h then waited for: a third of this function's time) */
    if (info->uhdr_len == sizeof(h)) {
        memcpy(&h, info->uhdr, sizeof(h));
    } else {
        memcpy(&h, info->uhdr, MPIDI_AMLAPI_P2P_HDR_NOID);
        h.msg_id = 0;
    }
    if (info->msg_len > (size_t) MPIR_AINT_MAX)
        MPIDI_AMLAPI_fatal("malformed MPI message from rank %d: %zu bytes", info->src,
                           info->msg_len);

    rreq = posted_find(&h);
    if (rreq) {
        MPIDI_AMLAPI_posted_remove(rreq);
        MPIDI_AMLAPI_recv_set_status(rreq, &h, info->msg_len);
        if (h.flags & MPIDI_AMLAPI_P2P_SYNC)
            MPIDI_AMLAPI_send_ctrl(info->src, MPIDI_AMLAPI_CTRL_SYNC_ACK, 0, h.msg_id);
        if (info->data) {
            /* one-packet: the data is in hand; no landing, no completion handler */
            MPIDI_AMLAPI_recv_copy_out(rreq, info->data, info->msg_len);
            MPIDI_AMLAPI_recv_complete(rreq);
            return 0;
        }
        MPIDI_AMLAPI_recv_landing(rreq, info->msg_len, recv);
        if (info->protocol == AML_PROTO_RNDV)
            MPIDI_AMLAPI_pv.rndv_recvd++;
        return 0;
    }

    /* early arrival */
    MPIDI_AMLAPI_ue_t *ue;
    size_t inline_len = info->msg ? 0 : info->msg_len;
    ue = MPL_malloc(sizeof(*ue) + inline_len, MPL_MEM_BUFFER);
    if (!ue)
        MPIDI_AMLAPI_fatal("out of memory holding a %zu-byte early message from rank %d",
                           info->msg_len, info->src);
    ue->hdr = h;
    ue->peer_src = info->src;
    ue->len = info->msg_len;
    ue->held = info->protocol == AML_PROTO_RNDV ? 0 : info->msg_len;
    ue->protocol = info->protocol;
    ue->buf = info->msg ? NULL : (void *) (ue + 1);
    ue->deferred = AML_HANDLE_NONE;
    ue->rreq = NULL;
    ue->complete = 0;
    if (info->msg) {
        /* rendezvous: only the envelope waits here; adaptive eager: aml holds the data, and
         * the sender's credit with it, until the receive that matches takes it */
        ue->deferred = info->msg;
        ue->complete = 1;
        recv->defer = 1;
    } else if (info->data) {
        if (info->msg_len)
            memcpy(ue->buf, info->data, info->msg_len);
        ue->complete = 1;
    } else {
        recv->buf = ue->buf;
        recv->compl_fn = ue_data_done;
        recv->compl_arg = ue;
    }
    MPIDI_AMLAPI_ue_enqueue(ue);
    return 0;
}

/* The small-message handler (aml_register_small_handler): a one-packet message without a
 * sync request that matches a posted receive of a basic datatype with room for it completes
 * here, with no aligned copy of the envelope and no landing structures (the common case of a
 * message-rate receiver); anything else, malformed envelopes included, is left to
 * MPIDI_AMLAPI_p2p_handler (nothing is changed before this returns 0). */
int MPIDI_AMLAPI_p2p_small(aml_t * aml, void *ctx, int src, const void *uhdr, size_t uhdr_len,
                           const void *data, size_t len)
{
    MPIDI_AMLAPI_p2p_hdr_t h;
    MPIR_Request *rreq;
    MPI_Aint dsz;
    (void) aml;
    (void) ctx;
    (void) src;

    if (uhdr_len != MPIDI_AMLAPI_P2P_HDR_NOID)
        return 0;
    memcpy(&h, uhdr, MPIDI_AMLAPI_P2P_HDR_NOID);
    if (h.flags & MPIDI_AMLAPI_P2P_SYNC)
        return 0;
    rreq = posted_find(&h);
    if (!rreq || !HANDLE_IS_BUILTIN(REQ(rreq).datatype))
        return 0;
    MPIR_Datatype_get_size_macro(REQ(rreq).datatype, dsz);
    if ((MPI_Aint) len > dsz * REQ(rreq).count)
        return 0;       /* truncated: the general path reports it */
    MPIDI_AMLAPI_posted_remove(rreq);
    rreq->status.MPI_SOURCE = h.src;
    rreq->status.MPI_TAG = h.tag;
    rreq->status.MPI_ERROR = MPI_SUCCESS;
    MPIR_STATUS_SET_COUNT(rreq->status, (MPI_Aint) len);
    aml_copy_small(REQ(rreq).buf, data, (MPI_Aint) len);
    REQ(rreq).flags = 0;        /* a basic datatype holds no reference */
    MPIDIU_request_complete(rreq);
    return 1;
}
