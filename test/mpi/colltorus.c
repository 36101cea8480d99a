/*
 * coll_torus inside amlapi: bcast, allreduce, reduce, allgather, allgatherv,
 * alltoall and barrier through MPI, checked element by element, on COMM_WORLD and on
 * sub-communicators, with the layouts the executor must handle: contiguous and strided
 * buffers (a root and the others may use different layouts of the same data), MPI_IN_PLACE,
 * uneven and zero allgatherv counts, a non-commutative user operation (rank order matters),
 * sizes from one element to a few pipelining chunks (COLLTORUS_LARGE=1 adds a bcast of at least
 * 5 chunks per colour); and the nonblocking forms, dozens in flight at once, their datatype and
 * op freed before the wait.
 *
 * Which path ran is asserted with the pvar amlapi_coll_torus_runs: with
 * MPIR_CVAR_AMLAPI_COLL_TORUS=on (or a described torus of more than one node under auto) the
 * torus schedules must have run, otherwise they must not have. Run it with NOLOCAL=1 (one node per rank: 8 ranks are
 * a 2x2x2 torus) or NUM_CLIQUES, and without MPIR_CVAR_AMLAPI_COLL_TORUS for MPICH's
 * algorithms, which must give the same results. MPICH's MTest convention: rank 0 prints
 * " No Errors" (" Found N errors" on any error); the count of torus runs only with
 * MPITEST_VERBOSE set.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

static int rank, errs;
#define ERR(...)                                                                       \
    do {                                                                               \
        if (errs++ < 20) {                                                             \
            fprintf(stderr, "[%d] ", rank);                                            \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
        }                                                                              \
    } while (0)
#include "mpit.h"
#include "mtest.h"

static int verbose;             /* mtest_verbose() */

static const int sizes[] = { 1, 7, 1000, 70000 };
#define NSIZES (int) (sizeof(sizes) / sizeof(sizes[0]))

/* COLLTORUS_LARGE=1: a bcast of this many int64 too, 3.2 MB, at least 5 of the glue's
 * pipelining chunks (MPIDI_AMLAPI_TORUS_BCAST_CHUNK, 262144 bytes) per colour on up to 3
 * colours, the last one partial */
#define BCAST_LARGE 400001
static int bcast_large;

static int64_t val(int r, int64_t i)
{
    return (int64_t) r * 1000003 + i * 7 + 1;
}

/* x -> a*x + b; (f o g)(x) = f(g(x)): composition is not commutative. MPI's order for a
 * reduction is x0 op x1 op ... with op(in, inout): inout = in o inout. */
typedef struct {
    int64_t a, b;
} affine;

static void compose(void *in, void *inout, int *len, MPI_Datatype * dt)
{
    affine *f = in, *g = inout;
    (void) dt;
    for (int i = 0; i < *len; i++) {
        affine r = { f[i].a * g[i].a, f[i].a * g[i].b + f[i].b };
        g[i] = r;
    }
}

static affine aff(int r, int i)
{
    affine f = { (r + i) % 3 + 1, r * 5 + i };
    return f;
}

static void t_bcast(MPI_Comm comm, const char *cn)
{
    int me, P;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &P);
    int64_t *b = malloc(sizeof(int64_t) * 2 * (bcast_large ? BCAST_LARGE : 70000) + 16);
    for (int si = 0; si < NSIZES + bcast_large; si++)
        for (int root = 0; root < P; root += P - 1 > 0 ? P - 1 : 1) {
            int n = si < NSIZES ? sizes[si] : BCAST_LARGE;
            for (int lay = 0; lay < 2; lay++) {
                /* lay 1: non-roots receive strided, the root sends contiguous */
                int strided_here = lay && me != root;
                for (int i = 0; i < 2 * n; i++)
                    b[i] = -1;
                if (me == root)
                    for (int i = 0; i < n; i++)
                        b[i] = val(root, i);
                if (strided_here) {
                    MPI_Datatype v;
                    MPI_Type_vector(n, 1, 2, MPI_INT64_T, &v);
                    MPI_Type_commit(&v);
                    MPI_Bcast(b, 1, v, root, comm);
                    MPI_Type_free(&v);
                } else {
                    MPI_Bcast(b, n, MPI_INT64_T, root, comm);
                }
                for (int i = 0; i < n; i++) {
                    int64_t got = b[strided_here ? 2 * i : i];
                    if (got != val(root, i)) {
                        ERR("%s bcast n=%d root=%d layout=%d: [%d] = %lld, want %lld", cn, n,
                            root, lay, i, (long long) got, (long long) val(root, i));
                        break;
                    }
                }
                if (strided_here)
                    for (int i = 0; i < n; i++)
                        if (b[2 * i + 1] != -1) {
                            ERR("%s bcast n=%d strided: gap %d written", cn, n, i);
                            break;
                        }
            }
        }
    free(b);
}

