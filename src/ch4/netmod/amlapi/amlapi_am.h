/*
 * MPICH's generic active-message API (MPIDIG) on aml. An MPIDIG message is one aml message
 * to handler MPIDI_AMLAPI_H_MPIDIG whose user header is MPIDI_AMLAPI_am_hdr_t + MPIDIG's
 * header, and whose data is the message data: aml picks one-packet, eager or rendezvous by
 * size, so am_isend takes any size.
 */
#ifndef AMLAPI_AM_H_INCLUDED
#define AMLAPI_AM_H_INCLUDED

#include "amlapi_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_isend(int rank, MPIR_Comm * comm, int handler_id,
                                               const void *am_hdr, MPI_Aint am_hdr_sz,
                                               const void *data, MPI_Aint count,
                                               MPI_Datatype datatype, int src_vci, int dst_vci,
                                               MPIR_Request * sreq)
{
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    MPI_Aint data_sz, dt_true_lb;
    MPIR_Datatype *dt_ptr;
    const void *send_buf;

    MPIR_FUNC_ENTER;
    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    MPIDI_AMLAPI_AMREQ(sreq).handler_id = handler_id;
    if (dt_contig || data_sz == 0) {
        send_buf = MPIR_get_contig_ptr(data, dt_true_lb);
    } else {
        /* freed when the send completes (am_request_finalize) */
        void *pack;
        mpi_errno = MPIDI_AMLAPI_pack(data, count, datatype, data_sz, &pack);
        MPIR_ERR_CHECK(mpi_errno);
        MPIDI_AMLAPI_AMREQ(sreq).pack_buffer = pack;
        send_buf = pack;
    }
    mpi_errno = MPIDI_AMLAPI_am_send(MPIDI_AMLAPI_peer(comm, rank), handler_id, am_hdr,
                                     am_hdr_sz, send_buf, data_sz, src_vci, dst_vci, sreq);
  fn_exit:
    MPIR_FUNC_EXIT;
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_isend_reply(MPIR_Comm * comm, int src_rank,
                                                     int handler_id, const void *am_hdr,
                                                     MPI_Aint am_hdr_sz, const void *data,
                                                     MPI_Aint count, MPI_Datatype datatype,
                                                     int src_vci, int dst_vci,
                                                     MPIR_Request * sreq)
{
    return MPIDI_NM_am_isend(src_rank, comm, handler_id, am_hdr, am_hdr_sz, data, count,
                             datatype, src_vci, dst_vci, sreq);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_send_hdr(int rank, MPIR_Comm * comm, int handler_id,
                                                  const void *am_hdr, MPI_Aint am_hdr_sz,
                                                  int src_vci, int dst_vci)
{
    /* a header-only message is a one-packet message: aml copies it, nothing to wait for */
    return MPIDI_AMLAPI_am_send(MPIDI_AMLAPI_peer(comm, rank), handler_id, am_hdr,
                                am_hdr_sz, NULL, 0, src_vci, dst_vci, NULL);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_send_hdr_reply(MPIR_Comm * comm, int src_rank,
                                                        int handler_id, const void *am_hdr,
                                                        MPI_Aint am_hdr_sz, int src_vci,
                                                        int dst_vci)
{
    return MPIDI_NM_am_send_hdr(src_rank, comm, handler_id, am_hdr, am_hdr_sz, src_vci,
                                dst_vci);
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_hdr_max_sz(void)
{
    return MPIDI_AMLAPI_global.am_hdr_max;
}

/* hdr + data of a message that travels as one aml packet */
MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_eager_limit(void)
{
    return MPIDI_AMLAPI_global.am_onepacket_max;
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_eager_buf_limit(void)
{
    return MPIDI_AMLAPI_global.packet_size;
}

/* Up to aml's eager limit MPIDIG sends the data with the header (aml cuts it into packets);
 * above it MPIDIG asks first (RTS/CTS) so unmatched large messages cost the receiver no
 * memory, then hands the whole buffer to am_isend, which aml moves by rendezvous. */
MPL_STATIC_INLINE_PREFIX bool MPIDI_NM_am_check_eager(MPI_Aint am_hdr_sz, MPI_Aint data_sz,
                                                      const void *data, MPI_Aint count,
                                                      MPI_Datatype datatype,
                                                      MPIR_Request * sreq)
{
    return data_sz <= MPIDI_AMLAPI_global.eager_limit;
}

MPL_STATIC_INLINE_PREFIX MPIDIG_recv_data_copy_cb MPIDI_NM_am_get_data_copy_cb(uint32_t attr)
{
    return NULL;
}

#endif /* AMLAPI_AM_H_INCLUDED */
