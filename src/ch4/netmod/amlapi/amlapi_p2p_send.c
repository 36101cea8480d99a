/*
 * Native point-to-point: sending. Standard and synchronous sends (MPI_Isend, MPI_Issend and
 * MPICH's collective sends): one aml message each, a small contiguous one completing at
 * injection with no request; a synchronous one also waits for the receiver's SYNC_ACK
 * (amlapi_p2p_ctrl.c). See amlapi_p2p_impl.h.
 */

#include "mpidimpl.h"
#include "amlapi_p2p_impl.h"

static void send_done(aml_t * aml, void *arg)
{
    MPIR_Request *sreq = arg;
    (void) aml;
    MPL_free(REQ(sreq).pack_buf);
    REQ(sreq).pack_buf = NULL;
    MPIDIU_request_complete(sreq);
}

int MPIDI_AMLAPI_send(const void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                      MPIR_Comm * comm, int context_offset, MPIR_Request ** request, int sync)
{
    int mpi_errno = MPI_SUCCESS, rc, dt_contig;
    MPI_Aint data_sz, dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIR_Request *sreq = *request;
    MPIDI_AMLAPI_p2p_hdr_t h;
    aml_xfer_t x;
    void *pack = NULL;

    if (unlikely(rank == MPI_PROC_NULL)) {
        if (sreq)
            MPIR_cc_set(&sreq->cc, 0);
        else
            sreq = MPIR_Request_create_complete(MPIR_REQUEST_KIND__SEND);
        *request = sreq;
        goto fn_exit;
    }

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    h.tag = tag;
    h.src = comm->rank;
    h.context_id = comm->context_id + context_offset;

    if (likely(!sync && (dt_contig || data_sz == 0) && data_sz <= MPIDI_AMLAPI_p2p.inline_max)) {
        /* small one-packet: aml copies envelope and data before returning, so this completes
         * at injection: no request object (MPICH's shared completed request), no allocation
         * on either side, and no message id (nothing can wait for it). Larger one-packet
         * messages go below with a request: aml sends them from the user's buffer. */
        h.flags = 0;
        rc = aml_amsend_small(MPIDI_AMLAPI_global.aml, MPIDI_AMLAPI_peer(comm, rank),
                              MPIDI_AMLAPI_H_P2P, &h, MPIDI_AMLAPI_P2P_HDR_NOID,
                              MPIR_get_contig_ptr(buf, dt_true_lb), data_sz);
        MPIDI_AMLAPI_CHK(rc, "aml_amsend_small");
        if (sreq) {
            MPIR_cc_set(&sreq->cc, 0);
            REQ(sreq).msg_id = 0;
        } else {
            sreq = MPIR_Request_create_complete(MPIR_REQUEST_KIND__SEND);
        }
        *request = sreq;
        goto fn_exit;
    }

    h.flags = sync ? MPIDI_AMLAPI_P2P_SYNC : 0;
    if (unlikely(++MPIDI_AMLAPI_p2p.next_msg_id == 0))
        MPIDI_AMLAPI_p2p.next_msg_id = 1;       /* 0 means "no id" in a request */
    h.msg_id = MPIDI_AMLAPI_p2p.next_msg_id;

    memset(&x, 0, sizeof(x));
    x.peer = MPIDI_AMLAPI_peer(comm, rank);
    x.handler = MPIDI_AMLAPI_H_P2P;
    x.uhdr = &h;
    x.uhdr_len = sizeof(h);
    x.len = data_sz;
    x.protocol = AML_PROTO_AUTO;
    if (dt_contig || data_sz == 0) {
        x.data = MPIR_get_contig_ptr(buf, dt_true_lb);
    } else {
        /* freed at origin completion (send_done) */
        mpi_errno = MPIDI_AMLAPI_pack(buf, count, datatype, data_sz, &pack);
        MPIR_ERR_CHECK(mpi_errno);
        x.data = pack;
    }

    if (sreq == NULL) {
        MPIDI_CH4_REQUEST_CREATE(sreq, MPIR_REQUEST_KIND__SEND, 0, 2);
        MPIR_ERR_CHKANDSTMT(sreq == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    } else {
        MPIR_Request_add_ref(sreq);
    }
    REQ(sreq).flags = 0;
    REQ(sreq).pack_buf = pack;
    REQ(sreq).msg_id = h.msg_id;
    REQ(sreq).peer = x.peer;
    pack = NULL;
    if (sync) {
        /* complete = data sent (origin) + matched (SYNC_ACK) */
        MPIR_cc_set(&sreq->cc, 2);
        REQ(sreq).flags |= MPIDI_AMLAPI_RF_SYNC_WAIT;
        MPIDI_AMLAPI_wait_put(sreq, h.msg_id);
    }
    x.org_fn = send_done;
    x.org_arg = sreq;
    *request = sreq;
    rc = aml_xfer(MPIDI_AMLAPI_global.aml, &x);
    MPIDI_AMLAPI_CHK(rc, "aml_xfer");

  fn_exit:
    return mpi_errno;
  fn_fail:
    MPL_free(pack);
    goto fn_exit;
}