static void t_reduce(MPI_Comm comm, const char *cn, MPI_Op affop, MPI_Datatype afft)
{
    int me, P;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &P);
    int64_t *s = malloc(sizeof(int64_t) * 70000), *r = malloc(sizeof(int64_t) * 70000);
    for (int si = 0; si < NSIZES; si++) {
        int n = sizes[si];
        for (int inplace = 0; inplace < 2; inplace++) {
            for (int i = 0; i < n; i++) {
                s[i] = val(me, i);
                r[i] = inplace ? s[i] : -1;
            }
            MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, n, MPI_INT64_T, MPI_SUM, comm);
            for (int i = 0; i < n; i++) {
                int64_t want = 0;
                for (int q = 0; q < P; q++)
                    want += val(q, i);
                if (r[i] != want) {
                    ERR("%s allreduce n=%d inplace=%d: [%d] = %lld, want %lld", cn, n, inplace,
                        i, (long long) r[i], (long long) want);
                    break;
                }
            }
            int root = (si + inplace) % P;
            for (int i = 0; i < n; i++) {
                s[i] = val(me, i) * 3;
                r[i] = inplace && me == root ? s[i] : -1;
            }
            MPI_Reduce(inplace && me == root ? MPI_IN_PLACE : s, r, n, MPI_INT64_T, MPI_MAX,
                       root, comm);
            if (me == root)
                for (int i = 0; i < n; i++) {
                    int64_t want = val(P - 1, i) * 3;
                    if (r[i] != want) {
                        ERR("%s reduce n=%d root=%d inplace=%d: [%d] = %lld, want %lld", cn, n,
                            root, inplace, i, (long long) r[i], (long long) want);
                        break;
                    }
                }
        }
        /* non-commutative: the result must be x0 o x1 o ... o x(P-1) */
        if (n > 1000)
            continue;
        affine *fa = malloc(sizeof(affine) * n), *fr = malloc(sizeof(affine) * n);
        for (int i = 0; i < n; i++)
            fa[i] = aff(me, i);
        MPI_Allreduce(fa, fr, n, afft, affop, comm);
        for (int i = 0; i < n; i++) {
            affine w = aff(P - 1, i);
            for (int q = P - 2; q >= 0; q--) {
                affine f = aff(q, i);
                int one = 1;
                compose(&f, &w, &one, NULL);
            }
            if (fr[i].a != w.a || fr[i].b != w.b) {
                ERR("%s allreduce non-commutative n=%d: [%d] = (%lld,%lld), want (%lld,%lld)",
                    cn, n, i, (long long) fr[i].a, (long long) fr[i].b, (long long) w.a,
                    (long long) w.b);
                break;
            }
        }
        free(fa);
        free(fr);
    }
    free(s);
    free(r);
}

