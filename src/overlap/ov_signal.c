/* The page-fault handler (seed 004 §2.3) and the application's own SIGSEGV handler.
 *
 * Our handler stays installed once MPI_Init has run; whatever handler was there before (the
 * application's, or one MPI installed during init, e.g. Open MPI's backtrace printer) and
 * whatever the application installs later through sigaction()/signal() is kept as "the
 * application's handler" (both calls are interposed and answer with it): a fault that is not
 * on one of our pages goes there, or to the default action (the fault repeats with SIG_DFL
 * restored, so the process dies of SIGSEGV as it would have).
 *
 * It runs on an alternate signal stack (a fault on a stack page must still find a stack) and
 * only uses async-signal-safe calls, with one deliberate exception the seed also makes: on
 * the thread that owns the requests, outside the library, it calls PMPI_Waitall. That is safe
 * because the interrupted code is the application's, never MPI's (ov_in_lib says so), and
 * MPI_THREAD_FUNNELED-style use is the only one we accept (ov_mpi.c). A fault inside MPI, or
 * on another thread (MPI's progress threads), cannot wait there: the page is opened and the
 * owner completes its requests before it returns to the application (ov_page_release). */
#define _GNU_SOURCE
#include "ov.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static sighandler_t (*real_signal)(int, sighandler_t);
static struct sigaction app_segv;      /* the application's view of SIGSEGV */
static volatile int installed;

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
        if (ov_in_lib || syscall(SYS_gettid) != ov.owner_tid) {
            ov.st.faults_in_mpi++;
            ov_page_release(pg);
        } else {
            ov.st.faults++;
            ov_chain_note_fault();

            ov_in_lib = 1;
            ov_complete_page(pg);
            /* MPI may have faulted on (and opened) another page while we waited */
            ov_deferred_run();
            ov_in_lib = 0;
        }
        errno = saved;
        return;
    }
    errno = saved;
    to_application(sig, si, uc);
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
