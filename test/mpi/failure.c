/*
 * For maint/test's failure checks: one rank (the victim, rank 1) fails while every other rank
 * is blocked in a call that needs it, each in a different kind of call: rank 0 in MPI_Recv
 * from it, rank 2 in MPI_Allreduce, rank 3 in MPI_Win_fence, the others in MPI_Wait on a
 * receive from it. The job must then end, promptly, with an error naming the victim.
 *
 *   failure MODE      MODE: wait   the victim waits to be killed or cut off by the test
 *                           segv   the victim dies of SIGSEGV
 *                           exit   the victim exits with status 0 without MPI_Finalize
 *
 * Each rank prints "rank R pid P host H" first; once every peer is about to block, rank 0
 * prints "blocked". Needs >= 4 ranks.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, len, x = 1, y = 0, winbuf = 0;
    char host[MPI_MAX_PROCESSOR_NAME];
    static char buf[1 << 20];
    const char *mode = argc > 1 ? argv[1] : "wait";
    MPI_Win win;
    MPI_Request req;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    if (size < 4) {
        fprintf(stderr, "failure needs >= 4 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("rank %d pid %d host %s\n", rank, (int) getpid(), host);
    fflush(stdout);
    MPI_Win_create(&winbuf, sizeof(winbuf), sizeof(winbuf), MPI_INFO_NULL, MPI_COMM_WORLD,
                   &win);
    MPI_Win_fence(0, win);
    /* some traffic first, so every transport's connections are up */
    for (int i = 0; i < 20; i++) {
        int peer = rank ^ 1;
        if (peer < size)
            MPI_Sendrecv(buf, sizeof(buf) / 2, MPI_CHAR, peer, 0, buf + sizeof(buf) / 2,
                         sizeof(buf) / 2, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("blocked\n");
        fflush(stdout);
    }
    if (rank == 1) {
        /* let the others block first */
        sleep(1);
        if (!strcmp(mode, "segv"))
            raise(SIGSEGV);
        if (!strcmp(mode, "exit"))
            exit(0);
        for (;;)
            pause();
    }
    switch (rank) {
        case 0:
            MPI_Recv(buf, sizeof(buf), MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            break;
        case 2:
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            break;
        case 3:
            MPI_Win_fence(0, win);
            break;
        default:
            MPI_Irecv(buf, sizeof(buf), MPI_CHAR, 1, 1, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            break;
    }
    /* nothing can complete without rank 1 */
    fprintf(stderr, "rank %d: a call completed without rank 1\n", rank);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 1;
}
