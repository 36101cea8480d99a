/*
 * amlapi netmod internals: globals, the aml handler ids the glue registers, error macros.
 */
#ifndef AMLAPI_IMPL_H_INCLUDED
#define AMLAPI_IMPL_H_INCLUDED

#include <mpidimpl.h>
#include "mpidch4r.h"
#include "aml.h"

typedef struct {
    aml_t *aml;
    int rank;
    /* aml's limits, fixed at init; read on every message, so kept here */
    MPI_Aint am_hdr_max;        /* MPIDIG header bytes that fit the aml user header */
    MPI_Aint am_onepacket_max;  /* MPIDIG header + data of a one-packet message */
    MPI_Aint packet_size;
    MPI_Aint eager_limit;
    int interrupt;              /* a blocked call that finds nothing sleeps on efd
                                 * (MPIDI_AMLAPI_progress_blocked): interrupt mode, or
                                 * polling on an oversubscribed node (after yielding) */
    int efd;
    int oversub;                /* polling mode on an oversubscribed node: idle yields, then
                                 * sleeps on efd */
    uint64_t idle_since;        /* oversub: when the blocked call began finding nothing (ns,
                                 * 0 = it found something last time) */
    int coproc;                 /* progress mode coprocessor: MPICH's progress thread runs */
    int coproc_sleeps;          /* ... and sleeps on efd when idle (app is SINGLE/FUNNELED) */
} MPIDI_AMLAPI_global_t;

extern MPIDI_AMLAPI_global_t MPIDI_AMLAPI_global;

/* aml handler ids used by the glue */
enum {
    MPIDI_AMLAPI_H_MPIDIG = 0,  /* MPICH's generic active messages (MPIDIG) */
    MPIDI_AMLAPI_H_P2P,         /* native MPI point-to-point (amlapi_p2p_match.c) */
    MPIDI_AMLAPI_H_CTRL,        /* its control messages: sync ack, cancel */
    MPIDI_AMLAPI_H_DYNPROC,     /* MPICH's connect/accept handshake (amlapi_spawn.c) */
    MPIDI_AMLAPI_H_RMA,         /* native RMA operations and their answers (amlapi_rma_am.c) */
    MPIDI_AMLAPI_H_LOCK,        /* passive-target window locks (amlapi_rma_lock.c) */
    MPIDI_AMLAPI_H_PSCW,        /* post/start/complete/wait notices (amlapi_rma_active.c) */
    MPIDI_AMLAPI_H_WAKE         /* wakes a rank asleep in a shared-memory collective
                                 * (amlapi_coll_shm.c) */
};

/* What precedes MPIDIG's own header in the aml user header. 8 bytes, so the MPIDIG header
 * that follows stays 8-byte aligned. */
typedef struct {
    uint16_t handler_id;
    uint8_t src_vci;
    uint8_t dst_vci;
    uint32_t rsvd;
} MPIDI_AMLAPI_am_hdr_t;

#define MPIDI_AMLAPI_AV(av) ((av)->netmod.amlapi)
#define MPIDI_AMLAPI_AMREQ(req) ((req)->dev.ch4.am.netmod_am.amlapi)
#define MPIDI_AMLAPI_REQ(req) ((req)->dev.ch4.netmod.amlapi)

