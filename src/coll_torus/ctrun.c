/* ctrun: runs coll_torus's schedules (ct_mpi.c) and MPI's own collectives side by side, checks
 * every rank's data, and prints one line per (collective, size, implementation):
 *   coll bytes impl time_us check
 * time_us is the median over --reps of the slowest rank's time; check is ok, WRONG or
 * unchecked. Where ct_select declines (CT_ERR_NOT_APPLICABLE), ct runs the MPI library's own
 * collective, as amlapi's netmod does, and its check carries "(fallback)". Built with mpicc or
 * smpicc.
 *
 *   ctrun [--shape=8x8x8] [--coll=bcast,allreduce,...] [--sizes=8,1024,...] [--impl=ct,mpi]
 *         [--reps=N] [--root=R] [--check-mpi] [--window=N] [--chunk=BYTES] [--no-check]
 *         [--shared] [--mpich-scattered=N]
 * --window and --chunk override the generators' choices (alltoall rounds in flight, bcast
 * chunk size), for tuning. --mpich-scattered=N: MPI's alltoall (the mpi side, and ct's
 * fallback) is MPICH's windowed exchange (alltoall_windowed) with N peers a window, where the
 * MPI library (SMPI) has no algorithm like it.
 * Every run's result is checked against the values it must have, ours and MPI's alike,
 * unless --no-check. --shared (SimGrid's SMPI only; implies --no-check): the user buffers of
 * every rank are one SMPI_SHARED_MALLOC block, so 4096 simulated ranks fit in memory and SMPI
 * copies no data (it skips copies from or to shared blocks); the data is then meaningless,
 * and correctness rests on the symbolic tests and the checked runs at smaller shapes.
 * --check-mpi: every collective (reduce too) at a few sizes, root the last rank; exit 1 on
 * any wrong result. Elements are 8-byte integers (sums are exact); a size is in bytes per
 * rank (bcast, allreduce, allgather's block) or per pair (alltoall). */
#include "ct_mpi.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *colls[] = { "bcast", "allreduce", "reduce", "allgather", "alltoall", "barrier" };
static const int collid[] = { CT_COLL_BCAST, CT_COLL_ALLREDUCE, CT_COLL_REDUCE, CT_COLL_ALLGATHER,
                              CT_COLL_ALLTOALL, CT_COLL_BARRIER };
#define NCOLL 6

static int rank, nranks;
static int check = 1, shared = 0;
static int scattered = -1;      /* --mpich-scattered=N: MPI's alltoall is alltoall_windowed */

/* the user buffers: private, or (--shared, SMPI) one block every rank shares */
static void *buf_alloc(size_t n)
{
#ifdef SMPI_SHARED_MALLOC
    if (shared)
        return SMPI_SHARED_MALLOC(n);
#endif
    return malloc(n);
}

static void buf_free(void *p)
{
#ifdef SMPI_SHARED_MALLOC
    if (shared) {
        SMPI_SHARED_FREE(p);
        return;
    }
#endif
    free(p);
}

/* The exchange MPICH 4.0.2 chooses for 257 B to 32 KiB per pair from 9 ranks
 * (MPIR_Alltoall_intra_scattered), written for the simulation: peers are taken in windows of
 * `window` (MPIR_CVAR_ALLTOALL_THROTTLE, 32; 0 = all at once); in each, this rank posts the
 * receives from the next peers up and the sends to the next peers down, and waits for all of
 * them before the next window. SMPI has nothing like it beyond 32 ranks: basic_linear posts
 * every peer at once, mvapich2_scatter_dest 4 at a time. */
