/*
 * amlapi netmod: native passive-target locks (Baptista et al. 2003, §3.1) for every window that
 * is not a shared-memory one (those take a lock word in shared memory: amlapi_rma_shm.c) nor
 * an MPI_Win_allocate_shared one (see native()).
 *
 * The target keeps a reader-writer lock per window: a count of shared holders, an exclusive
 * flag and a FIFO of waiting requests (a request waits while anybody waits before it, so an
 * exclusive one is not starved by a stream of shared ones). Five aml messages
 * (MPIDI_AMLAPI_H_LOCK, a 16-byte header, inline unless a protocol is forced): REQ (origin
 * to target, with the lock type), GRANT (back), UNLOCK (origin to target), and SYNC and its
 * DONE at MPI_Win_free.
 *
 * What differs from MPIDIG's lock protocol (a LOCK message and its ACK at MPI_Win_lock, one
 * per rank at MPI_Win_lock_all; an UNLOCK and its ACK at every unlock, waited for):
 *  - Lock does not block; the first operation to the target asks for the lock, as WMPI II does
 *    (Baptista et al. 2003). A native RMA message (amlapi_rma_am.c) does not wait for the grant: it
 *    carries the request itself (MPIDI_AMLAPI_lk_carry), the target takes the request before it
 *    applies the message and holds the message until the lock is granted
 *    (MPIDI_AMLAPI_lk_request_carried, MPIDI_AMLAPI_lk_waiting, and the function
 *    MPIDI_AMLAPI_lk_on_grant was given), and the message's answer is the grant
 *    (MPIDI_AMLAPI_lk_granted): lock_all + fetch_and_op + unlock_all costs one message and
 *    its answer there and the UNLOCK. A direct operation or an MPIDIG message, which the
 *    target cannot hold back, sends a REQ and waits for the GRANT first
 *    (MPIDI_AMLAPI_need_grant). An epoch that issues nothing to a target costs nothing,
 *    so lock_all + one operation + unlock_all on N ranks costs one request instead of N, and
 *    lock/unlock with no operation no message at all. A lock on this rank itself is taken at
 *    MPI_Win_lock/MPI_Win_lock_all (MPI: load/store access to the own window needs it held
 *    on return); it costs no message.
 *  - Unlock does not wait for the release: the epoch's operations are complete at the
 *    target when MPIDIG's unlock returns (the completion hooks and its counters), which is
 *    all MPI asks of MPI_Win_unlock; the UNLOCK then goes one way, in order behind
 *    everything this rank sent the target before (aml keeps per-peer order), so a later lock
 *    of this rank cannot overtake it. Nothing answers it: at MPI_Win_free, before MPIDIG's
 *    barrier, a rank sends one SYNC to each target it sent an UNLOCK since the last SYNC
 *    and waits for its DONE (the UNLOCKs came first), so that no UNLOCK arrives at a freed
 *    window.
 *
 * The epoch bookkeeping stays MPIDIG's (MPIDIG_mpi_win_lock & co. called with
 * MPI_MODE_NOCHECK, which sends nothing), so its operations, flushes, fence and free check
 * the same epochs and raise the same MPI_ERR_RMA_SYNC; every RMA entry point calls
 * MPIDI_AMLAPI_lk_before_op first, whichever path (direct, native message, MPIDIG) the
 * operation then takes. A malformed lock message (unknown kind or window, an UNLOCK or
 * GRANT nobody holds or awaits) is fatal, naming the peer.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_win.h"
#include "amlapi_rma_lock.h"

enum {
    LK_REQ = 1,
    LK_GRANT,
    LK_UNLOCK,
    LK_DONE,
    LK_SYNC
};

static const char *const lk_kind_name[] = { "?", "REQ", "GRANT", "UNLOCK", "DONE", "SYNC" };

typedef struct {
    uint8_t kind;
    uint8_t type;               /* MPI_LOCK_SHARED or MPI_LOCK_EXCLUSIVE */
    uint8_t pad[2];
    int32_t rank;               /* the sender's rank in the window */
    uint64_t win_id;            /* MPIDIG's window id, the same at every rank */
} lk_msg_t;

