/*
 * quickstart's demo: a plain MPI program (nothing amlapi-specific). Prints the library
 * version, passes a token around a ring, ping-pongs between ranks 0 and 1 at several sizes,
 * and checks an allreduce. Exits non-zero on any wrong result.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, len, errs = 0;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        MPI_Get_library_version(version, &len);
        char *dev = strstr(version, "--with-device=");
        printf("demo: %d ranks; %.*s", size, (int) strcspn(version, "\n") + 1, version);
        if (dev)
            printf("demo: device %.*s\n", (int) strcspn(dev + 14, " '\n"), dev + 14);
    }

    /* ring: rank 0 starts a token, every rank adds its rank */
    int token = 0;
    if (size > 1) {
        if (rank == 0) {
            MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (token != size * (size - 1) / 2)
                errs++;
            printf("demo: ring token came back as %d (expected %d)\n", token,
                   size * (size - 1) / 2);
        } else {
            MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += rank;
            MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
        }
    }

    /* ping-pong between 0 and 1 */
    static const int sizes[] = { 0, 8, 1024, 16384, 65536, 1 << 20, 4 << 20 };
    char *buf = malloc(4 << 20);
    for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && size > 1; s++) {
        int n = sizes[s], iters = n >= (1 << 20) ? 20 : 200;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            if (rank == 0) {
                memset(buf, i & 0xff, n);
                MPI_Send(buf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int k = 0; k < n; k += 4099)
                    if (buf[k] != (char) ((i + 1) & 0xff))
                        errs++;
            } else if (rank == 1) {
                MPI_Recv(buf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                memset(buf, (i + 1) & 0xff, n);
                MPI_Send(buf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
        double t = (MPI_Wtime() - t0) / iters / 2;
        if (rank == 0)
            printf("demo: ping-pong %8d bytes: %9.2f us one way, %8.1f MB/s\n", n, t * 1e6,
                   n / t / 1e6);
    }
    free(buf);

    /* a collective */
    long sum = 0, mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (sum != (long) size * (size + 1) / 2)
        errs++;
    if (rank == 0)
        printf("demo: allreduce of 1..%d = %ld\n", size, sum);

    MPI_Allreduce(MPI_IN_PLACE, &errs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("demo: %s\n", errs ? "FAILED" : "all results correct");
    MPI_Finalize();
    return errs ? 1 : 0;
}
