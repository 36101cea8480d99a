/*
 * amlapi netmod: native active-target synchronisation (Baptista et al. 2003, §3.1):
 * MPI_Win_post/start/complete/wait/test and MPI_Win_fence. The epoch bookkeeping is here for
 * every window; the notices are counters in shared memory for a shared-memory window
 * (amlapi_rma_shm.c: MPIDI_AMLAPI_shm_pscw_signal/_take, waited for by spinning, as no
 * message wakes a sleeper there) and aml messages for the others.
 *
 * PSCW by messages: two aml messages (MPIDI_AMLAPI_H_PSCW, a 16-byte header, inline unless
 * a protocol is forced). MPI_Win_post sends POST to every origin of its group;
 * MPI_Win_start waits for a POST from every target of its group; MPI_Win_complete waits
 * until the epoch's operations are complete at their targets (the completion hooks, and
 * MPIDIG's counters for what went as MPIDIG messages) and sends COMPLETE to every target;
 * MPI_Win_wait waits for a COMPLETE from every origin of its group. A rank of its own group
 * costs no message.
 *
 * What differs from MPIDIG's PSCW (the same two messages, as MPIDIG control messages):
 *  - Posts and completes are counted per peer, not in one total: MPIDIG's start takes any
 *    group-size posts, so a post for this rank's next epoch from a rank outside the current
 *    start group lets start return before the group's own target has posted (MPI allows a
 *    target to post early). Here start waits for each target of its group.
 *  - Waits yield as MPI_Wait does (MPIDI_AMLAPI_WAIT_UNTIL); MPIDIG's spin, which on an
 *    oversubscribed node keeps the very rank that must post or complete off the core.
 *
 * Fence is what MPIDIG's is (its epoch checks and events, the completion of every
 * operation this rank issued, then a barrier, also under MPI_MODE_NOPRECEDE, for the reason
 * MPIDIG gives: loads and stores before a fence), with a yielding wait for the operations.
 *
 * The epoch bookkeeping (MPIDIG_WIN(win, sync): the epoch types and groups) is kept exactly
 * as MPIDIG keeps it, so MPIDIG's operation checks and MPI_ERR_RMA_SYNC stay the same. A
 * malformed PSCW message (unknown kind or window, a sender that is not the rank it names) is
 * fatal, naming the peer.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include "amlapi_win.h"

enum {
    PS_POST = 1,
    PS_COMPLETE
};

static const char *const ps_kind_name[] = { "?", "POST", "COMPLETE" };

typedef struct {
    uint8_t kind;
    uint8_t pad[3];
    int32_t rank;               /* the sender's rank in the window */
    uint64_t win_id;            /* MPIDIG's window id, the same at every rank */
} ps_msg_t;

struct MPIDI_AMLAPI_pscw {
    uint32_t *posted;           /* per target: POSTs not yet taken by a start */
    uint32_t *completed;        /* per origin: COMPLETEs not yet taken by a wait */
    int *sc_ranks;              /* the open access epoch's group, as window ranks */
    int *pw_ranks;              /* the open exposure epoch's group */
};

static unsigned long long pv_posts, pv_completes;

/* PSCW is ours for every window amlapi's hooks made */
static int native(MPIR_Win * win)
{
    return MPIDI_AMLAPI_WIN(win) != NULL;
}

/* ... and by messages (what a PSCW message may name) */
static int by_msg(MPIR_Win * win)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    return w && !w->shm;
}

static struct MPIDI_AMLAPI_pscw *ps_of(MPIR_Win * win)
{
    struct MPIDI_AMLAPI_win *w = MPIDI_AMLAPI_WIN(win);
    struct MPIDI_AMLAPI_pscw *ps = w->pscw;
    int n = win->comm_ptr->local_size;
    if (ps)
        return ps;
    ps = MPL_calloc(1, sizeof(*ps), MPL_MEM_RMA);
    if (!ps)
        return NULL;
    ps->posted = MPL_calloc(n, sizeof(uint32_t), MPL_MEM_RMA);
    ps->completed = MPL_calloc(n, sizeof(uint32_t), MPL_MEM_RMA);
    ps->sc_ranks = MPL_malloc(n * sizeof(int), MPL_MEM_RMA);
    ps->pw_ranks = MPL_malloc(n * sizeof(int), MPL_MEM_RMA);
    if (!ps->posted || !ps->completed || !ps->sc_ranks || !ps->pw_ranks) {
        w->pscw = ps;
        MPIDI_AMLAPI_pscw_free(w);
        return NULL;
    }
    w->pscw = ps;
    return ps;
}