/* the origin's state for one target */
enum {
    T_IDLE = 0,                 /* nothing to take before an operation */
    T_WANT,                     /* an epoch is open; asked at the first operation */
    T_PENDING,                  /* an operation is on its way: its path asks (a native RMA
                                 * message carries the request, the others send a REQ) */
    T_ASKED,                    /* asked; GRANT (or the carrying operation's answer) awaited */
    T_HELD                      /* granted: released at unlock */
};

typedef struct {
    uint8_t state;
    uint8_t type;
} lk_target_t;

typedef struct lk_waiter {
    struct lk_waiter *next;
    int origin;
    int type;
    int carried;                /* asked by a native RMA message, whose answer is the grant */
} lk_waiter_t;

struct MPIDI_AMLAPI_lk {
    /* origin side */
    lk_target_t *t;             /* per rank of the window */
    int all;                    /* a lock_all epoch is open */
    int *touched;               /* lock_all: ranks whose lock was taken, released at unlock_all */
    int ntouched;
    uint8_t *unlocked;          /* per rank: sent it an UNLOCK since the last SYNC */
    uint64_t undone;            /* SYNCs whose DONE has not come back */
    /* target side: this rank's lock */
    int shared;                 /* shared holders */
    int excl;                   /* 1: held exclusively */
    lk_waiter_t *head, *tail;
};

static unsigned long long pv_requests, pv_carried, pv_queued, pv_elided;

/* Not for MPI_Win_allocate_shared windows that are not shared-memory ones (one rank, or
 * amlapi_rma_shm.c could not set the window up): their ranks may load and store each
 * other's memory through MPI_Win_shared_query inside an epoch that issues no RMA operation,
 * so a lock asked for at the first operation would not protect them. Every rank decides
 * alike (the flavor and w->shm are collective). */
static int native(MPIR_Win * win)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    return w && !w->shm && win->create_flavor != MPI_WIN_FLAVOR_SHARED;
}

/* the window's lock state, made on first use; NULL when out of memory */
static struct MPIDI_AMLAPI_lk *lk_of(MPIR_Win * win)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    struct MPIDI_AMLAPI_lk *lk = w->lk;
    int n = win->comm_ptr->local_size;
    if (lk)
        return lk;
    lk = MPL_calloc(1, sizeof(*lk), MPL_MEM_RMA);
    if (!lk)
        return NULL;
    lk->t = MPL_calloc(n, sizeof(*lk->t), MPL_MEM_RMA);
    lk->touched = MPL_malloc(n * sizeof(int), MPL_MEM_RMA);
    lk->unlocked = MPL_calloc(n, 1, MPL_MEM_RMA);
    if (!lk->t || !lk->touched || !lk->unlocked) {
        MPL_free(lk->t);
        MPL_free(lk->touched);
        MPL_free(lk->unlocked);
        MPL_free(lk);
        return NULL;
    }
    w->lk = lk;
    return lk;
}

static void send_msg(MPIR_Win * win, int rank, uint8_t kind, int type)
{
    lk_msg_t m = { kind, (uint8_t) type, {0}, win->comm_ptr->rank, MPIDIG_WIN(win, win_id) };
    int rc = MPIDI_AMLAPI_ctl_send(MPIDI_AMLAPI_peer(win->comm_ptr, rank), MPIDI_AMLAPI_H_LOCK,
                                   &m, sizeof(m));
    if (rc != AML_OK)
        MPIDI_AMLAPI_fatal("cannot send a window lock %s to rank %d: %s", lk_kind_name[kind],
                           rank, aml_strerror(rc));
}

/* ---- the target ----------------------------------------------------------------------- */

static int grantable(struct MPIDI_AMLAPI_lk *lk, int type)
{
    return !lk->excl && (type == MPI_LOCK_SHARED || lk->shared == 0);
}

/* origin (a rank of the window) now holds this rank's lock; a request that a native RMA
 * message carried is granted by that message's answer, sent when it is applied */
/* runs the operations a peer sent with its lock request once the lock is granted (set by
 * amlapi_rma_am.c, which holds them: this file calls nothing above it) */
