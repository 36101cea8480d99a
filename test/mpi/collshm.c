/*
 * Barrier, small allreduce, bcast and alltoall in a communicator's shared memory
 * (amlapi_coll_shm.c):
 * the same answers as MPICH's algorithms, on COMM_WORLD, a duplicate, split communicators
 * (two disjoint ones with the same context id, and one whose rank order is the reverse of
 * COMM_WORLD's), and communicators made and freed in a loop.
 *
 *  - barrier: before barrier k every rank adds 1 to a counter in rank 0's window; after it,
 *    each must read at least n(k+1) (nobody left before all arrived) and below n(k+2);
 *  - allreduce: int sum, double sum (all ranks must get the same bits), long max, unsigned
 *    char bor, 2int maxloc, float min, with counts from 1 to one past the shared row (which then
 *    runs MPICH's algorithm, or goes in chunks where the row reaches COLLSHM_REDUCE_MIN on a
 *    large communicator), in place and not, checked element by element;
 *  - bcast: from every root, 1 int to one past the shared row, contiguous at all ranks or a
 *    strided vector at the root only (the same type signature), checked element by element;
 *    50 in a row from one root with nothing between them, so the root runs ahead, and 300
 *    of mixed sizes and roots, which wrap around the segment's bcast ring;
 *  - large bcasts (in chunks through the ring on communicators of COLLSHM_LARGE ranks or
 *    more): sizes ending inside a chunk, every root, strided at the root; COLLSHM_RING=1 adds
 *    bcasts larger than the whole ring (several chunks each, the ring wraps within one bcast
 *    and the root waits for room); COLLSHM_CHUNKS=1 asserts that they, and large allreduces,
 *    went through shared memory in chunks, =0 that they did not;
 *  - large allreduce (in chunks in shared memory): int sum and long max element by element, a
 *    double sum with the same bits at every rank, in place and not, counts just below and at
 *    the smallest chunked one, ending in a chunk, and one element past a whole chunk;
 *  - alltoall: 1 int to one past the shared block, plain, in place, strided receive or send
 *    type, element by element; 60 in a row, so fast ranks reuse rows while others copy out;
 *    large blocks (single copy from the senders' buffers) in the same ways, and a receive
 *    count one short at one rank (MPI_ERR_TRUNCATE there, the communicator still works);
 *    COLLSHM_READS=1 asserts that single copies ran, =0 that none did;
 *  - sleepers: rank 0 arrives 30 ms late at barriers, allreduces and bcasts it roots, so the
 *    others go to sleep (interrupt mode, or an oversubscribed node once its yield time is
 *    over) and must be woken; and the last rank reads late while rank 0 broadcasts ahead, so
 *    rank 0 waits for a slot and must be woken. COLLSHM_WAKES=1 asserts wake-ups were sent.
 * Every check repeats past MPIR_CVAR_AMLAPI_COLL_SHM calls. COLLSHM_EXPECT=0 asserts the
 * shared-memory path never ran (NOLOCAL, the CVAR at 0); otherwise that it did.
 * MPICH's MTest convention: rank 0 prints " No Errors" (" Found N errors" on any error); the
 * counters only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

static int rank, nprocs, errs;
#define ERR(...) do {                                           \
        if (errs++ < 20) {                                      \
            fprintf(stderr, "rank %d: ", rank);                 \
            fprintf(stderr, __VA_ARGS__);                       \
            fputc('\n', stderr);                                \
        }                                                       \
    } while (0)
#include "mpit.h"
#include "mtest.h"

static int verbose;             /* mtest_verbose() */

#define REPS 20

