/*
 * amlapi netmod: collectives. Which algorithm runs is one table, MPIDI_AMLAPI_coll_paths below:
 * for each of blocking bcast, allreduce, reduce, allgather, allgatherv, alltoall and barrier
 * and the nonblocking forms of all but allgatherv, on intracommunicators, the paths in the
 * order they are tried -- coll_torus's torus schedules (amlapi_coll.c) when a torus is known;
 * for barrier, small bcast, allreduce and alltoall of a communicator on one node, its
 * shared-memory segment (amlapi_coll_shm.c); then MPICH's own algorithms (MPIR_<Coll>_impl,
 * never MPIR_<Coll>, which would come back here). Each entry point fills one descriptor and
 * MPIDI_AMLAPI_coll walks its row. Every other collective is MPICH's, as in MPICH's
 * netmod_am_fallback_coll.h, which is included with the names above moved aside.
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

/* ---- one collective, as each of its paths sees it ------------------------------------- */

enum {
    MPIDI_AMLAPI_COLL_BARRIER,
    MPIDI_AMLAPI_COLL_BCAST,
    MPIDI_AMLAPI_COLL_ALLREDUCE,
    MPIDI_AMLAPI_COLL_REDUCE,
    MPIDI_AMLAPI_COLL_ALLGATHER,
    MPIDI_AMLAPI_COLL_ALLGATHERV,
    MPIDI_AMLAPI_COLL_ALLTOALL,
    MPIDI_AMLAPI_COLL_IBARRIER,
    MPIDI_AMLAPI_COLL_IBCAST,
    MPIDI_AMLAPI_COLL_IALLREDUCE,
    MPIDI_AMLAPI_COLL_IREDUCE,
    MPIDI_AMLAPI_COLL_IALLGATHER,
    MPIDI_AMLAPI_COLL_IALLTOALL,
    MPIDI_AMLAPI_COLL_KINDS
};

typedef struct {                /* the entry points fill it in this order */
    int kind;                   /* MPIDI_AMLAPI_COLL_* */
    const void *sendbuf;
    void *recvbuf;              /* bcast: the buffer */
    MPI_Aint count;             /* bcast, the reductions */
    MPI_Datatype datatype;
    MPI_Aint sendcount;         /* allgather(v), alltoall */
    MPI_Datatype sendtype;
    MPI_Aint recvcount;
    MPI_Datatype recvtype;
    const MPI_Aint *recvcounts; /* allgatherv */
    const MPI_Aint *displs;
    MPI_Op op;
    int root;                   /* allreduce: -1, coll_torus's reduction to every rank */
    MPIR_Comm *comm;
    MPIR_Errflag_t *errflag;    /* blocking forms */
    MPIR_Request **req;         /* nonblocking forms; NULL for the blocking ones */
} MPIDI_AMLAPI_coll_t;

/* coll_torus's schedules (amlapi_coll.c), blocking and nonblocking alike */
static inline int MPIDI_AMLAPI_ct_barrier(const MPIDI_AMLAPI_coll_t * c, int *done)
{
    return MPIDI_AMLAPI_torus_barrier(c->comm, c->errflag, c->req, done);
}

static inline int MPIDI_AMLAPI_ct_bcast(const MPIDI_AMLAPI_coll_t * c, int *done)
{
    return MPIDI_AMLAPI_torus_bcast(c->recvbuf, c->count, c->datatype, c->root, c->comm,
                                    c->errflag, c->req, done);
}

static inline int MPIDI_AMLAPI_ct_reduce(const MPIDI_AMLAPI_coll_t * c, int *done)
{
    return MPIDI_AMLAPI_torus_reduce(c->sendbuf, c->recvbuf, c->count, c->datatype, c->op,
                                     c->root, c->comm, c->errflag, c->req, done);
}

/* allgather: recvcounts NULL */
static inline int MPIDI_AMLAPI_ct_allgatherv(const MPIDI_AMLAPI_coll_t * c, int *done)
{
    return MPIDI_AMLAPI_torus_allgatherv(c->sendbuf, c->sendcount, c->sendtype, c->recvbuf,
                                         c->recvcount, c->recvcounts, c->displs, c->recvtype,
                                         c->comm, c->errflag, c->req, done);
}

static inline int MPIDI_AMLAPI_ct_alltoall(const MPIDI_AMLAPI_coll_t * c, int *done)
{
    return MPIDI_AMLAPI_torus_alltoall(c->sendbuf, c->sendcount, c->sendtype, c->recvbuf,
                                       c->recvcount, c->recvtype, c->comm, c->errflag, c->req,
                                       done);
}

/* the node's shared memory (amlapi_coll_shm.c), blocking forms */
static inline int MPIDI_AMLAPI_cs_barrier(const MPIDI_AMLAPI_coll_t * c, int *done)
{
    return MPIDI_AMLAPI_shm_barrier(c->comm, c->errflag, done);
}

