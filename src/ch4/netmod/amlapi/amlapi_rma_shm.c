/*
 * amlapi netmod: RMA in shared memory (Baptista et al. 2003, §3). A window whose ranks all
 * share one node does all of its one-sided communication here, with no message and nothing
 * asked of the target, which may be computing. Its memory is either in one segment that
 * every rank maps (MPI_Win_allocate(_shared): MPIDIG's win_shm_alloc_impl) or, for
 * MPI_Win_create, each rank's own, which the others reach by single copy
 * (process_vm_readv/writev through aml's direct operations, with the keys amlapi_rma_win.c
 * opened) when MPIR_CVAR_AMLAPI_RMA_SHM_COPY asks for it (a single copy costs more than an
 * active message here: see the CVAR); when single copy is refused on the node, such a window
 * stays amlapi_rma_win.c's and MPIDIG's whole.
 *
 *  - put/get (any datatypes): a copy between the origin and the target's memory (a single
 *    copy per contiguous piece of the target's layout for MPI_Win_create memory);
 *  - accumulate, get_accumulate, fetch_and_op, compare_and_swap: applied at the target's
 *    memory (read, applied and written back by single copy for MPI_Win_create memory)
 *    under the target's accumulate mutex, a word in a small control segment that the
 *    window's ranks share (one cache line per rank). One mutex per target makes every
 *    accumulate-family operation atomic with respect to every other one on that target,
 *    whatever its op, type or origin, and applies them in each origin's order, which covers
 *    MPI's default accumulate_ordering (rar,raw,war,waw);
 *  - MPI_Win_lock/unlock, lock_all/unlock_all: a reader-writer lock word per target in the control
 *    segment, taken at MPI_Win_lock (WMPI II, Baptista et al. 2003, defers the grant to the first
 *    operation; here acquiring costs one atomic, so waiting at lock is as cheap and keeps
 *    MPI_Win_lock's "the lock is held on return" for lock-on-self and load/store use of shared
 *    windows). A waiting origin keeps progressing other communication;
 *  - post/start/complete/wait/test: counters in the control segment, no message;
 *  - flush(_local)(_all): operations are complete when they return, so a flush is a memory
 *    barrier; win_sync and fence are MPIDIG's (fence's completion hooks find nothing to wait
 *    for; it is a barrier), and shared_query reads MPIDIG's table.
 *
 * The epoch bookkeeping is MPIDIG's own window state (access_epoch_type, lock.count,
 * lockall, the PSCW groups), so MPIDIG's fence and free see the same epochs and raise the same
 * MPI_ERR_RMA_SYNC errors. A window spanning nodes cannot work this way (an origin on
 * another host needs a message for an accumulate, and the target-side MPIDIG handler would
 * not take the mutex): it stays amlapi_rma_win.c's direct operations plus MPIDIG.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_win.h"
#include "amlapi_rma_lock.h"
#include <sched.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define LK_EXCL (1ull << 62)    /* exclusive holder; the low bits count shared holders */

/* one per rank of the window, on its own cache line */
typedef struct {
    uint64_t lock;
    uint32_t acc;               /* accumulate mutex: 0 free, 1 held */
    char pad[64 - sizeof(uint64_t) - sizeof(uint32_t)];
} shm_ctl_t;

struct shm_target {
    char *base;                 /* the target's window memory: mapped here, or (key) its
                                 * address in the target's process */
    aml_xkey_t *key;            /* non-NULL: reached by single copy (MPI_Win_create) */
    MPI_Aint size;
    int disp_unit;
    int held;                   /* this origin's lock on it: 0, MPI_LOCK_SHARED/EXCLUSIVE */
    int nocheck;                /* locked with MPI_MODE_NOCHECK: nothing taken */
    shm_ctl_t *ctl;
};

struct MPIDI_AMLAPI_shmwin {
    void *ctl_seg;
    /* in ctl_seg after the ranks' lines, by window rank: posts[t * n + o] counts the
     * MPI_Win_post calls of target t naming origin o that o has not started on yet;
     * completes[t * n + o] the MPI_Win_complete calls of origin o to target t that t has not
     * waited for yet */
    uint32_t *posts, *completes;
    struct shm_target t[];      /* per rank of the window's communicator */
};

static unsigned long long pv_ops, pv_acc, pv_lock_waits, pv_copy_ops;

/* ---- windows -------------------------------------------------------------------------- */

/* Whether this rank can take part: every rank on one node, and the memory either in MPIDIG's
 * shared segment (allocated windows) or every other rank's reachable by single copy through
 * the keys win_expose opened (MPI_Win_create; a rank of no memory needs none). */
static bool can_share(MPIR_Win * win, int by_copy)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    MPIR_Comm *comm = win->comm_ptr, *node = comm->node_comm;
    int n = comm->local_size;

    if (n < 2 || !node || node->local_size != n)
        return false;
    if (!by_copy)
        return MPIDIG_WIN(win, shared_table) != NULL;
    if (!MPIR_CVAR_AMLAPI_RMA_SHM_COPY || !w->targets)
        return false;
    for (int i = 0; i < n; i++)
        if (i != comm->rank && w->targets[i].size > 0 && !w->targets[i].key)
            return false;
    return true;
}