static void t_gather(MPI_Comm comm, const char *cn)
{
    int me, P;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &P);
    int maxn = 7000;
    int64_t *s = malloc(sizeof(int64_t) * maxn * P * 2), *r = malloc(sizeof(int64_t) * maxn * P * 2);
    int *cnt = malloc(sizeof(int) * P), *dsp = malloc(sizeof(int) * P);
    const int gsizes[] = { 1, 100, 7000 };
    for (int si = 0; si < 3; si++) {
        int n = gsizes[si];
        for (int inplace = 0; inplace < 2; inplace++) {
            /* allgather */
            for (int i = 0; i < n * P; i++)
                r[i] = -1;
            for (int i = 0; i < n; i++)
                s[i] = val(me, i);
            if (inplace)
                memcpy(r + (size_t) me * n, s, sizeof(int64_t) * n);
            MPI_Allgather(inplace ? MPI_IN_PLACE : s, n, MPI_INT64_T, r, n, MPI_INT64_T, comm);
            for (int q = 0; q < P; q++)
                for (int i = 0; i < n; i++)
                    if (r[(size_t) q * n + i] != val(q, i)) {
                        ERR("%s allgather n=%d inplace=%d: block %d [%d] = %lld", cn, n,
                            inplace, q, i, (long long) r[(size_t) q * n + i]);
                        q = P;
                        break;
                    }
            /* allgatherv: rank q gives (q * n) % (n + 1) elements (zero for some), blocks in
             * reverse rank order with one-element gaps */
            int tot = 0;
            for (int q = P - 1; q >= 0; q--) {
                cnt[q] = (q * n + si) % (n + 1);
                dsp[q] = tot;
                tot += cnt[q] + 1;
            }
            for (int i = 0; i < tot; i++)
                r[i] = -1;
            for (int i = 0; i < cnt[me]; i++)
                s[i] = val(me, i);
            if (inplace)
                memcpy(r + dsp[me], s, sizeof(int64_t) * cnt[me]);
            MPI_Allgatherv(inplace ? MPI_IN_PLACE : s, cnt[me], MPI_INT64_T, r, cnt, dsp,
                           MPI_INT64_T, comm);
            for (int q = 0; q < P; q++) {
                for (int i = 0; i < cnt[q]; i++)
                    if (r[dsp[q] + i] != val(q, i)) {
                        ERR("%s allgatherv n=%d inplace=%d: block %d [%d] = %lld", cn, n,
                            inplace, q, i, (long long) r[dsp[q] + i]);
                        break;
                    }
                if (r[dsp[q] + cnt[q]] != -1)
                    ERR("%s allgatherv n=%d: the gap after block %d was written", cn, n, q);
            }
            /* alltoall: block q of rank me's send is val(me * P + q, i) */
            for (int q = 0; q < P; q++)
                for (int i = 0; i < n; i++)
                    s[(size_t) q * n + i] = val(me * P + q, i);
            if (inplace)
                memcpy(r, s, sizeof(int64_t) * n * P);
            else
                for (int i = 0; i < n * P; i++)
                    r[i] = -1;
            MPI_Alltoall(inplace ? MPI_IN_PLACE : s, n, MPI_INT64_T, r, n, MPI_INT64_T, comm);
            for (int q = 0; q < P; q++)
                for (int i = 0; i < n; i++)
                    if (r[(size_t) q * n + i] != val(q * P + me, i)) {
                        ERR("%s alltoall n=%d inplace=%d: block %d [%d] = %lld", cn, n,
                            inplace, q, i, (long long) r[(size_t) q * n + i]);
                        q = P;
                        break;
                    }
        }
        /* allgather into a strided receive buffer (every other element) */
        for (int i = 0; i < 2 * n * P; i++)
            r[i] = -1;
        for (int i = 0; i < n; i++)
            s[i] = val(me, i);
        {
            MPI_Datatype blk;
            MPI_Type_vector(n, 1, 2, MPI_INT64_T, &blk);
            MPI_Datatype blkr;
            MPI_Type_create_resized(blk, 0, sizeof(int64_t) * 2 * n, &blkr);
            MPI_Type_commit(&blkr);
            MPI_Allgather(s, n, MPI_INT64_T, r, 1, blkr, comm);
            MPI_Type_free(&blk);
            MPI_Type_free(&blkr);
        }
        for (int q = 0; q < P; q++)
            for (int i = 0; i < n; i++)
                if (r[(size_t) 2 * q * n + 2 * i] != val(q, i) || r[(size_t) 2 * q * n + 2 * i + 1] != -1) {
                    ERR("%s allgather strided n=%d: block %d [%d] wrong", cn, n, q, i);
                    q = P;
                    break;
                }
    }
    MPI_Barrier(comm);
    free(s);
    free(r);
    free(cnt);
    free(dsp);
}


