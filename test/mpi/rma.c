/*
 * One-sided communication: every rank puts into and gets from every rank (itself
 * included) in every synchronisation mode -- fence, post/start/complete/wait, lock/unlock
 * exclusive, lock_all with flush, lock_all with request-based rput/rget -- for each window
 * kind (MPI_Win_create, MPI_Win_allocate, MPI_Win_allocate_shared on the node's
 * communicator, MPI_Win_create_dynamic), with a contiguous target, a strided target
 * (MPIDIG's path) and a strided origin into a contiguous target (packed, then direct). Every
 * element is checked, the untouched ones too. Then 256 KiB puts and gets to every rank (above
 * every eager limit: direct where the target is reachable; on the node each shares its copy
 * with the target's progress, amlapi_vnode_shared_copies), a put outside the target's window
 * returns MPI_ERR_RMA_RANGE, and the counters say which path the operations took:
 * contiguous puts and gets to other ranks are direct (amlapi_rma_direct_puts/gets grow; to a
 * peer whose UCX RMA is software, tcp, they go as messages above
 * MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX and amlapi_rma_soft_messages grows) -- except when
 * every rank shares one node and MPIR_CVAR_AMLAPI_RMA_SHM_COPY is on: then every window
 * but the dynamic one is a shared-memory window (MPI_Win_create memory by single copy,
 * amlapi_rma_shm_single_copy_ops grows) and none is direct. Native RMA messages' target
 * datatype cache: 40 strided types put twice each to a neighbour, shipped whole then named
 * by slot, the first replaced and shipped again (amlapi_rma_am_types_shipped/_cached).
 * MPICH's MTest convention: rank 0 prints " No Errors" (" Found N errors" on any error);
 * "rma: N errors" only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, errs;
#define ERR(...) do { errs++; fprintf(stderr, "rank %d: ", rank); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } while (0)
#include "mpit.h"
#include "mtest.h"

static int verbose;             /* mtest_verbose() */

#define S 64                    /* elements each origin moves to each target */
#define SLOT (2 * S)            /* a slot per origin in every window: room for the stride */

enum { K_CREATE, K_ALLOCATE, K_SHARED, K_DYNAMIC, K_COUNT };
enum { Y_FENCE, Y_PSCW, Y_LOCK, Y_FLUSH, Y_REQ, Y_COUNT };
enum { D_CONTIG, D_TSTRIDED, D_OSTRIDED, D_COUNT };
static const char *const kname[] = { "create", "allocate", "allocate_shared", "dynamic" };
static const char *const yname[] = { "fence", "pscw", "lock", "lock_all+flush", "rput/rget" };
static const char *const dname[] = { "contiguous", "strided target", "strided origin" };

static int val(int origin, int target, int i)
{
    return 1 + origin * 1000003 + target * 10007 + i * 3;
}

typedef struct {
    MPI_Win win;
    MPI_Comm comm;
    int *mem;
    MPI_Aint *bases;            /* dynamic: each rank's attached memory */
    int kind, n, me;
} win_t;

static void win_open(win_t * w, int kind, MPI_Comm world, MPI_Comm node)
{
    MPI_Aint bytes;
    w->kind = kind;
    w->comm = kind == K_SHARED ? node : world;
    MPI_Comm_size(w->comm, &w->n);
    MPI_Comm_rank(w->comm, &w->me);
    bytes = (MPI_Aint) w->n * SLOT * sizeof(int);
    w->bases = NULL;
    switch (kind) {
        case K_CREATE:
            w->mem = calloc(1, bytes);
            MPI_Win_create(w->mem, bytes, sizeof(int), MPI_INFO_NULL, w->comm, &w->win);
            break;
        case K_ALLOCATE:
            MPI_Win_allocate(bytes, sizeof(int), MPI_INFO_NULL, w->comm, &w->mem, &w->win);
            memset(w->mem, 0, bytes);
            break;
        case K_SHARED:
            MPI_Win_allocate_shared(bytes, sizeof(int), MPI_INFO_NULL, w->comm, &w->mem,
                                    &w->win);
            memset(w->mem, 0, bytes);
            break;
        default:{
                MPI_Aint mine;
                w->mem = calloc(1, bytes);
                MPI_Win_create_dynamic(MPI_INFO_NULL, w->comm, &w->win);
                MPI_Win_attach(w->win, w->mem, bytes);
                MPI_Get_address(w->mem, &mine);
                w->bases = malloc(w->n * sizeof(MPI_Aint));
                MPI_Allgather(&mine, 1, MPI_AINT, w->bases, 1, MPI_AINT, w->comm);
            }
    }
    MPI_Barrier(w->comm);       /* every rank's memory is zero before anyone writes */
}