static void (*on_grant) (MPIR_Win * win, int peer);

static void grant(MPIR_Win * win, struct MPIDI_AMLAPI_lk *lk, int origin, int type, int carried)
{
    if (type == MPI_LOCK_EXCLUSIVE)
        lk->excl = 1;
    else
        lk->shared++;
    if (origin == win->comm_ptr->rank) {
        lk->t[origin].state = T_HELD;
        MPIDI_AMLAPI_progress_made();
    } else {
        /* the GRANT goes first, so the origin holds the lock before its operations'
         * answers arrive */
        if (!carried)
            send_msg(win, origin, LK_GRANT, type);
        if (on_grant)
            on_grant(win, MPIDI_AMLAPI_peer(win->comm_ptr, origin));
    }
}

int MPIDI_AMLAPI_lk_waiting(MPIR_Win * win, int peer)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    if (!w || !w->lk)
        return 0;
    for (lk_waiter_t * q = w->lk->head; q; q = q->next)
        if (MPIDI_AMLAPI_peer(win->comm_ptr, q->origin) == peer)
            return 1;
    return 0;
}

static void request(MPIR_Win * win, struct MPIDI_AMLAPI_lk *lk, int origin, int type,
                    int carried)
{
    lk_waiter_t *q;
    if (!lk->head && grantable(lk, type)) {
        grant(win, lk, origin, type, carried);
        return;
    }
    q = MPL_malloc(sizeof(*q), MPL_MEM_RMA);
    if (!q)
        MPIDI_AMLAPI_fatal("out of memory queueing a window lock request of rank %d", origin);
    q->next = NULL;
    q->origin = origin;
    q->type = type;
    q->carried = carried;
    if (lk->tail)
        lk->tail->next = q;
    else
        lk->head = q;
    lk->tail = q;
    pv_queued++;
}

/* origin released a lock of this type: grant the waiters that now can be, in order */
static void release(MPIR_Win * win, struct MPIDI_AMLAPI_lk *lk, int origin, int type)
{
    if (type == MPI_LOCK_EXCLUSIVE ? !lk->excl : lk->shared == 0)
        MPIDI_AMLAPI_fatal("malformed window lock UNLOCK from rank %d: it holds no %s lock here",
                           origin, type == MPI_LOCK_EXCLUSIVE ? "exclusive" : "shared");
    if (type == MPI_LOCK_EXCLUSIVE)
        lk->excl = 0;
    else
        lk->shared--;
    while (lk->head && grantable(lk, lk->head->type)) {
        lk_waiter_t *q = lk->head;
        lk->head = q->next;
        if (!lk->head)
            lk->tail = NULL;
        grant(win, lk, q->origin, q->type, q->carried);
        MPL_free(q);
    }
}

