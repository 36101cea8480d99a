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
#include <stdlib.h>
#include <string.h>

struct vnode_watcher {
    vnode_t *v;
    vnode_seg_rank_t *peer;     /* the watched rank's block */
    int local;
    vnode_died_fn_t died;
    void *arg;
    int stop;                   /* this rank finalized: say nothing */
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
    vnode_t *v = w->v;
    int n = 0, *local, *pid;
    if (!dead(w->peer, pthread_mutex_lock(&w->peer->alive)) ||
        __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE))
        return NULL;
    /* every rank of the node that is gone: the first may have been the watcher's victim */
    local = malloc(2 * sizeof(int) * (size_t) v->nlocal);
    if (!local) {
        int one = w->local, p1 = (int) VNODE_LOAD(&w->peer->pid, ACQUIRE);
        w->died(w->arg, 1, &one, &p1);
        return NULL;
    }
    pid = local + v->nlocal;
    for (int r = 0; r < v->nlocal; r++) {
        vnode_seg_rank_t *b = vnode_rank(v, r);
        if (r == v->local || (r != w->local && !dead(b, pthread_mutex_trylock(&b->alive))))
            continue;
        local[n] = r;
        pid[n++] = (int) VNODE_LOAD(&b->pid, ACQUIRE);
    }
    w->died(w->arg, n, local, pid);
    free(local);
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
    w->v = v;
    w->local = (v->local + 1) % v->nlocal;
    w->peer = vnode_rank(v, w->local);
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
 * stay (the thread may still wake on them) until the process exits. */
bool vnode_watch_end(vnode_t * v)
{
    vnode_seg_rank_t *me = vnode_rank(v, v->local);
    if (v->watcher)
        __atomic_store_n(&v->watcher->stop, 1, __ATOMIC_RELEASE);
    if (v->holds_alive) {
        VNODE_STORE(&me->done, 1, RELEASE);
        /* fails (EPERM) when another thread than the one that attached finalizes: the
         * kernel releases it at exit, and done says it was normal */
        pthread_mutex_unlock(&me->alive);
        v->holds_alive = false;
    }
    return v->watcher != NULL;
}
