/* The page-fault handler (Natvig and Elster 2006, §2.3) and the application's own SIGSEGV handler.
 *
 * Our handler stays installed once MPI_Init has run; whatever handler was there before (the
 * application's, or one MPI installed during init, e.g. Open MPI's backtrace printer) and
 * whatever the application installs later through sigaction()/signal() is kept as "the
 * application's handler" (both calls are interposed and answer with it): a fault that is not
 * on one of our pages goes there, or to the default action (the fault repeats with SIG_DFL
 * restored, so the process dies of SIGSEGV as it would have).
 *
 * It runs on an alternate signal stack (a fault on a stack page must still find a stack) and
 * only uses async-signal-safe calls, with one deliberate exception Natvig and Elster also make: on
 * the thread that owns the requests, outside the library, it calls PMPI_Waitall. That is safe
 * because the interrupted code is the application's, never MPI's (ov_in_lib says so), and
 * MPI_THREAD_FUNNELED-style use is the only one we accept (ov_mpi.c). A fault inside MPI, or
 * on another thread (MPI's progress threads), cannot wait there: the page is opened and the
 * owner completes its requests before it returns to the application (the queue below). */
#define _GNU_SOURCE
#include "ov_signal.h"
#include "ov_env.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static sighandler_t (*real_signal)(int, sighandler_t);
static struct sigaction app_segv;      /* the application's view of SIGSEGV */
static volatile int installed;

static void queue_page(uintptr_t pg, int foreign);

static void resolve(void)
{
    if (!real_sigaction)
        real_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
    if (!real_signal)
        real_signal = (sighandler_t (*)(int, sighandler_t))dlsym(RTLD_NEXT, "signal");
}

static void to_application(int sig, siginfo_t *si, void *uc)
{
    ov.st.faults_foreign++;
    struct sigaction a = app_segv;
    if (a.sa_flags & SA_RESETHAND)
        app_segv.sa_handler = SIG_DFL, app_segv.sa_flags = 0;
    if (a.sa_flags & SA_SIGINFO) {
        a.sa_sigaction(sig, si, uc);
    } else if (a.sa_handler == SIG_DFL || a.sa_handler == SIG_IGN) {
        /* the kernel does not let a fault be ignored either: default action. Returning
         * repeats the faulting instruction, which now kills the process with SIGSEGV. */
        struct sigaction d;
        memset(&d, 0, sizeof d);
        d.sa_handler = SIG_DFL;
        real_sigaction(SIGSEGV, &d, NULL);
        installed = 0;
    } else {
        a.sa_handler(sig);
    }
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    uintptr_t pg = (uintptr_t)si->si_addr / ov.page;
    if (si->si_code == SEGV_ACCERR && ov.page && ov_page_ours(pg)) {
        if (!ov_is_owner) {
            __atomic_fetch_add(&ov.st.faults_in_mpi, 1, __ATOMIC_RELAXED);
            queue_page(pg, 1);
        } else if (ov_in_lib) {
            ov.st.faults_in_mpi++;
            queue_page(pg, 0);
        } else {
            ov.st.faults++;
            ov_chain_note_fault();

            ov_enter();
            ov_complete_page(pg);
            /* MPI may have faulted on (and opened) another page while we waited: ov_leave
             * runs the queue */
            ov_leave();
        }
        errno = saved;
        return;
    }
    /* A fault on a page that was ours when it was taken but is not now: another thread
     * faulted while the owner was completing that page's request (out of the table already,
     * the page not yet open: wait until the owner is through; there is no MPI call in that
     * stretch, so it cannot be waiting for us), or the owner's own fault was delivered
     * together with the park signal, whose handler ran first and completed the request.
     * Run the instruction again, once per table state: a second fault at the same address
     * with the table unchanged is a real one. */
    if (si->si_code == SEGV_ACCERR && ov.page) {
        static __thread uintptr_t last_addr;
        static __thread unsigned last_seq;
        unsigned s;
        while (((s = __atomic_load_n(&ov_tab_seq, __ATOMIC_SEQ_CST)) & 1) && !ov_is_owner)
            __builtin_ia32_pause();
        if (last_addr != (uintptr_t)si->si_addr || last_seq != s) {
            last_addr = (uintptr_t)si->si_addr;
            last_seq = s;
            errno = saved;
            return;
        }
    }
    errno = saved;
    to_application(sig, si, uc);
}

