/*
 * Native point-to-point: receiving. The landing and completion of a matched message (status,
 * truncation, staging of non-contiguous data), and the receive calls: irecv, which matches
 * an early arrival or posts, imrecv of a probed message, cancel_recv (see amlapi_p2p_impl.h).
 */

#include "mpidimpl.h"
#include "amlapi_p2p_impl.h"

/* ---- receive completion --------------------------------------------------------------- */

static MPI_Aint recv_capacity(MPIR_Request * rreq)
{
    MPI_Aint sz;
    MPIR_Datatype_get_size_macro(REQ(rreq).datatype, sz);
    return sz * REQ(rreq).count;
}

/* The envelope is known: fill the status. A message longer than the buffer is the user's
 * error, returned in the request (MPI_ERR_TRUNCATE) once the message has been consumed; the
 * count is what fits. */
void MPIDI_AMLAPI_recv_set_status(MPIR_Request * rreq, const MPIDI_AMLAPI_p2p_hdr_t * h,
                                  MPI_Aint len)
{
    MPI_Aint cap = recv_capacity(rreq);
    rreq->status.MPI_SOURCE = h->src;
    rreq->status.MPI_TAG = h->tag;
    if (len > cap) {
        rreq->status.MPI_ERROR = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE,
                                                      __func__, __LINE__, MPI_ERR_TRUNCATE,
                                                      "**truncate", "**truncate %d %d %d %d",
                                                      h->src, MPIR_TAG_MASK_ERROR_BITS(h->tag),
                                                      (int) len, (int) cap);
        MPIR_STATUS_SET_COUNT(rreq->status, cap);
    } else {
        rreq->status.MPI_ERROR = MPI_SUCCESS;
        MPIR_STATUS_SET_COUNT(rreq->status, len);
    }
}

void MPIDI_AMLAPI_recv_complete(MPIR_Request * rreq)
{
    if (REQ(rreq).flags & MPIDI_AMLAPI_RF_DT_REF)
        MPIR_Datatype_release_if_not_builtin(REQ(rreq).datatype);
    REQ(rreq).flags = 0;
    MPIDIU_request_complete(rreq);
}

/* Copies len bytes of message data (contiguous, from offset 0) into the user's buffer,
 * dropping what does not fit (the status is set, and its count says what fits). Data whose
 * basic types do not fit the receive type (3 chars into ints) is the user's error: the
 * request carries MPI_ERR_TYPE, as in MPICH's generic layer, and completes normally. */
void MPIDI_AMLAPI_recv_copy_out(MPIR_Request * rreq, const void *data, MPI_Aint len)
{
    MPI_Aint cnt = MPIR_STATUS_GET_COUNT(rreq->status), n = len < cnt ? len : cnt, actual;
    int contig, rc;
    MPI_Aint true_lb;
    if (n == 0)
        return;
    MPIDI_Datatype_check_contig_lb(REQ(rreq).datatype, contig, true_lb);
    if (contig) {
        aml_copy_small(MPIR_get_contig_ptr(REQ(rreq).buf, true_lb), data, n);
        return;
    }
    rc = MPIR_Typerep_unpack(data, n, REQ(rreq).buf, REQ(rreq).count, REQ(rreq).datatype, 0,
                             &actual);
    if (rc == MPI_SUCCESS && actual == n)
        return;
    if (rreq->status.MPI_ERROR == MPI_SUCCESS)  /* a truncation stays the error reported */
        rreq->status.MPI_ERROR = rc != MPI_SUCCESS ? rc :
            MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                 MPI_ERR_TYPE, "**dtypemismatch", 0);
    MPIR_STATUS_SET_COUNT(rreq->status, rc == MPI_SUCCESS ? actual : 0);
}

/* completion handler of a message landed in a staging buffer (non-contiguous receive) or,
 * truncated, cut to what fits (truncated_piece) */
static void staged_done(aml_t * aml, void *arg)
{
    MPIR_Request *rreq = arg;
    (void) aml;
    if (REQ(rreq).pack_buf) {
        MPIDI_AMLAPI_recv_copy_out(rreq, REQ(rreq).pack_buf, MPIR_STATUS_GET_COUNT(rreq->status));
        MPL_free(REQ(rreq).pack_buf);
        REQ(rreq).pack_buf = NULL;
    }
    MPIDI_AMLAPI_recv_complete(rreq);
}

