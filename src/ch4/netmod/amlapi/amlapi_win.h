/*
 * amlapi netmod: a window's state (MPIR_Win's dev.netmod.amlapi.w). amlapi_rma_win.c makes it and
 * does direct operations through aml; amlapi_rma_shm.c does everything of a window whose
 * ranks share one node's memory with loads and stores. Also the descriptor of one RMA
 * operation that every path of amlapi_rma_win.c's table takes (MPIDI_AMLAPI_rma_desc_t).
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

/* ---- one RMA operation, as each of its paths sees it ----------------------------------
 * Every operation is filled once into a descriptor and handed to the paths of its kind's row
 * in amlapi_rma_win.c's table, in order (shared-memory window, direct operation, native
 * message, MPIDIG) until one takes it. A path returns an MPI error code, or one of these: */
#define MPIDI_AMLAPI_RMA_NOT_MINE (-1)  /* not this path's: the next one in the row */
#define MPIDI_AMLAPI_RMA_FINISHED (-2)  /* taken and finished in the call: the dispatcher
                                         * makes the request (rput & co.) a complete one */

enum {
    MPIDI_AMLAPI_RMA_PUT,       /* put, rput */
    MPIDI_AMLAPI_RMA_GET,       /* get, rget */
    MPIDI_AMLAPI_RMA_ACC,       /* accumulate, raccumulate */
    MPIDI_AMLAPI_RMA_GACC,      /* get_accumulate, rget_accumulate */
    MPIDI_AMLAPI_RMA_FOP,       /* fetch_and_op: get_accumulate of one element, but its own
                                 * call at MPIDIG */
    MPIDI_AMLAPI_RMA_CAS,       /* compare_and_swap */
    MPIDI_AMLAPI_RMA_KINDS
};

typedef struct {              /* the entry points fill it in this order */
    int kind;
    void *origin_addr;          /* written by get, read by every other kind */
    int origin_count;
    MPI_Datatype origin_datatype;
    void *result_addr;          /* get_accumulate, fetch_and_op, compare_and_swap; else NULL */
    int result_count;
    MPI_Datatype result_datatype;
    const void *compare_addr;   /* compare_and_swap */
    int target_rank;
    MPI_Aint target_disp;
    int target_count;
    MPI_Datatype target_datatype;
    MPI_Op op;                  /* the accumulate family */
    MPIR_Win *win;
    MPIR_Request **request;     /* rput, rget, raccumulate, rget_accumulate; else NULL */
} MPIDI_AMLAPI_rma_desc_t;

/* amlapi_rma_shm.c */
/* by_copy: MPI_Win_create's memory, reached by single copy; else MPIDIG's shared segment */
int MPIDI_AMLAPI_shm_win_init(MPIR_Win * win, int by_copy);
int MPIDI_AMLAPI_shm_win_free(MPIR_Win * win);
/* the shared-memory path (NOT_MINE for every other window) */
int MPIDI_AMLAPI_shm_xfer(const MPIDI_AMLAPI_rma_desc_t * d);      /* put, get */
int MPIDI_AMLAPI_shm_acc(const MPIDI_AMLAPI_rma_desc_t * d);       /* accumulate, get_acc., fop */
int MPIDI_AMLAPI_shm_cas(const MPIDI_AMLAPI_rma_desc_t * d);
void MPIDI_AMLAPI_shm_win_pvars(void);
/* a shared-memory window's PSCW counters (complete 0: posts, 1: completes) */
void MPIDI_AMLAPI_shm_pscw_signal(MPIR_Win * win, const int *ranks, int k, int complete);
int MPIDI_AMLAPI_shm_pscw_take(MPIR_Win * win, const int *ranks, int k, int complete);

/* The target's address for target_disp and the transfer's bytes, or MPI_ERR_RMA_RANGE. */
MPL_STATIC_INLINE_PREFIX int MPIDI_AMLAPI_win_target_addr(const struct MPIDI_AMLAPI_win_target *t,
                                                          MPI_Aint target_disp, MPI_Aint true_lb,
                                                          size_t bytes, uint64_t * addr)
{
    int mpi_errno = MPI_SUCCESS;
    int64_t off;
    int bad = __builtin_mul_overflow((int64_t) target_disp, t->disp_unit, &off) ||
        __builtin_add_overflow(off, (int64_t) true_lb, &off);
    MPIR_ERR_CHKANDJUMP2(bad || off < 0 || (uint64_t) off > t->size || bytes > t->size - off,
                         mpi_errno, MPI_ERR_RMA_RANGE, "**amlapi_rmarange",
                         "**amlapi_rmarange %d %d", (int) off, (int) bytes);
    *addr = t->base + (uint64_t) off;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Progresses until every direct operation and native RMA message of the window completed
 * (amlapi_rma.h's hooks: flush, unlock, fence; window free; PSCW's complete and wait). An
 * idle rank of an oversubscribed node yields its core meanwhile, where MPIDIG's own waits
 * spin. */
MPL_STATIC_INLINE_PREFIX int MPIDI_AMLAPI_rma_wait(MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    if (!w || w->issued == w->done)
        goto fn_exit;
    MPIDI_AMLAPI_WAIT_UNTIL(w->issued == w->done);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* amlapi_rma_am.c: the native message path. NOT_MINE: the operation is not one of theirs
 * (an accumulate then only once the native ones are answered, so that MPIDIG's cannot
 * overtake them) */
void MPIDI_AMLAPI_rma_am_pvars(void);
int MPIDI_AMLAPI_am_xfer(const MPIDI_AMLAPI_rma_desc_t * d);       /* put, get */
int MPIDI_AMLAPI_am_acc(const MPIDI_AMLAPI_rma_desc_t * d);        /* accumulate, get_acc., fop */
int MPIDI_AMLAPI_am_cas(const MPIDI_AMLAPI_rma_desc_t * d);

/* amlapi_rma_active.c: post/start/complete/wait (amlapi_rma.h) and fence */
void MPIDI_AMLAPI_pscw_free(struct MPIDI_AMLAPI_win *w);
void MPIDI_AMLAPI_pscw_pvars(void);

/* The request of a request-based operation (MPI_Rput & co.; request NULL: none, *req NULL):
 * one reference for the user, one for the completion. */
MPL_STATIC_INLINE_PREFIX int MPIDI_AMLAPI_rma_request(MPIR_Request ** request,
                                                      MPIR_Request ** req)
{
    int mpi_errno = MPI_SUCCESS;
    *req = NULL;
    if (!request)
        return MPI_SUCCESS;
    *req = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__RMA, 0, 2);
    MPIR_ERR_CHKANDSTMT(*req == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    *request = *req;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

#endif /* AMLAPI_WIN_H_INCLUDED */