/* Nonblocking forms, many in flight at once (more than the executor's 31 tag blocks), with
 * derived datatypes and an op freed before the wait: results as the blocking ones. */
static void t_nbc(MPI_Comm comm, const char *cn, MPI_Op affop, MPI_Datatype afft)
{
    int me, P;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &P);
    enum { NRED = 40, N = 5000 };
    MPI_Request rq[NRED + 8];
    MPI_Status st[NRED + 8];
    int nr = 0;
    int64_t (*red)[2] = malloc(sizeof(int64_t[2]) * NRED);
    for (int k = 0; k < NRED; k++) {
        red[k][0] = val(me, k);
        MPI_Iallreduce(MPI_IN_PLACE, red[k], 1, MPI_INT64_T, MPI_SUM, comm, &rq[nr++]);
    }
    int64_t *b = malloc(sizeof(int64_t) * 2 * N), *s = malloc(sizeof(int64_t) * N * P);
    int64_t *g = malloc(sizeof(int64_t) * N * P), *a = malloc(sizeof(int64_t) * N * P);
    int64_t *r = malloc(sizeof(int64_t) * N);
    for (int i = 0; i < 2 * N; i++)
        b[i] = me == 0 && i < N ? val(0, i) : -1;
    MPI_Datatype v;
    MPI_Type_vector(N, 1, 2, MPI_INT64_T, &v);
    MPI_Type_commit(&v);
    if (me == 0)
        MPI_Ibcast(b, N, MPI_INT64_T, 0, comm, &rq[nr++]);
    else
        MPI_Ibcast(b, 1, v, 0, comm, &rq[nr++]);
    MPI_Type_free(&v);          /* the collective keeps its own reference */
    for (int i = 0; i < N * P; i++)
        s[i] = val(me * P + i / N, i % N);
    MPI_Ialltoall(s, N, MPI_INT64_T, a, N, MPI_INT64_T, comm, &rq[nr++]);
    MPI_Iallgather(s, N, MPI_INT64_T, g, N, MPI_INT64_T, comm, &rq[nr++]);
    MPI_Ireduce(s, r, N, MPI_INT64_T, MPI_SUM, P - 1, comm, &rq[nr++]);
    affine fa = aff(me, 1), fr;
    MPI_Op op2;
    MPI_Op_create(compose, 0, &op2);
    MPI_Iallreduce(&fa, &fr, 1, afft, op2, comm, &rq[nr++]);
    MPI_Op_free(&op2);
    MPI_Ibarrier(comm, &rq[nr++]);
    MPI_Waitall(nr, rq, st);
    (void) affop;
    for (int k = 0; k < NRED; k++) {
        int64_t want = 0;
        for (int q = 0; q < P; q++)
            want += val(q, k);
        if (red[k][0] != want) {
            ERR("%s iallreduce #%d = %lld, want %lld", cn, k, (long long) red[k][0],
                (long long) want);
            break;
        }
    }
    for (int i = 0; i < N; i++)
        if (b[me ? 2 * i : i] != val(0, i)) {
            ERR("%s ibcast (strided at non-roots) [%d] = %lld", cn, i,
                (long long) b[me ? 2 * i : i]);
            break;
        }
    for (int q = 0; q < P; q++)
        for (int i = 0; i < N; i++) {
            if (a[q * N + i] != val(q * P + me, i)) {
                ERR("%s ialltoall block %d [%d] = %lld", cn, q, i, (long long) a[q * N + i]);
                q = P;
                break;
            }
            if (g[q * N + i] != val(q * P, i)) {
                ERR("%s iallgather block %d [%d] = %lld", cn, q, i, (long long) g[q * N + i]);
                q = P;
                break;
            }
        }
    if (me == P - 1)
        for (int i = 0; i < N; i++) {
            int64_t want = 0;
            for (int q = 0; q < P; q++)
                want += val(q * P, i);
            if (r[i] != want) {
                ERR("%s ireduce [%d] = %lld, want %lld", cn, i, (long long) r[i],
                    (long long) want);
                break;
            }
        }
    affine w = aff(P - 1, 1);
    for (int q = P - 2; q >= 0; q--) {
        affine f = aff(q, 1);
        int one = 1;
        compose(&f, &w, &one, NULL);
    }
    if (fr.a != w.a || fr.b != w.b)
        ERR("%s iallreduce non-commutative = (%lld,%lld), want (%lld,%lld)", cn,
            (long long) fr.a, (long long) fr.b, (long long) w.a, (long long) w.b);
    free(red);
    free(b);
    free(s);
    free(g);
    free(a);
    free(r);
}