/* the glue's fixed parameters of its shared-memory collectives (amlapi_impl.h) */
#define COLLSHM_BCAST_BYTES 2048        /* MPIDI_AMLAPI_COLLSHM_BCAST_BYTES */
#define COLLSHM_ALLTOALL_BYTES 2048     /* MPIDI_AMLAPI_COLLSHM_ALLTOALL_BYTES */
#define COLLSHM_ALLTOALL_COPY 32768     /* MPIDI_AMLAPI_COLLSHM_ALLTOALL_COPY */
#define COLLSHM_LARGE 4                 /* MPIDI_AMLAPI_COLLSHM_LARGE */
#define COLLSHM_BCAST_RING 4194304      /* MPIDI_AMLAPI_COLLSHM_BCAST_RING */
#define COLLSHM_REDUCE_CHUNK 262144     /* MPIDI_AMLAPI_COLLSHM_REDUCE_CHUNK */
#define COLLSHM_REDUCE_MIN 16384        /* MPIDI_AMLAPI_COLLSHM_REDUCE_MIN */

static void test_barrier(MPI_Comm comm, const char *what)
{
    int n, me;
    long *base, one = 1, got, zero = 0;
    MPI_Win win;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, comm, &base, &win);
    *base = 0;
    MPI_Win_lock_all(0, win);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; k < REPS; k++) {
        MPI_Fetch_and_op(&one, &got, MPI_LONG, 0, 0, MPI_SUM, win);
        MPI_Win_flush(0, win);
        MPI_Barrier(comm);
        MPI_Fetch_and_op(&zero, &got, MPI_LONG, 0, 0, MPI_NO_OP, win);
        MPI_Win_flush(0, win);
        if (got < (long) n * (k + 1) || got >= (long) n * (k + 2))
            ERR("%s: barrier %d: counter %ld after it, expected %d to %d", what, k, got,
                n * (k + 1), n * (k + 2) - 1);
    }
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
}

/* element i of rank r's contribution, per type */
static int v_int(int r, int i)
{
    return r * 1000 + i;
}

static double v_dbl(int r, int i)
{
    /* magnitudes that make the sum depend on its order */
    return (r % 2 ? 1e16 : 1.0) * (r + 1) + i * 0.1;
}

static long v_long(int r, int i)
{
    return (long) ((r * 7919 + i * 104729) % 10007) - 5000;
}

static unsigned char v_uc(int r, int i)
{
    return (unsigned char) (1u << ((r + i) % 8));
}

static float v_flt(int r, int i)
{
    return (float) ((r * 31 + i * 17) % 97) - 48.0f;
}

