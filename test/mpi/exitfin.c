/*
 * MPI_Finalize inside exit(): a common C pattern registers its cleanup with atexit() before
 * MPI_Init, and the cleanup finalizes. main here calls exit(0) with MPI still initialized;
 * the handler completes a last exchange, finalizes and checks that MPI says so. The job must
 * end with status 0 and no rank reported as exiting before MPI_Finalize (amlapi_fault.c
 * decides that only after every exit handler has run). Prints " No Errors" from rank 0's
 * handler (MPICH's MTest convention) and nothing else on success; a failure is a message and
 * a non-zero exit (after MPI_Finalize no count of errors can be gathered).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int rank = -1, nranks;

static void cleanup(void)
{
    int flag = 0, sum = 0, one = 1;

    /* MPI still works inside the handler */
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    MPI_Finalized(&flag);
    if (sum != nranks || !flag) {
        fprintf(stderr, "rank %d: allreduce %d (want %d), finalized %d\n", rank, sum, nranks,
                flag);
        _exit(2);
    }
    if (rank == 0)
        printf(" No Errors\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int token = 0;

    if (atexit(cleanup))
        return 3;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    /* a ring, so every pair of neighbours has talked before exit */
    if (nranks > 1) {
        if (rank == 0) {
            MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, nranks - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += rank;
            MPI_Send(&token, 1, MPI_INT, (rank + 1) % nranks, 0, MPI_COMM_WORLD);
        }
    }
    if (rank == 0 && token != nranks * (nranks - 1) / 2) {
        fprintf(stderr, "ring: token %d\n", token);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    exit(0);
}
