/*
 * Memory under a flood of small messages: every other rank sends rank 0
 * FLOOD_PER (100,000) 8-byte messages while rank 0 receives nothing until all have sent (it
 * waits in a barrier the senders enter when done), then receives them all with
 * MPI_ANY_SOURCE and checks per-sender order. Each rank's peak resident memory may grow by
 * at most FLOOD_MAX_MIB (64) during it: a sender whose FIFO is full keeps about 100 bytes per
 * waiting message (vnode copies small packets into its queue), rank 0 its unexpected queue.
 * MPICH's MTest convention: rank 0 prints " No Errors" (" Found N errors" on any error); the
 * largest growth and "floodmem: ... N errors" only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "mtest.h"

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v ? atol(v) : dflt;
}

static int verbose;             /* mtest_verbose() */

static long maxrss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
    int rank, size, errs = 0, total;
    const int per = (int) env_long("FLOOD_PER", 100000);
    const long max_mib = env_long("FLOOD_MAX_MIB", 64);
    long rss0;
    int *next;
    double grown, worst;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    verbose = mtest_verbose();
    next = calloc((size_t) size, sizeof(int));
    rss0 = maxrss_kib();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) {
        for (int i = 0; i < per; i++) {
            long v[1] = { (long) rank << 32 | i };
            MPI_Send(v, 8, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < (long) per * (size - 1); i++) {
            long v[1];
            MPI_Status st;
            MPI_Recv(v, 8, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
            int s = st.MPI_SOURCE;
            if (s <= 0 || s >= size || v[0] != ((long) s << 32 | next[s])) {
                if (errs++ < 5)
                    fprintf(stderr, "rank 0: message %ld from %d is %#lx, expected %d\n", i, s,
                            v[0], s > 0 && s < size ? next[s] : -1);
            } else {
                next[s]++;
            }
        }
    }
    grown = (double) (maxrss_kib() - rss0) / 1024.0;
    MPI_Reduce(&grown, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (grown > (double) max_mib) {
        errs++;
        fprintf(stderr, "rank %d: peak resident memory grew by %.1f MiB (limit %ld)\n", rank,
                grown, max_mib);
    }
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("floodmem: %d ranks, %d x 8 B from each sender, largest growth %.1f MiB, "
               "%d errors\n", size, per, worst, total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    free(next);
    MPI_Finalize();
    return total ? 1 : 0;
}