static inline int MPIDI_AMLAPI_cs_bcast(const MPIDI_AMLAPI_coll_t * c, int *done)
{
    return MPIDI_AMLAPI_shm_bcast(c->recvbuf, c->count, c->datatype, c->root, c->comm,
                                  c->errflag, done);
}

static inline int MPIDI_AMLAPI_cs_allreduce(const MPIDI_AMLAPI_coll_t * c, int *done)
{
    return MPIDI_AMLAPI_shm_allreduce(c->sendbuf, c->recvbuf, c->count, c->datatype, c->op,
                                      c->comm, c->errflag, done);
}

static inline int MPIDI_AMLAPI_cs_alltoall(const MPIDI_AMLAPI_coll_t * c, int *done)
{
    return MPIDI_AMLAPI_shm_alltoall(c->sendbuf, c->sendcount, c->sendtype, c->recvbuf,
                                     c->recvcount, c->recvtype, c->comm, c->errflag, done);
}

/* MPICH's own algorithms: MPIR_<Coll>_impl, never MPIR_<Coll>, which would come back here */
ATTRIBUTE((always_inline)) static inline int MPIDI_AMLAPI_mpich_coll(const MPIDI_AMLAPI_coll_t * c)
{
    MPIR_Comm *comm = c->comm;
    void *rb = c->recvbuf;
    const void *sb = c->sendbuf;
    MPI_Datatype dt = c->datatype, st = c->sendtype, rt = c->recvtype;
    MPI_Aint n = c->count, sn = c->sendcount, rn = c->recvcount;

    switch (c->kind) {
        case MPIDI_AMLAPI_COLL_BARRIER:
            return MPIR_Barrier_impl(comm, c->errflag);
        case MPIDI_AMLAPI_COLL_IBARRIER:
            return MPIR_Ibarrier_impl(comm, c->req);
        case MPIDI_AMLAPI_COLL_BCAST:
            return MPIR_Bcast_impl(rb, n, dt, c->root, comm, c->errflag);
        case MPIDI_AMLAPI_COLL_IBCAST:
            return MPIR_Ibcast_impl(rb, n, dt, c->root, comm, c->req);
        case MPIDI_AMLAPI_COLL_ALLREDUCE:
            return MPIR_Allreduce_impl(sb, rb, n, dt, c->op, comm, c->errflag);
        case MPIDI_AMLAPI_COLL_IALLREDUCE:
            return MPIR_Iallreduce_impl(sb, rb, n, dt, c->op, comm, c->req);
        case MPIDI_AMLAPI_COLL_REDUCE:
            return MPIR_Reduce_impl(sb, rb, n, dt, c->op, c->root, comm, c->errflag);
        case MPIDI_AMLAPI_COLL_IREDUCE:
            return MPIR_Ireduce_impl(sb, rb, n, dt, c->op, c->root, comm, c->req);
        case MPIDI_AMLAPI_COLL_ALLGATHER:
            return MPIR_Allgather_impl(sb, sn, st, rb, rn, rt, comm, c->errflag);
        case MPIDI_AMLAPI_COLL_IALLGATHER:
            return MPIR_Iallgather_impl(sb, sn, st, rb, rn, rt, comm, c->req);
        case MPIDI_AMLAPI_COLL_ALLGATHERV:
            return MPIR_Allgatherv_impl(sb, sn, st, rb, c->recvcounts, c->displs, rt, comm,
                                        c->errflag);
        case MPIDI_AMLAPI_COLL_ALLTOALL:
            return MPIR_Alltoall_impl(sb, sn, st, rb, rn, rt, comm, c->errflag);
        default:
            return MPIR_Ialltoall_impl(sb, sn, st, rb, rn, rt, comm, c->req);
    }
}

/* ---- the one decision: every collective's paths, in the order they are tried ---------- */

typedef int (*MPIDI_AMLAPI_coll_path_fn) (const MPIDI_AMLAPI_coll_t * c, int *done);

/* then MPICH's algorithms (MPIDI_AMLAPI_mpich_coll), which take everything: the same last
 * path for every collective */
typedef struct {
    MPIDI_AMLAPI_coll_path_fn torus;    /* coll_torus's, where MPIDI_AMLAPI_coll_torus_active */
    MPIDI_AMLAPI_coll_path_fn shm;      /* the node's shared memory, where
                                         * MPIR_CVAR_AMLAPI_COLL_SHM; NULL: none of the kind */
} MPIDI_AMLAPI_coll_paths_t;

