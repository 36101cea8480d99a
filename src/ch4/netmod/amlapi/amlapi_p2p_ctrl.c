/*
 * Native point-to-point: control messages (handler MPIDI_AMLAPI_H_CTRL, header only). A
 * receiver acknowledges a synchronous send it matched (SYNC_ACK); a sender cancels a send the
 * receiver has not matched (CANCEL_REQ, answered by CANCEL_ACK). The sends waiting for an
 * answer are kept by message id (see amlapi_p2p_impl.h).
 */

#include "mpidimpl.h"
#include "amlapi_p2p_impl.h"

/* ---- sends waiting for an answer ------------------------------------------------------ */

/* A send is never on the posted-receive queue: its link there chains it here, so waiting
 * costs no allocation (a user's MPI_Ssend cannot fail for want of memory here). */
void MPIDI_AMLAPI_wait_put(MPIR_Request * sreq, uint64_t msg_id)
{
    MPIR_Request **head = &MPIDI_AMLAPI_p2p.waits[msg_id & 255];
    MPIR_Assert(REQ(sreq).msg_id == msg_id);
    REQ(sreq).next = *head;
    *head = sreq;
}

/* Removes and returns the send waiting under msg_id, or NULL. */
static MPIR_Request *wait_take(uint64_t msg_id)
{
    for (MPIR_Request ** p = &MPIDI_AMLAPI_p2p.waits[msg_id & 255]; *p; p = &REQ(*p).next) {
        if (REQ(*p).msg_id == msg_id) {
            MPIR_Request *r = *p;
            *p = REQ(r).next;
            REQ(r).next = NULL;
            return r;
        }
    }
    return NULL;
}

void MPIDI_AMLAPI_send_ctrl(int peer, uint32_t type, uint32_t result, uint64_t msg_id)
{
    MPIDI_AMLAPI_ctrl_hdr_t h = { type, result, msg_id };
    int rc = aml_amsend(MPIDI_AMLAPI_global.aml, peer, MPIDI_AMLAPI_H_CTRL, &h, sizeof(h),
                        NULL, 0, NULL, NULL, NULL);
    if (rc != AML_OK)
        MPIDI_AMLAPI_fatal("cannot send a control message to rank %d: %s", peer,
                           aml_strerror(rc));
}

/* ---- control messages ----------------------------------------------------------------- */

static void sync_acked(MPIR_Request * sreq)
{
    REQ(sreq).flags &= ~MPIDI_AMLAPI_RF_SYNC_WAIT;
    MPIDI_AMLAPI_pv.sync_acks++;
    MPIDIU_request_complete(sreq);
}

