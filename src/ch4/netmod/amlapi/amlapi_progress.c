/*
 * amlapi netmod: the progress modes (Banikazemi et al. 1999, §6.1, Almási et al. 2005), chosen by
 * MPIR_CVAR_AMLAPI_PROGRESS_MODE:
 *   polling     - blocked calls spin on aml_progress; on an oversubscribed node an empty
 *                 poll yields the core, and after OVERSUB_YIELD_US of nothing they sleep
 *                 as in interrupt mode (see progress_blocked);
 *   interrupt   - a blocked call that found nothing arms the UCX worker and sleeps on its
 *                 event fd without MPICH's lock (no hysteresis);
 *   coprocessor - a helper thread keeps aml progressing while the application computes. The
 *                 helper is MPICH's own progress thread (MPIR_CVAR_ASYNC_PROGRESS), which
 *                 MPICH starts after MPID_Init and stops first in MPI_Finalize, before it
 *                 drops its locks: turning it on here keeps that ordering. When the
 *                 application asked for SINGLE or FUNNELED, no other thread than the main one
 *                 makes MPI calls, so an empty poll from another thread is the helper's, and
 *                 it sleeps on the event fd like the interrupt mode instead of spinning.
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include <poll.h>
#include <sched.h>
#include <time.h>
#include <hwloc.h>

/* Cores this process may run on (hwloc, allowed cores only); 0 when unknown. */
static int allowed_cores(void)
{
    hwloc_topology_t topo;
    int n = 0;
    if (hwloc_topology_init(&topo) != 0)
        return 0;
    if (hwloc_topology_load(topo) == 0)
        n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    hwloc_topology_destroy(topo);
    return n > 0 ? n : 0;
}

/* The longest sleep on the event fd without an arrival: bounds the delay of progress that
 * needs no packet (a peer's shared-memory flag, a timer). */
#define SLEEP_MS 10
/* How long an idle blocked call on an oversubscribed node yields before it sleeps. */
#define OVERSUB_YIELD_US 200

static unsigned long long pv_coproc_sleeps, pv_coproc_events;

/* Arms the worker and sleeps on its event fd without MPICH's lock, until something arrives
 * or SLEEP_MS pass. Returns the events handled on waking, or -1
 * when it did not sleep because events were pending. */