static const MPIDI_AMLAPI_coll_paths_t MPIDI_AMLAPI_coll_paths[MPIDI_AMLAPI_COLL_KINDS] = {
    /* *INDENT-OFF* */
    /*                               coll_torus                  shared memory */
    [MPIDI_AMLAPI_COLL_BARRIER]    = { MPIDI_AMLAPI_ct_barrier,    MPIDI_AMLAPI_cs_barrier },
    [MPIDI_AMLAPI_COLL_BCAST]      = { MPIDI_AMLAPI_ct_bcast,      MPIDI_AMLAPI_cs_bcast },
    [MPIDI_AMLAPI_COLL_ALLREDUCE]  = { MPIDI_AMLAPI_ct_reduce,     MPIDI_AMLAPI_cs_allreduce },
    [MPIDI_AMLAPI_COLL_REDUCE]     = { MPIDI_AMLAPI_ct_reduce,     NULL },
    [MPIDI_AMLAPI_COLL_ALLGATHER]  = { MPIDI_AMLAPI_ct_allgatherv, NULL },
    [MPIDI_AMLAPI_COLL_ALLGATHERV] = { MPIDI_AMLAPI_ct_allgatherv, NULL },
    [MPIDI_AMLAPI_COLL_ALLTOALL]   = { MPIDI_AMLAPI_ct_alltoall,   MPIDI_AMLAPI_cs_alltoall },
    [MPIDI_AMLAPI_COLL_IBARRIER]   = { MPIDI_AMLAPI_ct_barrier,    NULL },
    [MPIDI_AMLAPI_COLL_IBCAST]     = { MPIDI_AMLAPI_ct_bcast,      NULL },
    [MPIDI_AMLAPI_COLL_IALLREDUCE] = { MPIDI_AMLAPI_ct_reduce,     NULL },
    [MPIDI_AMLAPI_COLL_IREDUCE]    = { MPIDI_AMLAPI_ct_reduce,     NULL },
    [MPIDI_AMLAPI_COLL_IALLGATHER] = { MPIDI_AMLAPI_ct_allgatherv, NULL },
    [MPIDI_AMLAPI_COLL_IALLTOALL]  = { MPIDI_AMLAPI_ct_alltoall,   NULL },
    /* *INDENT-ON* */
};

/* The dispatcher: c's row of the table, path after path until one takes it (or fails, which
 * only a path that took it does). Inlined into each entry point below with c->kind a
 * constant, so the row's paths compile to the direct calls of a cascade written out and the
 * descriptor to registers. */
ATTRIBUTE((always_inline)) static inline int MPIDI_AMLAPI_coll(const MPIDI_AMLAPI_coll_t * c)
{
    const MPIDI_AMLAPI_coll_paths_t *row = &MPIDI_AMLAPI_coll_paths[c->kind];
    int done = 0, mpi_errno = MPI_SUCCESS;

    if (row->torus && MPIDI_AMLAPI_coll_torus_active)
        mpi_errno = row->torus(c, &done);
    if (!done && mpi_errno == MPI_SUCCESS && row->shm && MPIR_CVAR_AMLAPI_COLL_SHM)
        mpi_errno = row->shm(c, &done);
    if (!done && mpi_errno == MPI_SUCCESS)
        mpi_errno = MPIDI_AMLAPI_mpich_coll(c);
    return mpi_errno;
}