static void win_close(win_t * w)
{
    if (w->kind == K_DYNAMIC)
        MPI_Win_detach(w->win, w->mem);
    MPI_Win_free(&w->win);
    if (w->kind == K_CREATE || w->kind == K_DYNAMIC)
        free(w->mem);
    free(w->bases);
}

/* target displacement of element idx of target t's window */
static MPI_Aint disp(const win_t * w, int t, int idx)
{
    if (w->kind == K_DYNAMIC)
        return MPI_Aint_add(w->bases[t], (MPI_Aint) idx * sizeof(int));
    return idx;
}

static void epoch_open(win_t * w, int sync, MPI_Group g)
{
    if (sync == Y_FENCE)
        MPI_Win_fence(0, w->win);
    else if (sync == Y_PSCW) {
        MPI_Win_post(g, 0, w->win);
        MPI_Win_start(g, 0, w->win);
    } else if (sync == Y_FLUSH || sync == Y_REQ)
        MPI_Win_lock_all(0, w->win);
}

static void epoch_close(win_t * w, int sync)
{
    if (sync == Y_FENCE)
        MPI_Win_fence(0, w->win);
    else if (sync == Y_PSCW) {
        MPI_Win_complete(w->win);
        MPI_Win_wait(w->win);
    } else if (sync == Y_FLUSH || sync == Y_REQ) {
        MPI_Win_flush_all(w->win);
        MPI_Win_unlock_all(w->win);
    }
}

/* one operation to target t: put (get = 0) or get back what this rank put there */
static void op(win_t * w, int sync, int dt, int t, int get, int *buf, MPI_Datatype vec,
               MPI_Request * req)
{
    MPI_Aint d = disp(w, t, w->me * SLOT);
    const void *obuf = buf;
    int ocount = S, tcount = S;
    MPI_Datatype otype = MPI_INT, ttype = MPI_INT;
    if (dt == D_TSTRIDED) {
        ttype = vec;
        tcount = 1;
    } else if (dt == D_OSTRIDED) {
        otype = vec;
        ocount = 1;
    }
    if (sync == Y_LOCK)
        MPI_Win_lock(t == w->me ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE, t, 0, w->win);
    if (sync == Y_REQ) {
        if (get)
            MPI_Rget(buf, ocount, otype, t, d, tcount, ttype, w->win, req);
        else
            MPI_Rput(obuf, ocount, otype, t, d, tcount, ttype, w->win, req);
    } else if (get)
        MPI_Get(buf, ocount, otype, t, d, tcount, ttype, w->win);
    else
        MPI_Put(obuf, ocount, otype, t, d, tcount, ttype, w->win);
    if (sync == Y_LOCK)
        MPI_Win_unlock(t, w->win);
    else if (sync == Y_FLUSH && (t & 1))
        MPI_Win_flush(t, w->win);       /* per target for half of them, flush_all for the rest */
}