/* ---- parking the owner (the queue below says when) ----------------------------------------------
 * A real-time signal sent to the owner thread; its handler says "parked" with the handshake's
 * generation, waits until the foreign thread has opened the page, and completes the queued
 * pages' requests (PMPI_Waitall from a handler that interrupted application code: the
 * exception the fault path makes too, see the top of this file). Interrupting the library
 * instead (the owner entered it after the foreign thread looked), it only answers: the
 * library runs the queue on its way out. A foreign thread waits at most a second for the
 * answer (the application may block the signal); then it opens the page anyway and says so
 * once, and the page is completed at the owner's next library call, as before. */
static volatile unsigned park_gen, parked_gen, opened_gen;
static int park_sig;

static void on_park(int sig, siginfo_t *si, void *uc)
{
    (void)sig; (void)si; (void)uc;
    int saved = errno;
    unsigned g = __atomic_load_n(&park_gen, __ATOMIC_SEQ_CST);
    __atomic_store_n(&parked_gen, g, __ATOMIC_SEQ_CST);
    if (!ov_in_lib && ov_is_owner) {
        while ((int)(__atomic_load_n(&opened_gen, __ATOMIC_SEQ_CST) - g) < 0)
            __builtin_ia32_pause();
        ov_enter();
        ov_leave();     /* runs the queue */
    }
    errno = saved;
}

/* stop the owner (running application code) in a handler until park_opened says the page a
 * foreign thread needs is open; 0 if it did not answer in time */
static int park_owner(void)
{
    static int warned;
    unsigned g = __atomic_add_fetch(&park_gen, 1, __ATOMIC_SEQ_CST);
    if (syscall(SYS_tgkill, getpid(), ov.owner_tid, park_sig) != 0)
        return 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned k = 1; __atomic_load_n(&parked_gen, __ATOMIC_SEQ_CST) != g; k++) {
        __builtin_ia32_pause();
        if (k % 4096 == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec >= 2) {
                if (!warned++) {
                    static const char m[] = "mpioverlap: the MPI thread did not answer the park signal "
                                            "(blocked?); a page MPI's threads opened is completed at its "
                                            "next MPI call\n";
                    ov_say(m, sizeof m - 1);
                }
                return 0;
            }
        }
    }
    __atomic_fetch_add(&ov.st.parks, 1, __ATOMIC_RELAXED);
    return 1;
}

static void park_opened(void)
{
    __atomic_store_n(&opened_gen, park_gen, __ATOMIC_SEQ_CST);
}

/* Faults taken inside MPI, or in one of MPI's own threads, on a protected page: the handler
 * cannot call MPI there, so it opens the page and queues it for the owner thread, which
 * completes the page's requests.
 *  - inside MPI on the owner: before it returns to the application (ov_leave) the owner
 *    protects the page again as the requests still on it want. No application code ran
 *    while it was open, and MPI writes its own objects there, never the requests' bytes (a
 *    receive lands in our buffer; a send is only read), so nothing needs completing: MPI's
 *    next touch faults again, which is cheaper than waiting for the requests, each of which
 *    used to end its requests' overlap early (docs/benchmarks/2026-11-28-figures-from-the-code.md:
 *    how often it happens in the SOR solver);
 *  - on another thread while the owner is inside the library: the same (ov_leave's second
 *    look closes the race with its way out);
 *  - on another thread while the owner runs application code: the owner is parked in a
 *    signal handler first (park_owner), the page opened, and the owner completes the
 *    page's requests in that handler before it resumes. Opening the page with the owner
 *    running would let it read a receive's old bytes, or write under a send, until its next
 *    library call (the race the previous version had).
 * One queuing thread at a time (a spin lock; the owner's pops take it too, briefly, with no
 * fault possible inside). */
#define OV_MAXDEFER 64
static volatile uintptr_t queued[OV_MAXDEFER];
static volatile unsigned char queued_foreign[OV_MAXDEFER];
volatile int ov_deferred_n;
volatile int ov_owner_out;
static volatile int qlock;

