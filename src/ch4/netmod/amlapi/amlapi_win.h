/*
 * amlapi netmod: a window's state (MPIR_Win's dev.netmod.amlapi.w). amlapi_win.c makes it and
 * does direct operations through aml; amlapi_rma_shm.c does everything of a window whose
 * ranks share one node's memory with loads and stores.
 */
#ifndef AMLAPI_WIN_H_INCLUDED
#define AMLAPI_WIN_H_INCLUDED

struct MPIDI_AMLAPI_win_target {
    uint64_t base;              /* the target's window memory, in its address space */
    uint64_t size;
    int64_t disp_unit;
    aml_xkey_t *key;            /* NULL: no direct access (MPIDIG instead) */
};

struct MPIDI_AMLAPI_shmwin;
struct MPIDI_AMLAPI_lk;
struct MPIDI_AMLAPI_pscw;

/* a region attached to a dynamic window (MPI_Win_attach) */
struct MPIDI_AMLAPI_region {
    uintptr_t base;
    size_t size;
    struct MPIDI_AMLAPI_region *next;
};

struct MPIDI_AMLAPI_win {
    struct MPIDI_AMLAPI_win_target *targets;    /* per rank; NULL: no direct operations */
    struct aml_xmem *xmem;      /* this rank's memory, exposed */
    uint64_t issued, done;      /* direct operations and native RMA messages started and
                                 * completed */
    uint64_t acc_pending;       /* native accumulate-family messages not yet answered */
    struct MPIDI_AMLAPI_shmwin *shm;    /* non-NULL: every operation and the passive-target
                                         * synchronisation are amlapi_rma_shm.c's */
    struct MPIDI_AMLAPI_region *regions;        /* dynamic windows: what native RMA messages
                                                 * may touch here (amlapi_rma_am.c) */
    struct MPIDI_AMLAPI_lk *lk; /* passive-target locks (amlapi_rma_lock.c); NULL until the
                                 * window's first lock */
    struct MPIDI_AMLAPI_pscw *pscw;     /* post/start/complete/wait counts
                                         * (amlapi_rma_active.c); NULL until first used */
};

#define MPIDI_AMLAPI_WIN(win) ((win)->dev.netmod.amlapi.w)

/* rput/rget/raccumulate/rget_accumulate that completed in the call: a complete request */
static inline int MPIDI_AMLAPI_rma_done_at_once(MPIR_Request ** request)
{
    int mpi_errno = MPI_SUCCESS;
    if (request) {
        *request = MPIR_Request_create_complete(MPIR_REQUEST_KIND__RMA);
        MPIR_ERR_CHKANDSTMT(*request == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail,
                            "**nomemreq");
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* amlapi_rma_shm.c */
/* by_copy: MPI_Win_create's memory, reached by single copy; else MPIDIG's shared segment */
int MPIDI_AMLAPI_shm_win_init(MPIR_Win * win, int by_copy);
int MPIDI_AMLAPI_shm_win_free(MPIR_Win * win);
int MPIDI_AMLAPI_shm_put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                         int target_rank, MPI_Aint target_disp, int target_count,
                         MPI_Datatype target_datatype, MPIR_Win * win, MPIR_Request ** request);
int MPIDI_AMLAPI_shm_get(void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                         int target_rank, MPI_Aint target_disp, int target_count,
                         MPI_Datatype target_datatype, MPIR_Win * win, MPIR_Request ** request);
void MPIDI_AMLAPI_shm_win_pvars(void);
/* a shared-memory window's PSCW counters (complete 0: posts, 1: completes) */
void MPIDI_AMLAPI_shm_pscw_signal(MPIR_Win * win, const int *ranks, int k, int complete);
int MPIDI_AMLAPI_shm_pscw_take(MPIR_Win * win, const int *ranks, int k, int complete);
/* applies (origin) to the target's (count, dt) at addr with op, here */
int MPIDI_AMLAPI_rma_apply(const void *origin_addr, int origin_count,
                           MPI_Datatype origin_datatype, char *addr, int target_count,
                           MPI_Datatype target_datatype, MPI_Op op);

/* amlapi_win.c: the target's address for target_disp, or MPI_ERR_RMA_RANGE */
int MPIDI_AMLAPI_win_target_addr(const struct MPIDI_AMLAPI_win_target *t, MPI_Aint target_disp,
                                 MPI_Aint true_lb, size_t bytes, uint64_t * addr);

/* amlapi_rma_am.c: native RMA messages. *handled = 0: the operation is not one of theirs
 * and the caller hands it to MPIDIG (an accumulate once the native ones are answered) */
void MPIDI_AMLAPI_rma_am_pvars(void);
int MPIDI_AMLAPI_am_put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                        int target_rank, MPI_Aint target_disp, int target_count,
                        MPI_Datatype target_datatype, MPIR_Win * win, MPIR_Request ** request,
                        int *handled);