static void one_case(win_t * w, int sync, int dt, MPI_Datatype vec)
{
    MPI_Group g;
    int *out = malloc(w->n * SLOT * sizeof(int)), *in = malloc(w->n * SLOT * sizeof(int));
    MPI_Request *reqs = malloc(w->n * sizeof(MPI_Request));
    char what[128];
    snprintf(what, sizeof(what), "%s window, %s, %s", kname[w->kind], yname[sync], dname[dt]);
    MPI_Comm_group(w->comm, &g);

    /* puts: origin o's data lands in slot o of every target */
    for (int t = 0; t < w->n; t++) {
        int *b = out + t * SLOT;
        for (int i = 0; i < SLOT; i++)
            b[i] = -1;
        for (int i = 0; i < S; i++)
            b[dt == D_OSTRIDED ? 2 * i : i] = val(w->me, t, i);
    }
    epoch_open(w, sync, g);
    for (int t = 0; t < w->n; t++)
        op(w, sync, dt, t, 0, out + t * SLOT, vec, &reqs[t]);
    if (sync == Y_REQ)
        for (int t = 0; t < w->n; t++)
            MPI_Wait(&reqs[t], MPI_STATUS_IGNORE);
    epoch_close(w, sync);
    MPI_Barrier(w->comm);
    for (int o = 0; o < w->n; o++)
        for (int i = 0; i < SLOT; i++) {
            int want = 0, got = w->mem[o * SLOT + i];
            if (dt == D_TSTRIDED ? (i % 2 == 0) : i < S)
                want = val(o, w->me, dt == D_TSTRIDED ? i / 2 : i);
            if (got != want) {
                ERR("%s: put from %d, element %d is %d, want %d", what, o, i, got, want);
                o = w->n;
                break;
            }
        }
    MPI_Barrier(w->comm);

    /* gets: each rank reads its slot back from every target */
    for (int i = 0; i < w->n * SLOT; i++)
        in[i] = -7;
    epoch_open(w, sync, g);
    for (int t = 0; t < w->n; t++)
        op(w, sync, dt, t, 1, in + t * SLOT, vec, &reqs[t]);
    if (sync == Y_REQ)
        for (int t = 0; t < w->n; t++)
            MPI_Wait(&reqs[t], MPI_STATUS_IGNORE);
    epoch_close(w, sync);
    for (int t = 0; t < w->n; t++)
        for (int i = 0; i < SLOT; i++) {
            int got = in[t * SLOT + i], want = -7;
            if (dt == D_OSTRIDED ? (i % 2 == 0) : i < S)
                want = val(w->me, t, dt == D_OSTRIDED ? i / 2 : i);
            if (got != want) {
                ERR("%s: get from %d, element %d is %d, want %d", what, t, i, got, want);
                t = w->n;
                break;
            }
        }
    MPI_Barrier(w->comm);
    MPI_Group_free(&g);
    free(out);
    free(in);
    free(reqs);
}

