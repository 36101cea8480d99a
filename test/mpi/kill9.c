/*
 * For maint/test's SIGKILL check: each rank prints its pid, then both stream messages of
 * every protocol to each other until one is killed; the job must then end with an error,
 * leaving nothing in /dev/shm.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, peer;
    static char sbuf[1 << 20], rbuf[1 << 20];
    const int sizes[] = { 8, 4096, 65536, 1 << 20 };

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        fprintf(stderr, "kill9 needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    peer = 1 - rank;
    printf("rank %d pid %d\n", rank, (int) getpid());
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("streaming\n");
        fflush(stdout);
    }
    /* bounded: if nobody kills us, the test's timeout does */
    for (long i = 0; i < 100000000; i++) {
        int n = sizes[i % 4];
        MPI_Sendrecv(sbuf, n, MPI_CHAR, peer, 0, rbuf, n, MPI_CHAR, peer, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
