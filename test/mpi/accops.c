/*
 * The accumulate family's op applied right for every predefined (type, op) pair MPI allows
 * (MPI 3.1 section 5.9.2's groups; MPI_CHAR only for MPI_REPLACE): amlapi's vectorised loops
 * (src/ch4/netmod/amlapi/amlapi_rma_op.h) against a plain element-by-element reference here,
 * first called directly, then through MPI_Accumulate, MPI_Raccumulate and MPI_Get_accumulate
 * into another rank's window from MPI_Win_allocate (a shared-memory window on one node, a
 * native RMA message with MPIR_CVAR_NOLOCAL=1) and from MPI_Win_create (native messages), at
 * counts that hit the loops' vector bodies and tails and, above the eager limit, the
 * accumulate sent in pieces (amlapi_rma_am.c's acc_pieces, a one-element last piece for
 * 1-byte types). Values include
 * sums and products that overflow, and negative numbers for max and min; no NaN (MPI leaves
 * its max and min undefined). Then every reduction MPI defines on these types, as
 * MPI_Allreduce over all ranks. The reference is not MPI_Reduce_local: MPICH 4.0.2's gave the
 * maximum of MPI_UNSIGNED_CHAR 200 and 100 as 100 (maint/patches/0007). MPICH's MTest
 * convention: rank 0 prints " No Errors" (" Found N errors" on any error); the count of cases
 * only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../src/ch4/netmod/amlapi/amlapi_rma_op.h"
#include "mtest.h"

/* kind: what the type is for MPI's op groups */
enum { K_SIGNED, K_UNSIGNED, K_FLOAT, K_BYTE, K_CHAR };
static const struct {
    MPI_Datatype dt;
    const char *name;
    int size, kind;
} types[] = {
    {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 1, K_SIGNED}, {MPI_CHAR, "MPI_CHAR", 1, K_CHAR},
    {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 1, K_UNSIGNED}, {MPI_BYTE, "MPI_BYTE", 1, K_BYTE},
    {MPI_INT8_T, "MPI_INT8_T", 1, K_SIGNED}, {MPI_UINT8_T, "MPI_UINT8_T", 1, K_UNSIGNED},
    {MPI_SHORT, "MPI_SHORT", 2, K_SIGNED}, {MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", 2,
                                             K_UNSIGNED},
    {MPI_INT16_T, "MPI_INT16_T", 2, K_SIGNED}, {MPI_UINT16_T, "MPI_UINT16_T", 2, K_UNSIGNED},
    {MPI_INT, "MPI_INT", 4, K_SIGNED}, {MPI_UNSIGNED, "MPI_UNSIGNED", 4, K_UNSIGNED},
    {MPI_INT32_T, "MPI_INT32_T", 4, K_SIGNED}, {MPI_UINT32_T, "MPI_UINT32_T", 4, K_UNSIGNED},
    {MPI_LONG, "MPI_LONG", 8, K_SIGNED}, {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", 8, K_UNSIGNED},
    {MPI_LONG_LONG, "MPI_LONG_LONG", 8, K_SIGNED}, {MPI_INT64_T, "MPI_INT64_T", 8, K_SIGNED},
    {MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", 8, K_UNSIGNED},
    {MPI_UINT64_T, "MPI_UINT64_T", 8, K_UNSIGNED},
    {MPI_FLOAT, "MPI_FLOAT", 4, K_FLOAT}, {MPI_DOUBLE, "MPI_DOUBLE", 8, K_FLOAT},
};

static const struct {
    MPI_Op op;
    const char *name;
} ops[] = {
    {MPI_SUM, "SUM"}, {MPI_PROD, "PROD"}, {MPI_MAX, "MAX"}, {MPI_MIN, "MIN"},
    {MPI_BAND, "BAND"}, {MPI_BOR, "BOR"}, {MPI_BXOR, "BXOR"}, {MPI_LAND, "LAND"},
    {MPI_LOR, "LOR"}, {MPI_LXOR, "LXOR"}, {MPI_REPLACE, "REPLACE"},
};

/* 65537: above the default 64-KiB eager limit for every type, by one element for 1-byte ones
 * (odd index: MPI_Raccumulate); 70001: the same for a fetching get_accumulate */
static const int counts[] = { 1, 3, 7, 16, 17, 33, 100, 1000, 70001, 65537 };
#define MAXN 70001

static int errs, rank;

static int verbose;             /* mtest_verbose() */

/* n elements of a type of size bytes: varied bit patterns; floats small integers and halves
 * (exact sums and products), some negative, some zero (for the logical ops) */
static void fill(void *buf, int size, int kind, int n, unsigned seed)
{
    srand(seed);
    for (int i = 0; i < n; i++) {
        int r = rand();
        if (kind == K_FLOAT) {
            double v = (double) (r % 64 - 32) / 2;
            if (size == 4)
                ((float *) buf)[i] = (float) v;
            else
                ((double *) buf)[i] = v;
        } else {
            uint64_t v = (uint64_t) r * 2654435761u ^ ((uint64_t) rand() << 31);
            if (r % 5 == 0)
                v = 0;
            memcpy((char *) buf + (size_t) i * size, &v, size);
        }
    }
}

/* whether MPI defines op on a type of this kind */
static int allowed(int kind, MPI_Op op)
{
    if (op == MPI_REPLACE)
        return 1;
    switch (kind) {
        case K_SIGNED:
        case K_UNSIGNED:
            return 1;
        case K_FLOAT:
            return op == MPI_SUM || op == MPI_PROD || op == MPI_MAX || op == MPI_MIN;
        case K_BYTE:
            return op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR;
        default:
            return 0;
    }
}

/* one element, as MPI defines the op (target = origin op target) */
static void ref_int(MPI_Op op, int kind, int size, const void *o, void *t)
{
    uint64_t a = 0, b = 0, r, mask = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
    int64_t sa, sb;
    memcpy(&a, o, size);        /* little-endian: the low bytes */
    memcpy(&b, t, size);
    sa = (int64_t) (a << (64 - 8 * size)) >> (64 - 8 * size);
    sb = (int64_t) (b << (64 - 8 * size)) >> (64 - 8 * size);
    if (op == MPI_SUM)
        r = a + b;
    else if (op == MPI_PROD)
        r = a * b;
    else if (op == MPI_MAX)
        r = kind == K_SIGNED ? (uint64_t) (sa > sb ? sa : sb) : (a > b ? a : b);
    else if (op == MPI_MIN)
        r = kind == K_SIGNED ? (uint64_t) (sa < sb ? sa : sb) : (a < b ? a : b);
    else if (op == MPI_BAND)
        r = a & b;
    else if (op == MPI_BOR)
        r = a | b;
    else if (op == MPI_BXOR)
        r = a ^ b;
    else if (op == MPI_LAND)
        r = (a & mask) && (b & mask);
    else if (op == MPI_LOR)
        r = (a & mask) || (b & mask);
    else if (op == MPI_LXOR)
        r = !(a & mask) != !(b & mask);
    else
        r = a;          /* MPI_REPLACE */
    memcpy(t, &r, size);
}

static void expect(int kind, int size, MPI_Op op, const char *origin, char *target, int n)
{
    for (int i = 0; i < n; i++, origin += size, target += size) {
        if (op == MPI_REPLACE) {
            memcpy(target, origin, size);
        } else if (kind == K_FLOAT) {
            /* the values are small integers and halves: exact in float, so double computes
             * what float would */
            float fa, fb;
            double a, b;
            if (size == 4) {
                memcpy(&fa, origin, 4);
                memcpy(&fb, target, 4);
                a = fa;
                b = fb;
            } else {
                memcpy(&a, origin, 8);
                memcpy(&b, target, 8);
            }
            b = op == MPI_SUM ? a + b : op == MPI_PROD ? a * b : op == MPI_MAX ?
                (b > a ? b : a) : (b < a ? b : a);
            fb = (float) b;
            memcpy(target, size == 4 ? (void *) &fb : (void *) &b, size);
        } else {
            ref_int(op, kind, size, origin, target);
        }
    }
}

int main(int argc, char **argv)
{
    static char origin[MAXN * 8], target[MAXN * 8], want[MAXN * 8], got[MAXN * 8],
        old[MAXN * 8];
    int nprocs, pairs = 0, direct = 0;
    char *bases[2], *wmem;
    MPI_Win wins[2];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    verbose = mtest_verbose();
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Win_allocate(MAXN * 8, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &bases[0], &wins[0]);
    wmem = malloc(MAXN * 8);
    if (!wmem)
        MPI_Abort(MPI_COMM_WORLD, 1);
    bases[1] = wmem;
    MPI_Win_create(wmem, MAXN * 8, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wins[1]);
    for (int wi = 0; wi < 2; wi++)
        MPI_Win_set_errhandler(wins[wi], MPI_ERRORS_RETURN);
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++)
        for (size_t oi = 0; oi < sizeof(ops) / sizeof(ops[0]); oi++)
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                MPI_Datatype dt = types[ti].dt;
                MPI_Op op = ops[oi].op;
                int n = counts[ci], size = types[ti].size, kind = types[ti].kind;
                unsigned seed = (unsigned) (ti * 1000 + oi * 10 + ci);
                if (!allowed(kind, op))
                    continue;
                fill(origin, size, kind, n, seed);
                fill(target, size, kind, n, seed + 7777);
                memcpy(want, target, (size_t) n * size);
                expect(kind, size, op, origin, want, n);
                pairs++;
                /* the loops themselves, where they take the pair */
                memcpy(got, target, (size_t) n * size);
                if (MPIDI_AMLAPI_acc_fast(dt, op, origin, got, n)) {
                    direct++;
                    if (memcmp(got, want, (size_t) n * size)) {
                        errs++;
                        if (errs < 10)
                            printf("rank %d: %s %s n=%d: amlapi_rma_op.h differs from "
                                   "the reference\n", rank, types[ti].name, ops[oi].name, n);
                    }
                }
                for (int wi = 0; wi < 2 && nprocs >= 2; wi++) {
                    MPI_Win win = wins[wi];
                    char *base = bases[wi];
                    const char *how = !(ci % 2) ? "MPI_Get_accumulate" :
                        n > MAXN / 2 ? "MPI_Raccumulate" : "MPI_Accumulate";
                    /* through RMA: rank 0 into rank 1's window, which holds target */
                    if (rank == 1) {
                        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
                        memcpy(base, target, (size_t) n * size);
                        MPI_Win_unlock(1, win);
                    }
                    MPI_Barrier(MPI_COMM_WORLD);
                    if (rank == 0) {
                        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
                        if (ci % 2 && n > MAXN / 2) {
                            MPI_Request req;
                            MPI_Raccumulate(origin, n, dt, 1, 0, n, dt, op, win, &req);
                            MPI_Wait(&req, MPI_STATUS_IGNORE);
                        } else if (ci % 2)
                            MPI_Accumulate(origin, n, dt, 1, 0, n, dt, op, win);
                        else
                            MPI_Get_accumulate(origin, n, dt, old, n, dt, 1, 0, n, dt, op, win);
                        MPI_Win_unlock(1, win);
                        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
                        MPI_Get(got, n, dt, 1, 0, n, dt, win);
                        MPI_Win_unlock(1, win);
                        if (memcmp(got, want, (size_t) n * size) ||
                            (ci % 2 == 0 && memcmp(old, target, (size_t) n * size))) {
                            errs++;
                            if (errs < 10)
                                printf("rank 0: %s %s n=%d: %s into a window from %s "
                                       "differs from the reference\n", types[ti].name,
                                       ops[oi].name, n, how,
                                       wi ? "MPI_Win_create" : "MPI_Win_allocate");
                        }
                    }
                    MPI_Barrier(MPI_COMM_WORLD);
                }
            }
    /* the same ops as reductions: MPI_Allreduce of every rank's origin, against the reference
     * applied rank by rank (MPICH 4.0.2 with yaksa's reduction took unsigned types as signed:
     * maint/patches/0007) */
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++)
        for (size_t oi = 0; oi < sizeof(ops) / sizeof(ops[0]); oi++) {
            MPI_Datatype dt = types[ti].dt;
            MPI_Op op = ops[oi].op;
            int n = 100, size = types[ti].size, kind = types[ti].kind;
            if (op == MPI_REPLACE || !allowed(kind, op))
                continue;
            fill(origin, size, kind, n, (unsigned) (ti * 100 + oi + 1000 * rank));
            memset(want, 0, sizeof(want));
            for (int r = nprocs - 1; r >= 0; r--) {
                fill(target, size, kind, n, (unsigned) (ti * 100 + oi + 1000 * r));
                if (r == nprocs - 1)
                    memcpy(want, target, (size_t) n * size);
                else
                    expect(kind, size, op, target, want, n);
            }
            if (MPI_Allreduce(origin, got, n, dt, op, MPI_COMM_WORLD) != MPI_SUCCESS ||
                memcmp(got, want, (size_t) n * size)) {
                errs++;
                if (errs < 10)
                    printf("rank %d: MPI_Allreduce %s %s differs from the reference\n", rank,
                           types[ti].name, ops[oi].name);
            }
        }
    if (rank == 0 && verbose)
        printf("accops: %d (type, op, count) cases MPI defines, %d of them by amlapi's "
               "loops\n", pairs, direct);
    /* the common pairs must be amlapi's own loops, not the generic path */
    if (direct < pairs / 2) {
        errs++;
        printf("rank %d: only %d of %d cases took amlapi's loops\n", rank, direct, pairs);
    }
    for (int wi = 0; wi < 2; wi++)
        MPI_Win_free(&wins[wi]);
    free(wmem);
    MPI_Allreduce(MPI_IN_PLACE, &errs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf(errs ? " Found %d errors\n" : " No Errors\n", errs);
    MPI_Finalize();
    return errs != 0;
}
