/*
 * amlapi netmod: collectives. Blocking bcast, allreduce, reduce, allgather, allgatherv,
 * alltoall and barrier, and the nonblocking forms of all but allgatherv, on
 * intracommunicators try coll_torus's torus schedules (amlapi_coll.c) when a torus is known;
 * barrier, small bcast, allreduce and alltoall of a communicator on one node then try its
 * shared-memory segment (amlapi_coll_shm.c); otherwise MPICH's own algorithms run
 * (MPIR_<Coll>_impl, never MPIR_<Coll>, which would come back here). Every other collective
 * is MPICH's, as in MPICH's netmod_am_fallback_coll.h, which is included with the
 * names above moved aside.
 */
#ifndef AMLAPI_COLL_H_INCLUDED
#define AMLAPI_COLL_H_INCLUDED

/* amlapi_coll.c's entry points are declared in amlapi_impl.h */

#define MPIDI_NM_mpi_barrier    MPIDI_AMLAPI_generic_barrier
#define MPIDI_NM_mpi_bcast      MPIDI_AMLAPI_generic_bcast
#define MPIDI_NM_mpi_allreduce  MPIDI_AMLAPI_generic_allreduce
#define MPIDI_NM_mpi_reduce     MPIDI_AMLAPI_generic_reduce
#define MPIDI_NM_mpi_allgather  MPIDI_AMLAPI_generic_allgather
#define MPIDI_NM_mpi_allgatherv MPIDI_AMLAPI_generic_allgatherv
#define MPIDI_NM_mpi_alltoall   MPIDI_AMLAPI_generic_alltoall
#define MPIDI_NM_mpi_ibarrier   MPIDI_AMLAPI_generic_ibarrier
#define MPIDI_NM_mpi_ibcast     MPIDI_AMLAPI_generic_ibcast
#define MPIDI_NM_mpi_iallreduce MPIDI_AMLAPI_generic_iallreduce
#define MPIDI_NM_mpi_ireduce    MPIDI_AMLAPI_generic_ireduce
#define MPIDI_NM_mpi_iallgather MPIDI_AMLAPI_generic_iallgather
#define MPIDI_NM_mpi_ialltoall  MPIDI_AMLAPI_generic_ialltoall
#include "netmod_am_fallback_coll.h"
#undef MPIDI_NM_mpi_barrier
#undef MPIDI_NM_mpi_bcast
#undef MPIDI_NM_mpi_allreduce
#undef MPIDI_NM_mpi_reduce
#undef MPIDI_NM_mpi_allgather
#undef MPIDI_NM_mpi_allgatherv
#undef MPIDI_NM_mpi_alltoall
#undef MPIDI_NM_mpi_ibarrier
#undef MPIDI_NM_mpi_ibcast
#undef MPIDI_NM_mpi_iallreduce
#undef MPIDI_NM_mpi_ireduce
#undef MPIDI_NM_mpi_iallgather
#undef MPIDI_NM_mpi_ialltoall

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_barrier(MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_barrier(comm, errflag, NULL, &done);
    if (!done && MPIR_CVAR_AMLAPI_COLL_SHM)
        mpi_errno = MPIDI_AMLAPI_shm_barrier(comm, errflag, &done);
    return done || mpi_errno ? mpi_errno : MPIR_Barrier_impl(comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_bcast(void *buffer, MPI_Aint count,
                                                MPI_Datatype datatype, int root,
                                                MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_bcast(buffer, count, datatype, root, comm, errflag,
                                             NULL, &done);
    if (!done && MPIR_CVAR_AMLAPI_COLL_SHM)
        mpi_errno = MPIDI_AMLAPI_shm_bcast(buffer, count, datatype, root, comm, errflag, &done);
    return done || mpi_errno ? mpi_errno :
        MPIR_Bcast_impl(buffer, count, datatype, root, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allreduce(const void *sendbuf, void *recvbuf,
                                                    MPI_Aint count, MPI_Datatype datatype,
                                                    MPI_Op op, MPIR_Comm * comm,
                                                    MPIR_Errflag_t * errflag)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_reduce(sendbuf, recvbuf, count, datatype, op, -1, comm,
                                              errflag, NULL, &done);
    if (!done && MPIR_CVAR_AMLAPI_COLL_SHM)
        mpi_errno = MPIDI_AMLAPI_shm_allreduce(sendbuf, recvbuf, count, datatype, op, comm,
                                               errflag, &done);
    return done || mpi_errno ? mpi_errno :
        MPIR_Allreduce_impl(sendbuf, recvbuf, count, datatype, op, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_reduce(const void *sendbuf, void *recvbuf,
                                                 MPI_Aint count, MPI_Datatype datatype,
                                                 MPI_Op op, int root, MPIR_Comm * comm,
                                                 MPIR_Errflag_t * errflag)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_reduce(sendbuf, recvbuf, count, datatype, op, root,
                                              comm, errflag, NULL, &done);
    return done ? mpi_errno :
        MPIR_Reduce_impl(sendbuf, recvbuf, count, datatype, op, root, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allgather(const void *sendbuf, MPI_Aint sendcount,
                                                    MPI_Datatype sendtype, void *recvbuf,
                                                    MPI_Aint recvcount, MPI_Datatype recvtype,
                                                    MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_allgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                                  recvcount, NULL, NULL, recvtype, comm,
                                                  errflag, NULL, &done);
    return done ? mpi_errno : MPIR_Allgather_impl(sendbuf, sendcount, sendtype, recvbuf,
                                                  recvcount, recvtype, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allgatherv(const void *sendbuf, MPI_Aint sendcount,
                                                     MPI_Datatype sendtype, void *recvbuf,
                                                     const MPI_Aint * recvcounts,
                                                     const MPI_Aint * displs,
                                                     MPI_Datatype recvtype, MPIR_Comm * comm,
                                                     MPIR_Errflag_t * errflag)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_allgatherv(sendbuf, sendcount, sendtype, recvbuf, 0,
                                                  recvcounts, displs, recvtype, comm, errflag,
                                                  NULL, &done);
    return done ? mpi_errno : MPIR_Allgatherv_impl(sendbuf, sendcount, sendtype, recvbuf,
                                                   recvcounts, displs, recvtype, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_alltoall(const void *sendbuf, MPI_Aint sendcount,
                                                   MPI_Datatype sendtype, void *recvbuf,
                                                   MPI_Aint recvcount, MPI_Datatype recvtype,
                                                   MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_alltoall(sendbuf, sendcount, sendtype, recvbuf,
                                                recvcount, recvtype, comm, errflag, NULL,
                                                &done);
    if (!done && MPIR_CVAR_AMLAPI_COLL_SHM)
        mpi_errno = MPIDI_AMLAPI_shm_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                              recvtype, comm, errflag, &done);
    return done || mpi_errno ? mpi_errno : MPIR_Alltoall_impl(sendbuf, sendcount, sendtype, recvbuf,
                                                 recvcount, recvtype, comm, errflag);
}

/* nonblocking forms: the same schedules, walked by a progress hook (amlapi_coll.c) */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ibarrier(MPIR_Comm * comm, MPIR_Request ** req)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_barrier(comm, NULL, req, &done);
    return done ? mpi_errno : MPIR_Ibarrier_impl(comm, req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ibcast(void *buffer, MPI_Aint count,
                                                 MPI_Datatype datatype, int root,
                                                 MPIR_Comm * comm, MPIR_Request ** req)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_bcast(buffer, count, datatype, root, comm, NULL, req,
                                             &done);
    return done ? mpi_errno : MPIR_Ibcast_impl(buffer, count, datatype, root, comm, req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_iallreduce(const void *sendbuf, void *recvbuf,
                                                     MPI_Aint count, MPI_Datatype datatype,
                                                     MPI_Op op, MPIR_Comm * comm,
                                                     MPIR_Request ** req)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_reduce(sendbuf, recvbuf, count, datatype, op, -1, comm,
                                              NULL, req, &done);
    return done ? mpi_errno :
        MPIR_Iallreduce_impl(sendbuf, recvbuf, count, datatype, op, comm, req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ireduce(const void *sendbuf, void *recvbuf,
                                                  MPI_Aint count, MPI_Datatype datatype,
                                                  MPI_Op op, int root, MPIR_Comm * comm,
                                                  MPIR_Request ** req)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_reduce(sendbuf, recvbuf, count, datatype, op, root,
                                              comm, NULL, req, &done);
    return done ? mpi_errno :
        MPIR_Ireduce_impl(sendbuf, recvbuf, count, datatype, op, root, comm, req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_iallgather(const void *sendbuf, MPI_Aint sendcount,
                                                     MPI_Datatype sendtype, void *recvbuf,
                                                     MPI_Aint recvcount, MPI_Datatype recvtype,
                                                     MPIR_Comm * comm, MPIR_Request ** req)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_allgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                                  recvcount, NULL, NULL, recvtype, comm, NULL,
                                                  req, &done);
    return done ? mpi_errno : MPIR_Iallgather_impl(sendbuf, sendcount, sendtype, recvbuf,
                                                   recvcount, recvtype, comm, req);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ialltoall(const void *sendbuf, MPI_Aint sendcount,
                                                    MPI_Datatype sendtype, void *recvbuf,
                                                    MPI_Aint recvcount, MPI_Datatype recvtype,
                                                    MPIR_Comm * comm, MPIR_Request ** req)
{
    int done = 0, mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = MPIDI_AMLAPI_torus_alltoall(sendbuf, sendcount, sendtype, recvbuf,
                                                recvcount, recvtype, comm, NULL, req, &done);
    return done ? mpi_errno : MPIR_Ialltoall_impl(sendbuf, sendcount, sendtype, recvbuf,
                                                  recvcount, recvtype, comm, req);
}

#endif /* AMLAPI_COLL_H_INCLUDED */
