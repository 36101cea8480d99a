/*
 * amlapi netmod: the non-inline entry points other than init/finalize. Partitioned
 * communication and windows' info use MPICH's generic implementations (their traffic rides
 * on amlapi's active messages); window hooks and direct RMA are in amlapi_rma_win.c, dynamic
 * processes in amlapi_spawn.c.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_noinline.h"
#include "amlapi_win.h"
#include "amlapi_rma_lock.h"

int MPIDI_AMLAPI_comm_set_hints(MPIR_Comm * comm_ptr, MPIR_Info * info)
{
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_mpi_comm_commit_pre_hook(MPIR_Comm * comm)
{
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_mpi_comm_commit_post_hook(MPIR_Comm * comm)
{
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_mpi_comm_free_hook(MPIR_Comm * comm)
{
    MPIDI_AMLAPI_coll_comm_free(comm);
    MPIDI_AMLAPI_coll_shm_comm_free(comm);
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_mpi_psend_init(const void *buf, int partitions, MPI_Aint count,
                                MPI_Datatype datatype, int rank, int tag, MPIR_Comm * comm,
                                MPIR_Info * info, MPIDI_av_entry_t * av, MPIR_Request ** req_p)
{
    return MPIDIG_mpi_psend_init(buf, partitions, count, datatype, rank, tag, comm, info, req_p);
}

int MPIDI_AMLAPI_mpi_precv_init(void *buf, int partitions, MPI_Aint count, MPI_Datatype datatype,
                                int rank, int tag, MPIR_Comm * comm, MPIR_Info * info,
                                MPIDI_av_entry_t * av, MPIR_Request ** req_p)
{
    return MPIDIG_mpi_precv_init(buf, partitions, count, datatype, rank, tag, comm, info, req_p);
}

void *MPIDI_AMLAPI_mpi_alloc_mem(MPI_Aint size, MPIR_Info * info)
{
    return MPIDIG_mpi_alloc_mem(size, info);
}

int MPIDI_AMLAPI_mpi_free_mem(void *ptr)
{
    return MPIDIG_mpi_free_mem(ptr);
}

int MPIDI_AMLAPI_mpi_win_set_info(MPIR_Win * win, MPIR_Info * info)
{
    return MPIDIG_mpi_win_set_info(win, info);
}

int MPIDI_AMLAPI_mpi_win_get_info(MPIR_Win * win, MPIR_Info ** info_p)
{
    return MPIDIG_mpi_win_get_info(win, info_p);
}

int MPIDI_AMLAPI_mpi_win_free(MPIR_Win ** win_p)
{
    /* before MPIDIG's barrier: this rank's lock releases have arrived */
    int mpi_errno = MPIDI_AMLAPI_lk_win_free(*win_p);
    if (mpi_errno)
        return mpi_errno;
    return MPIDIG_mpi_win_free(win_p);
}

int MPIDI_AMLAPI_mpi_win_create(void *base, MPI_Aint length, int disp_unit, MPIR_Info * info,
                                MPIR_Comm * comm_ptr, MPIR_Win ** win_p)
{
    return MPIDIG_mpi_win_create(base, length, disp_unit, info, comm_ptr, win_p);
}

int MPIDI_AMLAPI_mpi_win_attach(MPIR_Win * win, void *base, MPI_Aint size)
{
    return MPIDIG_mpi_win_attach(win, base, size);
}

int MPIDI_AMLAPI_mpi_win_allocate_shared(MPI_Aint size, int disp_unit, MPIR_Info * info,
                                         MPIR_Comm * comm_ptr, void **baseptr_p,
                                         MPIR_Win ** win_p)
{
    return MPIDIG_mpi_win_allocate_shared(size, disp_unit, info, comm_ptr, baseptr_p, win_p);
}

int MPIDI_AMLAPI_mpi_win_detach(MPIR_Win * win, const void *base)
{
    return MPIDIG_mpi_win_detach(win, base);
}

int MPIDI_AMLAPI_mpi_win_allocate(MPI_Aint size, int disp_unit, MPIR_Info * info,
                                  MPIR_Comm * comm, void *baseptr, MPIR_Win ** win_p)
{
    return MPIDIG_mpi_win_allocate(size, disp_unit, info, comm, baseptr, win_p);
}

int MPIDI_AMLAPI_mpi_win_create_dynamic(MPIR_Info * info, MPIR_Comm * comm, MPIR_Win ** win_p)
{
    return MPIDIG_mpi_win_create_dynamic(info, comm, win_p);
}

int MPIDI_AMLAPI_mpi_type_commit_hook(MPIR_Datatype * datatype_p)
{
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_mpi_type_free_hook(MPIR_Datatype * datatype_p)
{
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_mpi_op_commit_hook(MPIR_Op * op_p)
{
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_mpi_op_free_hook(MPIR_Op * op_p)
{
    return MPI_SUCCESS;
}