static void test_allreduce(MPI_Comm comm, const char *what, int limit)
{
    int n, me, counts[5], nc = 0;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    size_t cap = (size_t) limit + 64;
    char *in = malloc(cap), *out = malloc(cap);

    for (int t = 0; t < 6; t++) {
        size_t sz = t == 0 ? sizeof(int) : t == 1 ? sizeof(double) : t == 2 ? sizeof(long) :
            t == 3 ? 1 : t == 4 ? 2 * sizeof(int) : sizeof(float);
        nc = 0;
        counts[nc++] = 1;
        counts[nc++] = 7;
        if (limit / (int) sz > 7)
            counts[nc++] = limit / (int) sz;
        counts[nc++] = limit / (int) sz + 1;   /* past the row: MPICH's algorithm, or chunks */
        for (int c = 0; c < nc; c++) {
            int cnt = counts[c];
            for (int rep = 0; rep < REPS; rep++) {
                int inplace = rep % 2;
                void *sb = inplace ? MPI_IN_PLACE : in, *rb = out;
                char *mine = inplace ? out : in;
                for (int i = 0; i < cnt; i++) {
                    switch (t) {
                        case 0: ((int *) mine)[i] = v_int(me, i); break;
                        case 1: ((double *) mine)[i] = v_dbl(me, i); break;
                        case 2: ((long *) mine)[i] = v_long(me, i); break;
                        case 3: ((unsigned char *) mine)[i] = v_uc(me, i); break;
                        case 4: ((int *) mine)[2 * i] = v_int(me, i) % 77;
                            ((int *) mine)[2 * i + 1] = me; break;
                        default: ((float *) mine)[i] = v_flt(me, i); break;
                    }
                }
                switch (t) {
                    case 0: MPI_Allreduce(sb, rb, cnt, MPI_INT, MPI_SUM, comm); break;
                    case 1: MPI_Allreduce(sb, rb, cnt, MPI_DOUBLE, MPI_SUM, comm); break;
                    case 2: MPI_Allreduce(sb, rb, cnt, MPI_LONG, MPI_MAX, comm); break;
                    case 3: MPI_Allreduce(sb, rb, cnt, MPI_UNSIGNED_CHAR, MPI_BOR, comm); break;
                    case 4: MPI_Allreduce(sb, rb, cnt, MPI_2INT, MPI_MAXLOC, comm); break;
                    default: MPI_Allreduce(sb, rb, cnt, MPI_FLOAT, MPI_MIN, comm); break;
                }
                for (int i = 0; i < cnt; i++) {
                    long long e = 0, g = 0;
                    int bad = 0;
                    switch (t) {
                        case 0:
                            for (int r = 0; r < n; r++)
                                e += v_int(r, i);
                            g = ((int *) out)[i];
                            bad = (int) e != (int) g;
                            break;
                        case 1: {
                            /* any order is right within rounding; all ranks must agree,
                             * checked below */
                            double s = 0;
                            for (int r = 0; r < n; r++)
                                s += v_dbl(r, i);
                            double d = ((double *) out)[i] - s;
                            bad = d > 1e-6 * s || d < -1e-6 * s;
                            e = (long long) s;
                            g = (long long) ((double *) out)[i];
                            break;
                        }
                        case 2:
                            e = v_long(0, i);
                            for (int r = 1; r < n; r++)
                                if (v_long(r, i) > e)
                                    e = v_long(r, i);
                            g = ((long *) out)[i];
                            bad = e != g;
                            break;
                        case 3:
                            for (int r = 0; r < n; r++)
                                e |= v_uc(r, i);
                            g = ((unsigned char *) out)[i];
                            bad = e != g;
                            break;
                        case 4: {
                            int bv = v_int(0, i) % 77, bl = 0;
                            for (int r = 1; r < n; r++)
                                if (v_int(r, i) % 77 > bv)
                                    bv = v_int(r, i) % 77, bl = r;
                            e = (long long) bv * 100000 + bl;
                            g = (long long) ((int *) out)[2 * i] * 100000 +
                                ((int *) out)[2 * i + 1];
                            bad = e != g;
                            break;
                        }
                        default: {
                            float m = v_flt(0, i);
                            for (int r = 1; r < n; r++)
                                if (v_flt(r, i) < m)
                                    m = v_flt(r, i);
                            bad = m != ((float *) out)[i];
                            e = (long long) m;
                            g = (long long) ((float *) out)[i];
                            break;
                        }
                    }
                    if (bad) {
                        ERR("%s: allreduce type %d count %d%s element %d: %lld, expected %lld",
                            what, t, cnt, inplace ? " in place" : "", i, g, e);
                        break;
                    }
                }
                if (t == 1) {
                    /* the same bits at every rank */
                    uint64_t h = 1469598103934665603ull, h0;
                    for (size_t b = 0; b < cnt * sizeof(double); b++)
                        h = (h ^ (unsigned char) out[b]) * 1099511628211ull;
                    h0 = h;
                    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, comm);
                    if (h0 != h)
                        ERR("%s: double sum of %d differs from rank 0's", what, cnt);
                }
            }
        }
    }
    free(in);
    free(out);
}

/* cnt ints from root; strided: at the root only, every other int of buf (buf[0], buf[2], ...),
 * the same type signature */