/* Collective over the window's communicator: makes the window a shared-memory one when
 * every rank can (can_share), else leaves it to amlapi_rma_win.c and MPIDIG. */
int MPIDI_AMLAPI_shm_win_init(MPIR_Win * win, int by_copy)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    MPIR_Comm *comm = win->comm_ptr, *node = comm->node_comm;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    MPIDIG_win_shared_info_t *table = MPIDIG_WIN(win, shared_table);
    struct MPIDI_AMLAPI_shmwin *s = NULL;
    void *seg = NULL;
    bool ok, fail = false, all_ok;
    int n = comm->local_size;

    ok = can_share(win, by_copy);
    mpi_errno = MPIR_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_C_BOOL, MPI_LAND, comm, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    if (!ok)
        goto fn_exit;

    /* zero-filled: a new segment */
    mpi_errno = MPIDU_shm_alloc(node, n * sizeof(shm_ctl_t) + 2 * (size_t) n * n *
                                sizeof(uint32_t), &seg, &fail);
    MPIR_ERR_CHECK(mpi_errno);
    s = MPL_calloc(1, sizeof(*s) + n * sizeof(struct shm_target), MPL_MEM_RMA);
    all_ok = !fail && s;
    mpi_errno = MPIR_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_C_BOOL, MPI_LAND, comm, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    if (!all_ok) {
        /* some rank could not map it: the window goes the general way everywhere */
        if (!fail)
            MPIDU_shm_free(seg);
        MPL_free(s);
        goto fn_exit;
    }
    s->ctl_seg = seg;
    s->posts = (uint32_t *) ((shm_ctl_t *) seg + n);
    s->completes = s->posts + (size_t) n * n;
    for (int i = 0; i < n; i++) {
        int l = comm->intranode_table[i];
        struct shm_target *t = &s->t[i];
        if (!by_copy) {
            t->base = table[l].shm_base_addr;
            t->size = table[l].size;
            t->disp_unit = table[l].disp_unit;
        } else if (i == comm->rank) {
            t->base = win->base;
            t->size = win->size;
            t->disp_unit = win->disp_unit;
        } else {
            t->base = (char *) (uintptr_t) w->targets[i].base;
            t->size = (MPI_Aint) w->targets[i].size;
            t->disp_unit = (int) w->targets[i].disp_unit;
            t->key = w->targets[i].key;         /* amlapi_rma_win.c closes it at free */
        }
        t->ctl = (shm_ctl_t *) seg + l;
    }
    w->shm = s;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* MPIDIG_mpi_win_free checked that no epoch is open and ran a barrier: nobody holds a lock
 * or the mutex any more. */
int MPIDI_AMLAPI_shm_win_free(MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    if (!w || !w->shm)
        return MPI_SUCCESS;
    mpi_errno = MPIDU_shm_free(w->shm->ctl_seg);
    MPL_free(w->shm);
    w->shm = NULL;
    return mpi_errno;
}

static inline struct MPIDI_AMLAPI_shmwin *shmwin(MPIR_Win * win)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    return w ? w->shm : NULL;
}

/* ---- the lock word and the accumulate mutex ------------------------------------------ */