static int alltoall_windowed(const void *sb, void *rb, int count, MPI_Datatype dt,
                             MPI_Comm comm, int window)
{
    int nprocs, me, esize, rc = MPI_SUCCESS;
    MPI_Comm_size(comm, &nprocs);
    MPI_Comm_rank(comm, &me);
    MPI_Type_size(dt, &esize);
    int w = window > 0 && window < nprocs ? window : nprocs;
    MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * (size_t) w);
    if (!rq)
        return MPI_ERR_NO_MEM;
    size_t block = (size_t) count * (size_t) esize;
    for (int first = 0; first < nprocs && rc == MPI_SUCCESS; first += w) {
        int n = nprocs - first < w ? nprocs - first : w, nrq = 0;
        for (int k = first; k < first + n && rc == MPI_SUCCESS; k++) {
            int from = (me + k) % nprocs;
            rc = MPI_Irecv((char *) rb + (size_t) from * block, count, dt, from, 99, comm,
                           &rq[nrq++]);
        }
        for (int k = first; k < first + n && rc == MPI_SUCCESS; k++) {
            int to = (me - k % nprocs + nprocs) % nprocs;
            rc = MPI_Isend((const char *) sb + (size_t) to * block, count, dt, to, 99, comm,
                           &rq[nrq++]);
        }
        if (rc == MPI_SUCCESS)
            rc = MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE);
    }
    free(rq);
    return rc;
}