static void send_msg(MPIR_Win * win, int rank, uint8_t kind)
{
    ps_msg_t m = { kind, {0}, win->comm_ptr->rank, MPIDIG_WIN(win, win_id) };
    int rc = MPIDI_AMLAPI_ctl_send(MPIDI_AMLAPI_peer(win->comm_ptr, rank), MPIDI_AMLAPI_H_PSCW,
                                   &m, sizeof(m));
    if (rc != AML_OK)
        MPIDI_AMLAPI_fatal("cannot send a window %s to rank %d: %s", ps_kind_name[kind], rank,
                           aml_strerror(rc));
}

/* a POST or COMPLETE from rank to this rank (rank may be this rank) */
static void arrived(struct MPIDI_AMLAPI_pscw *ps, int kind, int rank)
{
    if (kind == PS_POST)
        ps->posted[rank]++;
    else
        ps->completed[rank]++;
    MPIDI_AMLAPI_progress_made();
}

static int ps_handler(aml_t * aml, void *ctx, const aml_msg_info_t * info, aml_recv_t * recv)
{
    ps_msg_t m;
    MPIR_Win *win;
    struct MPIDI_AMLAPI_pscw *ps;

    if (info->uhdr_len != sizeof(m) || info->msg_len != 0)
        MPIDI_AMLAPI_fatal("malformed window PSCW message from rank %d: %zu-byte header, %zu "
                           "data bytes", info->src, info->uhdr_len, info->msg_len);
    memcpy(&m, info->uhdr, sizeof(m));
    if (m.kind != PS_POST && m.kind != PS_COMPLETE)
        MPIDI_AMLAPI_fatal("malformed window PSCW message from rank %d: kind %u", info->src,
                           m.kind);
    win = MPIDIU_map_lookup(MPIDI_global.win_map, m.win_id);
    if (win == MPIDIU_MAP_NOT_FOUND || !by_msg(win) || !(ps = ps_of(win)))
        MPIDI_AMLAPI_fatal("malformed window %s from rank %d: no window %#llx here%s",
                           ps_kind_name[m.kind], info->src, (unsigned long long) m.win_id,
                           win != MPIDIU_MAP_NOT_FOUND && by_msg(win) ? " (out of memory)" : "");
    if (m.rank < 0 || m.rank >= win->comm_ptr->local_size ||
        MPIDI_AMLAPI_peer(win->comm_ptr, m.rank) != info->src)
        MPIDI_AMLAPI_fatal("malformed window %s from rank %d: it says it is rank %d of window "
                           "%#llx", ps_kind_name[m.kind], info->src, (int) m.rank,
                           (unsigned long long) m.win_id);
    arrived(ps, m.kind, m.rank);
    return 0;
}

/* every rank of ranks[0..n) has a count: take one of each */
static int take_all(uint32_t * count, const int *ranks, int n)
{
    for (int i = 0; i < n; i++)
        if (count[ranks[i]] == 0)
            return 0;
    for (int i = 0; i < n; i++)
        count[ranks[i]]--;
    return 1;
}

/* a notice of kind from this rank to every rank of ranks[0..n) */
static void signal_ranks(MPIR_Win * win, struct MPIDI_AMLAPI_pscw *ps, const int *ranks, int n,
                         int kind)
{
    int me = win->comm_ptr->rank;
    if (MPIDI_AMLAPI_WIN(win)->shm) {
        MPIDI_AMLAPI_shm_pscw_signal(win, ranks, n, kind == PS_COMPLETE);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (ranks[i] == me)
            arrived(ps, kind, me);
        else
            send_msg(win, ranks[i], kind);
    }
    if (kind == PS_POST)
        pv_posts += n;
    else
        pv_completes += n;
}

/* takes a notice of kind from every rank of ranks[0..n) once each has sent one */
static int take(MPIR_Win * win, struct MPIDI_AMLAPI_pscw *ps, const int *ranks, int n, int kind)
{
    if (MPIDI_AMLAPI_WIN(win)->shm)
        return MPIDI_AMLAPI_shm_pscw_take(win, ranks, n, kind == PS_COMPLETE);
    return take_all(kind == PS_POST ? ps->posted : ps->completed, ranks, n);
}

