/*
 * A rank blocked in MPI_Recv while its peer computes for 2 s: in interrupt progress mode
 * (MPIR_CVAR_AMLAPI_PROGRESS_MODE=interrupt) it must sleep, using < 5 % of a CPU (getrusage);
 * in polling mode it spins, which is reported, not judged. Then a ping-pong checks that the
 * mode still moves data of every protocol. MPICH's MTest convention: rank 0 prints
 * " No Errors" (" Found N errors" on any error); the measurement and "idle: N errors" only with
 * MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "mtest.h"

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int verbose;             /* mtest_verbose() */

int main(int argc, char **argv)
{
    int rank, errs = 0, total;
    const char *mode = getenv("MPIR_CVAR_AMLAPI_PROGRESS_MODE");
    int interrupt = mode && !strcmp(mode, "interrupt");
    static char buf[1 << 20];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    verbose = mtest_verbose();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        /* "compute" without using a CPU: the receiver is the one measured */
        struct timespec ts = { 2, 0 };
        nanosleep(&ts, NULL);
        MPI_Send(buf, 1, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        double w0 = MPI_Wtime(), c0 = cpu_seconds(), wall, cpu;
        MPI_Recv(buf, 1, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        wall = MPI_Wtime() - w0;
        cpu = cpu_seconds() - c0;
        if (verbose)
            printf("idle: %s mode, blocked %.2f s in MPI_Recv using %.1f %% CPU\n",
                   interrupt ? "interrupt" : "polling", wall, 100 * cpu / wall);
        if (interrupt && cpu / wall >= 0.05) {
            fprintf(stderr, "idle: interrupt mode used %.1f %% CPU while blocked\n",
                    100 * cpu / wall);
            errs++;
        }
    }
    /* data still moves in this mode: sizes of every protocol, both directions */
    for (int n = 1; n <= (1 << 20); n *= 16) {
        for (int i = 0; i < 20; i++) {
            if (rank == 0) {
                memset(buf, i, n);
                MPI_Send(buf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (buf[n - 1] != (char) (i + 1))
                    errs++;
            } else if (rank == 1) {
                MPI_Recv(buf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                buf[n - 1]++;
                MPI_Send(buf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
    }
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("idle: %d errors\n", total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