static void all(MPI_Comm comm, const char *cn, MPI_Op affop, MPI_Datatype afft)
{
    t_bcast(comm, cn);
    t_reduce(comm, cn, affop, afft);
    t_gather(comm, cn);
    t_nbc(comm, cn, affop, afft);
}

int main(int argc, char **argv)
{
    int P;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    verbose = mtest_verbose();
    mpit_init();
    bcast_large = getenv("COLLTORUS_LARGE") && atoi(getenv("COLLTORUS_LARGE"));
    MPI_Op affop;
    MPI_Datatype afft;
    MPI_Op_create(compose, 0, &affop);
    MPI_Type_contiguous(2, MPI_INT64_T, &afft);
    MPI_Type_commit(&afft);

    unsigned long long runs0 = pvar_read("amlapi_coll_torus_runs");
    all(MPI_COMM_WORLD, "world", affop, afft);
    unsigned long long runs_world = pvar_read("amlapi_coll_torus_runs") - runs0;

    /* halves (a sub-box of a 2x2x2 torus when ranks are in XYZT order: x = rank % 2) and a
     * comm whose members are not a box (ranks 0, 1, 2 of 8: the executor must fall back) */
    MPI_Comm half, odd, dup;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    all(half, "half", affop, afft);
    MPI_Comm_split(MPI_COMM_WORLD, rank < 3, rank, &odd);
    all(odd, "first3", affop, afft);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    all(dup, "dup", affop, afft);
    MPI_Comm_free(&half);
    MPI_Comm_free(&odd);
    MPI_Comm_free(&dup);

    const char *mode = cvar_env_str("AMLAPI_COLL_TORUS", "auto");
    int described = *cvar_env_str("AMLAPI_TORUS_SHAPE", "") ||
        *cvar_env_str("AMLAPI_TORUS_MAP_FILE", "");
    /* auto leaves a torus of one node to MPICH's algorithms (its ranks share memory) */
    MPI_Comm node;
    int nodesize;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &nodesize);
    MPI_Comm_free(&node);
    int want = P > 1 && (!strcmp(mode, "on") ||
                         (!strcmp(mode, "auto") && described && nodesize < P));
    if (want && runs_world == 0)
        ERR("coll_torus should have run (MPIR_CVAR_AMLAPI_COLL_TORUS=%s) but "
            "amlapi_coll_torus_runs stayed 0", mode);
    if (!want && runs_world != 0)
        ERR("coll_torus ran %llu collectives with MPIR_CVAR_AMLAPI_COLL_TORUS=%s",
            runs_world, mode);

    MPI_Op_free(&affop);
    MPI_Type_free(&afft);
    mpit_finalize();
    int tot = 0;        /* the sum at rank 0; the other ranks exit 0 */
    MPI_Reduce(&errs, &tot, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("coll_torus collectives run on COMM_WORLD by rank 0: %llu\n", runs_world);
    if (rank == 0)
        printf(tot ? " Found %d errors\n" : " No Errors\n", tot);
    MPI_Finalize();
    return tot != 0;
}