/* completion handler of a message landed in place */
static void direct_done(aml_t * aml, void *arg)
{
    (void) aml;
    MPIDI_AMLAPI_recv_complete((MPIR_Request *) arg);
}

/* aml unpack function of a truncated message: keeps the bytes that fit (the status count),
 * in the staging buffer when there is one, else in the user's contiguous buffer, and drops
 * the rest as it arrives, so a truncated message costs no buffer of its own size here. */
static void truncated_piece(void *arg, size_t offset, const void *data, size_t len)
{
    MPIR_Request *rreq = arg;
    size_t keep = (size_t) MPIR_STATUS_GET_COUNT(rreq->status);
    char *dst = REQ(rreq).pack_buf;
    if (offset >= keep)
        return;
    if (len > keep - offset)
        len = keep - offset;
    if (!dst) {
        int contig;
        MPI_Aint true_lb;
        MPIDI_Datatype_check_contig_lb(REQ(rreq).datatype, contig, true_lb);
        MPIR_Assert(contig);
        dst = MPIR_get_contig_ptr(REQ(rreq).buf, true_lb);
    }
    memcpy(dst + offset, data, len);
}

/* The landing for a matched message (status already set): the user's buffer when contiguous
 * and large enough; else a staging buffer unpacked once at completion (typerep cannot unpack
 * a basic element split across packets); a truncated message keeps only what fits. */
void MPIDI_AMLAPI_recv_landing(MPIR_Request * rreq, MPI_Aint len, aml_recv_t * recv)
{
    int contig;
    MPI_Aint true_lb, keep = MPIR_STATUS_GET_COUNT(rreq->status);
    MPIDI_Datatype_check_contig_lb(REQ(rreq).datatype, contig, true_lb);
    memset(recv, 0, sizeof(*recv));
    recv->compl_arg = rreq;
    if (contig && keep == len) {
        recv->buf = MPIR_get_contig_ptr(REQ(rreq).buf, true_lb);
        recv->compl_fn = direct_done;
        return;
    }
    if (!contig && keep > 0) {
        REQ(rreq).pack_buf = MPL_malloc(keep, MPL_MEM_BUFFER);
        if (!REQ(rreq).pack_buf) {
            /* no room to stage it: this receive fails (the error handler decides), the
             * message is consumed and dropped as it arrives, and the job goes on */
            rreq->status.MPI_ERROR = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE,
                                                          __func__, __LINE__, MPI_ERR_NO_MEM,
                                                          "**nomem", "**nomem %s",
                                                          "amlapi receive staging buffer");
            MPIR_STATUS_SET_COUNT(rreq->status, 0);
            keep = 0;
        }
    }
    if (keep == len) {
        recv->buf = REQ(rreq).pack_buf;
    } else {
        recv->unpack = truncated_piece;
        recv->unpack_arg = rreq;
        recv->partial = 1;      /* a rendezvous then moves only what fits */
        recv->want = keep;
    }
    recv->compl_fn = staged_done;
}

/* ---- receiving ------------------------------------------------------------------------ */

/* Receives the early arrival ue into rreq (status already set). */
static void recv_from_ue(MPIR_Request * rreq, MPIDI_AMLAPI_ue_t * ue)
{
    if (ue->hdr.flags & MPIDI_AMLAPI_P2P_SYNC)
        MPIDI_AMLAPI_send_ctrl(ue->peer_src, MPIDI_AMLAPI_CTRL_SYNC_ACK, 0, ue->hdr.msg_id);
    if (ue->deferred) {
        aml_recv_t r;
        int rc;
        MPIDI_AMLAPI_recv_landing(rreq, ue->len, &r);
        if (ue->protocol == AML_PROTO_RNDV)
            MPIDI_AMLAPI_pv.rndv_recvd++;
        rc = aml_accept(MPIDI_AMLAPI_global.aml, ue->deferred, &r);
        /* only a handle aml never gave (or took back) fails: our bug, not the user's */
        if (rc != AML_OK)
            MPIDI_AMLAPI_fatal("aml_accept of a deferred message from rank %d failed: %s",
                               ue->peer_src, aml_strerror(rc));
        MPL_free(ue);
    } else if (ue->complete) {
        MPIDI_AMLAPI_recv_copy_out(rreq, ue->buf, ue->len);
        MPL_free(ue);
        MPIDI_AMLAPI_recv_complete(rreq);
    } else {
        ue->rreq = rreq;        /* ue_data_done finishes */
    }
}