/* An aml call that failed: MPI_ERR_NO_MEM or MPI_ERR_OTHER, naming the call and aml's reason. */
#define MPIDI_AMLAPI_CHK(rc, call)                                                     \
    do {                                                                               \
        if (unlikely((rc) != AML_OK)) {                                                \
            /* literal classes: MPICH's extracterrmsgs (autogen) reads these calls */    \
            if ((rc) == AML_ERR_NOMEM)                                                 \
                MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_NO_MEM, "**amlapi_aml",        \
                                     "**amlapi_aml %s %s", call, aml_strerror(rc));    \
            MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**amlapi_aml",             \
                                 "**amlapi_aml %s %s", call, aml_strerror(rc));        \
        }                                                                              \
    } while (0)

/* A counter this netmod keeps for users: a read-only, continuous MPI_T performance variable
 * of category AMLAPI, one unsigned long long, bound to no object. */
#define MPIDI_AMLAPI_PVAR_COUNTER(name, addr, desc)                                      \
    MPIR_T_PVAR_REGISTER_impl(MPI_T_PVAR_CLASS_COUNTER, MPI_UNSIGNED_LONG_LONG, name, addr, 1, \
                              MPI_T_ENUM_NULL, MPI_T_VERBOSITY_USER_BASIC,               \
                              MPI_T_BIND_NO_OBJECT,                                      \
                              MPIR_T_PVAR_FLAG_READONLY | MPIR_T_PVAR_FLAG_CONTINUOUS,   \
                              NULL, NULL, "AMLAPI", desc)

/* The same, read through get(addr, obj, count, buf) when MPI_T asks: a counter of aml's */
#define MPIDI_AMLAPI_PVAR_COUNTER_FN(name, get, desc)                                    \
    MPIR_T_PVAR_REGISTER_impl(MPI_T_PVAR_CLASS_COUNTER, MPI_UNSIGNED_LONG_LONG, name, NULL, 1, \
                              MPI_T_ENUM_NULL, MPI_T_VERBOSITY_USER_BASIC,               \
                              MPI_T_BIND_NO_OBJECT,                                      \
                              MPIR_T_PVAR_FLAG_READONLY | MPIR_T_PVAR_FLAG_CONTINUOUS,   \
                              get, NULL, "AMLAPI", desc)

/* Something a netmod wait loop waits for happened outside any request (a window lock
 * granted, say): MPID_Progress_wait returns for it as it does when a request completes
 * (MPICH counts freed requests in the same counter). */
MPL_STATIC_INLINE_PREFIX void MPIDI_AMLAPI_progress_made(void)
{
    int c = MPL_atomic_relaxed_load_int(&MPIDI_VCI(0).progress_count);
    MPL_atomic_relaxed_store_int(&MPIDI_VCI(0).progress_count, c + 1);
}

/* Progresses until cond holds, waiting as MPI_Wait does: polling spins, but on an
 * oversubscribed node (and in interrupt mode) an idle rank yields and then sleeps, which
 * MPIDIU_PROGRESS_WHILE never does. Whatever makes cond true must call
 * MPIDI_AMLAPI_progress_made. Jumps to fn_fail on an error. */
#define MPIDI_AMLAPI_WAIT_UNTIL(cond)                                  \
    do {                                                               \
        MPID_Progress_state wst_;                                      \
        MPID_Progress_start(&wst_);                                    \
        while (!(cond)) {                                              \
            mpi_errno = MPID_Progress_wait(&wst_);                     \
            if (mpi_errno)                                             \
                break;                                                 \
        }                                                              \
        MPID_Progress_end(&wst_);                                      \
        MPIR_ERR_CHECK(mpi_errno);                                     \
    } while (0)

/* aml's index of rank in comm: its COMM_WORLD rank, or for a process of another job (AV
 * table above 0) the index aml_add_peer gave it, kept in its AV entry (amlapi_spawn.c). */
MPL_STATIC_INLINE_PREFIX int MPIDI_AMLAPI_peer(MPIR_Comm * comm, int rank)
{
    int lpid = -1, avtid = 0;
    MPIDIU_comm_rank_to_pid(comm, rank, &lpid, &avtid);
    if (likely(avtid == 0))
        return lpid;
    return MPIDI_AMLAPI_AV(&MPIDIU_get_av(avtid, lpid)).peer;
}

/* aml moves contiguous bytes: a non-contiguous send is packed once into *pack (MPL_malloc'd,
 * the caller frees it when the send completes). */
MPL_STATIC_INLINE_PREFIX int MPIDI_AMLAPI_pack(const void *buf, MPI_Aint count,
                                               MPI_Datatype datatype, MPI_Aint data_sz,
                                               void **pack)
{
    int mpi_errno = MPI_SUCCESS;
    MPI_Aint packed;
    *pack = MPL_malloc(data_sz, MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP1(*pack == NULL, mpi_errno, MPI_ERR_NO_MEM, "**nomem", "**nomem %s",
                         "amlapi pack buffer");
    mpi_errno = MPIR_Typerep_pack(buf, count, datatype, 0, *pack, data_sz, &packed);
    MPIR_ERR_CHECK(mpi_errno);
    MPIR_Assert(packed == data_sz);
  fn_exit:
    return mpi_errno;
  fn_fail:
    MPL_free(*pack);
    *pack = NULL;
    goto fn_exit;
}

/* amlapi_am.c: the MPIDIG transport (the inline MPIDI_NM_am_* in amlapi_am.h call these) */
int MPIDI_AMLAPI_am_init(void);
int MPIDI_AMLAPI_am_send(int peer, int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz,
                         const void *data, MPI_Aint data_sz, int src_vci, int dst_vci,
                         MPIR_Request * sreq);

/* native point-to-point: amlapi_p2p_init.c (init, finalize), amlapi_p2p_send.c, amlapi_p2p_ctrl.c
 * (cancel_send), amlapi_p2p_recv.c, amlapi_p2p_probe.c (the inline MPIDI_NM_mpi_* in amlapi_p2p.h
 * call these) */
int MPIDI_AMLAPI_p2p_init(void);
void MPIDI_AMLAPI_p2p_finalize(void);
int MPIDI_AMLAPI_send(const void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                      MPIR_Comm * comm, int context_offset, MPIR_Request ** request, int sync);
int MPIDI_AMLAPI_cancel_send(MPIR_Request * sreq);
int MPIDI_AMLAPI_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                       MPIR_Comm * comm, int context_offset, MPIR_Request ** request);
int MPIDI_AMLAPI_imrecv(void *buf, MPI_Aint count, MPI_Datatype datatype,
                        MPIR_Request * message);
int MPIDI_AMLAPI_cancel_recv(MPIR_Request * rreq);
int MPIDI_AMLAPI_iprobe(int source, int tag, MPIR_Comm * comm, int context_offset, int *flag,
                        MPIR_Request ** message, MPI_Status * status);


/* amlapi_spawn.c: dynamic processes */
int MPIDI_AMLAPI_spawn_init(void);
void MPIDI_AMLAPI_spawn_finalize(void);

/* amlapi_fault.c: a rank names itself when it exits early or gets a fatal signal */
void MPIDI_AMLAPI_fault_init(void);
void MPIDI_AMLAPI_fault_finalize(void);

/* amlapi_progress.c: the progress modes */
int MPIDI_AMLAPI_oversubscribed(void);
void MPIDI_AMLAPI_win_pvars(void);

/* Fixed parameters of the collectives, in bytes unless said otherwise. */
/* torus bcast (amlapi_coll.c): pipelining chunk down each colour's tree */
#define MPIDI_AMLAPI_TORUS_BCAST_CHUNK 262144
/* shared memory (amlapi_coll_shm.c): largest bcast in one ring record, not in chunks */
#define MPIDI_AMLAPI_COLLSHM_BCAST_BYTES 2048
/* largest alltoall block (bytes to each rank) through the shared rows */
#define MPIDI_AMLAPI_COLLSHM_ALLTOALL_BYTES 2048
/* smallest alltoall block (bytes to each rank) done by single copy, on large communicators */
#define MPIDI_AMLAPI_COLLSHM_ALLTOALL_COPY 32768
/* ranks from which a communicator's large bcasts, allreduces and alltoalls use shared memory */
#define MPIDI_AMLAPI_COLLSHM_LARGE 4
/* bcast ring of a large communicator; a large bcast goes in chunks of a quarter of it */
#define MPIDI_AMLAPI_COLLSHM_BCAST_RING 4194304
/* chunk of a large allreduce (a multiple of 64) */
#define MPIDI_AMLAPI_COLLSHM_REDUCE_CHUNK 262144
/* smallest allreduce done in chunks, on large communicators */
#define MPIDI_AMLAPI_COLLSHM_REDUCE_MIN 16384

/* torus collectives (amlapi_coll.c; the inline entry points are amlapi_coll.h) */
extern int MPIDI_AMLAPI_coll_torus_active;
int MPIDI_AMLAPI_coll_init(void);
void MPIDI_AMLAPI_coll_finalize(void);
void MPIDI_AMLAPI_coll_comm_free(MPIR_Comm * comm);
/* amlapi_coll_shm.c: barrier, bcast, allreduce, small alltoall in a communicator's shared memory */
int MPIDI_AMLAPI_coll_shm_init(void);
void MPIDI_AMLAPI_coll_shm_finalize(void);
void MPIDI_AMLAPI_coll_shm_comm_free(MPIR_Comm * comm);
int MPIDI_AMLAPI_shm_barrier(MPIR_Comm * comm, MPIR_Errflag_t * errflag, int *done);
int MPIDI_AMLAPI_shm_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                           MPIR_Comm * comm, MPIR_Errflag_t * errflag, int *done);
int MPIDI_AMLAPI_shm_allreduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                               MPI_Datatype datatype, MPI_Op op, MPIR_Comm * comm,
                               MPIR_Errflag_t * errflag, int *done);
