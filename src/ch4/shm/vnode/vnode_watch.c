/*
 * vnode: watching the node's ranks (vnode.h says what). Why a robust mutex: the kernel itself
 * releases it, marked owner-dead, when its holder ends in any way -- SIGKILL included -- and
 * wakes a waiter, early in the process's exit (with its memory, before its files are closed).
 * So a rank killed on this node is named by a peer of the node before the launcher, which
 * learns of the death from the closed pipes, kills the rest; hydra alone names only a process
 * id, and not always the right one.
 */
#include "vnode_impl.h"
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The thread never touches the vnode_t, which vnode_finalize frees: what it reads is here
 * and in the segment, which stays mapped while a watcher exists. Who goes first, a death
 * report or this rank's finalize, is settled by one CAS on state. */
enum { W_WATCHING, W_STOPPED, W_REPORTING, W_REPORTED };

#ifdef VNODE_TEST_HOOKS
unsigned vnode_test_watch_delay_us;
#endif

struct vnode_watcher {
    vnode_seg_rank_t *ranks;    /* the node's rank blocks */
    int nlocal, self;
    int local;                  /* the watched rank */
    vnode_died_fn_t died;
    void *arg;
    int state;                  /* W_* */
};

int vnode_alive_hold(vnode_t * v)
{
    vnode_seg_rank_t *me = vnode_rank(v, v->local);
    pthread_mutexattr_t a;
    int rc;
    if (pthread_mutexattr_init(&a) || pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) ||
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST))
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: cannot make a robust shared mutex");
    rc = pthread_mutex_init(&me->alive, &a);
    pthread_mutexattr_destroy(&a);
    if (rc || pthread_mutex_lock(&me->alive))
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: cannot take this rank's alive mutex");
    VNODE_STORE(&me->done, 0, RELAXED);
    v->holds_alive = true;
    return VNODE_OK;
}

/* Whether rank block r's holder ended without finalizing. The mutex is left unusable
 * (not made consistent): a later locker gets ENOTRECOVERABLE, which says the same. */
static bool dead(vnode_seg_rank_t * r, int rc)
{
    if (rc == EOWNERDEAD)
        pthread_mutex_unlock(&r->alive);
    else if (rc == 0)
        pthread_mutex_unlock(&r->alive);        /* released in vnode_finalize */
    return (rc == EOWNERDEAD || rc == ENOTRECOVERABLE) && !VNODE_LOAD(&r->done, ACQUIRE);
}

static void *watch_main(void *p)
{
    struct vnode_watcher *w = p;
    vnode_seg_rank_t *peer = &w->ranks[w->local];
    int n = 0, *local, *pid, watching = W_WATCHING;
    if (!dead(peer, pthread_mutex_lock(&peer->alive)) ||
        !__atomic_compare_exchange_n(&w->state, &watching, W_REPORTING, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return NULL;            /* it finalized, or this rank did first */
#ifdef VNODE_TEST_HOOKS
    if (vnode_test_watch_delay_us)
        usleep(vnode_test_watch_delay_us);
#endif
    /* every rank of the node that is gone: the first may have been the watcher's victim */
    local = malloc(2 * sizeof(int) * (size_t) w->nlocal);
    if (!local) {
        int one = w->local, p1 = (int) VNODE_LOAD(&peer->pid, ACQUIRE);
        w->died(w->arg, 1, &one, &p1);
    } else {
        pid = local + w->nlocal;
        for (int r = 0; r < w->nlocal; r++) {
            vnode_seg_rank_t *b = &w->ranks[r];
            if (r == w->self || (r != w->local && !dead(b, pthread_mutex_trylock(&b->alive))))
                continue;
            local[n] = r;
            pid[n++] = (int) VNODE_LOAD(&b->pid, ACQUIRE);
        }
        w->died(w->arg, n, local, pid);
        free(local);
    }
    __atomic_store_n(&w->state, W_REPORTED, __ATOMIC_RELEASE);
    return NULL;
}

int vnode_watch(vnode_t * v, vnode_died_fn_t died, void *arg)
{
    struct vnode_watcher *w;
    pthread_attr_t a;
    pthread_t t;
    if (!v || !died || !v->attached || v->watcher)
        return VNODE_ERR_INVAL;
    if (v->nlocal < 2)
        return VNODE_OK;
    if (!(w = calloc(1, sizeof(*w))))
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: out of memory");
    w->ranks = vnode_rank(v, 0);
    w->nlocal = v->nlocal;
    w->self = v->local;
    w->local = (v->local + 1) % v->nlocal;
    w->died = died;
    w->arg = arg;
    /* a small detached thread: it is never joined (vnode_finalize cannot wake it) */
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 64 * 1024);
    if (pthread_create(&t, &a, watch_main, w)) {
        pthread_attr_destroy(&a);
        free(w);
        return vnode_fail(v, VNODE_ERR_SYS, "vnode: cannot start the watcher thread");
    }
    pthread_attr_destroy(&a);
    v->watcher = w;
    return VNODE_OK;
}

void vnode_ending(vnode_t * v)
{
    if (v && v->holds_alive)
        VNODE_STORE(&vnode_rank(v, v->local)->done, 2, RELEASE);
}

/* This rank ends normally: its watcher (if any) says nothing any more, and its own mutex is
 * released, marked done, for the rank that watches it. The watcher's record and the segment
 * stay (the thread may still wake on them) until the process exits. A death the watcher is
 * reporting already was first: its callback ends the job, and finalize waits for it rather
 * than free what the callback may use. */
bool vnode_watch_end(vnode_t * v)
{
    vnode_seg_rank_t *me = vnode_rank(v, v->local);
    int watching = W_WATCHING;
    if (v->watcher &&
        !__atomic_compare_exchange_n(&v->watcher->state, &watching, W_STOPPED, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&v->watcher->state, __ATOMIC_ACQUIRE) != W_REPORTED)
            sched_yield();
    if (v->holds_alive) {
        VNODE_STORE(&me->done, 1, RELEASE);
        /* fails (EPERM) when another thread than the one that attached finalizes: the
         * kernel releases it at exit, and done says it was normal */
        pthread_mutex_unlock(&me->alive);
        v->holds_alive = false;
    }
    return v->watcher != NULL;
}
