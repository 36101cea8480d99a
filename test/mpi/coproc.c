/*
 * Progress while the application computes (MPIR_CVAR_AMLAPI_PROGRESS_MODE=coprocessor).
 * Rank 1 posts a receive for a rendezvous-sized message, tells rank 0 it is ready (a 0-byte
 * message: rank 0 sends only after that, so nothing of the message can reach rank 1 before
 * its computation starts) and computes without calling MPI; the computation watches the
 * buffer (reading only) and ends when the data is there, or after COPROC_MAX_MS. Checked
 * before any further MPI call:
 *   - coprocessor mode, helper sleeping when idle (MPI_THREAD_SINGLE): the data arrived, and
 *     the helper's event counter amlapi_coproc_events (read without progressing) grew during
 *     the computation: the helper, not the application, handled the arrival;
 *   - COPROC_MULTIPLE=1 (MPI_THREAD_MULTIPLE: the helper polls instead of sleeping, and its
 *     work cannot be told from application threads'): the data arrived, and the helper
 *     neither slept nor counted events (amlapi_coproc_sleeps/events unchanged);
 *   - any other mode: nothing progresses during the computation (the data did not arrive)
 *     and there is no helper (both counters unchanged).
 * MPICH's MTest convention: rank 0 prints " No Errors" (" Found N errors" on any error); the
 * arrival time, the helper's counts and "coproc: N errors" only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, errs;

#define ERR(...) do { errs++; fprintf(stderr, "rank %d: ", rank); \
                      fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } while (0)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int verbose;             /* mtest_verbose() */

#include "mpit.h"
#include "mtest.h"

int main(int argc, char **argv)
{
    const size_t n = 4 << 20;
    const char *mode = getenv("MPIR_CVAR_AMLAPI_PROGRESS_MODE");
    int coproc = mode && !strcmp(mode, "coprocessor");
    int multiple = getenv("COPROC_MULTIPLE") != NULL, provided, total;
    double max_ms = coproc ? atof(getenv("COPROC_MAX_MS") ? getenv("COPROC_MAX_MS") : "20000")
        : 500;
    volatile char *buf = calloc(1, n);

    if (multiple)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    MPI_Query_thread(&provided);
    mpit_init();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    verbose = mtest_verbose();
    if (coproc && provided != MPI_THREAD_MULTIPLE)
        ERR("coprocessor mode provides thread level %d, want MPI_THREAD_MULTIPLE", provided);

    if (rank == 0) {
        char *s = malloc(n);
        memset(s, 0x5a, n);
        /* rank 1 is in its computation (or about to enter it, with nothing left to progress) */
        MPI_Recv(NULL, 0, MPI_CHAR, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(s, (int) n, MPI_CHAR, 1, 3, MPI_COMM_WORLD);
        free(s);
    } else if (rank == 1) {
        MPI_Request req, ready;
        unsigned long long ev0, ev1, sl0, sl1;
        double t0, t;
        int arrived = 0;
        MPI_Irecv((void *) buf, (int) n, MPI_CHAR, 0, 3, MPI_COMM_WORLD, &req);
        ev0 = pvar_read("amlapi_coproc_events");
        sl0 = pvar_read("amlapi_coproc_sleeps");
        MPI_Isend(NULL, 0, MPI_CHAR, 0, 4, MPI_COMM_WORLD, &ready);
        /* the computation: no MPI call until the data is there or time is up */
        t0 = now_ms();
        do {
            arrived = buf[0] == 0x5a && buf[n / 2] == 0x5a && buf[n - 1] == 0x5a;
            t = now_ms();
        } while (!arrived && t - t0 < max_ms);
        ev1 = pvar_read("amlapi_coproc_events");
        /* the helper counts the events of a progress call when the call returns, which may
         * be just after the last byte landed (a single copy fills the buffer from inside the
         * call): give it until that call ends */
        for (double w0 = now_ms(); coproc && !multiple && arrived && ev1 == ev0 &&
             now_ms() - w0 < 2000;)
            ev1 = pvar_read("amlapi_coproc_events");
        sl1 = pvar_read("amlapi_coproc_sleeps");
        if (coproc) {
            if (!arrived)
                ERR("the data did not arrive during %.0f ms of computation", max_ms);
            if (!multiple && ev1 == ev0)
                ERR("the data arrived but the helper handled no events (amlapi_coproc_events "
                    "%llu before and after)", ev0);
            if (multiple && (ev1 != ev0 || sl1 != sl0))
                ERR("with MPI_THREAD_MULTIPLE the helper polls: amlapi_coproc_events %llu -> "
                    "%llu, amlapi_coproc_sleeps %llu -> %llu, want unchanged", ev0, ev1, sl0,
                    sl1);
            if (verbose)
                printf("coproc: data arrived %.1f ms into the computation; the helper handled "
                       "%llu events and slept %llu times meanwhile\n", t - t0, ev1 - ev0,
                       sl1 - sl0);
        } else {
            if (arrived)
                ERR("data arrived without progress in mode %s", mode ? mode : "polling");
            if (ev1 != ev0 || sl1 != sl0)
                ERR("no helper in mode %s, yet amlapi_coproc_events %llu -> %llu, "
                    "amlapi_coproc_sleeps %llu -> %llu", mode ? mode : "polling", ev0, ev1, sl0,
                    sl1);
        }
        MPI_Wait(&ready, MPI_STATUS_IGNORE);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++)
            if (buf[i] != 0x5a) {
                ERR("byte %zu wrong", i);
                break;
            }
    }
    mpit_finalize();
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("coproc: %d errors\n", total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    free((void *) buf);
    return total ? 1 : 0;
}