int MPIDI_AMLAPI_ctrl_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info,
                              aml_recv_t * recv)
{
    MPIDI_AMLAPI_ctrl_hdr_t h;
    MPIR_Request *sreq;
    (void) aml;
    (void) ctx;
    (void) recv;
    if (info->uhdr_len != sizeof(h) || info->msg_len != 0)
        MPIDI_AMLAPI_fatal("malformed control message from rank %d: %zu-byte header, %zu data "
                           "bytes", info->src, info->uhdr_len, info->msg_len);
    memcpy(&h, info->uhdr, sizeof(h));
    switch (h.type) {
        case MPIDI_AMLAPI_CTRL_SYNC_ACK:
            sreq = wait_take(h.msg_id);
            if (!sreq || !(REQ(sreq).flags & MPIDI_AMLAPI_RF_SYNC_WAIT) ||
                REQ(sreq).peer != info->src)
                MPIDI_AMLAPI_fatal("malformed control message from rank %d: SYNC_ACK for "
                                   "message %llu, which no synchronous send awaits", info->src,
                                   (unsigned long long) h.msg_id);
            if (REQ(sreq).flags & MPIDI_AMLAPI_RF_CANCEL_WAIT)
                MPIDI_AMLAPI_wait_put(sreq, h.msg_id); /* still awaits the CANCEL_ACK */
            sync_acked(sreq);
            break;
        case MPIDI_AMLAPI_CTRL_CANCEL_REQ:{
                int done = 0;
                for (MPIDI_AMLAPI_ue_t * ue = MPIDI_AMLAPI_p2p.ue_head; ue; ue = ue->next) {
                    if (ue->peer_src != info->src || ue->hdr.msg_id != h.msg_id)
                        continue;
                    /* an early arrival nobody matched: drop it (an eager one still
                     * arriving stays: it will be received) */
                    if (ue->complete) {
                        MPIDI_AMLAPI_ue_dequeue(ue);
                        if (ue->deferred)
                            aml_reject(MPIDI_AMLAPI_global.aml, ue->deferred);
                        MPL_free(ue);
                        done = 1;
                    }
                    break;
                }
                MPIDI_AMLAPI_send_ctrl(info->src, MPIDI_AMLAPI_CTRL_CANCEL_ACK, done, h.msg_id);
                break;
            }
        case MPIDI_AMLAPI_CTRL_CANCEL_ACK:
            sreq = wait_take(h.msg_id);
            if (!sreq || !(REQ(sreq).flags & MPIDI_AMLAPI_RF_CANCEL_WAIT) ||
                REQ(sreq).peer != info->src)
                MPIDI_AMLAPI_fatal("malformed control message from rank %d: CANCEL_ACK for "
                                   "message %llu, which no cancel awaits", info->src,
                                   (unsigned long long) h.msg_id);
            REQ(sreq).flags &= ~MPIDI_AMLAPI_RF_CANCEL_WAIT;
            if (h.result) {
                MPIDI_AMLAPI_pv.cancel_ok++;
                MPIR_STATUS_SET_CANCEL_BIT(sreq->status, TRUE);
                if (REQ(sreq).flags & MPIDI_AMLAPI_RF_SYNC_WAIT)
                    sync_acked(sreq);   /* the message is gone: no SYNC_ACK will come */
            } else {
                MPIDI_AMLAPI_pv.cancel_fail++;
                if (REQ(sreq).flags & MPIDI_AMLAPI_RF_SYNC_WAIT)
                    MPIDI_AMLAPI_wait_put(sreq, h.msg_id);
            }
            MPIDIU_request_complete(sreq);      /* the cancel's own completion */
            break;
        default:
            MPIDI_AMLAPI_fatal("malformed control message from rank %d: unknown type %u",
                               info->src, h.type);
    }
    return 0;
}

/* ---- send cancellation ---------------------------------------------------------------- */

int MPIDI_AMLAPI_cancel_send(MPIR_Request * sreq)
{
    /* Sends that completed at injection (one-packet, MPICH's shared completed request) have
     * no id: they are not cancelled, which MPI allows. A cancel in flight is not repeated. */
    if (HANDLE_IS_BUILTIN(sreq->handle) || REQ(sreq).msg_id == 0 ||
        (REQ(sreq).flags & MPIDI_AMLAPI_RF_CANCEL_WAIT) ||
        MPIR_STATUS_GET_CANCEL_BIT(sreq->status))
        return MPI_SUCCESS;
    /* The request stays incomplete until the receiver answers: one more completion event,
     * and the reference that event's completion drops. */
    MPIR_Request_add_ref(sreq);
    MPIR_cc_inc(sreq->cc_ptr);
    REQ(sreq).flags |= MPIDI_AMLAPI_RF_CANCEL_WAIT;
    if (REQ(sreq).flags & MPIDI_AMLAPI_RF_SYNC_WAIT)
        wait_take(REQ(sreq).msg_id);    /* one table entry serves both waits */
    MPIDI_AMLAPI_wait_put(sreq, REQ(sreq).msg_id);
    MPIDI_AMLAPI_send_ctrl(REQ(sreq).peer, MPIDI_AMLAPI_CTRL_CANCEL_REQ, 0, REQ(sreq).msg_id);
    return MPI_SUCCESS;
}