/* ---- the entry points: one descriptor each ------------------------------------------- */

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_barrier(MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_BARRIER, NULL, NULL, 0, MPI_DATATYPE_NULL, 0, MPI_DATATYPE_NULL, 0,
        MPI_DATATYPE_NULL, NULL, NULL, MPI_OP_NULL, 0, comm, errflag, NULL
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_bcast(void *buffer, MPI_Aint count,
                                                MPI_Datatype datatype, int root,
                                                MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_BCAST, NULL, buffer, count, datatype, 0, MPI_DATATYPE_NULL, 0,
        MPI_DATATYPE_NULL, NULL, NULL, MPI_OP_NULL, root, comm, errflag, NULL
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allreduce(const void *sendbuf, void *recvbuf,
                                                    MPI_Aint count, MPI_Datatype datatype,
                                                    MPI_Op op, MPIR_Comm * comm,
                                                    MPIR_Errflag_t * errflag)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_ALLREDUCE, sendbuf, recvbuf, count, datatype, 0, MPI_DATATYPE_NULL, 0,
        MPI_DATATYPE_NULL, NULL, NULL, op, -1, comm, errflag, NULL
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_reduce(const void *sendbuf, void *recvbuf,
                                                 MPI_Aint count, MPI_Datatype datatype,
                                                 MPI_Op op, int root, MPIR_Comm * comm,
                                                 MPIR_Errflag_t * errflag)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_REDUCE, sendbuf, recvbuf, count, datatype, 0, MPI_DATATYPE_NULL, 0,
        MPI_DATATYPE_NULL, NULL, NULL, op, root, comm, errflag, NULL
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allgather(const void *sendbuf, MPI_Aint sendcount,
                                                    MPI_Datatype sendtype, void *recvbuf,
                                                    MPI_Aint recvcount, MPI_Datatype recvtype,
                                                    MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_ALLGATHER, sendbuf, recvbuf, 0, MPI_DATATYPE_NULL, sendcount, sendtype,
        recvcount, recvtype, NULL, NULL, MPI_OP_NULL, 0, comm, errflag, NULL
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allgatherv(const void *sendbuf, MPI_Aint sendcount,
                                                     MPI_Datatype sendtype, void *recvbuf,
                                                     const MPI_Aint * recvcounts,
                                                     const MPI_Aint * displs,
                                                     MPI_Datatype recvtype, MPIR_Comm * comm,
                                                     MPIR_Errflag_t * errflag)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_ALLGATHERV, sendbuf, recvbuf, 0, MPI_DATATYPE_NULL, sendcount, sendtype,
        0, recvtype, recvcounts, displs, MPI_OP_NULL, 0, comm, errflag, NULL
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_alltoall(const void *sendbuf, MPI_Aint sendcount,
                                                   MPI_Datatype sendtype, void *recvbuf,
                                                   MPI_Aint recvcount, MPI_Datatype recvtype,
                                                   MPIR_Comm * comm, MPIR_Errflag_t * errflag)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_ALLTOALL, sendbuf, recvbuf, 0, MPI_DATATYPE_NULL, sendcount, sendtype,
        recvcount, recvtype, NULL, NULL, MPI_OP_NULL, 0, comm, errflag, NULL
    };
    return MPIDI_AMLAPI_coll(&c);
}

/* nonblocking forms: the same schedules, walked by a progress hook (amlapi_coll.c) */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ibarrier(MPIR_Comm * comm, MPIR_Request ** req)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_IBARRIER, NULL, NULL, 0, MPI_DATATYPE_NULL, 0, MPI_DATATYPE_NULL, 0,
        MPI_DATATYPE_NULL, NULL, NULL, MPI_OP_NULL, 0, comm, NULL, req
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ibcast(void *buffer, MPI_Aint count,
                                                 MPI_Datatype datatype, int root,
                                                 MPIR_Comm * comm, MPIR_Request ** req)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_IBCAST, NULL, buffer, count, datatype, 0, MPI_DATATYPE_NULL, 0,
        MPI_DATATYPE_NULL, NULL, NULL, MPI_OP_NULL, root, comm, NULL, req
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_iallreduce(const void *sendbuf, void *recvbuf,
                                                     MPI_Aint count, MPI_Datatype datatype,
                                                     MPI_Op op, MPIR_Comm * comm,
                                                     MPIR_Request ** req)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_IALLREDUCE, sendbuf, recvbuf, count, datatype, 0, MPI_DATATYPE_NULL, 0,
        MPI_DATATYPE_NULL, NULL, NULL, op, -1, comm, NULL, req
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ireduce(const void *sendbuf, void *recvbuf,
                                                  MPI_Aint count, MPI_Datatype datatype,
                                                  MPI_Op op, int root, MPIR_Comm * comm,
                                                  MPIR_Request ** req)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_IREDUCE, sendbuf, recvbuf, count, datatype, 0, MPI_DATATYPE_NULL, 0,
        MPI_DATATYPE_NULL, NULL, NULL, op, root, comm, NULL, req
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_iallgather(const void *sendbuf, MPI_Aint sendcount,
                                                     MPI_Datatype sendtype, void *recvbuf,
                                                     MPI_Aint recvcount, MPI_Datatype recvtype,
                                                     MPIR_Comm * comm, MPIR_Request ** req)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_IALLGATHER, sendbuf, recvbuf, 0, MPI_DATATYPE_NULL, sendcount, sendtype,
        recvcount, recvtype, NULL, NULL, MPI_OP_NULL, 0, comm, NULL, req
    };
    return MPIDI_AMLAPI_coll(&c);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_ialltoall(const void *sendbuf, MPI_Aint sendcount,
                                                    MPI_Datatype sendtype, void *recvbuf,
                                                    MPI_Aint recvcount, MPI_Datatype recvtype,
                                                    MPIR_Comm * comm, MPIR_Request ** req)
{
    MPIDI_AMLAPI_coll_t c = {
        MPIDI_AMLAPI_COLL_IALLTOALL, sendbuf, recvbuf, 0, MPI_DATATYPE_NULL, sendcount, sendtype,
        recvcount, recvtype, NULL, NULL, MPI_OP_NULL, 0, comm, NULL, req
    };
    return MPIDI_AMLAPI_coll(&c);
}

#endif /* AMLAPI_COLL_H_INCLUDED */