static void bcast_ints(int *buf, int cnt, int root, MPI_Comm comm, int strided)
{
    int me;
    MPI_Comm_rank(comm, &me);
    if (strided && me == root) {
        MPI_Datatype vec;
        MPI_Type_vector(cnt, 1, 2, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        MPI_Bcast(buf, 1, vec, root, comm);
        MPI_Type_free(&vec);
    } else {
        MPI_Bcast(buf, cnt, MPI_INT, root, comm);
    }
}

static void test_bcast(MPI_Comm comm, const char *what, int limit)
{
    int n, me, maxc = limit / (int) sizeof(int) + 1;
    /* room for the largest count (25 may exceed a small row) twice over, strided */
    int *buf = malloc(sizeof(int) * 2 * (maxc + 25));
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    for (int root = 0; root < n; root++) {
        int counts[4] = { 1, 25, maxc - 1, maxc };
        for (int c = 0; c < 4; c++) {
            int cnt = counts[c];
            for (int rep = 0; rep < REPS; rep++) {
                int strided = rep % 2;
                for (int i = 0; i < 2 * cnt; i++)
                    buf[i] = me == root ? root * 100000 + rep * 1000 + i : -1;
                bcast_ints(buf, cnt, root, comm, strided);
                if (me == root)
                    continue;
                for (int i = 0; i < cnt; i++) {
                    int e = root * 100000 + rep * 1000 + (strided ? 2 * i : i);
                    if (buf[i] != e) {
                        ERR("%s: bcast root %d count %d%s element %d: %d, expected %d", what,
                            root, cnt, strided ? " (strided at the root)" : "", i, buf[i], e);
                        break;
                    }
                }
                if (buf[cnt] != -1)
                    ERR("%s: bcast root %d count %d wrote past the data", what, root, cnt);
            }
        }
    }
    for (int k = 0; k < 50; k++) {
        int v = me == 0 ? k * 7 : -1;
        MPI_Bcast(&v, 1, MPI_INT, 0, comm);
        if (v != k * 7)
            ERR("%s: bcast %d of a run: %d, expected %d", what, k, v, k * 7);
    }
    /* 300 in a row of mixed sizes and roots: records of every size wrap around the ring */
    for (int k = 0; k < 300; k++) {
        int root = k % n, cnt = (k * 37) % (maxc - 1) + 1, bad = -1;
        for (int i = 0; i < cnt; i++)
            buf[i] = me == root ? k * 1000 + i : -1;
        MPI_Bcast(buf, cnt, MPI_INT, root, comm);
        for (int i = 0; i < cnt && bad < 0; i++)
            if (buf[i] != k * 1000 + i)
                bad = i;
        if (bad >= 0)
            ERR("%s: bcast %d of a mixed run (root %d, %d ints): element %d is %d", what, k,
                root, cnt, bad, buf[bad]);
    }
    free(buf);
}

/* element i of the block rank r sends rank j in repetition rep */
static int v_a2a(int rep, int r, int j, int i)
{
    return ((rep * 64 + r) * 64 + j) * 4096 + i;
}

/* alltoall: counts up to one past the shared block (MPICH's algorithm then), plain, in place,
 * strided receive type and strided send type, checked element by element; 60 in a row with
 * nothing between them (a fast rank is in the next call while others still copy out) and
 * with barriers between (the same row set again) */
static void test_alltoall(MPI_Comm comm, const char *what, const int *counts, int ncounts)
{
    int n, me, maxc = 0;
    for (int c = 0; c < ncounts; c++)
        maxc = counts[c] > maxc ? counts[c] : maxc;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int *sbuf = malloc(sizeof(int) * 2 * n * (maxc + 1)), *rbuf =
        malloc(sizeof(int) * 2 * n * (maxc + 1));
    for (int c = 0; c < ncounts; c++) {
        int cnt = counts[c];
        if (cnt < 1)
            continue;
        for (int rep = 0; rep < REPS; rep++) {
            int mode = rep % 4, stride = mode >= 2 ? 2 * cnt - 1 : cnt;
            MPI_Datatype vec;
            MPI_Type_vector(cnt, 1, 2, MPI_INT, &vec);
            MPI_Type_commit(&vec);
            for (int i = 0; i < 2 * n * (maxc + 1); i++)
                sbuf[i] = rbuf[i] = -1;
            for (int j = 0; j < n; j++)
                for (int i = 0; i < cnt; i++) {
                    if (mode == 3)      /* strided send: element i at 2i of block j */
                        sbuf[j * stride + 2 * i] = v_a2a(rep, me, j, i);
                    else if (mode == 1)
                        rbuf[j * cnt + i] = v_a2a(rep, me, j, i);
                    else
                        sbuf[j * cnt + i] = v_a2a(rep, me, j, i);
                }
            if (mode == 0)
                MPI_Alltoall(sbuf, cnt, MPI_INT, rbuf, cnt, MPI_INT, comm);
            else if (mode == 1)
                MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, cnt, MPI_INT, comm);
            else if (mode == 2)
                MPI_Alltoall(sbuf, cnt, MPI_INT, rbuf, 1, vec, comm);
            else
                MPI_Alltoall(sbuf, 1, vec, rbuf, cnt, MPI_INT, comm);
            MPI_Type_free(&vec);
            for (int j = 0; j < n; j++) {
                int bad = -1, got = 0;
                for (int i = 0; i < cnt && bad < 0; i++) {
                    got = rbuf[mode == 2 ? j * stride + 2 * i : j * cnt + i];
                    if (got != v_a2a(rep, j, me, i))
                        bad = i;
                }
                if (bad >= 0) {
                    ERR("%s: alltoall (%s) of %d ints: element %d from rank %d is %d, expected "
                        "%d", what, mode == 0 ? "plain" : mode == 1 ? "in place" : mode == 2 ?
                        "strided receive" : "strided send", cnt, bad, j, got,
                        v_a2a(rep, j, me, bad));
                    break;
                }
                if (mode == 2 && cnt > 1 && rbuf[j * stride + 1] != -1)
                    ERR("%s: alltoall into a strided type wrote a gap", what);
            }
            if (mode != 2 && rbuf[n * cnt] != -1)
                ERR("%s: alltoall of %d ints wrote past the data", what, cnt);
        }
    }
    for (int k = 0; k < 60; k++) {
        for (int j = 0; j < n; j++)
            sbuf[j] = v_a2a(k, me, j, 0);
        MPI_Alltoall(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, comm);
        for (int j = 0; j < n; j++)
            if (rbuf[j] != v_a2a(k, j, me, 0)) {
                ERR("%s: alltoall %d of a run: %d from rank %d, expected %d", what, k, rbuf[j],
                    j, v_a2a(k, j, me, 0));
                break;
            }
        if (k % 3 == 0)
            MPI_Barrier(comm);
    }
    free(sbuf);
    free(rbuf);
}