/* until take() succeeds: a shared-memory window's counters spin (nothing would wake a
 * sleeper), messages are waited for as MPI_Wait waits */
static int wait_take(MPIR_Win * win, struct MPIDI_AMLAPI_pscw *ps, const int *ranks, int n,
                     int kind)
{
    int mpi_errno = MPI_SUCCESS;
    if (MPIDI_AMLAPI_WIN(win)->shm) {
        MPIDIU_PROGRESS_WHILE(!take(win, ps, ranks, n, kind), 0);
    } else {
        MPIDI_AMLAPI_WAIT_UNTIL(take(win, ps, ranks, n, kind));
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_win_post(MPIR_Group * group, int assert, MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS, epoch;
    struct MPIDI_AMLAPI_pscw *ps;

    if (!native(win))
        return MPIDIG_mpi_win_post(group, assert, win);
    epoch = MPIDIG_WIN(win, sync).exposure_epoch_type;
    MPIR_ERR_CHKANDJUMP(epoch != MPIDIG_EPOTYPE_NONE && epoch != MPIDIG_EPOTYPE_REFENCE,
                        mpi_errno, MPI_ERR_RMA_SYNC, "**rmasync");
    MPIR_ERR_CHKANDJUMP(MPIDIG_WIN(win, sync).pw.group != NULL, mpi_errno, MPI_ERR_GROUP,
                        "**group");
    ps = ps_of(win);
    MPIR_ERR_CHKANDJUMP(!ps, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    mpi_errno = MPIDIG_fill_ranks_in_win_grp(win, group, ps->pw_ranks);
    MPIR_ERR_CHECK(mpi_errno);
    /* this rank's stores to its window before the post are ordered before the notice (a
     * release add in shared memory; aml's send, as every message, releases them) */
    if (!(assert & MPI_MODE_NOCHECK))
        signal_ranks(win, ps, ps->pw_ranks, group->size, PS_POST);
    MPIR_Group_add_ref(group);
    MPIDIG_WIN(win, sync).pw.group = group;
    MPIDIG_WIN(win, sync).exposure_epoch_type = MPIDIG_EPOTYPE_POST;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_win_start(MPIR_Group * group, int assert, MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS, epoch;
    struct MPIDI_AMLAPI_pscw *ps;

    if (!native(win))
        return MPIDIG_mpi_win_start(group, assert, win);
    epoch = MPIDIG_WIN(win, sync).access_epoch_type;
    MPIR_ERR_CHKANDJUMP(epoch != MPIDIG_EPOTYPE_NONE && epoch != MPIDIG_EPOTYPE_REFENCE,
                        mpi_errno, MPI_ERR_RMA_SYNC, "**rmasync");
    MPIR_ERR_CHKANDJUMP(MPIDIG_WIN(win, sync).sc.group != NULL, mpi_errno, MPI_ERR_GROUP,
                        "**group");
    ps = ps_of(win);
    MPIR_ERR_CHKANDJUMP(!ps, mpi_errno, MPI_ERR_NO_MEM, "**nomem");
    mpi_errno = MPIDIG_fill_ranks_in_win_grp(win, group, ps->sc_ranks);
    MPIR_ERR_CHECK(mpi_errno);
    if (!(assert & MPI_MODE_NOCHECK)) {
        mpi_errno = wait_take(win, ps, ps->sc_ranks, group->size, PS_POST);
        MPIR_ERR_CHECK(mpi_errno);
    }
    MPIR_Group_add_ref(group);
    MPIDIG_WIN(win, sync).sc.group = group;
    MPIDIG_WIN(win, sync).access_epoch_type = MPIDIG_EPOTYPE_START;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_win_complete(MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_pscw *ps;
    MPIR_Group *group;

    if (!native(win))
        return MPIDIG_mpi_win_complete(win);
    MPIR_ERR_CHKANDJUMP(MPIDIG_WIN(win, sync).access_epoch_type != MPIDIG_EPOTYPE_START,
                        mpi_errno, MPI_ERR_RMA_SYNC, "**rmasync");
    group = MPIDIG_WIN(win, sync).sc.group;
    ps = MPIDI_AMLAPI_WIN(win)->pscw;
    /* direct operations and native messages: complete at their targets (a shared-memory
     * window's are complete when they return) */
    mpi_errno = MPIDI_AMLAPI_rma_wait(win);
    MPIR_ERR_CHECK(mpi_errno);
    /* MPIDIG's messages: locally complete, and aml delivers the COMPLETE behind them */
    MPIDI_AMLAPI_WAIT_UNTIL(MPIDIG_win_check_group_local_completed(win, ps->sc_ranks,
                                                                   group->size));
    signal_ranks(win, ps, ps->sc_ranks, group->size, PS_COMPLETE);
    if (MPIR_CVAR_CH4_RMA_MEM_EFFICIENT)
        MPIDIG_win_target_cleanall(win);
    MPIDIG_WIN(win, sync).access_epoch_type = MPIDIG_EPOTYPE_NONE;
    MPIDIG_WIN(win, sync).sc.group = NULL;
    MPIR_Group_release(group);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* wait (flag NULL) or test: ends the exposure epoch once every origin of its group has
 * completed */
int MPIDI_AMLAPI_win_wait(MPIR_Win * win, int *flag)
{
    int mpi_errno = MPI_SUCCESS;
    struct MPIDI_AMLAPI_pscw *ps;
    MPIR_Group *group;

    if (!native(win))
        return flag ? MPIDIG_mpi_win_test(win, flag) : MPIDIG_mpi_win_wait(win);
    MPIR_ERR_CHKANDJUMP(MPIDIG_WIN(win, sync).exposure_epoch_type != MPIDIG_EPOTYPE_POST,
                        mpi_errno, MPI_ERR_RMA_SYNC, "**rmasync");
    group = MPIDIG_WIN(win, sync).pw.group;
    ps = MPIDI_AMLAPI_WIN(win)->pscw;
    if (flag) {
        *flag = take(win, ps, ps->pw_ranks, group->size, PS_COMPLETE);
        if (!*flag) {
            mpi_errno = MPID_Progress_test(NULL);
            goto fn_exit;
        }
    } else {
        mpi_errno = wait_take(win, ps, ps->pw_ranks, group->size, PS_COMPLETE);
        MPIR_ERR_CHECK(mpi_errno);
    }
    MPIDIG_WIN(win, sync).pw.group = NULL;
    MPIDIG_WIN(win, sync).exposure_epoch_type = MPIDIG_EPOTYPE_NONE;
    MPIR_Group_release(group);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_AMLAPI_win_fence(int assert, MPIR_Win * win)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;

    MPIDIG_FENCE_EPOCH_CHECK(win, mpi_errno, goto fn_fail);
    mpi_errno = MPIDI_AMLAPI_rma_wait(win);
    MPIR_ERR_CHECK(mpi_errno);
    MPIDI_AMLAPI_WAIT_UNTIL(MPIR_cc_get(MPIDIG_WIN(win, local_cmpl_cnts)) == 0 &&
                            MPIR_cc_get(MPIDIG_WIN(win, remote_acc_cmpl_cnts)) == 0);
    MPIDIG_EPOCH_FENCE_EVENT(win, assert);
    mpi_errno = MPIR_Barrier(win->comm_ptr, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

void MPIDI_AMLAPI_pscw_free(struct MPIDI_AMLAPI_win *w)
{
    struct MPIDI_AMLAPI_pscw *ps = w->pscw;
    if (!ps)
        return;
    MPL_free(ps->posted);
    MPL_free(ps->completed);
    MPL_free(ps->sc_ranks);
    MPL_free(ps->pw_ranks);
    MPL_free(ps);
    w->pscw = NULL;
}

int MPIDI_AMLAPI_pscw_init(void)
{
    return MPIDI_AMLAPI_ctl_register(MPIDI_AMLAPI_H_PSCW, ps_handler);
}

void MPIDI_AMLAPI_pscw_pvars(void)
{
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_pscw_posts", &pv_posts,
                              "MPI_Win_post notices this rank sent to origins of windows that "
                              "are not shared-memory ones");
    MPIDI_AMLAPI_PVAR_COUNTER("amlapi_rma_pscw_completes", &pv_completes,
                              "MPI_Win_complete notices this rank sent to targets of windows "
                              "that are not shared-memory ones");
}