static inline void recv_init(MPIR_Request * rreq, void *buf, MPI_Aint count, MPI_Datatype datatype,
                      int rank, int tag, int context_id)
{
    REQ(rreq).buf = buf;
    REQ(rreq).count = count;
    REQ(rreq).datatype = datatype;
    REQ(rreq).rank = rank;
    REQ(rreq).tag = tag;
    REQ(rreq).context_id = context_id;
    REQ(rreq).flags = 0;
    REQ(rreq).pack_buf = NULL;
    REQ(rreq).msg_id = 0;
    REQ(rreq).ue = NULL;
    if (!HANDLE_IS_BUILTIN(datatype)) {
        MPIR_Datatype_add_ref_if_not_builtin(datatype);
        REQ(rreq).flags |= MPIDI_AMLAPI_RF_DT_REF;
    }
}

int MPIDI_AMLAPI_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                       MPIR_Comm * comm, int context_offset, MPIR_Request ** request)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Request *rreq = *request;
    MPIDI_AMLAPI_ue_t *ue;
    int context_id = comm->recvcontext_id + context_offset;

    if (rreq == NULL) {
        MPIDI_CH4_REQUEST_CREATE(rreq, MPIR_REQUEST_KIND__RECV, 0, 2);
        MPIR_ERR_CHKANDSTMT(rreq == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    } else {
        MPIR_Request_add_ref(rreq);
    }
    *request = rreq;
    if (unlikely(rank == MPI_PROC_NULL)) {
        /* complete at once; the fields cancel_recv and completion read say so (a cancel of
         * it has no effect: it is not posted) */
        REQ(rreq).flags = 0;
        REQ(rreq).pack_buf = NULL;
        REQ(rreq).msg_id = 0;
        REQ(rreq).ue = NULL;
        rreq->status.MPI_SOURCE = MPI_PROC_NULL;
        rreq->status.MPI_TAG = MPI_ANY_TAG;
        rreq->status.MPI_ERROR = MPI_SUCCESS;
        MPIR_STATUS_SET_COUNT(rreq->status, 0);
        MPIDIU_request_complete(rreq);
        goto fn_exit;
    }
    recv_init(rreq, buf, count, datatype, rank, tag, context_id);

    ue = MPIDI_AMLAPI_ue_find(rank, tag, context_id);
    if (ue) {
        MPIDI_AMLAPI_ue_dequeue(ue);
        MPIDI_AMLAPI_recv_set_status(rreq, &ue->hdr, ue->len);
        recv_from_ue(rreq, ue);
    } else {
        MPIDI_AMLAPI_posted_append(rreq);
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_imrecv(void *buf, MPI_Aint count, MPI_Datatype datatype, MPIR_Request * message)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_AMLAPI_ue_t *ue = REQ(message).ue;
    /* MPICH hands us only message requests our improbe made, each once */
    MPIR_ERR_CHKANDJUMP1(!ue, mpi_errno, MPI_ERR_INTERN, "**intern", "**intern %s",
                         "amlapi: MPI_Imrecv of a message that holds no probed message");
    /* the message request becomes the receive request; its status was set by improbe */
    recv_init(message, buf, count, datatype, ue->hdr.src, ue->hdr.tag, ue->hdr.context_id);
    MPIDI_AMLAPI_recv_set_status(message, &ue->hdr, ue->len);
    recv_from_ue(message, ue);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_cancel_recv(MPIR_Request * rreq)
{
    if (REQ(rreq).flags & MPIDI_AMLAPI_RF_POSTED) {
        MPIDI_AMLAPI_posted_remove(rreq);
        MPIR_STATUS_SET_CANCEL_BIT(rreq->status, TRUE);
        MPIR_STATUS_SET_COUNT(rreq->status, 0);
        MPIDI_AMLAPI_recv_complete(rreq);
    }
    return MPI_SUCCESS;
}
