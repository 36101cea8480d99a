/* Entering and leaving the library, and the fault handler (ov_signal.c). Only for the files
 * above paging (ov_signal.c, ov_sys.c, ov_mpi.c): leaving runs the queue of pages MPI's
 * faults opened, which completes requests. */
#ifndef MPIOVERLAP_OV_SIGNAL_H
#define MPIOVERLAP_OV_SIGNAL_H

#include "ov.h"

void ov_signal_init(void);
/* 1 while the owner runs application code: a page MPI's other threads must open then is
 * opened only with the owner parked; written by the owner only */
extern volatile int ov_owner_out;
/* pages MPI (or another thread) faulted on, opened by the handler: the owner completes
 * their requests at its next library exit */
extern volatile int ov_deferred_n;
void ov_deferred_run(void);

/* Entering and leaving the library on any thread. Leaving on the owner runs the queue of
 * pages MPI opened, then says it is out, then looks at the queue once more: a thread that
 * queued a page just before saw it inside (and did not park it), so the owner must see that
 * page here (both sides write, then read the other's word, sequentially consistent). */
static inline void ov_enter(void)
{
    if (ov_in_lib++ == 0 && ov_is_owner)
        __atomic_store_n(&ov_owner_out, 0, __ATOMIC_SEQ_CST);
}

static inline void ov_leave(void)
{
    for (;;) {
        if (ov_deferred_n)
            ov_deferred_run();
        if (--ov_in_lib || !ov_is_owner)
            return;
        __atomic_store_n(&ov_owner_out, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&ov_deferred_n, __ATOMIC_SEQ_CST))
            return;
        __atomic_store_n(&ov_owner_out, 0, __ATOMIC_SEQ_CST);
        ov_in_lib++;
    }
}

#endif