int main(int argc, char **argv)
{
    int size, total, any_direct, all_direct, native_am;
    unsigned long long vpeers, single_copy;
    MPI_Comm node;
    MPI_Datatype vec;
    unsigned long long puts0, gets0, puts, gets, soft0, soft, cp0, cp;
    int node_size, shm_all, soft_max;
    const char *tls;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    verbose = mtest_verbose();
    mpit_init();
    puts0 = pvar_read("amlapi_rma_direct_puts");
    gets0 = pvar_read("amlapi_rma_direct_gets");
    soft0 = pvar_read("amlapi_rma_soft_messages");
    /* direct access reaches peers through UCX always, vnode peers only with single copy */
    vpeers = pvar_read("amlapi_vnode_peers");
    single_copy = pvar_read("amlapi_vnode_single_copy");
    any_direct = size > 1 && (single_copy || vpeers < (unsigned) size - 1);
    all_direct = size > 1 && (single_copy || vpeers == 0);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    /* every window but the dynamic one in shared memory: nothing goes direct */
    shm_all = cvar_int("MPIR_CVAR_AMLAPI_RMA_SHM_COPY") == 1 && single_copy && size > 1 &&
        node_size == size;
    if (shm_all)
        any_direct = 0;
    /* MPI_Win_create windows send native RMA messages for what is not direct, unless in
     * shared memory */
    native_am = !shm_all;
    cp0 = pvar_read("amlapi_rma_shm_single_copy_ops");
    MPI_Type_vector(S, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);

    for (int k = 0; k < K_COUNT; k++)
        for (int y = 0; y < Y_COUNT; y++)
            for (int d = 0; d < D_COUNT; d++) {
                win_t w;
                win_open(&w, k, MPI_COMM_WORLD, node);
                one_case(&w, y, d, vec);
                win_close(&w);
            }

    /* large transfers (above every eager limit: direct where the target is reachable) to
     * every other rank under lock_all, read back and checked */
    {
        const int big = 64 * 1024;      /* ints: 256 KiB */
        win_t w;
        int *src = malloc(big * sizeof(int)), *back = malloc(big * sizeof(int));
        MPI_Aint bytes = (MPI_Aint) size * big * sizeof(int);
        w.kind = K_CREATE;
        w.comm = MPI_COMM_WORLD;
        w.n = size;
        w.me = rank;
        w.bases = NULL;
        w.mem = calloc(1, bytes);
        unsigned long long shc = pvar_read("amlapi_vnode_shared_copies"), shc_all;
        MPI_Win_create(w.mem, bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w.win);
        MPI_Win_lock_all(0, w.win);
        /* the ranks in turn, the others waiting in MPI: an exporter shares a copy only when
         * it makes none of its own (vnode_share.c) */
        for (int turn = 0; turn < size; turn++) {
            for (int t = 0; t < size && turn == rank; t++) {
                for (int i = 0; i < big; i++)
                    src[i] = val(rank, t, i);
                MPI_Put(src, big, MPI_INT, t, (MPI_Aint) rank * big, big, MPI_INT, w.win);
                MPI_Win_flush(t, w.win);
                MPI_Get(back, big, MPI_INT, t, (MPI_Aint) rank * big, big, MPI_INT, w.win);
                MPI_Win_flush(t, w.win);
                for (int i = 0; i < big; i++)
                    if (back[i] != val(rank, t, i)) {
                        ERR("256 KiB put/get with %d: element %d is %d, want %d", t, i,
                            back[i], val(rank, t, i));
                        break;
                    }
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
        MPI_Win_unlock_all(w.win);
        /* a window's memory serves one shared copy after another (vnode_share.c), not just
         * its first: with 2 ranks every direct op to the node's other rank shares (4), with
         * more most do; one per window would be at most `size` */
        shc = pvar_read("amlapi_vnode_shared_copies") - shc;
        MPI_Allreduce(&shc, &shc_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        int share_min = 65536;  /* vnode shares single copies from 64 KiB (vnode_seg.c) */
        if (any_direct && !shm_all && single_copy && vpeers > 0 && share_min > 0 &&
            share_min <= big * (int) sizeof(int) &&
            shc_all <= (unsigned long long) size)
            ERR("256 KiB puts and gets on the node: %llu shared copies in all, want more than "
                "one per window (%d)", shc_all, size);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int o = 0; o < size; o++)
            for (int i = 0; i < big; i++)
                if (w.mem[o * big + i] != val(o, rank, i)) {
                    ERR("256 KiB put from %d: element %d is %d, want %d", o, i,
                        w.mem[o * big + i], val(o, rank, i));
                    o = size;
                    break;
                }
        win_close(&w);
        free(src);
        free(back);
    }

    /* The target datatype cache of native RMA messages (amlapi_rma_am.c): 40 distinct strided
     * target types, each put twice to the next rank (shipped whole, then by its slot), then
     * the first again (replaced meanwhile among the 32 slots: shipped whole again) and the
     * last (still held); every element read back by a contiguous get */
    if (size > 1) {
        win_t w;
        const int nt = 40, cnt = 4, span = cnt * (nt + 2);
        int t = (rank + 1) % size, src[4], *back = malloc(span * sizeof(int));
        unsigned long long sh0 = pvar_read("amlapi_rma_am_types_shipped");
        unsigned long long ca0 = pvar_read("amlapi_rma_am_types_cached"), sh, ca;
        MPI_Datatype ty[40];
        w.kind = K_CREATE;
        w.comm = MPI_COMM_WORLD;
        w.n = size;
        w.me = rank;
        w.bases = NULL;
        w.mem = calloc(span, sizeof(int));
        MPI_Win_create(w.mem, span * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                       &w.win);
        for (int k = 0; k < nt; k++) {
            MPI_Type_vector(cnt, 1, k + 2, MPI_INT, &ty[k]);
            MPI_Type_commit(&ty[k]);
        }
        MPI_Win_lock_all(0, w.win);
        for (int k = 0; k <= nt + 1; k++) {
            int ty_k = k < nt ? k : k == nt ? 0 : nt - 1;
            for (int rep = 0; rep < (k < nt ? 2 : 1); rep++) {
                for (int i = 0; i < cnt; i++)
                    src[i] = val(rank, t, 100 * k + 10 * rep + i);
                MPI_Put(src, cnt, MPI_INT, t, 0, 1, ty[ty_k], w.win);
                MPI_Win_flush(t, w.win);
                MPI_Get(back, span, MPI_INT, t, 0, span, MPI_INT, w.win);
                MPI_Win_flush(t, w.win);
                for (int i = 0; i < cnt; i++)
                    if (back[i * (ty_k + 2)] != src[i]) {
                        ERR("datatype cache: put %d (stride %d, repeat %d) to %d: element %d "
                            "is %d, want %d", k, ty_k + 2, rep, t, i, back[i * (ty_k + 2)],
                            src[i]);
                        break;
                    }
            }
        }
        MPI_Win_unlock_all(w.win);
        sh = pvar_read("amlapi_rma_am_types_shipped") - sh0;
        ca = pvar_read("amlapi_rma_am_types_cached") - ca0;
        if (native_am && (sh != (unsigned) nt + 1 || ca != (unsigned) nt + 1))
            ERR("datatype cache: %llu target types shipped and %llu named by slot, want %d "
                "and %d", sh, ca, nt + 1, nt + 1);
        if (!native_am && (sh || ca))
            ERR("datatype cache: no native RMA messages here, yet %llu types shipped and %llu "
                "named", sh, ca);
        for (int k = 0; k < nt; k++)
            MPI_Type_free(&ty[k]);
        win_close(&w);
        free(back);
    }

    /* a 128 KiB put into a 1.5 KiB window (so: direct, above every eager limit): refused at
     * the origin with MPI_ERR_RMA_RANGE, nothing written */
    if (all_direct) {
        win_t w;
        int rc, cls, n = 32 * 1024, *buf = calloc(n, sizeof(int));
        win_open(&w, K_CREATE, MPI_COMM_WORLD, node);
        MPI_Win_set_errhandler(w.win, MPI_ERRORS_RETURN);
        MPI_Win_lock_all(0, w.win);
        rc = MPI_Put(buf, n, MPI_INT, (rank + 1) % size, 0, n, MPI_INT, w.win);
        MPI_Error_class(rc, &cls);
        if (cls != MPI_ERR_RMA_RANGE)
            ERR("a put past the window's end returned class %d, want MPI_ERR_RMA_RANGE (%d)",
                cls, MPI_ERR_RMA_RANGE);
        MPI_Win_unlock_all(w.win);
        win_close(&w);
        free(buf);
    }

    puts = pvar_read("amlapi_rma_direct_puts") - puts0;
    gets = pvar_read("amlapi_rma_direct_gets") - gets0;
    /* the 256 KiB ones to a peer whose UCX RMA is software (tcp: between test hosts) go as
     * messages above MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX */
    soft = pvar_read("amlapi_rma_soft_messages") - soft0;
    soft_max = cvar_int("MPIR_CVAR_AMLAPI_RMA_DIRECT_SOFT_MAX");
    tls = getenv("UCX_TLS");
    if (any_direct && soft == 0 && (puts == 0 || gets == 0))
        ERR("direct access reaches a peer, yet %llu puts and %llu gets were direct (and %llu "
            "sent as messages to a peer whose RMA is software)", puts, gets, soft);
    if (soft && (!any_direct || soft_max < 0))
        ERR("%llu puts/gets counted as sent around software RMA, want none here", soft);
    /* every peer through UCX's tcp alone (the testlist's UCX_TLS=tcp line): its RMA is
     * software, so no put or get above the limit (the 256 KiB ones) is direct */
    if (tls && !strcmp(tls, "tcp") && vpeers == 0 && any_direct && soft_max >= 0 &&
        soft_max < 256 * 1024 && (soft == 0 || puts || gets))
        ERR("every peer through UCX's tcp: %llu puts and %llu gets direct, %llu sent as "
            "messages; want none direct and some sent", puts, gets, soft);
    if (!any_direct && (puts || gets))
        ERR("no peer is reachable directly, yet %llu puts and %llu gets were direct", puts,
            gets);
    cp = pvar_read("amlapi_rma_shm_single_copy_ops") - cp0;
    if (shm_all && cp == 0)
        ERR("every rank on the node with single copy, yet no MPI_Win_create operation was "
            "a single copy");
    if (!shm_all && cp)
        ERR("%llu single copies counted in a shared-memory window, want none", cp);

    MPI_Type_free(&vec);
    MPI_Comm_free(&node);
    mpit_finalize();
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("rma: %d errors\n", total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total != 0;
}
