/*
 * Doorbells: how a sleeping rank is woken. Each rank's doorbell is an eventfd it made in
 * vnode_init; local rank 0 gathers them and hands them all to every local rank with the segment
 * (vnode_hand.c): no name, so nobody outside the job can ring it. To sleep, it stores ARMED in its
 * sleeping word, fences (vnode_arm_bell), and looks once more for work in its rings (vnode_arm,
 * vnode_ring.c, which calls this file and not the other way round); a sender fences after publishing
 * and, if it sees ARMED, swaps it to RUNG (so one wake per sleep) and adds 1 to the sleeper's
 * eventfd.
 *
 * The sender's fence is only needed once its receiver may sleep. Every rank registers for
 * membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) at attach and, when that worked, starts with
 * its sleepy word at 0. A sender that registered too publishes with no fence while that word
 * reads 0 (vnode_ring.c). The first vnode_arm stores 1 there, then calls membarrier, which
 * runs a full barrier on every core running a registered process: a sender whose load of the
 * word came before that barrier on its core had stored its record before it, so the record is
 * visible when membarrier returns and the arm's look finds it; a later load reads 1, and that
 * sender fences and rings as before. The word stays 1: a rank that sleeps once (interrupt
 * mode, an oversubscribed node, a progress thread) is likely to sleep again, and each
 * membarrier is costly (an interrupt to the other core of a VM;
 * docs/benchmarks/2026-11-27-defaults.md, MPIR_CVAR_AMLAPI_VNODE_MEMBARRIER). Without
 * membarrier (old kernels, seccomp) the word is 1 from the start: every packet is fenced.
 */
#define _GNU_SOURCE
#include "vnode_impl.h"
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/membarrier.h>

static int membarrier(int cmd)
{
#ifdef __NR_membarrier
    return (int) syscall(__NR_membarrier, cmd, 0, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

void vnode_fence_setup(vnode_t * v)
{
    int q = v->cfg.fence_always ? 0 : membarrier(MEMBARRIER_CMD_QUERY);
    v->asym = q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
        membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
    v->sleepy = !v->asym;
    VNODE_STORE(&vnode_rank(v, v->local)->sleepy, v->sleepy ? 1 : 0, RELAXED);
}

/* Before the first sleep: from now on our senders fence (see the top) */
static bool become_sleepy(vnode_t * v)
{
    VNODE_STORE(&vnode_rank(v, v->local)->sleepy, 1, RELAXED);
    v->sleepy = true;
    v->stats.membarriers++;
    if (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0)
        return true;
    /* registered, so not expected: without the barrier a record stored just now may not be
     * visible yet; rather than sleep past it, poll once more (the next arm only fences) */
    v->asym = false;
    return false;
}

void vnode_bell_close(vnode_t * v)
{
    for (int r = 0; v->bells && r < v->nlocal; r++)
        if (v->bells[r] >= 0) {
            close(v->bells[r]);
            v->bells[r] = -1;
        }
}

void vnode_bell_ring(vnode_t * v, int peer)
{
    uint64_t one = 1;
    v->stats.doorbells++;
    /* EAGAIN: its counter is at the maximum, so a wake is pending anyway. Nothing else is
     * expected: the descriptor stays valid whatever became of the peer. */
    while (write(v->bells[peer], &one, sizeof(one)) < 0 && errno == EINTR);
}

void vnode_bell_drain(vnode_t * v)
{
    uint64_t n;
    while (read(v->bells[v->local], &n, sizeof(n)) < 0 && errno == EINTR);
}

int vnode_arm_bell(vnode_t * v)
{
    if (!v->sleepy && !become_sleepy(v))
        return 0;
    uint32_t *s = &vnode_rank(v, v->local)->sleeping;
    VNODE_STORE(s, VNODE_ARMED, RELAXED);
    v->armed = true;
    VNODE_FENCE();
    return 1;
}

void vnode_disarm(vnode_t * v)
{
    v->armed = false;
    /* A sender that saw ARMED rang (or is about to: then one spurious wake): the count goes,
     * or the fd would stay readable and every later sleep would return at once. */
    __atomic_exchange_n(&vnode_rank(v, v->local)->sleeping, VNODE_AWAKE, __ATOMIC_RELAXED);
    vnode_bell_drain(v);
}

#ifdef VNODE_TEST_HOOKS
int vnode_test_unsleepy(vnode_t * v)
{
    if (!v->asym)
        return 0;
    v->sleepy = false;
    VNODE_STORE(&vnode_rank(v, v->local)->sleepy, 0, RELEASE);
    return 1;
}
#endif

int vnode_doorbell_fd(const vnode_t * v)
{
    return v->bells ? v->bells[v->local] : -1;
}
