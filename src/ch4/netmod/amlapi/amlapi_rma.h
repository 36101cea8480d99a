/*
 * amlapi netmod: RMA entry points. A window whose ranks all share one node's memory
 * (MPI_Win_allocate, MPI_Win_allocate_shared) is amlapi_rma_shm.c's: every operation is a
 * load/store or copy in shared memory, and passive-target locks and PSCW are words in shared
 * memory.
 * In other windows, contiguous put/get/rput/rget to a target that aml can reach directly go
 * as direct operations (amlapi_rma_win.c: a single copy on the node, UCX RMA between hosts, no
 * message at the target); the rest goes as one native amlapi message (amlapi_rma_am.c) or
 * through MPICH's generic MPIDIG layer, which calls the completion hooks below before it
 * closes an epoch, so direct operations are complete when it does. Which of these four paths
 * an operation takes is one table, rma_paths in amlapi_rma_win.c, where every entry point
 * below leads (MPIDI_AMLAPI_rma_put & co. fill one descriptor and its dispatcher walks the
 * operation's row). Passive-target locks of
 * those windows are amlapi's (amlapi_rma_lock.c), and so are post/start/complete/wait and
 * fence (amlapi_rma_active.c); flush, win_sync and shared_query are MPIDIG's there, over the
 * completion hooks.
 */
#ifndef AMLAPI_RMA_H_INCLUDED
#define AMLAPI_RMA_H_INCLUDED

int MPIDI_AMLAPI_rma_put(const void *origin_addr, int origin_count,
                         MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
                         int target_count, MPI_Datatype target_datatype, MPIR_Win * win,
                         MPIR_Request ** request);
int MPIDI_AMLAPI_rma_get(void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                         int target_rank, MPI_Aint target_disp, int target_count,
                         MPI_Datatype target_datatype, MPIR_Win * win,
                         MPIR_Request ** request);
int MPIDI_AMLAPI_rma_cmpl(MPIR_Win * win);
int MPIDI_AMLAPI_rma_acc(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                         int target_rank, MPI_Aint target_disp, int target_count,
                         MPI_Datatype target_datatype, MPI_Op op, MPIR_Win * win,
                         MPIR_Request ** request);
int MPIDI_AMLAPI_rma_get_acc(const void *origin_addr, int origin_count,
                             MPI_Datatype origin_datatype, void *result_addr, int result_count,
                             MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                             int target_count, MPI_Datatype target_datatype, MPI_Op op,
                             MPIR_Win * win, MPIR_Request ** request);
int MPIDI_AMLAPI_rma_fop(const void *origin_addr, void *result_addr, MPI_Datatype datatype,
                         int target_rank, MPI_Aint target_disp, MPI_Op op, MPIR_Win * win);
int MPIDI_AMLAPI_rma_cas(const void *origin_addr, const void *compare_addr, void *result_addr,
                         MPI_Datatype datatype, int target_rank, MPI_Aint target_disp,
                         MPIR_Win * win);
int MPIDI_AMLAPI_win_lock(int lock_type, int rank, int assert, MPIR_Win * win);
int MPIDI_AMLAPI_win_unlock(int rank, MPIR_Win * win);
int MPIDI_AMLAPI_win_lock_all(int assert, MPIR_Win * win);
int MPIDI_AMLAPI_win_unlock_all(MPIR_Win * win);
int MPIDI_AMLAPI_win_flush(int rank, MPIR_Win * win, int local);
int MPIDI_AMLAPI_win_flush_all(MPIR_Win * win, int local);
int MPIDI_AMLAPI_win_post(MPIR_Group * group, int assert, MPIR_Win * win);
int MPIDI_AMLAPI_win_start(MPIR_Group * group, int assert, MPIR_Win * win);
int MPIDI_AMLAPI_win_complete(MPIR_Win * win);
int MPIDI_AMLAPI_win_wait(MPIR_Win * win, int *flag);
int MPIDI_AMLAPI_win_fence(int assert, MPIR_Win * win);

