/*
 * Native MPI point-to-point entry points (MPIDI_NM_mpi_*): thin wrappers over amlapi_p2p_send.c,
 * amlapi_p2p_recv.c, amlapi_p2p_probe.c and amlapi_p2p_ctrl.c, where matching, the protocols' use and
 * cancellation live (amlapi_p2p_impl.h describes the design and lists the files).
 */
#ifndef AMLAPI_P2P_H_INCLUDED
#define AMLAPI_P2P_H_INCLUDED

#include "amlapi_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_isend(const void *buf, MPI_Aint count,
                                                MPI_Datatype datatype, int rank, int tag,
                                                MPIR_Comm * comm, int context_offset,
                                                MPIDI_av_entry_t * addr, MPIR_Request ** request)
{
    (void) addr;
    return MPIDI_AMLAPI_send(buf, count, datatype, rank, tag, comm, context_offset, request, 0);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_issend(const void *buf, MPI_Aint count,
                                                 MPI_Datatype datatype, int rank, int tag,
                                                 MPIR_Comm * comm, int context_offset,
                                                 MPIDI_av_entry_t * addr, MPIR_Request ** request)
{
    (void) addr;
    return MPIDI_AMLAPI_send(buf, count, datatype, rank, tag, comm, context_offset, request, 1);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_isend_coll(const void *buf, MPI_Aint count,
                                                 MPI_Datatype datatype, int rank, int tag,
                                                 MPIR_Comm * comm, int context_offset,
                                                 MPIDI_av_entry_t * addr, MPIR_Request ** request,
                                                 MPIR_Errflag_t * errflag)
{
    (void) addr;
    /* a collective's error travels to the peers in the tag */
    switch (*errflag) {
        case MPIR_ERR_NONE:
            break;
        case MPIR_ERR_PROC_FAILED:
            MPIR_TAG_SET_PROC_FAILURE_BIT(tag);
            break;
        default:
            MPIR_TAG_SET_ERROR_BIT(tag);
    }
    return MPIDI_AMLAPI_send(buf, count, datatype, rank, tag, comm, context_offset, request, 0);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_cancel_send(MPIR_Request * sreq)
{
    return MPIDI_AMLAPI_cancel_send(sreq);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype,
                                                int rank, int tag, MPIR_Comm * comm,
                                                int context_offset, MPIDI_av_entry_t * addr,
                                                MPIR_Request ** request, MPIR_Request * partner)
{
    int mpi_errno;
    (void) addr;
    mpi_errno = MPIDI_AMLAPI_irecv(buf, count, datatype, rank, tag, comm, context_offset,
                                   request);
    MPIDI_REQUEST_SET_LOCAL(*request, 0, partner);
    return mpi_errno;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_imrecv(void *buf, MPI_Aint count,
                                                 MPI_Datatype datatype, MPIR_Request * message)
{
    return MPIDI_AMLAPI_imrecv(buf, count, datatype, message);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_cancel_recv(MPIR_Request * rreq)
{
    return MPIDI_AMLAPI_cancel_recv(rreq);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_improbe(int source, int tag, MPIR_Comm * comm,
                                                  int context_offset, MPIDI_av_entry_t * addr,
                                                  int *flag, MPIR_Request ** message,
                                                  MPI_Status * status)
{
    (void) addr;
    return MPIDI_AMLAPI_iprobe(source, tag, comm, context_offset, flag, message, status);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_iprobe(int source, int tag, MPIR_Comm * comm,
                                                 int context_offset, MPIDI_av_entry_t * addr,
                                                 int *flag, MPI_Status * status)
{
    (void) addr;
    return MPIDI_AMLAPI_iprobe(source, tag, comm, context_offset, flag, NULL, status);
}

#endif /* AMLAPI_P2P_H_INCLUDED */