static int lk_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    lk_msg_t m;
    MPIR_Win *win;
    struct MPIDI_AMLAPI_lk *lk;
    int origin;

    if (info->uhdr_len != sizeof(m) || info->msg_len != 0)
        MPIDI_AMLAPI_fatal("malformed window lock message from rank %d: %zu-byte header, %zu "
                           "data bytes", info->src, info->uhdr_len, info->msg_len);
    memcpy(&m, info->uhdr, sizeof(m));
    if (m.kind < LK_REQ || m.kind > LK_SYNC ||
        (m.type != MPI_LOCK_SHARED && m.type != MPI_LOCK_EXCLUSIVE))
        MPIDI_AMLAPI_fatal("malformed window lock message from rank %d: kind %u, type %u",
                           info->src, m.kind, m.type);
    win = MPIDIU_map_lookup(MPIDI_global.win_map, m.win_id);
    if (win == MPIDIU_MAP_NOT_FOUND || !native(win) || !(lk = lk_of(win)))
        MPIDI_AMLAPI_fatal("malformed window lock %s from rank %d: no window %#llx here%s",
                           lk_kind_name[m.kind], info->src, (unsigned long long) m.win_id,
                           win != MPIDIU_MAP_NOT_FOUND && native(win) ? " (out of memory)" : "");
    origin = m.rank;
    if (origin < 0 || origin >= win->comm_ptr->local_size ||
        MPIDI_AMLAPI_peer(win->comm_ptr, origin) != info->src)
        MPIDI_AMLAPI_fatal("malformed window lock %s from rank %d: it says it is rank %d of "
                           "window %#llx", lk_kind_name[m.kind], info->src, (int) m.rank,
                           (unsigned long long) m.win_id);
    switch (m.kind) {
        case LK_REQ:
            request(win, lk, origin, m.type, 0);
            break;
        case LK_UNLOCK:
            release(win, lk, origin, m.type);
            break;
        case LK_SYNC:
            /* every UNLOCK origin sent before is applied: they came first (per-peer order) */
            send_msg(win, origin, LK_DONE, m.type);
            break;
        case LK_GRANT:
            if (lk->t[origin].state != T_ASKED || lk->t[origin].type != m.type)
                MPIDI_AMLAPI_fatal("malformed window lock GRANT from rank %d: no %s lock asked",
                                   info->src, m.type == MPI_LOCK_EXCLUSIVE ? "exclusive" :
                                   "shared");
            lk->t[origin].state = T_HELD;
            MPIDI_AMLAPI_progress_made();
            break;
        case LK_DONE:
            if (lk->undone == 0)
                MPIDI_AMLAPI_fatal("malformed window lock DONE from rank %d: no SYNC sent",
                                   info->src);
            lk->undone--;
            MPIDI_AMLAPI_progress_made();
            break;
    }
    return 0;
}

/* ---- the origin ----------------------------------------------------------------------- */

/* progresses until this rank holds target rank's lock it asked for */
static int wait_grant(struct MPIDI_AMLAPI_lk *lk, int rank)
{
    int mpi_errno = MPI_SUCCESS;
    /* waited for as MPI_Wait waits: the holder needs the core of an oversubscribed node
     * (spinning here made MPICH's lockcontention2 on 3 ranks over 2 cores many times slower) */
    MPIDI_AMLAPI_WAIT_UNTIL(lk->t[rank].state == T_HELD);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* asks target rank for the lock; waits for it only when wait is set (a lock on this rank
 * itself always: its operations are loads and stores that no grant orders) */
static int ask(MPIR_Win * win, struct MPIDI_AMLAPI_lk *lk, int rank, int type, int wait)
{
    lk->t[rank].state = T_ASKED;
    lk->t[rank].type = (uint8_t) type;
    pv_requests++;
    if (rank == win->comm_ptr->rank) {
        request(win, lk, rank, type, 0);
        wait = 1;
    } else {
        send_msg(win, rank, LK_REQ, type);
    }
    return wait ? wait_grant(lk, rank) : MPI_SUCCESS;
}

int MPIDI_AMLAPI_lk_wait_grant(MPIR_Win * win, int rank)
{
    struct MPIDI_AMLAPI_lk *lk = MPIDI_AMLAPI_WIN(win)->lk;
    if (rank < 0 || rank >= win->comm_ptr->local_size)
        return MPI_SUCCESS;
    if (lk->t[rank].state == T_PENDING)
        return ask(win, lk, rank, lk->t[rank].type, 1);
    if (lk->t[rank].state != T_ASKED)
        return MPI_SUCCESS;
    return wait_grant(lk, rank);
}

/* A native RMA message to rank is about to leave: the lock type whose request it carries,
 * or 0 */
int MPIDI_AMLAPI_lk_carry(MPIR_Win * win, int rank)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    struct MPIDI_AMLAPI_lk *lk = w ? w->lk : NULL;
    if (!lk || lk->t[rank].state != T_PENDING)
        return 0;
    lk->t[rank].state = T_ASKED;
    pv_requests++;
    pv_carried++;
    return lk->t[rank].type;
}

/* the answer of the message that carried the request to rank: the lock is held */
void MPIDI_AMLAPI_lk_granted(struct MPIDI_AMLAPI_win *w, int rank)
{
    if (w->lk && w->lk->t[rank].state == T_ASKED) {
        w->lk->t[rank].state = T_HELD;
        MPIDI_AMLAPI_progress_made();
    }
}

