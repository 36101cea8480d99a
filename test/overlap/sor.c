/* Red-Black 2D SOR solver, Natvig and Elster 2006, §1.2: the same solver with three ways of
 * exchanging borders, for maint/bench-overlap and the overlap tests.
 *
 *   sor VARIANT N ITERS     VARIANT: sendrecv | isend | manual; N: global grid N x N
 *
 *   sendrecv  4 x MPI_Sendrecv (top, bottom, left, right), the easy way
 *   isend     4 x MPI_Irecv + 4 x MPI_Isend, one MPI_Waitall
 *   manual    border cells of a colour first, their exchange in the background while the
 *             interior cells of that colour are updated
 * Ranks form a 2D grid (MPI_Dims_create); left/right borders go through contiguous column
 * buffers the solver packs and unpacks itself. Each half-sweep updates one colour from the
 * other colour's values, whose borders came in the exchange before it, so the three variants
 * compute exactly the same numbers: rank 0 prints the checksum's bits, which
 * test/check/overlap.test compares between variants and with/without libmpioverlap, and the
 * time per iteration. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nx, ny;                  /* interior cells of this rank: ny rows of nx */
static double *g;                   /* (ny + 2) x (nx + 2) with ghost cells */
static double *sw, *se, *rw, *re;   /* column buffers: send west/east, receive west/east */
static int up, down, left, right;
static MPI_Comm comm;
static const double omega = 1.5;

#define G(i, j) g[(size_t)(i) * (size_t)(nx + 2) + (size_t)(j)]

static void pack(void)
{
    for (int i = 1; i <= ny; i++) {
        sw[i - 1] = G(i, 1);
        se[i - 1] = G(i, nx);
    }
}

static void unpack(void)
{
    if (left != MPI_PROC_NULL)
        for (int i = 1; i <= ny; i++)
            G(i, 0) = rw[i - 1];
    if (right != MPI_PROC_NULL)
        for (int i = 1; i <= ny; i++)
            G(i, nx + 1) = re[i - 1];
}

/* rows [i0, i1] and columns [j0, j1] of colour c (global parity of i + j) */
static int gi0, gj0;    /* global index of this rank's first interior cell */
static void update(int c, int i0, int i1, int j0, int j1)
{
    for (int i = i0; i <= i1; i++) {
        int j = j0 + ((gi0 + i + gj0 + j0 + c) & 1);
        for (; j <= j1; j += 2) {
            double v = 0.25 * (G(i - 1, j) + G(i + 1, j) + G(i, j - 1) + G(i, j + 1));
            G(i, j) += omega * (v - G(i, j));
        }
    }
}

static void exchange_sendrecv(void)
{
    pack();
    MPI_Sendrecv(&G(1, 1), nx, MPI_DOUBLE, up, 0, &G(ny + 1, 1), nx, MPI_DOUBLE, down, 0, comm, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&G(ny, 1), nx, MPI_DOUBLE, down, 1, &G(0, 1), nx, MPI_DOUBLE, up, 1, comm, MPI_STATUS_IGNORE);
    MPI_Sendrecv(sw, ny, MPI_DOUBLE, left, 2, re, ny, MPI_DOUBLE, right, 2, comm, MPI_STATUS_IGNORE);
    MPI_Sendrecv(se, ny, MPI_DOUBLE, right, 3, rw, ny, MPI_DOUBLE, left, 3, comm, MPI_STATUS_IGNORE);
    unpack();
}

static MPI_Request rq[8];
static void exchange_start(void)
{
    pack();
    MPI_Irecv(&G(ny + 1, 1), nx, MPI_DOUBLE, down, 0, comm, &rq[0]);
    MPI_Irecv(&G(0, 1), nx, MPI_DOUBLE, up, 1, comm, &rq[1]);
    MPI_Irecv(re, ny, MPI_DOUBLE, right, 2, comm, &rq[2]);
    MPI_Irecv(rw, ny, MPI_DOUBLE, left, 3, comm, &rq[3]);
    MPI_Isend(&G(1, 1), nx, MPI_DOUBLE, up, 0, comm, &rq[4]);
    MPI_Isend(&G(ny, 1), nx, MPI_DOUBLE, down, 1, comm, &rq[5]);
    MPI_Isend(sw, ny, MPI_DOUBLE, left, 2, comm, &rq[6]);
    MPI_Isend(se, ny, MPI_DOUBLE, right, 3, comm, &rq[7]);
}

