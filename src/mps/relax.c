/* Polling's pause: every loop that waits for the other end (a pool buffer, a request, a ring
 * slot) calls it between attempts. Calls nothing of MPS. */
#define _GNU_SOURCE
#include "mps_impl.h"

#include <sched.h>

void mps_relax(void)
{
    /* spin a little (a message is often microseconds away), then let another process of the
     * same core run. Every 64th poll is a guess: against a yield at every poll, an A/B on a
     * host loaded by other jobs showed no difference either way (5 runs, 64 KiB-1 MiB). */
    static _Thread_local unsigned polls;
    if ((++polls & 63) == 0)
        sched_yield();
}
