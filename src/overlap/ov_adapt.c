/* Call sites whose deferral does not pay (not in the published design; measured need,
 * docs/overlap.md).
 *
 * A deferred request costs two mprotect calls and, when touched while in flight, a fault
 * (docs/benchmarks/2026-11-28-figures-from-the-code.md). A request the application touches
 * within MPIOVERLAP_ADAPT_NS (default 20000 ns) of the call's return gained at most that much
 * overlap, less than it cost: a ping-pong that receives and reads (or sends back) at once is
 * the typical case. Each completion of a protected request (a fault, a later call on its
 * memory, a system call, a flush) scores its call site "quick" or "slow"; a site with at least 4 quick touches and more than 3 times as many quick as
 * slow ones stays blocking from then on, except every 32nd call, which is deferred again to
 * notice a change (counts halve every 64 scores, so old behaviour fades). Requests a chain
 * waits for do not score (they are waited for on purpose), nor unprotected ones (complete at
 * once, or the last of a chain). MPIOVERLAP_ADAPT=0 turns this off.
 *
 * The table is small and open-addressed by site; scoring (also from the fault handler) only
 * updates counters in place, no allocation: async-signal-safe. */
#define _GNU_SOURCE
#include "ov.h"

#define OV_NSITES 64

struct site {
    void *pc;
    unsigned quick, slow, calls;
};
static struct site sites[OV_NSITES];

static struct site *lookup(void *pc, int insert)
{
    unsigned h = (unsigned)(((uintptr_t)pc >> 2) * 2654435761u) % OV_NSITES;
    for (int k = 0; k < OV_NSITES; k++) {
        struct site *s = &sites[(h + (unsigned)k) % OV_NSITES];
        if (s->pc == pc)
            return s;
        if (!s->pc) {
            if (!insert)
                return NULL;
            s->pc = pc;
            return s;
        }
    }
    return NULL;    /* full: that site is never made blocking */
}

int ov_site_blocking(void *pc)
{
    if (!ov.adapt)
        return 0;
    struct site *s = lookup(pc, 0);
    if (!s || s->quick < 4 || s->quick <= 3 * s->slow)
        return 0;
    if (++s->calls % 32 == 0)
        return 0;   /* a probe */
    return 1;
}

void ov_site_score(void *pc, long long touched_after_ns)
{
    if (!ov.adapt || !pc)
        return;
    struct site *s = lookup(pc, 1);
    if (!s)
        return;
    if (touched_after_ns < ov.adapt_ns)
        s->quick++;
    else
        s->slow++;
    if (s->quick + s->slow >= 64) {
        s->quick /= 2;
        s->slow /= 2;
    }
}