/* Every hook waits for all of the window's direct operations: a put completes only once its
 * data is at the target, so local and remote completion are one. */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_rma_win_cmpl_hook(MPIR_Win * win)
{
    return MPIDI_AMLAPI_rma_cmpl(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_rma_win_local_cmpl_hook(MPIR_Win * win)
{
    return MPIDI_AMLAPI_rma_cmpl(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_rma_target_cmpl_hook(int rank, MPIR_Win * win)
{
    return MPIDI_AMLAPI_rma_cmpl(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_rma_target_local_cmpl_hook(int rank, MPIR_Win * win)
{
    return MPIDI_AMLAPI_rma_cmpl(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_put(const void *origin_addr, int origin_count,
                                              MPI_Datatype origin_datatype, int target_rank,
                                              MPI_Aint target_disp, int target_count,
                                              MPI_Datatype target_datatype, MPIR_Win * win,
                                              MPIDI_av_entry_t * addr, MPIDI_winattr_t winattr)
{
    return MPIDI_AMLAPI_rma_put(origin_addr, origin_count, origin_datatype, target_rank,
                                target_disp, target_count, target_datatype, win, NULL);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_get(void *origin_addr, int origin_count,
                                              MPI_Datatype origin_datatype, int target_rank,
                                              MPI_Aint target_disp, int target_count,
                                              MPI_Datatype target_datatype, MPIR_Win * win,
                                              MPIDI_av_entry_t * addr, MPIDI_winattr_t winattr)
{
    return MPIDI_AMLAPI_rma_get(origin_addr, origin_count, origin_datatype, target_rank,
                                target_disp, target_count, target_datatype, win, NULL);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_rput(const void *origin_addr, int origin_count,
                                               MPI_Datatype origin_datatype, int target_rank,
                                               MPI_Aint target_disp, int target_count,
                                               MPI_Datatype target_datatype, MPIR_Win * win,
                                               MPIDI_av_entry_t * addr, MPIDI_winattr_t winattr,
                                               MPIR_Request ** request)
{
    return MPIDI_AMLAPI_rma_put(origin_addr, origin_count, origin_datatype, target_rank,
                                target_disp, target_count, target_datatype, win, request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_rget(void *origin_addr, int origin_count,
                                               MPI_Datatype origin_datatype, int target_rank,
                                               MPI_Aint target_disp, int target_count,
                                               MPI_Datatype target_datatype, MPIR_Win * win,
                                               MPIDI_av_entry_t * addr, MPIDI_winattr_t winattr,
                                               MPIR_Request ** request)
{
    return MPIDI_AMLAPI_rma_get(origin_addr, origin_count, origin_datatype, target_rank,
                                target_disp, target_count, target_datatype, win, request);
}

/* ---- synchronisation: amlapi_rma_shm.c, which hands the other windows to amlapi_rma_lock.c
 * or MPIDIG; post/start/complete/wait and fence: amlapi_rma_active.c; win_sync and
 * shared_query: MPIDIG. The accumulate family below goes through amlapi_rma_win.c's table as
 * put and get do ---- */

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_start(MPIR_Group * group, int assert, MPIR_Win * win)
{
    return MPIDI_AMLAPI_win_start(group, assert, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_complete(MPIR_Win * win)
{
    return MPIDI_AMLAPI_win_complete(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_post(MPIR_Group * group, int assert, MPIR_Win * win)
{
    return MPIDI_AMLAPI_win_post(group, assert, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_wait(MPIR_Win * win)
{
    return MPIDI_AMLAPI_win_wait(win, NULL);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_test(MPIR_Win * win, int *flag)
{
    return MPIDI_AMLAPI_win_wait(win, flag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_lock(int lock_type, int rank, int assert,
                                                   MPIR_Win * win, MPIDI_av_entry_t * addr)
{
    return MPIDI_AMLAPI_win_lock(lock_type, rank, assert, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_unlock(int rank, MPIR_Win * win,
                                                     MPIDI_av_entry_t * addr)
{
    return MPIDI_AMLAPI_win_unlock(rank, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_fence(int assert, MPIR_Win * win)
{
    return MPIDI_AMLAPI_win_fence(assert, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_shared_query(MPIR_Win * win, int rank,
                                                           MPI_Aint * size, int *disp_unit,
                                                           void *baseptr)
{
    return MPIDIG_mpi_win_shared_query(win, rank, size, disp_unit, baseptr);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_flush(int rank, MPIR_Win * win,
                                                    MPIDI_av_entry_t * addr)
{
    return MPIDI_AMLAPI_win_flush(rank, win, 0);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_flush_local_all(MPIR_Win * win)
{
    return MPIDI_AMLAPI_win_flush_all(win, 1);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_unlock_all(MPIR_Win * win)
{
    return MPIDI_AMLAPI_win_unlock_all(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_flush_local(int rank, MPIR_Win * win,
                                                          MPIDI_av_entry_t * addr)
{
    return MPIDI_AMLAPI_win_flush(rank, win, 1);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_sync(MPIR_Win * win)
{
    return MPIDIG_mpi_win_sync(win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_flush_all(MPIR_Win * win)
{
    return MPIDI_AMLAPI_win_flush_all(win, 0);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_lock_all(int assert, MPIR_Win * win)
{
    return MPIDI_AMLAPI_win_lock_all(assert, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_compare_and_swap(const void *origin_addr,
                                                           const void *compare_addr,
                                                           void *result_addr,
                                                           MPI_Datatype datatype,
                                                           int target_rank, MPI_Aint target_disp,
                                                           MPIR_Win * win, MPIDI_av_entry_t * addr,
                                                           MPIDI_winattr_t winattr)
{
    return MPIDI_AMLAPI_rma_cas(origin_addr, compare_addr, result_addr, datatype,
                                target_rank, target_disp, win);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_accumulate(const void *origin_addr, int origin_count,
                                                     MPI_Datatype origin_datatype, int target_rank,
                                                     MPI_Aint target_disp, int target_count,
                                                     MPI_Datatype target_datatype, MPI_Op op,
                                                     MPIR_Win * win, MPIDI_av_entry_t * addr,
                                                     MPIDI_winattr_t winattr)
{
    return MPIDI_AMLAPI_rma_acc(origin_addr, origin_count, origin_datatype, target_rank,
                                target_disp, target_count, target_datatype, op, win, NULL);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_raccumulate(const void *origin_addr, int origin_count,
                                                      MPI_Datatype origin_datatype,
                                                      int target_rank, MPI_Aint target_disp,
                                                      int target_count,
                                                      MPI_Datatype target_datatype, MPI_Op op,
                                                      MPIR_Win * win, MPIDI_av_entry_t * addr,
                                                      MPIDI_winattr_t winattr,
                                                      MPIR_Request ** request)
{
    return MPIDI_AMLAPI_rma_acc(origin_addr, origin_count, origin_datatype, target_rank,
                                target_disp, target_count, target_datatype, op, win, request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_get_accumulate(const void *origin_addr,
                                                         int origin_count,
                                                         MPI_Datatype origin_datatype,
                                                         void *result_addr, int result_count,
                                                         MPI_Datatype result_datatype,
                                                         int target_rank, MPI_Aint target_disp,
                                                         int target_count,
                                                         MPI_Datatype target_datatype, MPI_Op op,
                                                         MPIR_Win * win, MPIDI_av_entry_t * addr,
                                                         MPIDI_winattr_t winattr)
{
    return MPIDI_AMLAPI_rma_get_acc(origin_addr, origin_count, origin_datatype, result_addr,
                                    result_count, result_datatype, target_rank, target_disp,
                                    target_count, target_datatype, op, win, NULL);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_rget_accumulate(const void *origin_addr,
                                                          int origin_count,
                                                          MPI_Datatype origin_datatype,
                                                          void *result_addr, int result_count,
                                                          MPI_Datatype result_datatype,
                                                          int target_rank, MPI_Aint target_disp,
                                                          int target_count,
                                                          MPI_Datatype target_datatype,
                                                          MPI_Op op, MPIR_Win * win,
                                                          MPIDI_av_entry_t * addr,
                                                          MPIDI_winattr_t winattr,
                                                          MPIR_Request ** request)
{
    return MPIDI_AMLAPI_rma_get_acc(origin_addr, origin_count, origin_datatype, result_addr,
                                    result_count, result_datatype, target_rank, target_disp,
                                    target_count, target_datatype, op, win, request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_fetch_and_op(const void *origin_addr,
                                                       void *result_addr, MPI_Datatype datatype,
                                                       int target_rank, MPI_Aint target_disp,
                                                       MPI_Op op, MPIR_Win * win,
                                                       MPIDI_av_entry_t * addr,
                                                       MPIDI_winattr_t winattr)
{
    return MPIDI_AMLAPI_rma_fop(origin_addr, result_addr, datatype, target_rank, target_disp,
                                op, win);
}

#endif /* AMLAPI_RMA_H_INCLUDED */