int MPIDI_AMLAPI_shm_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                              void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                              MPIR_Comm * comm, MPIR_Errflag_t * errflag, int *done);
/* Each sets *done when a torus schedule runs the collective (then its return is the result);
 * else the caller runs MPICH's algorithm. req NULL: blocking (peers' failures in *errflag);
 * else nonblocking, the request in *req (errflag unused). */
int MPIDI_AMLAPI_torus_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype, int root,
                             MPIR_Comm * comm, MPIR_Errflag_t * errflag, MPIR_Request ** req,
                             int *done);
/* root < 0: allreduce */
int MPIDI_AMLAPI_torus_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                              MPI_Datatype datatype, MPI_Op op, int root, MPIR_Comm * comm,
                              MPIR_Errflag_t * errflag, MPIR_Request ** req, int *done);
/* recvcounts NULL: allgather of recvcount each; allgatherv is blocking only */
int MPIDI_AMLAPI_torus_allgatherv(const void *sendbuf, MPI_Aint sendcount,
                                  MPI_Datatype sendtype, void *recvbuf, MPI_Aint recvcount,
                                  const MPI_Aint * recvcounts, const MPI_Aint * displs,
                                  MPI_Datatype recvtype, MPIR_Comm * comm,
                                  MPIR_Errflag_t * errflag, MPIR_Request ** req, int *done);
