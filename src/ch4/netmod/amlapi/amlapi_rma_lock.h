/*
 * amlapi netmod: native passive-target locks (amlapi_rma_lock.c), as the other RMA files use
 * them. Include after amlapi_win.h.
 */
#ifndef AMLAPI_RMA_LOCK_H_INCLUDED
#define AMLAPI_RMA_LOCK_H_INCLUDED

/* the locks of windows that are not shared-memory ones */
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
/* fn runs the operations peer sent with its request when its lock of win is granted */
void MPIDI_AMLAPI_lk_on_grant(void (*fn) (MPIR_Win * win, int peer));
int MPIDI_AMLAPI_lk_win_free(MPIR_Win * win);
void MPIDI_AMLAPI_lk_free(struct MPIDI_AMLAPI_win *w);
void MPIDI_AMLAPI_lk_pvars(void);

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

#endif /* AMLAPI_RMA_LOCK_H_INCLUDED */