static void test_alltoall_small(MPI_Comm comm, const char *what, int limit)
{
    int maxc = limit / (int) sizeof(int), counts[4] = { 1, 3, maxc, maxc + 1 };
    test_alltoall(comm, what, counts, 4);
}

/* large blocks (by single copy from the senders' buffers from COLLSHM_ALLTOALL_COPY bytes on
 * communicators of COLLSHM_LARGE ranks): one int below that, at it, and 64 KiB and 12 bytes,
 * in the same four modes; then, where single copy is expected (communicators of at least
 * reads ranks), a receive count one short at rank 0 only, which must be MPI_ERR_TRUNCATE
 * there and leave the communicator working */
static void test_alltoall_large(MPI_Comm comm, const char *what, int reads)
{
    int c4 = COLLSHM_ALLTOALL_COPY / 4, counts[3] = { c4 - 1, c4, 16387 };
    int n, me, rc, cls, *sbuf, *rbuf;
    MPI_Comm ec;
    test_alltoall(comm, what, counts, 3);
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    /* the error class of MPICH's algorithms is theirs to choose */
    if (!reads || n < reads)
        return;
    MPI_Comm_dup(comm, &ec);
    MPI_Comm_set_errhandler(ec, MPI_ERRORS_RETURN);
    sbuf = calloc((size_t) n * 16387, sizeof(int));
    rbuf = calloc((size_t) n * 16387, sizeof(int));
    for (int k = 0; k < 10; k++) {
        rc = MPI_Alltoall(sbuf, 16387, MPI_INT, rbuf, me == 0 && k == 9 ? 16386 : 16387,
                          MPI_INT, ec);
        MPI_Error_class(rc, &cls);
        if (k == 9 && me == 0 ? cls != MPI_ERR_TRUNCATE : rc != MPI_SUCCESS)
            ERR("%s: alltoall %d with %s receive count: error class %d", what, k,
                me == 0 && k == 9 ? "a short" : "the right", cls);
    }
    rc = MPI_Barrier(ec);
    if (rc != MPI_SUCCESS)
        ERR("%s: barrier after a truncated alltoall: %d", what, rc);
    MPI_Comm_free(&ec);
    free(sbuf);
    free(rbuf);
}