int MPIDI_AMLAPI_am_get(void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                        int target_rank, MPI_Aint target_disp, int target_count,
                        MPI_Datatype target_datatype, MPIR_Win * win, MPIR_Request ** request,
                        int *handled);
int MPIDI_AMLAPI_am_acc(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                        void *result_addr, int result_count, MPI_Datatype result_datatype,
                        int target_rank, MPI_Aint target_disp, int target_count,
                        MPI_Datatype target_datatype, MPI_Op op, MPIR_Win * win,
                        MPIR_Request ** request, int fetch, int *handled);
int MPIDI_AMLAPI_am_cas(const void *origin_addr, const void *compare_addr, void *result_addr,
                        MPI_Datatype datatype, int target_rank, MPI_Aint target_disp,
                        MPIR_Win * win, int *handled);

/* amlapi_rma_lock.c: passive-target locks of windows that are not shared-memory ones */
int MPIDI_AMLAPI_lk_lock(int lock_type, int rank, int assert, MPIR_Win * win);
int MPIDI_AMLAPI_lk_unlock(int rank, MPIR_Win * win);
int MPIDI_AMLAPI_lk_lock_all(int assert, MPIR_Win * win);
int MPIDI_AMLAPI_lk_unlock_all(MPIR_Win * win);
int MPIDI_AMLAPI_lk_before_op(MPIR_Win * win, int rank);
int MPIDI_AMLAPI_lk_wait_grant(MPIR_Win * win, int rank);
/* native RMA messages (amlapi_rma_am.c): the origin's lock request rides along with the
 * first one of an epoch to a target (lk_carry: the lock type, or 0), whose answer grants it
 * (lk_granted); the target takes the request before it applies the message */
int MPIDI_AMLAPI_lk_carry(MPIR_Win * win, int rank);
void MPIDI_AMLAPI_lk_granted(struct MPIDI_AMLAPI_win *w, int rank);
void MPIDI_AMLAPI_lk_request_carried(MPIR_Win * win, int origin, int type);
/* target side: the aml peer waits for this rank's lock of win (its operations wait too) */
int MPIDI_AMLAPI_lk_waiting(MPIR_Win * win, int peer);
/* amlapi_rma_am.c: applies peer's operations deferred until its lock of win was granted */
void MPIDI_AMLAPI_am_run_deferred(MPIR_Win * win, int peer);
int MPIDI_AMLAPI_lk_win_free(MPIR_Win * win);
void MPIDI_AMLAPI_lk_free(struct MPIDI_AMLAPI_win *w);
void MPIDI_AMLAPI_lk_pvars(void);

/* amlapi_win.c: the synchronisation messages' handler registration and send (an aml rc) */
int MPIDI_AMLAPI_ctl_register(unsigned handler, aml_hdr_handler_t fn);
int MPIDI_AMLAPI_ctl_send(int peer, unsigned handler, const void *hdr, size_t len);

/* amlapi_rma_active.c: post/start/complete/wait (amlapi_rma.h) and fence */
void MPIDI_AMLAPI_pscw_free(struct MPIDI_AMLAPI_win *w);
void MPIDI_AMLAPI_pscw_pvars(void);

/* Every operation of a window that is not a shared-memory one starts here: the first one to
 * a target in a lock or lock_all epoch asks for the target's lock (amlapi_rma_lock.c) and
 * goes on without waiting for it if it is a native RMA message (the target applies it after
 * the grant); every other path (a direct operation, MPIDIG's messages) calls
 * MPIDI_AMLAPI_need_grant before it touches the target. */
static inline int MPIDI_AMLAPI_before_op(MPIR_Win * win, int target_rank)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    if (likely(!w || !w->lk))
        return MPI_SUCCESS;
    return MPIDI_AMLAPI_lk_before_op(win, target_rank);
}

static inline int MPIDI_AMLAPI_need_grant(MPIR_Win * win, int target_rank)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    if (likely(!w || !w->lk))
        return MPI_SUCCESS;
    return MPIDI_AMLAPI_lk_wait_grant(win, target_rank);
}

#endif /* AMLAPI_WIN_H_INCLUDED */