static int64_t val(int r, int64_t i)
{
    return (int64_t) r * 1000003 + i;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* one run (buffers filled first); 0 or -1 on an MPI error */
static long run(int c, int impl, const ct_topo *t, const ct_sched *s, int64_t count, int root,
                int64_t *sb, int64_t *rb)
{
    int64_t P = nranks, rlen = count;
    if (c == CT_COLL_ALLGATHER || c == CT_COLL_ALLTOALL)
        rlen = count * P;
    int64_t slen = c == CT_COLL_ALLTOALL ? count * P : count;
    /* unchecked runs skip the filling: at 4096 simulated ranks it costs host time only */
    for (int64_t i = 0; check && i < slen; i++)
        sb[i] = val(rank, i);
    for (int64_t i = 0; check && i < rlen; i++)
        rb[i] = -1;
    if (check && c == CT_COLL_BCAST && rank == root)
        for (int64_t i = 0; i < count; i++)
            rb[i] = val(root, i);
    int rc;
    if (impl) {
        rc = ct_mpi_run(s, MPI_COMM_WORLD, 100, sb, rb, MPI_INT64_T, MPI_SUM);
    } else {
        switch (c) {
        case CT_COLL_BCAST:
            rc = MPI_Bcast(rb, (int) count, MPI_INT64_T, root, MPI_COMM_WORLD);
            break;
        case CT_COLL_ALLREDUCE:
            rc = MPI_Allreduce(sb, rb, (int) count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
            break;
        case CT_COLL_REDUCE:
            rc = MPI_Reduce(sb, rb, (int) count, MPI_INT64_T, MPI_SUM, root, MPI_COMM_WORLD);
            break;
        case CT_COLL_ALLGATHER:
            rc = MPI_Allgather(sb, (int) count, MPI_INT64_T, rb, (int) count, MPI_INT64_T, MPI_COMM_WORLD);
            break;
        case CT_COLL_ALLTOALL:
            if (scattered >= 0)
                rc = alltoall_windowed(sb, rb, (int) count, MPI_INT64_T, MPI_COMM_WORLD,
                                       scattered);
            else
                rc = MPI_Alltoall(sb, (int) count, MPI_INT64_T, rb, (int) count, MPI_INT64_T,
                                  MPI_COMM_WORLD);
            break;
        default:
            rc = MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    (void) t;
    return rc == MPI_SUCCESS ? 0 : -1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *shape = NULL, *collarg = "bcast,allreduce,allgather,alltoall,barrier";
    char sizes_s[512] = "8,1024,65536,1048576";
    int impls = 3, reps = 1, root = 0, checkmpi = 0;
    ct_params prm = { 0, 1, 0 };
    for (int a = 1; a < argc; a++) {
        if (!strncmp(argv[a], "--shape=", 8))
            shape = argv[a] + 8;
        else if (!strncmp(argv[a], "--coll=", 7))
            collarg = argv[a] + 7;
        else if (!strncmp(argv[a], "--sizes=", 8))
            snprintf(sizes_s, sizeof sizes_s, "%s", argv[a] + 8);
        else if (!strcmp(argv[a], "--impl=ct"))
            impls = 2;
        else if (!strcmp(argv[a], "--impl=mpi"))
            impls = 1;
        else if (!strncmp(argv[a], "--reps=", 7))
            reps = atoi(argv[a] + 7);
        else if (!strncmp(argv[a], "--root=", 7))
            root = atoi(argv[a] + 7);
        else if (!strcmp(argv[a], "--check-mpi"))
            checkmpi = 1;
        else if (!strncmp(argv[a], "--window=", 9))
            prm.window = atoi(argv[a] + 9);
        else if (!strncmp(argv[a], "--chunk=", 8))
            prm.chunk_elems = atoll(argv[a] + 8) / 8;
        else if (!strcmp(argv[a], "--no-check"))
            check = 0;
        else if (!strncmp(argv[a], "--mpich-scattered=", 18))
            scattered = atoi(argv[a] + 18);
        else if (!strcmp(argv[a], "--shared"))
            shared = 1, check = 0;
        else if (!strncmp(argv[a], "--cfg=", 6))
            ;   /* SimGrid's, when smpirun passes them through */
        else {
            if (!rank)
                fprintf(stderr, "ctrun: unknown option %s\n", argv[a]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
#ifndef SMPI_SHARED_MALLOC
    if (shared) {
        if (!rank)
            fprintf(stderr, "ctrun: --shared needs SimGrid's SMPI (build with smpicc)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
#endif
    if (checkmpi && !check) {
        if (!rank)
            fprintf(stderr, "ctrun: --check-mpi checks data: not with --no-check or --shared\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (reps < 1 || root < 0 || root >= nranks) {
        if (!rank)
            fprintf(stderr, "ctrun: bad --reps or --root\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (checkmpi) {
        collarg = "bcast,allreduce,reduce,allgather,alltoall,barrier";
        snprintf(sizes_s, sizeof sizes_s, "8,200,4096,100000");
        root = nranks > 1 ? nranks - 1 : 0;
    }
    ct_topo t;
    if (ct_topo_default(&t, nranks, NULL, shape)) {
        if (!rank)
            fprintf(stderr, "ctrun: %s\n", ct_strerror());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int64_t sizes[32];
    int nsizes = 0;
    for (char *tok = strtok(sizes_s, ","); tok && nsizes < 32; tok = strtok(NULL, ","))
        sizes[nsizes++] = atoll(tok);
    int failed = 0;
    if (!rank) {
        char sh[64];
        ct_shape_format(t.dims, t.wrap, sh, sizeof sh);
        printf("# %d ranks, shape %s, %d rep(s), root %d\n", nranks, sh, reps, root);
        printf("%-10s %9s %-4s %12s %s\n", "coll", "bytes", "impl", "time_us", "check");
        fflush(stdout);
    }
    for (int ci = 0; ci < NCOLL; ci++) {
        char want[128];
        snprintf(want, sizeof want, ",%s,", collarg);
        char key[32];
        snprintf(key, sizeof key, ",%s,", colls[ci]);
        if (!strstr(want, key))
            continue;
        int c = collid[ci];
        for (int si = 0; si < nsizes; si++) {
            if (c == CT_COLL_BARRIER && si > 0)
                break;
            int64_t count = (sizes[si] + 7) / 8;
            if (c == CT_COLL_BARRIER)
                count = 0;
            int64_t big = count * ((c == CT_COLL_ALLGATHER || c == CT_COLL_ALLTOALL) ? nranks : 1);
            int64_t *sb = buf_alloc(sizeof(int64_t) * (size_t) (big ? big : 1));
            int64_t *rb = buf_alloc(sizeof(int64_t) * (size_t) (big ? big : 1));
            if (!sb || !rb) {
                fprintf(stderr, "ctrun: out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            ct_sched s;
            int sel = ct_select(&s, c, &t, rank, root, count, 8, &prm);
            /* the choice is the same at every rank (it depends on the topology and the size
             * only), so all ranks fall back together */
            int fallback = sel == CT_ERR_NOT_APPLICABLE;
            for (int impl = 0; impl < 2; impl++) {
                if (!(impls >> impl & 1))
                    continue;
                if (impl == 1 && sel && !fallback) {
                    if (!rank)
                        printf("%-10s %9lld %-4s %12s FAILED: %s\n", colls[ci],
                               (long long) count * 8, "ct", "-", ct_strerror());
                    failed = 1;
                    continue;
                }
                /* where ct_select declines, ours is what an executor does then (amlapi's
                 * netmod too): the MPI library's own collective, marked as a fallback */
                int how = impl == 1 && !fallback;
                double *times = malloc(sizeof(double) * (size_t) reps);
                long bad = 0;
                for (int rp = 0; rp < reps; rp++) {
                    MPI_Barrier(MPI_COMM_WORLD);
                    /* a barrier is timed over 10 calls in a row, after one untimed call: a
                     * single one mostly measures the skew the harness's own barrier left
                     * between ranks, and each implementation leaves its own skew */
                    int inner = c == CT_COLL_BARRIER ? 10 : 1;
                    if (c == CT_COLL_BARRIER && run(c, how, &t, &s, count, root, sb, rb) < 0)
                        bad = 1;
                    double t0 = MPI_Wtime();
                    long b = 0;
                    for (int in = 0; in < inner; in++)
                        b |= run(c, how, &t, &s, count, root, sb, rb);
                    double dt = (MPI_Wtime() - t0) / inner, mx;
                    if (b < 0)
                        bad = 1;
                    MPI_Reduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                    times[rp] = mx;
                }
                /* the check: the timed runs fill the buffers first, so look at the last */
                if (check) {
                    long b = 0;
                    int64_t rlen = (c == CT_COLL_ALLGATHER || c == CT_COLL_ALLTOALL) ? count * nranks : count;
                    for (int64_t i = 0; i < rlen; i++) {
                        int64_t want = 0;
                        int skip = 0;
                        switch (c) {
                        case CT_COLL_BCAST: want = val(root, i); break;
                        case CT_COLL_REDUCE: if (rank != root) skip = 1; /* fall through */
                        case CT_COLL_ALLREDUCE:
                            for (int r = 0; r < nranks; r++)
                                want += val(r, i);
                            break;
                        case CT_COLL_ALLGATHER: want = val((int) (i / count), i % count); break;
                        case CT_COLL_ALLTOALL: want = val((int) (i / count), rank * count + i % count); break;
                        default: skip = 1;
                        }
                        if (skip)
                            break;
                        b += rb[i] != want;
                    }
                    bad += b;
                }
                long allbad = 0;
                MPI_Allreduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
                if (allbad)
                    failed = 1;
                if (!rank) {
                    qsort(times, (size_t) reps, sizeof(double), cmp_d);
                    printf("%-10s %9lld %-4s %12.2f %s%s\n", colls[ci], (long long) count * 8,
                           impl ? "ct" : "mpi", times[reps / 2] * 1e6,
                           !check ? "unchecked" : allbad ? "WRONG" : "ok",
                           impl && fallback ? "(fallback)" : "");
                    fflush(stdout);
                }
                free(times);
            }
            if (!sel)
                ct_sched_free(&s);
            buf_free(sb);
            buf_free(rb);
        }
    }
    ct_topo_free(&t);
    if (!rank && failed)
        printf("ctrun: some results were wrong\n");
    MPI_Finalize();
    return failed;
}