static void q_lock(void)
{
    while (__atomic_exchange_n(&qlock, 1, __ATOMIC_ACQUIRE))
        __builtin_ia32_pause();
}
static void q_unlock(void) { __atomic_store_n(&qlock, 0, __ATOMIC_RELEASE); }

static void queue_page(uintptr_t pg, int foreign)
{
    q_lock();
    int n = ov_deferred_n;
    if (n >= OV_MAXDEFER) {
        static const char m[] = "mpioverlap: too many faults inside MPI on protected pages\n";
        ov_say(m, sizeof m - 1);
        abort();
    }
    queued[n] = pg;
    queued_foreign[n] = (unsigned char)foreign;
    __atomic_store_n(&ov_deferred_n, n + 1, __ATOMIC_SEQ_CST);
    int parked = foreign && __atomic_load_n(&ov_owner_out, __ATOMIC_SEQ_CST) && park_owner();
    mprotect((char *)(pg * ov.page), ov.page, PROT_READ | PROT_WRITE);
    if (parked)
        park_opened();
    q_unlock();
}

void ov_deferred_run(void)
{
    for (;;) {
        q_lock();
        int n = ov_deferred_n;
        uintptr_t pg = n > 0 ? queued[n - 1] : 0;
        int foreign = n > 0 && queued_foreign[n - 1];
        if (n > 0)
            __atomic_store_n(&ov_deferred_n, n - 1, __ATOMIC_SEQ_CST);
        q_unlock();
        if (n <= 0)
            return;
        if (foreign)
            ov_complete_page(pg);
        else
            ov_page_reprotect(pg);
    }
}

void ov_signal_init(void)
{
    resolve();
    /* a stack of our own for the handler, unless the application set one */
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_DISABLE)) {
        size_t sz = 64 * 1024;
        void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            stack_t ss = { .ss_sp = p, .ss_size = sz, .ss_flags = 0 };
            sigaltstack(&ss, NULL);
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    /* SA_NODEFER: MPI may fault on one of our pages while the handler waits in it (a
     * receive's landing buffer on a heap page shared with an inaccessible user buffer); with
     * SIGSEGV blocked, the kernel would kill the process instead of delivering that fault */
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    real_sigaction(SIGSEGV, &sa, &app_segv);
    installed = 1;
    /* the park signal: MPIOVERLAP_PARK_SIGNAL, default SIGRTMAX - 3 (glibc keeps the first
     * real-time signals; MPI libraries here use none of the last ones) */
    park_sig = SIGRTMAX - 3;
    const char *v = getenv("MPIOVERLAP_PARK_SIGNAL");
    if (v && *v) {
        long x;
        if (ov_parse_long(v, SIGRTMIN, SIGRTMAX, &x) != 0) {
            fprintf(stderr, "mpioverlap: MPIOVERLAP_PARK_SIGNAL=%s is not a real-time signal (%d..%d)\n",
                    v, SIGRTMIN, SIGRTMAX);
            exit(1);
        }
        park_sig = (int)x;
    }
    struct sigaction pa;
    memset(&pa, 0, sizeof pa);
    pa.sa_sigaction = on_park;
    pa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&pa.sa_mask);
    real_sigaction(park_sig, &pa, NULL);
}

/* interposed: the application sees and sets its own handler; ours stays underneath */
int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    resolve();
    if (sig != SIGSEGV || !installed)
        return real_sigaction(sig, act, old);
    struct sigaction prev = app_segv;
    if (act)
        app_segv = *act;
    if (old)
        *old = prev;
    return 0;
}

sighandler_t signal(int sig, sighandler_t h)
{
    resolve();
    if (sig != SIGSEGV || !installed)
        return real_signal(sig, h);
    if (h == SIG_ERR) {
        errno = EINVAL;
        return SIG_ERR;
    }
    sighandler_t prev = (app_segv.sa_flags & SA_SIGINFO) ? (sighandler_t)(void (*)(void))app_segv.sa_sigaction
                                                        : app_segv.sa_handler;
    memset(&app_segv, 0, sizeof app_segv);
    app_segv.sa_handler = h;
    app_segv.sa_flags = SA_RESTART;     /* glibc's signal() is BSD semantics */
    return prev;
}