/* large bcasts (through the ring in chunks on communicators of COLLSHM_LARGE ranks or more,
 * else MPICH's algorithms): sizes that end inside a chunk, from every root, contiguous or a
 * strided vector at the root, and a run of them with nothing between; with ring set, also
 * one larger than the ring (5 MiB and 12 bytes: six chunks of a quarter of the ring) */
static void test_bcast_large(MPI_Comm comm, const char *what, int ring)
{
    int n, me, sizes[4] = { 5000, 70001, 300007,
        COLLSHM_BCAST_RING / 4 + COLLSHM_BCAST_RING / 16 + 3
    };
    int nsizes = ring ? 4 : 3, *buf = malloc(sizeof(int) * 2 * (size_t) sizes[nsizes - 1]);
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    for (int s = 0; s < nsizes; s++)
        for (int k = 0; k < 2 * n; k++) {
            int root = k % n, cnt = sizes[s], strided = k >= n, bad = -1;
            for (int i = 0; i < 2 * cnt; i++)
                buf[i] = me == root ? k * 7 + i : -1;
            bcast_ints(buf, cnt, root, comm, strided);
            if (me == root)
                continue;
            for (int i = 0; i < cnt && bad < 0; i++)
                if (buf[i] != k * 7 + (strided ? 2 * i : i))
                    bad = i;
            if (bad >= 0)
                ERR("%s: bcast of %d ints from %d%s: element %d is %d", what, cnt, root,
                    strided ? " (strided at the root)" : "", bad, buf[bad]);
            else if (buf[cnt] != -1)
                ERR("%s: bcast of %d ints wrote past the data", what, cnt);
        }
    free(buf);
}

/* large allreduce (in chunks in shared memory from COLLSHM_REDUCE_MIN bytes on, chunks of
 * COLLSHM_REDUCE_CHUNK): int sum and long max checked element by element, a double sum that
 * every rank must get to the same bits, in place and not; ints one below the smallest chunked
 * allreduce (MPICH's algorithm; longs and doubles go in chunks) and at it, counts that end
 * inside a chunk, one element past a whole chunk (a last chunk with empty slices), and calls
 * in a row */
static void test_allreduce_large(MPI_Comm comm, const char *what)
{
    int n, me, counts[6] = { COLLSHM_REDUCE_MIN / 4 - 1, COLLSHM_REDUCE_MIN / 4, 16385,
        COLLSHM_REDUCE_CHUNK / 4 + 1, 70001, 300007
    };
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int *ia = malloc(sizeof(int) * 300007), *ib = malloc(sizeof(int) * 300007);
    long *la = malloc(sizeof(long) * 300007), *lb = malloc(sizeof(long) * 300007);
    double *da = malloc(sizeof(double) * 300007), *db = malloc(sizeof(double) * 300007);
    for (int c = 0; c < 6; c++)
        for (int rep = 0; rep < 4; rep++) {
            int cnt = counts[c], inplace = rep % 2, bad = -1;
            uint64_t h = 0, h0;
            for (int i = 0; i < cnt; i++) {
                ia[i] = me * 7 + i % 1000 + rep;
                la[i] = (long) ((me * 31 + i) % (n + 3)) * 1000 + i;
                da[i] = (i % 3 ? 1e16 : 1.0) * (me + 1) + i * 0.001;
            }
            if (inplace) {
                memcpy(ib, ia, sizeof(int) * cnt);
                MPI_Allreduce(MPI_IN_PLACE, ib, cnt, MPI_INT, MPI_SUM, comm);
            } else {
                MPI_Allreduce(ia, ib, cnt, MPI_INT, MPI_SUM, comm);
            }
            MPI_Allreduce(la, lb, cnt, MPI_LONG, MPI_MAX, comm);
            MPI_Allreduce(da, db, cnt, MPI_DOUBLE, MPI_SUM, comm);
            for (int i = 0; i < cnt && bad < 0; i++) {
                long mx = 0;
                for (int r = 0; r < n; r++) {
                    long v = (long) ((r * 31 + i) % (n + 3)) * 1000 + i;
                    mx = v > mx ? v : mx;
                }
                if (ib[i] != n * (i % 1000 + rep) + 7 * n * (n - 1) / 2 || lb[i] != mx)
                    bad = i;
            }
            if (bad >= 0)
                ERR("%s: large allreduce of %d%s: element %d: int sum %d, long max %ld", what,
                    cnt, inplace ? " (in place)" : "", bad, ib[bad], lb[bad]);
            for (int i = 0; i < cnt; i++) {
                uint64_t u;
                memcpy(&u, &db[i], sizeof(u));
                h = h * 1099511628211ULL + u;
            }
            h0 = h;
            MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, comm);
            if (h0 != h)
                ERR("%s: large allreduce of %d doubles: a different sum than rank 0's", what,
                    cnt);
        }
    free(ia);
    free(ib);
    free(la);
    free(lb);
    free(da);
    free(db);
}