/* target: origin's request came with a native RMA message, which the caller then applies
 * (or defers while origin waits for the lock) */
void MPIDI_AMLAPI_lk_request_carried(MPIR_Win * win, int origin, int type)
{
    struct MPIDI_AMLAPI_lk *lk = native(win) ? lk_of(win) : NULL;
    if (!lk)
        MPIDI_AMLAPI_fatal("malformed RMA message from rank %d: a lock request for window "
                           "%#llx, %s", origin, (unsigned long long) MPIDIG_WIN(win, win_id),
                           native(win) ? "out of memory" : "whose locks are not amlapi's");
    request(win, lk, origin, type, 1);
}

static int unlock_target(MPIR_Win * win, struct MPIDI_AMLAPI_lk *lk, int rank)
{
    int mpi_errno = MPI_SUCCESS;
    lk_target_t *t = &lk->t[rank];
    /* asked for with an operation that then failed at this rank: the grant still comes */
    if (t->state == T_ASKED) {
        mpi_errno = wait_grant(lk, rank);
        if (mpi_errno)
            return mpi_errno;
    }
    if (t->state == T_HELD) {
        if (rank == win->comm_ptr->rank) {
            release(win, lk, rank, t->type);
        } else {
            send_msg(win, rank, LK_UNLOCK, t->type);
            lk->unlocked[rank] = 1;
        }
    } else if (t->state == T_WANT || t->state == T_PENDING) {
        /* nothing asked (an operation that failed before it left asks nothing) */
        pv_elided++;
    }
    t->state = T_IDLE;
    return MPI_SUCCESS;
}