int MPIDI_AMLAPI_torus_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                                void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                                MPIR_Comm * comm, MPIR_Errflag_t * errflag,
                                MPIR_Request ** req, int *done);
int MPIDI_AMLAPI_torus_barrier(MPIR_Comm * comm, MPIR_Errflag_t * errflag, MPIR_Request ** req,
                               int *done);
/* amlapi_rma_am.c: registers the native RMA messages' handler */
int MPIDI_AMLAPI_rma_am_init(void);
/* ... and frees the datatypes kept for other ranks' messages */
void MPIDI_AMLAPI_rma_am_finalize(void);
/* amlapi_rma_lock.c: registers the window lock handler */
int MPIDI_AMLAPI_lk_init(void);
/* amlapi_rma_active.c: registers the PSCW handler */
int MPIDI_AMLAPI_pscw_init(void);
int MPIDI_AMLAPI_progress_init(const aml_config_t * cfg);
int MPIDI_AMLAPI_progress_blocked(int events);
enum { MPIDI_AMLAPI_IDLE_SPIN, MPIDI_AMLAPI_IDLE_YIELD, MPIDI_AMLAPI_IDLE_SLEEP };
int MPIDI_AMLAPI_idle_plan(int events);
void MPIDI_AMLAPI_idle(int plan);
int MPIDI_AMLAPI_coproc_progressed(int events);

/* The glue's core, which every other file may use and which uses none of them: */
/* amlapi_global.c: MPIDI_AMLAPI_global, and the end of the job naming its cause */
void MPIDI_AMLAPI_fatal(const char *fmt, ...) __attribute__ ((format(printf, 1, 2), noreturn));
/* amlapi_cvar.c: every integer CVAR within its range (amlapi_cvar_range.h); a string CVAR
 * one of choices (NULL-terminated, the default first: an unset one is that), *index which;
 * else an error naming the CVAR */
int MPIDI_AMLAPI_cvar_check(void);
int MPIDI_AMLAPI_cvar_choice(const char *name, const char *value, const char *const *choices,
                             int *index);
/* amlapi_ctl.c: the control channel's handler registration and send (an aml rc) */
int MPIDI_AMLAPI_ctl_register(unsigned handler, aml_hdr_handler_t fn);
int MPIDI_AMLAPI_ctl_send(int peer, unsigned handler, const void *hdr, size_t len);
/* amlapi_op.c: applies (origin) to the target's (count, dt) at addr with op, here */
int MPIDI_AMLAPI_rma_apply(const void *origin_addr, int origin_count,
                           MPI_Datatype origin_datatype, char *addr, int target_count,
                           MPI_Datatype target_datatype, MPI_Op op);
/* ... and whether datatype is contiguous without gaps (its extent and true lower bound) */
int MPIDI_AMLAPI_coll_reducible(MPI_Datatype datatype, MPI_Aint * extent, MPI_Aint * lb);

/* n elements of a predefined type on both sides */
MPL_STATIC_INLINE_PREFIX int MPIDI_AMLAPI_same_basic(MPI_Datatype a, int na, MPI_Datatype b,
                                                     int nb)
{
    return a == b && na == nb && HANDLE_IS_BUILTIN(a);
}

#endif /* AMLAPI_IMPL_H_INCLUDED */