static int sleep_on_fd(void)
{
    aml_t *aml = MPIDI_AMLAPI_global.aml;
    struct pollfd p;
    int rc = aml_arm(aml);
    if (rc == AML_ERR_STATE)
        return -1;      /* events pending: the next poll takes them */
    if (rc != AML_OK)
        MPIDI_AMLAPI_fatal("arming the UCX worker failed: %s", aml_strerror(rc));
    p.fd = MPIDI_AMLAPI_global.efd;
    p.events = POLLIN;
    p.revents = 0;
    MPID_THREAD_CS_EXIT(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    (void) poll(&p, 1, SLEEP_MS);
    MPID_THREAD_CS_ENTER(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    return aml_progress(aml);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t) t.tv_sec * 1000000000u + (uint64_t) t.tv_nsec;
}

/* A blocked MPI call polled and handled `events` (MPIDI_NM_progress with blocking set), in
 * interrupt mode or polling on an oversubscribed node. Interrupt mode sleeps on the event fd
 * after an empty poll. An oversubscribed rank first yields its core for OVERSUB_YIELD_US: the
 * rank it waits for often shares that core and then runs at once, where a sleep costs a wake-up
 * and the scheduler's latency on every message. Past that, it sleeps, so a rank blocked for
 * long uses no CPU and a flooding sender cannot keep the core from the receiver it floods. */
int MPIDI_AMLAPI_progress_blocked(int events)
{
    MPIDI_AMLAPI_idle(MPIDI_AMLAPI_idle_plan(events));
    return MPI_SUCCESS;
}

/* What a blocked call does after a poll that handled `events` (see above); also for waits on
 * a condition that MPID_Progress_wait cannot see (amlapi_coll_shm.c), which must know before
 * it sleeps, to ask for a wake-up. */
int MPIDI_AMLAPI_idle_plan(int events)
{
    if (!MPIDI_AMLAPI_global.interrupt)
        return MPIDI_AMLAPI_IDLE_SPIN;
    if (events > 0) {
        MPIDI_AMLAPI_global.idle_since = 0;
        return MPIDI_AMLAPI_IDLE_SPIN;
    }
    if (MPIDI_AMLAPI_global.oversub) {
        uint64_t now = now_ns();
        if (MPIDI_AMLAPI_global.idle_since == 0)
            MPIDI_AMLAPI_global.idle_since = now;
        if (now - MPIDI_AMLAPI_global.idle_since <
            (uint64_t) OVERSUB_YIELD_US * 1000u)
            return MPIDI_AMLAPI_IDLE_YIELD;
    }
    return MPIDI_AMLAPI_IDLE_SLEEP;
}

void MPIDI_AMLAPI_idle(int plan)
{
    if (plan == MPIDI_AMLAPI_IDLE_YIELD)
        sched_yield();
    else if (plan == MPIDI_AMLAPI_IDLE_SLEEP && sleep_on_fd() > 0)
        MPIDI_AMLAPI_global.idle_since = 0;
}

/* Polling mode: does this rank share its cores (MPIR_CVAR_AMLAPI_OVERSUBSCRIBED)? Decided
 * before aml_init, which must then provide the event fd. MPIR_CVAR_NOLOCAL and
 * MPIR_CVAR_NUM_CLIQUES shrink MPICH's node map below the processes that really share this
 * host's cores (NOLOCAL: one each), so hydra's count of the processes it started on this host
 * (MPI_LOCALNRANKS) wins when larger: without it, 3 ranks on 2 cores under NOLOCAL spun and
 * MPICH's rma/put_flush_get took minutes instead of a fraction of a second. */
int MPIDI_AMLAPI_oversubscribed(void)
{
    int cores, local = MPIR_Process.local_size;
    const char *e = getenv("MPI_LOCALNRANKS");
    if (MPIR_CVAR_AMLAPI_OVERSUBSCRIBED >= 0)
        return MPIR_CVAR_AMLAPI_OVERSUBSCRIBED > 0;
    if (e && atoi(e) > local)
        local = atoi(e);
    cores = allowed_cores();
    return cores > 0 && local > cores;
}

/* Coprocessor mode: a nonblocking poll handled `events`. On the helper thread (any thread but
 * the main one, see the top of this file) they are counted, and after an empty poll the helper
 * sleeps until the next arrival. */
int MPIDI_AMLAPI_coproc_progressed(int events)
{
    MPID_Thread_id_t self;
    int same;
    MPID_Thread_self(&self);
    MPID_Thread_same(&self, &MPIR_ThreadInfo.main_thread, &same);
    if (same)
        return MPI_SUCCESS;
    pv_coproc_events += events;
    if (events == 0) {
        int woke = sleep_on_fd();
        if (woke >= 0) {        /* it slept (an armed attempt that found work is no sleep) */
            pv_coproc_sleeps++;
            pv_coproc_events += woke;
        }
    }
    return MPI_SUCCESS;
}

int MPIDI_AMLAPI_progress_init(const aml_config_t * cfg)
{
    int mpi_errno = MPI_SUCCESS, rc;
    const char *m = MPIR_CVAR_AMLAPI_PROGRESS_MODE ? MPIR_CVAR_AMLAPI_PROGRESS_MODE : "polling";
    static int registered;

    MPIDI_AMLAPI_global.coproc = !strcmp(m, "coprocessor");
    /* read_config set the aml mode: interrupt for interrupt and coprocessor modes, and for
     * polling on an oversubscribed node (global.oversub) */
    MPIDI_AMLAPI_global.interrupt = !MPIDI_AMLAPI_global.coproc &&
        cfg->progress_mode == AML_PROGRESS_INTERRUPT;
    if (cfg->progress_mode == AML_PROGRESS_INTERRUPT) {
        rc = aml_event_fd(MPIDI_AMLAPI_global.aml, &MPIDI_AMLAPI_global.efd);
        MPIDI_AMLAPI_CHK(rc, "aml_event_fd");
    }
    if (MPIDI_AMLAPI_global.coproc) {
        /* MPID_Init was handed &MPIR_ThreadInfo.thread_provided and set it to the level the
         * application asked for; MPICH starts its progress thread after MPID_Init when
         * MPIR_CVAR_ASYNC_PROGRESS is set and the level is MULTIPLE (MPI lets the provided
         * level exceed the requested one). */
        MPIDI_AMLAPI_global.coproc_sleeps =
            MPIR_ThreadInfo.thread_provided <= MPI_THREAD_FUNNELED;
        MPIR_CVAR_ASYNC_PROGRESS = 1;
        MPIR_ThreadInfo.thread_provided = MPI_THREAD_MULTIPLE;
    }
    if (!registered) {
        registered = 1;
        MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coproc_sleeps", &pv_coproc_sleeps,
                              "coprocessor mode: times the helper thread slept on the UCX event "
                              "fd");
        MPIDI_AMLAPI_PVAR_COUNTER("amlapi_coproc_events", &pv_coproc_events,
                              "coprocessor mode: transport events (arrivals, completions) the "
                              "helper thread handled; counted where the helper can be told apart "
                              "from application threads (MPI_THREAD_SINGLE or FUNNELED)");
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