/* w->lk is set: asks for target rank's lock if the open epoch has not yet (no wait) */
int MPIDI_AMLAPI_lk_before_op(MPIR_Win * win, int rank)
{
    struct MPIDI_AMLAPI_lk *lk = MPIDI_AMLAPI_WIN(win)->lk;
    if (rank < 0 || rank >= win->comm_ptr->local_size || lk->t[rank].state != T_WANT)
        return MPI_SUCCESS;     /* the operation's own checks report a bad rank */
    if (lk->all)
        lk->touched[lk->ntouched++] = rank;
    /* the operation's path asks: MPIDI_AMLAPI_lk_carry or MPIDI_AMLAPI_lk_wait_grant */
    lk->t[rank].state = T_PENDING;
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_lk_lock(int lock_type, int rank, int assert, MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_lk *lk;

    if (!native(win))
        return MPIDIG_mpi_win_lock(lock_type, rank, assert, win);
    MPIR_ERR_CHKANDJUMP(lock_type != MPI_LOCK_SHARED && lock_type != MPI_LOCK_EXCLUSIVE,
                        mpi_errno, MPI_ERR_LOCKTYPE, "**locktype");
    lk = lk_of(win);
    MPIR_ERR_CHKANDJUMP(!lk, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    /* MPIDIG's epoch state and checks, without its messages */
    mpi_errno = MPIDIG_mpi_win_lock(lock_type, rank, assert | MPI_MODE_NOCHECK, win);
    MPIR_ERR_CHECK(mpi_errno);
    if (assert & MPI_MODE_NOCHECK)
        goto fn_exit;
    lk->t[rank].state = T_WANT;
    lk->t[rank].type = (uint8_t) lock_type;
    if (rank == win->comm_ptr->rank)
        mpi_errno = ask(win, lk, rank, lock_type, 1);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_lk_unlock(int rank, MPIR_Win * win)
{
    int mpi_errno;
    if (!native(win))
        return MPIDIG_mpi_win_unlock(rank, win);
    /* checks the epoch, waits until the epoch's operations are complete at the target */
    mpi_errno = MPIDIG_mpi_win_unlock(rank, win);
    if (mpi_errno == MPI_SUCCESS && MPIDI_AMLAPI_WIN(win)->lk)
        mpi_errno = unlock_target(win, MPIDI_AMLAPI_WIN(win)->lk, rank);
    return mpi_errno;
}

int MPIDI_AMLAPI_lk_lock_all(int assert, MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_lk *lk;
    int n = win->comm_ptr->local_size, me = win->comm_ptr->rank;

    if (!native(win))
        return MPIDIG_mpi_win_lock_all(assert, win);
    lk = lk_of(win);
    MPIR_ERR_CHKANDJUMP(!lk, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    mpi_errno = MPIDIG_mpi_win_lock_all(assert | MPI_MODE_NOCHECK, win);
    MPIR_ERR_CHECK(mpi_errno);
    lk->ntouched = 0;
    if (assert & MPI_MODE_NOCHECK)
        goto fn_exit;
    lk->all = 1;
    for (int i = 0; i < n; i++) {
        lk->t[i].state = T_WANT;
        lk->t[i].type = MPI_LOCK_SHARED;
    }
    lk->touched[lk->ntouched++] = me;
    mpi_errno = ask(win, lk, me, MPI_LOCK_SHARED, 1);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_lk_unlock_all(MPIR_Win * win)
{
    int mpi_errno;
    struct MPIDI_AMLAPI_lk *lk;
    int n = win->comm_ptr->local_size;

    if (!native(win))
        return MPIDIG_mpi_win_unlock_all(win);
    mpi_errno = MPIDIG_mpi_win_unlock_all(win);
    lk = MPIDI_AMLAPI_WIN(win)->lk;
    if (mpi_errno != MPI_SUCCESS || !lk)
        return mpi_errno;
    for (int k = 0; k < lk->ntouched && mpi_errno == MPI_SUCCESS; k++)
        mpi_errno = unlock_target(win, lk, lk->touched[k]);
    if (lk->all) {
        pv_elided += n - lk->ntouched;
        for (int i = 0; i < n; i++)
            lk->t[i].state = T_IDLE;
    }
    lk->ntouched = 0;
    lk->all = 0;
    return mpi_errno;
}

/* Before MPIDIG's barrier in MPI_Win_free: every UNLOCK this rank sent has been applied, so
 * none reaches a window that is gone. */
int MPIDI_AMLAPI_lk_win_free(MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    struct MPIDI_AMLAPI_lk *lk = w ? w->lk : NULL;
    if (!lk)
        goto fn_exit;
    for (int r = 0; r < win->comm_ptr->local_size; r++)
        if (lk->unlocked[r]) {
            lk->unlocked[r] = 0;
            send_msg(win, r, LK_SYNC, MPI_LOCK_SHARED);
            lk->undone++;
        }
    MPIDI_AMLAPI_WAIT_UNTIL(lk->undone == 0);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* after the barrier: nobody holds or asks for this rank's lock any more */
void MPIDI_AMLAPI_lk_free(struct MPIDI_AMLAPI_win *w)
{
    struct MPIDI_AMLAPI_lk *lk = w->lk;
    if (!lk)
        return;
    while (lk->head) {
        lk_waiter_t *q = lk->head;
        lk->head = q->next;
        MPL_free(q);
    }
    MPL_free(lk->t);
    MPL_free(lk->touched);
    MPL_free(lk->unlocked);
    MPL_free(lk);
    w->lk = NULL;
}

void MPIDI_AMLAPI_lk_on_grant(void (*fn) (MPIR_Win * win, int peer))
{
    on_grant = fn;
}

int MPIDI_AMLAPI_lk_init(void)
{
    return MPIDI_AMLAPI_ctl_register(MPIDI_AMLAPI_H_LOCK, lk_handler);
}

void MPIDI_AMLAPI_lk_pvars(void)
{
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_lock_requests", &pv_requests,
                              "passive-target locks of non-shared-memory windows this rank asked "
                              "for (each is one request and one grant; this rank's own lock "
                              "costs no message)");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_lock_carried", &pv_carried,
                              "of those, requests that went in the epoch's first native RMA "
                              "message, granted by its answer (no message of their own)");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_lock_queued", &pv_queued,
                              "lock requests to this rank's windows that had to wait for another "
                              "holder");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_lock_elided", &pv_elided,
                              "per-target locks of lock/lock_all epochs that issued no operation "
                              "to the target, so were never asked for");
}
