/*
 * Doorbells: how a sleeping rank is woken. Each rank binds an AF_UNIX datagram socket in the
 * abstract namespace ("\0amlapi-<uid>-<job>-<local>": nothing in the file system, gone with
 * the process) and sleeps on its fd. To sleep, a rank stores ARMED in its sleeping word,
 * fences, and looks once more for work (vnode_arm); a sender fences after publishing and, if
 * it sees ARMED, swaps it to RUNG (so one datagram per sleep) and sends one byte.
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
 * membarrier costs about 16 us here (an interrupt to the other core of a VM). Without
 * membarrier (old kernels, seccomp) the word is 1 from the start: every packet is fenced.
 */
#define _GNU_SOURCE
#include "vnode_impl.h"
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
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

/* The abstract address of local rank r's doorbell. A name too long for sun_path keeps the
 * job's start and a hash of all of it. */
static socklen_t bell_addr(const vnode_t * v, int r, struct sockaddr_un *a)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    char *name = a->sun_path + 1;
    size_t cap = sizeof(a->sun_path) - 1;
    int n = snprintf(name, cap, "amlapi-%u-%s-%d", v->uid, v->job, r);
    if (n < 0 || (size_t) n >= cap) {
        n = snprintf(name, cap, "amlapi-%u-%.48s-%016llx-%d", v->uid, v->job,
                     (unsigned long long) vnode_hash_str(v->job), r);
    }
    return (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int vnode_bell_open(vnode_t * v)
{
    struct sockaddr_un a;
    socklen_t alen = bell_addr(v, v->local, &a);
    v->bell_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (v->bell_fd < 0)
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: doorbell socket: %s", strerror(errno));
    if (bind(v->bell_fd, (struct sockaddr *) &a, alen) < 0) {
        int e = errno;
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: binding doorbell @%s: %s%s", a.sun_path + 1,
                          strerror(e), e == EADDRINUSE ? " (is another job using the same "
                          "job name and local rank?)" : "");
    }
    return VNODE_OK;
}

void vnode_bell_close(vnode_t * v)
{
    if (v->bell_fd >= 0)
        close(v->bell_fd);
    v->bell_fd = -1;
}

void vnode_bell_ring(vnode_t * v, int peer)
{
    struct sockaddr_un a;
    socklen_t alen = bell_addr(v, peer, &a);
    char b = 0;
    v->stats.doorbells++;
    /* EAGAIN/ENOBUFS: its queue is full, so a wake is pending anyway; ECONNREFUSED: the peer
     * is gone, and its death is for the embedder to notice. Nothing else is expected. */
    while (sendto(v->bell_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *) &a,
                  alen) < 0 && errno == EINTR);
}

void vnode_bell_drain(vnode_t * v)
{
    char buf[64];
    while (recv(v->bell_fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0 || errno == EINTR);
}

int vnode_arm(vnode_t * v)
{
    if (!v->attached)
        return vnode_fail(v, VNODE_ERR_INVAL, "vnode: vnode_arm before vnode_attach");
    if (!v->sleepy && !become_sleepy(v))
        return VNODE_AGAIN;
    uint32_t *s = &vnode_rank(v, v->local)->sleeping;
    VNODE_STORE(s, VNODE_ARMED, RELAXED);
    v->armed = true;
    VNODE_FENCE();
    if (vnode_rx_pending(v) || vnode_tx_room(v)) {
        vnode_disarm(v);
        return VNODE_AGAIN;
    }
    return VNODE_OK;
}

void vnode_disarm(vnode_t * v)
{
    v->armed = false;
    /* A sender that saw ARMED sent a datagram (or is about to: then one spurious wake). Any
     * process may send to an abstract name, of any user: what it sent goes too, or the fd
     * would stay readable and every later sleep would return at once. */
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
    return v->bell_fd;
}