static inline int try_excl(shm_ctl_t * c)
{
    uint64_t zero = 0;
    return __atomic_compare_exchange_n(&c->lock, &zero, LK_EXCL, 0, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}

/* A shared locker counts itself in first and backs out if a writer holds the word; the
 * writer therefore releases by subtracting its bit, never by storing 0. */
static inline int try_shared(shm_ctl_t * c)
{
    if (__atomic_load_n(&c->lock, __ATOMIC_RELAXED) & LK_EXCL)
        return 0;
    if (!(__atomic_fetch_add(&c->lock, 1, __ATOMIC_ACQUIRE) & LK_EXCL))
        return 1;
    __atomic_fetch_sub(&c->lock, 1, __ATOMIC_RELAXED);
    return 0;
}

static int lock_target(struct shm_target *t, int lock_type)
{
    int mpi_errno = MPI_SUCCESS;
    int excl = lock_type == MPI_LOCK_EXCLUSIVE;
    if (excl ? try_excl(t->ctl) : try_shared(t->ctl))
        return MPI_SUCCESS;
    pv_lock_waits++;
    /* the holder may be waiting for a message from this rank: keep progressing */
    MPIDIU_PROGRESS_WHILE(!(excl ? try_excl(t->ctl) : try_shared(t->ctl)), 0);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static void unlock_target(struct shm_target *t, int lock_type)
{
    __atomic_fetch_sub(&t->ctl->lock, lock_type == MPI_LOCK_EXCLUSIVE ? LK_EXCL : 1,
                       __ATOMIC_RELEASE);
}

/* Held only while one operation is applied, never across a call that could block; a
 * holder that was descheduled (more ranks than cores) gets the core back by sched_yield. */
static inline void acc_enter(shm_ctl_t * c)
{
    int spins = 0;
    while (__atomic_exchange_n(&c->acc, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&c->acc, __ATOMIC_RELAXED)) {
            if (++spins >= 64) {
                sched_yield();
                spins = 0;
            }
        }
    }
}

static inline void acc_exit(shm_ctl_t * c)
{
    __atomic_store_n(&c->acc, 0, __ATOMIC_RELEASE);
}

/* ---- synchronisation ------------------------------------------------------------------ */

int MPIDI_AMLAPI_win_lock(int lock_type, int rank, int assert, MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_shmwin *s = shmwin(win);
    struct shm_target *t;
    int epoch;

    if (!s)
        return MPIDI_AMLAPI_lk_lock(lock_type, rank, assert, win);
    t = &s->t[rank];
    epoch = MPIDIG_WIN(win, sync).access_epoch_type;
    MPIR_ERR_CHKANDJUMP(!(epoch == MPIDIG_EPOTYPE_NONE || epoch == MPIDIG_EPOTYPE_REFENCE ||
                          (epoch == MPIDIG_EPOTYPE_LOCK && !t->held)),
                        mpi_errno, MPI_ERR_RMA_SYNC, "**rmasync");
    t->nocheck = !!(assert & MPI_MODE_NOCHECK);
    if (!t->nocheck) {
        mpi_errno = lock_target(t, lock_type);
        MPIR_ERR_CHECK(mpi_errno);
    }
    t->held = lock_type;
    MPIDIG_WIN(win, sync).access_epoch_type = MPIDIG_EPOTYPE_LOCK;
    MPIDIG_WIN(win, sync).lock.count++;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_win_unlock(int rank, MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_shmwin *s = shmwin(win);
    struct shm_target *t;

    if (!s)
        return MPIDI_AMLAPI_lk_unlock(rank, win);
    t = &s->t[rank];
    MPIR_ERR_CHKANDJUMP(MPIDIG_WIN(win, sync).access_epoch_type != MPIDIG_EPOTYPE_LOCK ||
                        !t->held, mpi_errno, MPI_ERR_RMA_SYNC, "**rmasync");
    /* every operation completed when it returned; the release orders them before the
     * next holder's */
    if (!t->nocheck)
        unlock_target(t, t->held);
    else
        MPL_atomic_read_write_barrier();
    t->held = 0;
    t->nocheck = 0;
    if (--MPIDIG_WIN(win, sync).lock.count == 0)
        MPIDIG_WIN(win, sync).access_epoch_type = MPIDIG_EPOTYPE_NONE;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_win_lock_all(int assert, MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_shmwin *s = shmwin(win);
    int n = win->comm_ptr->local_size, epoch;

    if (!s)
        return MPIDI_AMLAPI_lk_lock_all(assert, win);
    epoch = MPIDIG_WIN(win, sync).access_epoch_type;
    MPIR_ERR_CHKANDJUMP(epoch != MPIDIG_EPOTYPE_NONE && epoch != MPIDIG_EPOTYPE_REFENCE,
                        mpi_errno, MPI_ERR_RMA_SYNC, "**rmasync");
    if (!(assert & MPI_MODE_NOCHECK)) {
        for (int i = 0; i < n; i++) {
            mpi_errno = lock_target(&s->t[i], MPI_LOCK_SHARED);
            if (mpi_errno) {
                while (--i >= 0)
                    unlock_target(&s->t[i], MPI_LOCK_SHARED);
                MPIR_ERR_CHECK(mpi_errno);
            }
        }
    }
    MPIDIG_WIN(win, sync).assert_mode = assert & MPI_MODE_NOCHECK;
    MPIDIG_WIN(win, sync).lockall.allLocked = n;
    MPIDIG_WIN(win, sync).access_epoch_type = MPIDIG_EPOTYPE_LOCK_ALL;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_win_unlock_all(MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_shmwin *s = shmwin(win);
    int n = win->comm_ptr->local_size;

    if (!s)
        return MPIDI_AMLAPI_lk_unlock_all(win);
    MPIR_ERR_CHKANDJUMP(MPIDIG_WIN(win, sync).access_epoch_type != MPIDIG_EPOTYPE_LOCK_ALL,
                        mpi_errno, MPI_ERR_RMA_SYNC, "**rmasync");
    if (MPIDIG_WIN(win, sync).assert_mode & MPI_MODE_NOCHECK)
        MPL_atomic_read_write_barrier();
    else
        for (int i = 0; i < n; i++)
            unlock_target(&s->t[i], MPI_LOCK_SHARED);
    MPIDIG_WIN(win, sync).assert_mode = 0;
    MPIDIG_WIN(win, sync).lockall.allLocked = 0;
    MPIDIG_WIN(win, sync).access_epoch_type = MPIDIG_EPOTYPE_NONE;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* ---- post/start/complete/wait: counters in the control segment ----------------------
 * A post adds one to (itself, origin) for each origin of its group, a start waits until
 * (target, itself) holds one for each target of its group and takes them; a complete adds
 * one to (target, itself), a wait takes one of (itself, origin) for each origin. Counted
 * per pair, not in one total per rank: a post for this rank's next epoch from a rank outside
 * the current start group must not stand in for a post the group has not made yet (MPI
 * lets a target post early). MPI's rules keep the counts of successive epochs of one pair
 * apart (a target cannot post again before its wait, which needs the origin's complete,
 * which comes after the origin's start). The adds release this rank's earlier stores (its
 * local writes before post, its operations before complete); the waits acquire them. */

/* adds one to count[ranks[i] * stride] for each rank of the group */
static void signal_ranks(uint32_t * count, size_t stride, const int *ranks, int k)
{
    for (int i = 0; i < k; i++)
        __atomic_fetch_add(&count[ranks[i] * stride], 1, __ATOMIC_RELEASE);
}

/* takes one of each count[ranks[i] * stride] once all hold one (only this rank takes) */
static inline int take_all(uint32_t * count, size_t stride, const int *ranks, int k)
{
    for (int i = 0; i < k; i++)
        if (__atomic_load_n(&count[ranks[i] * stride], __ATOMIC_ACQUIRE) == 0)
            return 0;
    for (int i = 0; i < k; i++)
        __atomic_fetch_sub(&count[ranks[i] * stride], 1, __ATOMIC_RELAXED);
    return 1;
}

/* amlapi_rma_active.c's PSCW calls these for a shared-memory window: a post (complete 0) or
 * complete notice from this rank to each of ranks[0..k) */
void MPIDI_AMLAPI_shm_pscw_signal(MPIR_Win * win, const int *ranks, int k, int complete)
{
    struct MPIDI_AMLAPI_shmwin *s = shmwin(win);
    size_t n = win->comm_ptr->local_size, me = win->comm_ptr->rank;
    if (complete)
        signal_ranks(s->completes + me, n, ranks, k);  /* completes[t * n + me] */
    else
        signal_ranks(s->posts + me * n, 1, ranks, k);  /* posts[me * n + o] */
}

/* ... and takes one post (complete 0) or complete notice from each of ranks[0..k) once all
 * have sent one */
int MPIDI_AMLAPI_shm_pscw_take(MPIR_Win * win, const int *ranks, int k, int complete)
{
    struct MPIDI_AMLAPI_shmwin *s = shmwin(win);
    size_t n = win->comm_ptr->local_size, me = win->comm_ptr->rank;
    if (complete)
        return take_all(s->completes + me * n, 1, ranks, k);   /* completes[me * n + o] */
    return take_all(s->posts + me, n, ranks, k);       /* posts[t * n + me] */
}

static int passive_check(MPIR_Win * win)
{
    int epoch = MPIDIG_WIN(win, sync).access_epoch_type;
    if (epoch != MPIDIG_EPOTYPE_LOCK && epoch != MPIDIG_EPOTYPE_LOCK_ALL)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_RMA_SYNC, "**rmasync", 0);
    return MPI_SUCCESS;
}

/* A flush of a window that is not a shared-memory one, when MPIDIG has nothing of its own
 * outstanding to the target: its checks, then amlapi's operations complete. MPIDIG's flush
 * ends with one more pass of the progress engine after they have (MPICH's
 * MPIR_CVAR_CH4_RMA_AM_PROGRESS_INTERVAL); here the wait for them is that pass. */
static int flush_native(int rank, MPIR_Win * win, int local)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDIG_win_target_t *t;

    MPIDIG_EPOCH_CHECK_PASSIVE(win, mpi_errno, return mpi_errno);
    t = MPIDIG_win_target_find(win, rank);
    if (t && (MPIR_cc_get(t->local_cmpl_cnts) != 0 || MPIR_cc_get(t->remote_cmpl_cnts) != 0 ||
              MPIR_cc_get(t->remote_acc_cmpl_cnts) != 0))
        return local ? MPIDIG_mpi_win_flush_local(rank, win) : MPIDIG_mpi_win_flush(rank, win);
    if (t && MPIDIG_WIN(win, sync).access_epoch_type == MPIDIG_EPOTYPE_LOCK)
        MPIDIG_EPOCH_CHECK_TARGET_LOCK(t, mpi_errno, return mpi_errno);
    /* every flush makes progress at least once, as MPIDIG's does: a rank that spins on
     * operations to itself (complete at once) must still apply what others send it */
    if (MPIDI_AMLAPI_WIN(win) && MPIDI_AMLAPI_WIN(win)->issued != MPIDI_AMLAPI_WIN(win)->done)
        mpi_errno = MPIDI_AMLAPI_rma_wait(win);
    else
        mpi_errno = MPID_Progress_test(NULL);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Operations on a shared-memory window are complete when they return: a flush orders them
 * before what this rank does next, nothing more. */
int MPIDI_AMLAPI_win_flush(int rank, MPIR_Win * win, int local)
{
    int mpi_errno;
    struct MPIDI_AMLAPI_shmwin *s = shmwin(win);

    if (!s)
        return flush_native(rank, win, local);
    mpi_errno = passive_check(win);
    if (mpi_errno == MPI_SUCCESS && MPIDIG_WIN(win, sync).access_epoch_type ==
        MPIDIG_EPOTYPE_LOCK && !s->t[rank].held)
        mpi_errno = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                         MPI_ERR_RMA_SYNC, "**rmasync", 0);
    MPL_atomic_read_write_barrier();
    return mpi_errno;
}

int MPIDI_AMLAPI_win_flush_all(MPIR_Win * win, int local)
{
    int mpi_errno;
    if (!shmwin(win))
        return local ? MPIDIG_mpi_win_flush_local_all(win) : MPIDIG_mpi_win_flush_all(win);
    mpi_errno = passive_check(win);
    MPL_atomic_read_write_barrier();
    return mpi_errno;
}

/* ---- operations ----------------------------------------------------------------------- */

/* MPIDIG's epoch rules for an operation to target_rank (MPIDIG_RMA_OP_CHECK_SYNC), with
 * this file's per-target lock state. */
static int op_check(MPIR_Win * win, struct MPIDI_AMLAPI_shmwin *s, int target_rank)
{
    int mpi_errno = MPI_SUCCESS;
    int epoch = MPIDIG_WIN(win, sync).access_epoch_type;

    if (epoch == MPIDIG_EPOTYPE_NONE || epoch == MPIDIG_EPOTYPE_POST)
        goto fn_sync;
    if (epoch == MPIDIG_EPOTYPE_REFENCE &&
        MPIDIG_WIN(win, sync).exposure_epoch_type == MPIDIG_EPOTYPE_REFENCE) {
        MPIDIG_WIN(win, sync).access_epoch_type = MPIDIG_EPOTYPE_FENCE;
        MPIDIG_WIN(win, sync).exposure_epoch_type = MPIDIG_EPOTYPE_FENCE;
    }
    if (epoch == MPIDIG_EPOTYPE_START &&
        !MPIDIU_valid_group_rank(win->comm_ptr, target_rank, MPIDIG_WIN(win, sync).sc.group))
        goto fn_sync;
    if (epoch == MPIDIG_EPOTYPE_LOCK && !s->t[target_rank].held)
        goto fn_sync;
    return MPI_SUCCESS;
  fn_sync:
    MPIR_ERR_SET(mpi_errno, MPI_ERR_RMA_SYNC, "**rmasync");
    return mpi_errno;
}

/* The target's memory for (disp, count, dt), checked against its window: everything the
 * datatype touches, from its true lower bound in the first element to its true upper bound
 * in the last, must lie inside. */
static int target_span(struct shm_target *t, MPI_Aint disp, int count, MPI_Datatype dt,
                       char **addr, MPI_Aint * bytes)
{
    int mpi_errno = MPI_SUCCESS;
    MPI_Aint size, extent, true_lb, true_ub, off, last, lo, hi;

    MPIR_Datatype_get_size_macro(dt, size);
    *bytes = size * count;
    *addr = NULL;
    if (*bytes == 0)
        goto fn_exit;
    MPIR_Datatype_get_extent_macro(dt, extent);
    if (HANDLE_IS_BUILTIN(dt)) {
        true_lb = 0;
        true_ub = size;
    } else {
        MPIR_Datatype *p;
        MPIR_Datatype_get_ptr(dt, p);
        true_lb = p->true_lb;
        true_ub = p->true_ub;
    }
    off = disp * t->disp_unit;
    last = (MPI_Aint) (count - 1) * extent;
    lo = off + true_lb + MPL_MIN(0, last);
    hi = off + true_ub + MPL_MAX(0, last);
    MPIR_ERR_CHKANDJUMP2(lo < 0 || hi > t->size, mpi_errno, MPI_ERR_RMA_RANGE,
                         "**amlapi_rmarange", "**amlapi_rmarange %d %d", (int) lo,
                         (int) (hi - lo));
    *addr = t->base + off;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* The epoch check and the target's memory for an operation: *bytes 0 when it moves none. */
static int target_of(MPIR_Win * win, struct MPIDI_AMLAPI_shmwin *s, int target_rank,
                     MPI_Aint disp, int count, MPI_Datatype dt, struct shm_target **t,
                     char **addr, MPI_Aint * bytes)
{
    int mpi_errno = op_check(win, s, target_rank);
    if (mpi_errno != MPI_SUCCESS)
        return mpi_errno;
    *t = &s->t[target_rank];
    return target_span(*t, disp, count, dt, addr, bytes);
}

/* glibc's memcpy (rep movsb on this machine) runs many times slower when the destination is
 * 1-63 bytes past the source modulo 4 KiB: each load waits for an earlier store with the
 * same low address bits (4K aliasing). That is the usual get, into a malloc'd buffer (16
 * bytes past a page) from page-aligned window memory
 * (docs/benchmarks/2026-11-28-figures-from-the-code.md). A backward copy never loads right
 * behind its own stores. Above 512 KiB the copy is bound by memory and memcpy is as fast
 * either way. */
static inline void shm_copy(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
    size_t d = ((uintptr_t) dst - (uintptr_t) src) & 4095;
    if (n >= 2048 && n <= 512 * 1024 && d > 0 && d < 64) {
        char *o = dst;
        const char *i = src;
        while (n >= 64) {
            n -= 64;
            __m128i a = _mm_loadu_si128((const __m128i *) (i + n));
            __m128i b = _mm_loadu_si128((const __m128i *) (i + n + 16));
            __m128i c = _mm_loadu_si128((const __m128i *) (i + n + 32));
            __m128i e = _mm_loadu_si128((const __m128i *) (i + n + 48));
            _mm_storeu_si128((__m128i *) (o + n), a);
            _mm_storeu_si128((__m128i *) (o + n + 16), b);
            _mm_storeu_si128((__m128i *) (o + n + 32), c);
            _mm_storeu_si128((__m128i *) (o + n + 48), e);
        }
        memcpy(o, i, n);
        return;
    }
#endif
    memcpy(dst, src, n);
}

static void piece_done(aml_t * aml, void *arg)
{
    *(int *) arg = 1;
}

/* One contiguous piece between local memory and a target reached by single copy
 * (process_vm_writev/readv through aml), complete on return: the target's progress may be
 * copying a share of a large one, and then this waits for that share, nothing else. */
static int piece(struct shm_target *t, int write, void *local, char *addr, size_t len)
{
    int mpi_errno = MPI_SUCCESS, rc, done = 0;
    aml_t *aml = MPIDI_AMLAPI_global.aml;
    uint64_t raddr = (uint64_t) (uintptr_t) addr;

    rc = write ? aml_put_direct(aml, t->key, raddr, local, len, NULL, piece_done, &done)
        : aml_get_direct(aml, t->key, raddr, local, len, NULL, piece_done, &done);
    MPIDI_AMLAPI_CHK(rc, write ? "aml_put_direct" : "aml_get_direct");
    MPIDIU_PROGRESS_WHILE(!done, 0);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Moves bytes between packed (contiguous) and the (count, dt) layout at the target's addr,
 * by single copy: one piece per contiguous segment of the layout. */
static int packed_xfer(struct shm_target *t, int write, void *packed, char *addr, int count,
                       MPI_Datatype dt, MPI_Aint bytes)
{
    int mpi_errno = MPI_SUCCESS, contig;
    MPI_Aint size, true_lb, niov, got, off = 0;
    struct iovec *iov = NULL;

    MPIDI_Datatype_check_contig_size_lb(dt, count, contig, size, true_lb);
    if (contig)
        return piece(t, write, packed, addr + true_lb, (size_t) bytes);
    mpi_errno = MPIR_Typerep_iov_len(count, dt, bytes, &niov);
    MPIR_ERR_CHECK(mpi_errno);
    iov = MPL_malloc(MPL_MAX(niov, 1) * sizeof(*iov), MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!iov, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    mpi_errno = MPIR_Typerep_to_iov_offset(addr, count, dt, 0, iov, niov, &got);
    MPIR_ERR_CHECK(mpi_errno);
    for (MPI_Aint k = 0; k < got && off < bytes; k++) {
        size_t len = MPL_MIN(iov[k].iov_len, (size_t) (bytes - off));
        mpi_errno = piece(t, write, (char *) packed + off, iov[k].iov_base, len);
        MPIR_ERR_CHECK(mpi_errno);
        off += len;
    }
    (void) size;
  fn_exit:
    MPL_free(iov);
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* A put or get to a target reached by single copy: straight between the origin's and the
 * target's memory when both are contiguous, else through a packed buffer. */
static int copy_xfer(struct shm_target *t, int write, void *local, int local_count,
                     MPI_Datatype local_datatype, char *addr, int target_count,
                     MPI_Datatype target_datatype, MPI_Aint bytes)
{
    int mpi_errno = MPI_SUCCESS, contig;
    MPI_Aint size, true_lb, n;
    void *packed = NULL;

    pv_copy_ops++;
    MPIDI_Datatype_check_contig_size_lb(local_datatype, local_count, contig, size, true_lb);
    if (contig)
        return packed_xfer(t, write, (char *) local + true_lb, addr, target_count,
                           target_datatype, bytes);
    packed = MPL_malloc(bytes, MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!packed, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    if (write) {
        mpi_errno = MPIR_Typerep_pack(local, local_count, local_datatype, 0, packed, bytes, &n);
        MPIR_ERR_CHECK(mpi_errno);
    }
    mpi_errno = packed_xfer(t, write, packed, addr, target_count, target_datatype, bytes);
    MPIR_ERR_CHECK(mpi_errno);
    if (!write)
        mpi_errno = MPIR_Typerep_unpack(packed, bytes, local, local_count, local_datatype, 0,
                                        &n);
    (void) size;
  fn_exit:
    MPL_free(packed);
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Put and get (amlapi_rma_win.c's table): one copy between the origin's memory and the
 * target's. */
int MPIDI_AMLAPI_shm_xfer(const MPIDI_AMLAPI_rma_desc_t * d)
{
    int mpi_errno, write = d->kind == MPIDI_AMLAPI_RMA_PUT;
    struct MPIDI_AMLAPI_shmwin *s = shmwin(d->win);
    struct shm_target *t;
    char *addr, *local = d->origin_addr;
    MPI_Aint bytes;

    if (!s)
        return MPIDI_AMLAPI_RMA_NOT_MINE;
    mpi_errno = target_of(d->win, s, d->target_rank, d->target_disp, d->target_count,
                          d->target_datatype, &t, &addr, &bytes);
    MPIR_ERR_CHECK(mpi_errno);
    if (bytes > 0) {
        if (t->key)
            mpi_errno = copy_xfer(t, write, local, d->origin_count, d->origin_datatype, addr,
                                  d->target_count, d->target_datatype, bytes);
        else if (MPIDI_AMLAPI_same_basic(d->origin_datatype, d->origin_count,
                                         d->target_datatype, d->target_count))
            shm_copy(write ? addr : local, write ? local : addr, bytes);
        else if (write)
            mpi_errno = MPIR_Localcopy(local, d->origin_count, d->origin_datatype, addr,
                                       d->target_count, d->target_datatype);
        else
            mpi_errno = MPIR_Localcopy(addr, d->target_count, d->target_datatype, local,
                                       d->origin_count, d->origin_datatype);
        MPIR_ERR_CHECK(mpi_errno);
        pv_ops++;
    }
    mpi_errno = MPIDI_AMLAPI_RMA_FINISHED;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* The accumulate family at a target reached by single copy, under the target's mutex: its
 * elements are read into a packed buffer, the result (get_accumulate) taken from there, the
 * origin applied, and the buffer written back (not for MPI_NO_OP). Only the bytes of the
 * target layout are written, so another origin's put into the gaps of a strided target is
 * not undone. */
static int acc_by_copy(struct shm_target *t, const void *origin_addr, int origin_count,
                       MPI_Datatype origin_datatype, void *result_addr, int result_count,
                       MPI_Datatype result_datatype, char *addr, int target_count,
                       MPI_Datatype target_datatype, MPI_Aint bytes, MPI_Op op)
{
    int mpi_errno = MPI_SUCCESS;
    MPI_Datatype basic = target_datatype;
    MPI_Aint basic_size, n;
    char stack[64];
    void *tmp = stack, *work = NULL;        /* work: tmp, or tmp at the elements' extent */

    if (!HANDLE_IS_BUILTIN(target_datatype)) {
        MPIR_Datatype *dtp;
        MPIR_Datatype_get_ptr(target_datatype, dtp);
        basic = dtp->basic_type;
    }
    MPIR_ERR_CHKANDJUMP(basic == MPI_DATATYPE_NULL, mpi_errno, MPI_ERR_TYPE, "**dtype");
    MPIR_Datatype_get_size_macro(basic, basic_size);
    if (bytes > (MPI_Aint) sizeof(stack)) {
        tmp = MPL_malloc(bytes, MPL_MEM_RMA);
        MPIR_ERR_CHKANDJUMP(!tmp, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    }
    work = tmp;
    pv_copy_ops++;
    acc_enter(t->ctl);
    mpi_errno = packed_xfer(t, 0, tmp, addr, target_count, target_datatype, bytes);
    if (mpi_errno == MPI_SUCCESS && result_addr)
        mpi_errno = MPIR_Typerep_unpack(tmp, bytes, result_addr, result_count, result_datatype,
                                        0, &n);
    if (mpi_errno == MPI_SUCCESS && op != MPI_NO_OP) {
        MPI_Aint n_elem = bytes / basic_size, extent;
        MPIR_Datatype_get_extent_macro(basic, extent);
        if (extent != basic_size) {
            /* a pair type with padding (MPI_LONG_DOUBLE_INT): the op wants its elements at
             * their extent, the packed buffer has them back to back */
            work = MPL_malloc(n_elem * extent, MPL_MEM_RMA);
            if (!work)
                mpi_errno = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
                                                 __LINE__, MPI_ERR_NO_MEM, "**nomem", 0);
            else
                mpi_errno = MPIR_Typerep_unpack(tmp, bytes, work, n_elem, basic, 0, &n);
        }
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = MPIDI_AMLAPI_rma_apply(origin_addr, origin_count, origin_datatype, work,
                                               n_elem, basic, op);
        if (mpi_errno == MPI_SUCCESS && work != tmp)
            mpi_errno = MPIR_Typerep_pack(work, n_elem, basic, 0, tmp, bytes, &n);
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = packed_xfer(t, 1, tmp, addr, target_count, target_datatype, bytes);
    }
    acc_exit(t->ctl);
  fn_exit:
    if (work != tmp)
        MPL_free(work);         /* NULL when it failed before */
    if (tmp != stack)
        MPL_free(tmp);
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* A large accumulate of one predefined type (origin, target and result alike) is applied
 * ACC_PIECE bytes at a time, the mutex released in between, so that another origin's
 * fetch_and_op on the same target waits for a piece, not for megabytes: MPI makes an
 * accumulate atomic per element, and this origin's operations stay in its order (the call
 * returns when the last piece is applied). */
#define ACC_PIECE 262144

static int acc_pieces(struct shm_target *t, const MPIDI_AMLAPI_rma_desc_t * d, char *addr,
                      int fetch)
{
    int mpi_errno = MPI_SUCCESS;
    MPI_Aint esize, per, at, n;
    MPIR_Datatype_get_size_macro(d->target_datatype, esize);
    per = ACC_PIECE / esize;
    for (at = 0; at < d->target_count && mpi_errno == MPI_SUCCESS; at += per) {
        n = MPL_MIN(per, d->target_count - at);
        acc_enter(t->ctl);
        if (fetch)
            memcpy((char *) d->result_addr + at * esize, addr + at * esize, n * esize);
        mpi_errno = MPIDI_AMLAPI_rma_apply((const char *) d->origin_addr + at * esize, (int) n,
                                           d->origin_datatype, addr + at * esize, (int) n,
                                           d->target_datatype, d->op);
        acc_exit(t->ctl);
    }
    return mpi_errno;
}

/* Accumulate, get_accumulate (into d->result_addr first) and fetch_and_op, applied at the
 * target's memory under its mutex. */
int MPIDI_AMLAPI_shm_acc(const MPIDI_AMLAPI_rma_desc_t * d)
{
    int mpi_errno, fetch = d->kind != MPIDI_AMLAPI_RMA_ACC;
    struct MPIDI_AMLAPI_shmwin *s = shmwin(d->win);
    struct shm_target *t;
    char *addr;
    MPI_Aint bytes;

    if (!s)
        return MPIDI_AMLAPI_RMA_NOT_MINE;
    mpi_errno = target_of(d->win, s, d->target_rank, d->target_disp, d->target_count,
                          d->target_datatype, &t, &addr, &bytes);
    MPIR_ERR_CHECK(mpi_errno);
    if (bytes > 0 && t->key) {
        mpi_errno = acc_by_copy(t, d->origin_addr, d->origin_count, d->origin_datatype,
                                fetch ? d->result_addr : NULL, d->result_count,
                                d->result_datatype, addr, d->target_count, d->target_datatype,
                                bytes, d->op);
        MPIR_ERR_CHECK(mpi_errno);
        pv_acc++;
    } else if (bytes > ACC_PIECE &&
               MPIDI_AMLAPI_same_basic(d->origin_datatype, d->origin_count, d->target_datatype,
                                       d->target_count) &&
               (!fetch || MPIDI_AMLAPI_same_basic(d->target_datatype, d->target_count,
                                                  d->result_datatype, d->result_count))) {
        mpi_errno = acc_pieces(t, d, addr, fetch);
        MPIR_ERR_CHECK(mpi_errno);
        pv_acc++;
    } else if (bytes > 0) {
        acc_enter(t->ctl);
        if (fetch && MPIDI_AMLAPI_same_basic(d->target_datatype, d->target_count,
                                             d->result_datatype, d->result_count))
            memcpy(d->result_addr, addr, bytes);
        else if (fetch)
            mpi_errno = MPIR_Localcopy(addr, d->target_count, d->target_datatype,
                                       d->result_addr, d->result_count, d->result_datatype);
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = MPIDI_AMLAPI_rma_apply(d->origin_addr, d->origin_count,
                                               d->origin_datatype, addr, d->target_count,
                                               d->target_datatype, d->op);
        acc_exit(t->ctl);
        MPIR_ERR_CHECK(mpi_errno);
        pv_acc++;
    }
    mpi_errno = MPIDI_AMLAPI_RMA_FINISHED;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_shm_cas(const MPIDI_AMLAPI_rma_desc_t * d)
{
    int mpi_errno;
    struct MPIDI_AMLAPI_shmwin *s = shmwin(d->win);
    struct shm_target *t;
    char *addr;
    MPI_Aint bytes;

    if (!s)
        return MPIDI_AMLAPI_RMA_NOT_MINE;
    mpi_errno = target_of(d->win, s, d->target_rank, d->target_disp, 1, d->origin_datatype, &t,
                          &addr, &bytes);
    MPIR_ERR_CHECK(mpi_errno);
    if (bytes > 0 && t->key) {
        /* read, compare here, write back only on a match */
        pv_copy_ops++;
        acc_enter(t->ctl);
        mpi_errno = piece(t, 0, d->result_addr, addr, bytes);
        if (mpi_errno == MPI_SUCCESS &&
            MPIR_Compare_equal(d->compare_addr, d->result_addr, d->origin_datatype))
            mpi_errno = piece(t, 1, d->origin_addr, addr, bytes);
        acc_exit(t->ctl);
        MPIR_ERR_CHECK(mpi_errno);
        pv_acc++;
    } else if (bytes > 0) {
        acc_enter(t->ctl);
        memcpy(d->result_addr, addr, bytes);
        if (MPIR_Compare_equal(d->compare_addr, addr, d->origin_datatype))
            memcpy(addr, d->origin_addr, bytes);
        acc_exit(t->ctl);
        pv_acc++;
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

void MPIDI_AMLAPI_shm_win_pvars(void)
{
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_shm_ops", &pv_ops,
                              "puts and gets done as copies in a shared-memory window (one "
                              "whose ranks all share a node)");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_shm_atomics", &pv_acc,
                              "accumulate, get_accumulate, fetch_and_op and compare_and_swap "
                              "applied at the target's memory under its mutex");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_shm_single_copy_ops", &pv_copy_ops,
                              "of those (and of the atomics), the ones on MPI_Win_create memory "
                              "of another rank, moved by single copy (process_vm_readv/writev)");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_shm_lock_waits", &pv_lock_waits,
                              "MPI_Win_lock/lock_all requests on a shared-memory window that "
                              "found the lock held and waited");
}
