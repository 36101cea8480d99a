#ifndef AMLAPI_PROGRESS_H_INCLUDED
#define AMLAPI_PROGRESS_H_INCLUDED

#include "amlapi_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_progress(int vci, int blocking)
{
    (void) vci;
    /* blocking: MPICH waits in MPID_Progress_wait (maint/patches/0004) */
    int n = aml_progress(MPIDI_AMLAPI_global.aml);
    /* coprocessor mode: MPICH's progress thread polls without blocking */
    if (unlikely(MPIDI_AMLAPI_global.coproc_sleeps) && !blocking)
        return MPIDI_AMLAPI_coproc_progressed(n);
    if (unlikely(MPIDI_AMLAPI_global.interrupt) && blocking)
        return MPIDI_AMLAPI_progress_blocked(n);
    /* polling: an empty blocked poll pauses once. Back-to-back loads of the line a peer is
     * writing take it away from the writer between its stores. */
    if (blocking && n == 0)
        aml_cpu_relax();
    return MPI_SUCCESS;
}

#endif /* AMLAPI_PROGRESS_H_INCLUDED */
