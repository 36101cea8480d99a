/*
 * Native point-to-point: probes. MPI_Iprobe and MPI_Improbe look in the early-arrival queue,
 * where every message that has arrived and not been received waits; improbe takes the one it
 * finds out of the queue into a message request for MPI_Imrecv (amlapi_p2p_recv.c).
 */

#include "mpidimpl.h"
#include "amlapi_p2p_impl.h"

int MPIDI_AMLAPI_iprobe(int source, int tag, MPIR_Comm * comm, int context_offset, int *flag,
                        MPIR_Request ** message, MPI_Status * status)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_AMLAPI_ue_t *ue;

    if (unlikely(source == MPI_PROC_NULL)) {
        *flag = 1;
        if (message)
            *message = NULL;
        if (status != MPI_STATUS_IGNORE) {
            status->MPI_SOURCE = MPI_PROC_NULL;
            status->MPI_TAG = MPI_ANY_TAG;
            MPIR_STATUS_SET_COUNT(*status, 0);
        }
        goto fn_exit;
    }
    ue = MPIDI_AMLAPI_ue_find(source, tag, comm->recvcontext_id + context_offset);
    if (!ue) {
        *flag = 0;      /* MPID_Iprobe progresses before the caller asks again */
        goto fn_exit;
    }
    *flag = 1;
    if (status != MPI_STATUS_IGNORE) {
        status->MPI_SOURCE = ue->hdr.src;
        status->MPI_TAG = ue->hdr.tag;
        /* MPI_ERROR is left alone: probes do not set it */
        MPIR_STATUS_SET_COUNT(*status, ue->len);
    }
    if (message) {
        MPIR_Request *req;
        MPIDI_CH4_REQUEST_CREATE(req, MPIR_REQUEST_KIND__MPROBE, 0, 2);
        MPIR_ERR_CHKANDSTMT(req == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
        MPIDI_AMLAPI_ue_dequeue(ue);
        REQ(req).ue = ue;
        REQ(req).flags = 0;
        req->status.MPI_SOURCE = ue->hdr.src;
        req->status.MPI_TAG = ue->hdr.tag;
        MPIR_STATUS_SET_COUNT(req->status, ue->len);
        *message = req;
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}