static void test_sleepers(MPI_Comm comm)
{
    int me, x, y, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    /* rank 0 broadcasts 6 ahead while the last rank dawdles: rank 0 waits for a slot */
    for (int k = 0; k < 6; k++) {
        int v = me == 0 ? k + 40 : -1;
        if (me == n - 1)
            usleep(20000);
        MPI_Bcast(&v, 1, MPI_INT, 0, comm);
        if (v != k + 40)
            ERR("sleepers: bcast %d: %d", k, v);
    }
    for (int k = 0; k < 3; k++) {
        int v = me == 0 ? k : -1;
        if (me == 0)
            usleep(30000);
        MPI_Bcast(&v, 1, MPI_INT, 0, comm);
        if (v != k)
            ERR("sleepers: late root's bcast %d: %d", k, v);
    }
    for (int k = 0; k < 5; k++) {
        if (me == 0)
            usleep(30000);
        MPI_Barrier(comm);
        x = me + k;
        if (me == 0)
            usleep(30000);
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, comm);
        int n;
        MPI_Comm_size(comm, &n);
        if (y != n * (n - 1) / 2 + n * k)
            ERR("sleepers: allreduce %d gave %d", k, y);
    }
}

int main(int argc, char **argv)
{
    MPI_Comm dup, half, rev, tmp;
    const char *ev = getenv("COLLSHM_EXPECT"), *wv = getenv("COLLSHM_WAKES");
    int expect = !ev || atoi(ev), wakes = wv && atoi(wv), limit, blimit, alimit, areads, ring;
    unsigned long long b0, a0, s0, w0, c0, t0, k0, r0, d0;
    const char *kv = getenv("COLLSHM_CHUNKS"), *dv = getenv("COLLSHM_READS"),
        *gv = getenv("COLLSHM_RING");

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    verbose = mtest_verbose();
    mpit_init();
    limit = cvar_int("MPIR_CVAR_AMLAPI_COLL_SHM_BYTES");
    blimit = COLLSHM_BCAST_BYTES;
    alimit = COLLSHM_ALLTOALL_BYTES;
    /* the least ranks of a communicator whose large alltoalls go by single copy, 0 none */
    areads = dv && atoi(dv) ? COLLSHM_LARGE : 0;
    ring = gv && atoi(gv);
    b0 = pvar_read("amlapi_coll_shm_barriers");
    a0 = pvar_read("amlapi_coll_shm_allreduces");
    s0 = pvar_read("amlapi_coll_shm_segments");
    w0 = pvar_read("amlapi_coll_shm_wakes");
    c0 = pvar_read("amlapi_coll_shm_bcasts");
    t0 = pvar_read("amlapi_coll_shm_alltoalls");
    k0 = pvar_read("amlapi_coll_shm_bcast_chunks");
    r0 = pvar_read("amlapi_coll_shm_reduce_chunks");
    d0 = pvar_read("amlapi_coll_shm_alltoall_reads");

    test_barrier(MPI_COMM_WORLD, "world");
    test_allreduce(MPI_COMM_WORLD, "world", limit);
    test_bcast(MPI_COMM_WORLD, "world", blimit);
    test_alltoall_small(MPI_COMM_WORLD, "world", alimit);
    test_alltoall_large(MPI_COMM_WORLD, "world", areads);
    test_bcast_large(MPI_COMM_WORLD, "world", ring);
    test_allreduce_large(MPI_COMM_WORLD, "world");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    test_barrier(dup, "dup");
    test_allreduce(dup, "dup", limit);
    /* two disjoint halves: MPICH may give both the same context id */
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    test_barrier(half, "half");
    test_allreduce(half, "half", limit);
    test_bcast(half, "half", blimit);
    test_alltoall_small(half, "half", alimit);
    test_alltoall_large(half, "half", areads);
    test_bcast_large(half, "half", ring);
    test_allreduce_large(half, "half");
    MPI_Comm_split(MPI_COMM_WORLD, 0, nprocs - rank, &rev);
    test_allreduce(rev, "reversed", limit);
    test_bcast(rev, "reversed", blimit);
    test_alltoall_small(rev, "reversed", alimit);
    for (int i = 0; i < 10; i++) {
        int x = rank, y;
        MPI_Comm_dup(rev, &tmp);
        for (int k = 0; k < 12; k++) {
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, tmp);
            if (y != nprocs - 1)
                ERR("made and freed %d: max %d", i, y);
            MPI_Barrier(tmp);
        }
        MPI_Comm_free(&tmp);
    }
    test_sleepers(dup);

    unsigned long long b = pvar_read("amlapi_coll_shm_barriers") - b0,
        a = pvar_read("amlapi_coll_shm_allreduces") - a0,
        s = pvar_read("amlapi_coll_shm_segments") - s0,
        w = pvar_read("amlapi_coll_shm_wakes") - w0,
        bc = pvar_read("amlapi_coll_shm_bcasts") - c0,
        t = pvar_read("amlapi_coll_shm_alltoalls") - t0, wall;
    if (expect && (b == 0 || a == 0 || bc == 0 || t == 0 || s < 4))
        ERR("the shared-memory path did not run: %llu barriers, %llu allreduces, %llu bcasts, "
            "%llu alltoalls, %llu segments", b, a, bc, t, s);
    if (!expect && (b || a || bc || t || s))
        ERR("the shared-memory path ran where it should not: %llu barriers, %llu allreduces, "
            "%llu bcasts, %llu alltoalls, %llu segments", b, a, bc, t, s);
    if (kv) {
        unsigned long long k = pvar_read("amlapi_coll_shm_bcast_chunks") - k0,
            r = pvar_read("amlapi_coll_shm_reduce_chunks") - r0;
        if (atoi(kv) ? !k || !r : k || r)
            ERR("large bcasts and allreduces %s through shared memory in chunks "
                "(COLLSHM_CHUNKS=%s): %llu bcast chunks, %llu allreduce chunks",
                atoi(kv) ? "did not go" : "went", kv, k, r);
    }
    if (dv) {
        unsigned long long d = pvar_read("amlapi_coll_shm_alltoall_reads") - d0;
        if (atoi(dv) ? !d : d)
            ERR("large alltoalls %s by single copy (COLLSHM_READS=%s): %llu", atoi(dv) ?
                "did not go" : "went", dv, d);
    }
    MPI_Allreduce(&w, &wall, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wakes && rank == 0 && (w == 0 || wall == w))
        ERR("ranks slept in the segment, but rank 0 woke nobody (%llu) or nobody woke it "
            "(%llu in all)", w, wall);
    if (rank == 0 && verbose)
        printf("rank 0: %llu shared-memory barriers, %llu allreduces, %llu bcasts, %llu "
               "alltoalls, %llu segments, %llu wake-ups (%llu by all)\n", b, a, bc, t, s, w,
               wall);

    MPI_Comm_free(&rev);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    mpit_finalize();
    {
        int all;
        MPI_Allreduce(&errs, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            printf(all ? " Found %d errors\n" : " No Errors\n", all);
    }
    MPI_Finalize();
    return errs ? 1 : 0;
}