static void exchange_end(void)
{
    MPI_Waitall(8, rq, MPI_STATUSES_IGNORE);
    unpack();
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 4) {
        fprintf(stderr, "usage: sor sendrecv|isend|manual N ITERS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *var = argv[1];
    int N = atoi(argv[2]), iters = atoi(argv[3]);
    int v = !strcmp(var, "sendrecv") ? 0 : !strcmp(var, "isend") ? 1 : !strcmp(var, "manual") ? 2 : -1;
    if (v < 0 || N < 4 || iters < 1) {
        fprintf(stderr, "sor: bad arguments (variant sendrecv|isend|manual, N >= 4, ITERS >= 1)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int size, rank, dims[2] = { 0, 0 }, periods[2] = { 0, 0 }, coords[2];
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, 2, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &comm);
    MPI_Comm_rank(comm, &rank);
    MPI_Cart_coords(comm, rank, 2, coords);
    MPI_Cart_shift(comm, 0, 1, &up, &down);
    MPI_Cart_shift(comm, 1, 1, &left, &right);
    ny = N / dims[0] + (coords[0] < N % dims[0]);
    nx = N / dims[1] + (coords[1] < N % dims[1]);
    gi0 = coords[0] * (N / dims[0]) + (coords[0] < N % dims[0] ? coords[0] : N % dims[0]);
    gj0 = coords[1] * (N / dims[1]) + (coords[1] < N % dims[1] ? coords[1] : N % dims[1]);
    g = calloc((size_t)(ny + 2) * (size_t)(nx + 2), sizeof *g);
    sw = calloc((size_t)ny, sizeof *sw); se = calloc((size_t)ny, sizeof *se);
    rw = calloc((size_t)ny, sizeof *rw); re = calloc((size_t)ny, sizeof *re);
    if (!g || !sw || !se || !rw || !re) {
        fprintf(stderr, "sor: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* fixed boundary: the global top edge at 1, the others at 0 */
    if (up == MPI_PROC_NULL)
        for (int j = 0; j <= nx + 1; j++)
            G(0, j) = 1.0;

    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    if (v == 2) {
        exchange_start();
        exchange_end();
    }
    for (int it = 0; it < iters; it++)
        for (int c = 0; c < 2; c++) {
            if (v == 0) {
                exchange_sendrecv();
                update(c, 1, ny, 1, nx);
            } else if (v == 1) {
                exchange_start();
                exchange_end();
                update(c, 1, ny, 1, nx);
            } else {
                /* borders of colour c, then their exchange under the interior's update */
                update(c, 1, 1, 1, nx);
                if (ny > 1) update(c, ny, ny, 1, nx);
                if (ny > 2) {
                    update(c, 2, ny - 1, 1, 1);
                    if (nx > 1) update(c, 2, ny - 1, nx, nx);
                }
                exchange_start();
                if (ny > 2 && nx > 2) update(c, 2, ny - 1, 2, nx - 1);
                exchange_end();
            }
        }
    double t = MPI_Wtime() - t0;
    double s = 0;
    for (int i = 1; i <= ny; i++)
        for (int j = 1; j <= nx; j++)
            s += G(i, j) * (double)((gi0 + i) * 7 + (gj0 + j));
    double tot = 0, tmax = 0;
    MPI_Reduce(&s, &tot, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
    if (rank == 0) {
        uint64_t bits;
        memcpy(&bits, &tot, sizeof bits);
        printf("sor %s N=%d iters=%d ranks=%d: checksum %.17g bits %016llx time %.6f s per-iter %.3f us\n",
               var, N, iters, size, tot, (unsigned long long)bits, tmax, tmax / iters * 1e6);
    }
    free(g); free(sw); free(se); free(rw); free(re);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
