/*
 * amlapi netmod: what a rank says when it ends abnormally. The launcher ends the job when a
 * rank dies, but hydra names only the process id and host of a rank killed by a signal, and
 * nothing at all for one that exits without MPI_Finalize. So each rank names itself -- rank,
 * process id, host -- in one line on stderr:
 *   - when it exits (exit(), or returning from main) after MPI_Init and before MPI_Finalize,
 *     and then with a non-zero status, so that the launcher reports the job failed;
 *   - when a fatal signal reaches it (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT); the handler
 *     that was there before (UCX's backtrace, the user's) runs afterwards, else the default.
 * A rank killed by SIGKILL cannot speak: a rank of its node names it (vnode_watch: the kernel
 * releases its robust mutex in the node's segment), ranks on other hosts through the
 * transport (aml's fatal error for a failed endpoint); hydra prints a process id and host.
 *
 * When is an exit "before MPI_Finalize"? Only once the program's own exit work is done: C++
 * programs finalize from the destructor of a global "MPI environment" object, C programs from
 * an atexit() handler registered before MPI_Init, and both run inside exit() after any handler
 * registered at MPI_Init. So the handler registered here only records the status; the verdict
 * is taken in libmpi's destructor, which the dynamic linker runs from exit() after every exit
 * handler and static destructor, and after the destructors of the libraries that depend on
 * libmpi (the program's, the application's own libraries).
 */

#include "mpidimpl.h"
#include "amlapi_impl.h"
#include <signal.h>
#include <unistd.h>

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

cvars:
    - name        : MPIR_CVAR_AMLAPI_REPORT_EXIT
      category    : CH4_AMLAPI
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        A rank that exits before MPI_Finalize or dies of a fatal signal is named (rank, pid, host)
        on stderr and the job fails (exit status 0 becomes 1); one killed outright (SIGKILL) is
        named by a rank of its node. Default on; 0: none of this.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

static char who[160];           /* "amlapi: rank R (pid P on HOST)", made at init */
static int who_len;
static int finalized;
static pid_t me;                /* a child the application forks is not the rank */

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

#define NSIG_HANDLED (sizeof(fatal_signals) / sizeof(fatal_signals[0]))
static struct sigaction previous[NSIG_HANDLED];

/* async-signal-safe: write(2) of preformatted text and a small number */
static void say_signal(int sig)
{
    char num[12];
    int n = 0;
    const char *tail = " got a fatal signal: ";
    unsigned v = (unsigned) sig;
    do {
        num[sizeof(num) - 1 - n++] = (char) ('0' + v % 10);
        v /= 10;
    } while (v && n < (int) sizeof(num) - 1);
    if (write(2, who, who_len) < 0 || write(2, tail, strlen(tail)) < 0 ||
        write(2, num + sizeof(num) - n, n) < 0 || write(2, "\n", 1) < 0)
        return;
}

static void on_signal(int sig, siginfo_t * info, void *ctx)
{
    size_t i;
    if (getpid() == me)
        say_signal(sig);
    for (i = 0; i < NSIG_HANDLED && fatal_signals[i] != sig; i++);
    if (i < NSIG_HANDLED) {
        struct sigaction *old = &previous[i];
        if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
            old->sa_sigaction(sig, info, ctx);
            return;
        }
        if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
            old->sa_handler(sig);
            return;
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static int exiting;
static int exit_status;

static void on_exit_cb(int status, void *arg)
{
    exiting = 1;
    exit_status = status;
}

/* From exit(), after the program's exit handlers and static destructors (see the top). A
 * library unloaded without exit() (dlclose) says nothing. */
static void __attribute__ ((destructor)) at_unload(void)
{
    if (!exiting || finalized || !who_len || getpid() != me)
        return;
    fprintf(stderr, "%s exits with status %d before MPI_Finalize: the job is stopped\n", who,
            exit_status);
    fflush(NULL);
    /* Hydra (4.0.2) kills the other ranks, then reports this rank's own status, and theirs as
     * 0: the job would "succeed". An exit without MPI_Finalize is an error, so it exits 1
     * (so does an MPI_Abort with error code 0, which also ends here). */
    if (exit_status == 0)
        _exit(1);
}

void MPIDI_AMLAPI_fault_init(void)
{
    char host[64] = "?";
    struct sigaction sa;

    if (!MPIR_CVAR_AMLAPI_REPORT_EXIT)
        return;
    gethostname(host, sizeof(host) - 1);
    me = getpid();
    who_len = snprintf(who, sizeof(who), "amlapi: rank %d (pid %d on %s)", MPIR_Process.rank,
                       (int) getpid(), host);
    if (who_len >= (int) sizeof(who))
        who_len = sizeof(who) - 1;
    on_exit(on_exit_cb, NULL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NSIG_HANDLED; i++) {
        /* a signal the application ignores stays ignored */
        if (sigaction(fatal_signals[i], NULL, &previous[i]) == 0 &&
            previous[i].sa_handler != SIG_IGN)
            sigaction(fatal_signals[i], &sa, NULL);
    }
}

/* From MPI_Finalize, and before an abort whose own message names this rank. */
void MPIDI_AMLAPI_fault_finalize(void)
{
    finalized = 1;
}
