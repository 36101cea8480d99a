/*
 * One-sided atomicity, locks and passive-target progress, for each window kind
 * (MPI_Win_create, MPI_Win_allocate on COMM_WORLD, MPI_Win_allocate_shared on the node's
 * communicator):
 *  - concurrent MPI_Accumulate(SUM) from every rank into every target, contiguous and with a
 *    strided target datatype, under lock_all: each element is the exact sum;
 *  - the same under fence and under post/start/complete/wait (active target);
 *  - an early post: rank 1 posts for rank 0's second access epoch while rank 0 starts its
 *    first one on rank 2 only, and rank 2 posts late, after a store into its window: rank
 *    0's get from rank 2 must see that store (a start that counts posts from anybody
 *    returns on rank 1's post and reads the window before it); rank 1 ends its exposure
 *    with MPI_Win_test; where PSCW is amlapi's messages (windows that are not shared-memory
 *    ones) each post counts in amlapi_rma_pscw_posts, else none does;
 *  - MPI_Fetch_and_op(SUM, +1) on one counter by every rank: the fetched values are exactly
 *    0 .. n*ITERS-1, each once (a lost or doubled update shows);
 *  - a mutex built from MPI_Compare_and_swap guarding a get/put increment, released with
 *    MPI_Fetch_and_op(REPLACE), and MPI_Get_accumulate(NO_OP) reading it;
 *  - exclusive MPI_Win_lock guarding a get/put increment (mutual exclusion);
 *  - readers and writers: writers put the same value into two words with a flush between,
 *    under an exclusive lock; readers get both under a shared lock and must never see them
 *    differ; a lock on this rank itself is held when MPI_Win_lock returns (no other rank's
 *    put lands while its owner reads its own memory);
 *  - native locks (windows that are not shared-memory ones): lock_all + one put +
 *    unlock_all asks for exactly two locks (the target's and this rank's) and elides the
 *    rest (amlapi_rma_lock_requests/_elided), the target's request carried by the put, a
 *    native RMA message (amlapi_rma_lock_carried), and lock/unlock with no operation asks
 *    for none;
 *  - an operation sent with a lock request that must wait (native locks): rank 1 holds rank
 *    0's exclusive lock after a put of 5; rank 2 starts lock_all + fetch_and_op on the same
 *    word once rank 0 sees its request queued; rank 1 then puts 7 and unlocks. The fetched
 *    value must be 7 (the operation waited for the lock), and rank 0 counts the native RMA
 *    message that carried the request in amlapi_rma_am_deferred;
 *  - passive-target progress on shared-memory windows, and on the others in coprocessor
 *    progress mode: the target spins on its own memory making no MPI call while every other
 *    rank locks, accumulates into it and unlocks;
 *  - errors: an operation outside any epoch and an unlock without a lock return
 *    MPI_ERR_RMA_SYNC; a put past a target's window end returns MPI_ERR_RMA_RANGE and writes
 *    nothing, and so does an accumulate, on a shared-memory window too (its neighbour's
 *    memory is in the same segment);
 *  - accumulate ordering across paths: MPI_REPLACE accumulates to one element alternating
 *    small (native amlapi messages) and 128 KiB ones (MPIDIG's): the last one wins;
 *  - the path: windows whose ranks all share a node (MPI_Win_allocate(_shared);
 *    MPI_Win_create too with MPIR_CVAR_AMLAPI_RMA_SHM_COPY, when vnode's single copy works)
 *    count their operations in amlapi_rma_shm_ops/_atomics, others do not;
 *    amlapi_rma_shm_single_copy_ops grows for MPI_Win_create ones only; the others send
 *    native RMA messages (amlapi_rma_am_ops).
 * MPICH's MTest convention: rank 0 prints " No Errors" (" Found N errors" on any error);
 * "rma_atomic: N errors" only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, errs;
#define ERR(...) do { errs++; fprintf(stderr, "rank %d: ", rank); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } while (0)
#include "mpit.h"
#include "mtest.h"

static int verbose;             /* mtest_verbose() */

#define ITERS 200
#define E 16                    /* accumulate elements per target */

enum { K_CREATE, K_ALLOCATE, K_SHARED, K_COUNT };
static const char *const kname[] = { "create", "allocate", "allocate_shared" };

/* window layout, in longs: [0] fop counter, [1] cas mutex, [2] guarded counter,
 * [3] lock counter, [4] progress flag, [W_ACC, +E) contiguous accumulates,
 * [W_STR, +2E) strided accumulates (even slots), [W_ACT, +E) accumulates in fence and
 * post/start/complete/wait epochs */
#define W_FOP 0
#define W_MUTEX 1
#define W_GUARDED 2
#define W_LOCKED 3
#define W_FLAG 4
#define W_RW 5                  /* two words written together under an exclusive lock */
#define W_SELF 7                /* written by others while its owner holds its own lock */
#define W_ACC 8
#define W_STR (W_ACC + E)
#define W_ACT (W_STR + 2 * E)
#define W_EARLY (W_ACT + E)     /* stored by its owner just before it posts (test_early_post) */
#define W_DEFER (W_EARLY + 1)   /* test_deferred's counter */
#define W_LEN (W_DEFER + 1)

typedef struct {
    MPI_Win win;
    MPI_Comm comm;
    long *mem, *own;
    int n, me, kind;
} win_t;

static void win_open(win_t * w, int kind, MPI_Comm node)
{
    MPI_Aint bytes = W_LEN * sizeof(long);
    w->kind = kind;
    w->comm = kind == K_SHARED ? node : MPI_COMM_WORLD;
    MPI_Comm_size(w->comm, &w->n);
    MPI_Comm_rank(w->comm, &w->me);
    w->own = NULL;
    if (kind == K_CREATE) {
        w->own = calloc(1, bytes);
        w->mem = w->own;
        MPI_Win_create(w->mem, bytes, sizeof(long), MPI_INFO_NULL, w->comm, &w->win);
    } else if (kind == K_ALLOCATE) {
        MPI_Win_allocate(bytes, sizeof(long), MPI_INFO_NULL, w->comm, &w->mem, &w->win);
    } else {
        MPI_Win_allocate_shared(bytes, sizeof(long), MPI_INFO_NULL, w->comm, &w->mem,
                                &w->win);
    }
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, w->me, 0, w->win);
    memset(w->mem, 0, bytes);
    MPI_Win_unlock(w->me, w->win);
    MPI_Barrier(w->comm);
}

static void win_close(win_t * w)
{
    MPI_Win_free(&w->win);
    free(w->own);
}

static long contrib(int origin, int i)
{
    return 1 + origin * 131 + i * 7;
}

static void test_accumulate(win_t * w, MPI_Datatype stride2)
{
    long src[E];
    for (int i = 0; i < E; i++)
        src[i] = contrib(w->me, i);
    MPI_Win_lock_all(0, w->win);
    for (int rep = 0; rep < 3; rep++)
        for (int t = 0; t < w->n; t++) {
            MPI_Accumulate(src, E, MPI_LONG, t, W_ACC, E, MPI_LONG, MPI_SUM, w->win);
            MPI_Accumulate(src, E, MPI_LONG, t, W_STR, 1, stride2, MPI_SUM, w->win);
        }
    MPI_Win_unlock_all(w->win);
    MPI_Barrier(w->comm);
    MPI_Win_lock(MPI_LOCK_SHARED, w->me, 0, w->win);
    for (int i = 0; i < E; i++) {
        long want = 0;
        for (int o = 0; o < w->n; o++)
            want += 3 * contrib(o, i);
        if (w->mem[W_ACC + i] != want)
            ERR("%s: accumulate element %d is %ld, want %ld", kname[w->kind], i,
                w->mem[W_ACC + i], want);
        if (w->mem[W_STR + 2 * i] != want || w->mem[W_STR + 2 * i + 1] != 0)
            ERR("%s: strided accumulate element %d is %ld (gap %ld), want %ld (gap 0)",
                kname[w->kind], i, w->mem[W_STR + 2 * i], w->mem[W_STR + 2 * i + 1], want);
    }
    MPI_Win_unlock(w->me, w->win);
}

/* MPI_REPLACE accumulates from one origin to one element, alternately a small one (amlapi's
 * native RMA messages) and one of BIGACC elements that also covers it (above the eager
 * limit: MPIDIG's path): MPI's default accumulate_ordering makes the last one win, across
 * the two paths too. A window of the same kind, with room for the large ones. */
#define BIGACC (16 * 1024)      /* longs: 128 KiB */
static void test_order(int kind, MPI_Comm node)
{
    const int reps = 41;        /* odd: the last is a small one right after a large one */
    win_t w;
    MPI_Aint bytes;
    long *v = malloc(BIGACC * sizeof(long));
    int t, o;
    w.kind = kind;
    w.comm = kind == K_SHARED ? node : MPI_COMM_WORLD;
    MPI_Comm_size(w.comm, &w.n);
    MPI_Comm_rank(w.comm, &w.me);
    bytes = (MPI_Aint) w.n * BIGACC * sizeof(long);
    w.own = NULL;
    if (kind == K_CREATE) {
        w.own = calloc(1, bytes);
        w.mem = w.own;
        MPI_Win_create(w.mem, bytes, sizeof(long), MPI_INFO_NULL, w.comm, &w.win);
    } else if (kind == K_ALLOCATE) {
        MPI_Win_allocate(bytes, sizeof(long), MPI_INFO_NULL, w.comm, &w.mem, &w.win);
    } else {
        MPI_Win_allocate_shared(bytes, sizeof(long), MPI_INFO_NULL, w.comm, &w.mem, &w.win);
    }
    t = (w.me + 1) % w.n;
    o = (w.me + w.n - 1) % w.n;
    MPI_Win_lock_all(0, w.win);
    for (int i = 1; i <= reps; i++) {
        for (int k = 0; k < (i % 2 ? 1 : BIGACC); k++)
            v[k] = 1000L * w.me + i;
        MPI_Accumulate(v, i % 2 ? 1 : BIGACC, MPI_LONG, t, (MPI_Aint) w.me * BIGACC,
                       i % 2 ? 1 : BIGACC, MPI_LONG, MPI_REPLACE, w.win);
    }
    MPI_Win_unlock_all(w.win);
    MPI_Barrier(w.comm);
    MPI_Win_lock(MPI_LOCK_SHARED, w.me, 0, w.win);
    if (w.mem[(MPI_Aint) o * BIGACC] != 1000L * o + reps ||
        w.mem[(MPI_Aint) o * BIGACC + 1] != 1000L * o + reps - 1)
        ERR("%s: after alternating small and %d-element REPLACE accumulates from rank %d, the "
            "first elements are %ld and %ld, want %ld (the last, small) and %ld (the last large)",
            kname[kind], BIGACC, o, w.mem[(MPI_Aint) o * BIGACC],
            w.mem[(MPI_Aint) o * BIGACC + 1], 1000L * o + reps, 1000L * o + reps - 1);
    MPI_Win_unlock(w.me, w.win);
    win_close(&w);
    free(v);
}

static void test_accumulate_active(win_t * w)
{
    long src[E];
    MPI_Group g;
    MPI_Request *req = malloc(w->n * sizeof(MPI_Request));
    for (int i = 0; i < E; i++)
        src[i] = contrib(w->me, i);
    MPI_Win_fence(MPI_MODE_NOPRECEDE, w->win);
    for (int t = 0; t < w->n; t++)
        MPI_Accumulate(src, E, MPI_LONG, t, W_ACT, E, MPI_LONG, MPI_SUM, w->win);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, w->win);
    MPI_Comm_group(w->comm, &g);
    MPI_Win_post(g, 0, w->win);
    MPI_Win_start(g, 0, w->win);
    for (int t = 0; t < w->n; t++)
        MPI_Raccumulate(src, E, MPI_LONG, t, W_ACT, E, MPI_LONG, MPI_SUM, w->win, &req[t]);
    MPI_Waitall(w->n, req, MPI_STATUSES_IGNORE);
    MPI_Win_complete(w->win);
    MPI_Win_wait(w->win);
    MPI_Group_free(&g);
    free(req);
    for (int i = 0; i < E; i++) {
        long want = 0;
        for (int o = 0; o < w->n; o++)
            want += 2 * contrib(o, i);
        if (w->mem[W_ACT + i] != want)
            ERR("%s: fence + PSCW accumulate element %d is %ld, want %ld", kname[w->kind], i,
                w->mem[W_ACT + i], want);
    }
    MPI_Barrier(w->comm);
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *) a, y = *(const long *) b;
    return x < y ? -1 : x > y;
}

static void test_fetch_and_op(win_t * w)
{
    long one = 1, got[ITERS], *all = NULL;
    MPI_Win_lock_all(0, w->win);
    for (int i = 0; i < ITERS; i++) {
        MPI_Fetch_and_op(&one, &got[i], MPI_LONG, 0, W_FOP, MPI_SUM, w->win);
        MPI_Win_flush(0, w->win);
    }
    MPI_Win_unlock_all(w->win);
    if (w->me == 0)
        all = malloc((size_t) w->n * ITERS * sizeof(long));
    MPI_Gather(got, ITERS, MPI_LONG, all, ITERS, MPI_LONG, 0, w->comm);
    if (w->me == 0) {
        qsort(all, (size_t) w->n * ITERS, sizeof(long), cmp_long);
        for (long i = 0; i < (long) w->n * ITERS; i++)
            if (all[i] != i) {
                ERR("%s: fetch_and_op values: sorted[%ld] is %ld (lost or doubled update)",
                    kname[w->kind], i, all[i]);
                break;
            }
        free(all);
    }
}

static void test_cas_mutex(win_t * w)
{
    long me = w->me + 1, zero = 0, prev, v, noop = 0, final;
    MPI_Win_lock_all(0, w->win);
    for (int i = 0; i < ITERS / 4; i++) {
        do {
            MPI_Compare_and_swap(&me, &zero, &prev, MPI_LONG, 0, W_MUTEX, w->win);
            MPI_Win_flush(0, w->win);
        } while (prev != 0);
        MPI_Get(&v, 1, MPI_LONG, 0, W_GUARDED, 1, MPI_LONG, w->win);
        MPI_Win_flush(0, w->win);
        v++;
        MPI_Put(&v, 1, MPI_LONG, 0, W_GUARDED, 1, MPI_LONG, w->win);
        MPI_Win_flush(0, w->win);
        MPI_Fetch_and_op(&zero, &prev, MPI_LONG, 0, W_MUTEX, MPI_REPLACE, w->win);
        MPI_Win_flush(0, w->win);
        if (prev != me)
            ERR("%s: CAS mutex held by %ld while this rank (%ld) owned it", kname[w->kind],
                prev, me);
    }
    MPI_Win_unlock_all(w->win);
    MPI_Barrier(w->comm);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w->win);
    MPI_Get_accumulate(&noop, 1, MPI_LONG, &final, 1, MPI_LONG, 0, W_GUARDED, 1, MPI_LONG,
                       MPI_NO_OP, w->win);
    MPI_Win_unlock(0, w->win);
    if (final != (long) w->n * (ITERS / 4))
        ERR("%s: CAS-guarded counter is %ld, want %ld", kname[w->kind], final,
            (long) w->n * (ITERS / 4));
}

static void test_exclusive(win_t * w)
{
    long v, final;
    for (int i = 0; i < ITERS / 4; i++) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w->win);
        MPI_Get(&v, 1, MPI_LONG, 0, W_LOCKED, 1, MPI_LONG, w->win);
        MPI_Win_flush(0, w->win);
        v++;
        MPI_Put(&v, 1, MPI_LONG, 0, W_LOCKED, 1, MPI_LONG, w->win);
        MPI_Win_unlock(0, w->win);
    }
    MPI_Barrier(w->comm);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w->win);
    MPI_Get(&final, 1, MPI_LONG, 0, W_LOCKED, 1, MPI_LONG, w->win);
    MPI_Win_unlock(0, w->win);
    if (final != (long) w->n * (ITERS / 4))
        ERR("%s: exclusive-lock counter is %ld, want %ld", kname[w->kind], final,
            (long) w->n * (ITERS / 4));
}

static void test_readers_writers(win_t * w)
{
    long pair[2], v;
    int writer = w->me % 2 == 0;
    for (int i = 0; i < ITERS / 4; i++) {
        if (writer) {
            v = (long) w->me * 1000 + i;
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w->win);
            MPI_Put(&v, 1, MPI_LONG, 0, W_RW, 1, MPI_LONG, w->win);
            MPI_Win_flush(0, w->win);
            MPI_Put(&v, 1, MPI_LONG, 0, W_RW + 1, 1, MPI_LONG, w->win);
            MPI_Win_unlock(0, w->win);
        } else {
            MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w->win);
            MPI_Get(pair, 2, MPI_LONG, 0, W_RW, 2, MPI_LONG, w->win);
            MPI_Win_unlock(0, w->win);
            if (pair[0] != pair[1])
                ERR("%s: under a shared lock read %ld and %ld, written together under an "
                    "exclusive one", kname[w->kind], pair[0], pair[1]);
        }
    }
    MPI_Barrier(w->comm);
}

/* Rank 0 holds its own window's exclusive lock while the others put into it: none of the
 * puts may land before rank 0 unlocks (MPI_Win_lock on oneself returns with the lock). */
static void test_self_lock(win_t * w)
{
    long mark = -1, v = w->me;
    if (w->me == 0) {
        volatile long *mine = &w->mem[W_SELF];
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w->win);
        *mine = mark;
        MPI_Barrier(w->comm);
        /* the others are asking for the lock now; nothing may land meanwhile, though this
         * rank makes progress (Iprobe), so a lock request it wrongly granted would let a put
         * in */
        for (int i = 0; i < 200; i++) {
            struct timespec ts = { 0, 1000000 };
            int flag;
            nanosleep(&ts, NULL);
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, w->comm, &flag, MPI_STATUS_IGNORE);
            if (*mine != mark) {
                ERR("%s: a put landed (%ld) while rank 0 held its own window's exclusive lock",
                    kname[w->kind], *mine);
                break;
            }
        }
        MPI_Win_unlock(0, w->win);
    } else {
        MPI_Barrier(w->comm);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w->win);
        MPI_Put(&v, 1, MPI_LONG, 0, W_SELF, 1, MPI_LONG, w->win);
        MPI_Win_unlock(0, w->win);
    }
    MPI_Barrier(w->comm);
    if (w->me == 0 && w->n > 1) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w->win);
        if (w->mem[W_SELF] < 1 || w->mem[W_SELF] >= w->n)
            ERR("%s: after the others' puts the word is %ld, want a rank in 1..%d",
                kname[w->kind], w->mem[W_SELF], w->n - 1);
        MPI_Win_unlock(0, w->win);
    }
}

/* lock: whether native locks serve this window */
static void test_early_post(win_t * w, int native)
{
    MPI_Group world, g0, g1, g2;
    int r0 = 0, r1 = 1, r2 = 2, flag = 0;
    unsigned long long p0 = pvar_read("amlapi_rma_pscw_posts"), p;
    long v = -1;
    MPI_Comm_group(w->comm, &world);
    MPI_Group_incl(world, 1, &r0, &g0);
    MPI_Group_incl(world, 1, &r1, &g1);
    MPI_Group_incl(world, 1, &r2, &g2);
    if (w->me == 0) {
        MPI_Win_start(g2, 0, w->win);
        MPI_Get(&v, 1, MPI_LONG, 2, W_EARLY, 1, MPI_LONG, w->win);
        MPI_Win_complete(w->win);
        if (v != 42)
            ERR("%s: a get from rank 2 after its post read %ld, want 42 (stored before the "
                "post: start returned on rank 1's post for the next epoch)", kname[w->kind], v);
        MPI_Win_start(g1, 0, w->win);
        MPI_Win_complete(w->win);
    } else if (w->me == 1) {
        MPI_Win_post(g0, 0, w->win);
        MPI_Send(&r1, 1, MPI_INT, 2, 0, w->comm);
        while (!flag)
            MPI_Win_test(w->win, &flag);
    } else if (w->me == 2) {
        MPI_Recv(&r1, 1, MPI_INT, 1, 0, w->comm, MPI_STATUS_IGNORE);
        /* rank 0 is in MPI_Win_start by now, with rank 1's post on its way or there;
         * progress meanwhile, so that an early get would be answered (with the old value) */
        double t0 = MPI_Wtime();
        int any;
        while (MPI_Wtime() - t0 < 0.2)
            MPI_Iprobe(MPI_ANY_SOURCE, 99, w->comm, &any, MPI_STATUS_IGNORE);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 2, 0, w->win);
        w->mem[W_EARLY] = 42;
        MPI_Win_unlock(2, w->win);
        MPI_Win_post(g0, 0, w->win);
        MPI_Win_wait(w->win);
    }
    p = pvar_read("amlapi_rma_pscw_posts") - p0;
    if ((w->me == 1 || w->me == 2) && p != (native ? 1 : 0))
        ERR("%s: one MPI_Win_post counted %llu amlapi PSCW posts, want %d", kname[w->kind], p,
            native ? 1 : 0);
    MPI_Group_free(&g0);
    MPI_Group_free(&g1);
    MPI_Group_free(&g2);
    MPI_Group_free(&world);
    MPI_Barrier(w->comm);
}

static void test_deferred(win_t * w)
{
    long five = 5, seven = 7, one = 1, got = -1;
    int go = 0;
    unsigned long long d0 = pvar_read("amlapi_rma_am_deferred");
    /* rank 0 reads its counts before rank 2 can send its request (a coprocessor's helper
     * thread could queue it while rank 0 is still in the previous test's barrier) */
    MPI_Barrier(w->comm);
    if (w->me == 1) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w->win);
        MPI_Put(&five, 1, MPI_LONG, 0, W_DEFER, 1, MPI_LONG, w->win);
        MPI_Win_flush(0, w->win);
        MPI_Send(&go, 1, MPI_INT, 2, 0, w->comm);
        MPI_Recv(&go, 1, MPI_INT, 0, 0, w->comm, MPI_STATUS_IGNORE);
        /* rank 2's fetch_and_op is at rank 0 now (or on its way): it must not see 5 */
        MPI_Put(&seven, 1, MPI_LONG, 0, W_DEFER, 1, MPI_LONG, w->win);
        MPI_Win_unlock(0, w->win);
    } else if (w->me == 2) {
        MPI_Recv(&go, 1, MPI_INT, 1, 0, w->comm, MPI_STATUS_IGNORE);
        MPI_Win_lock_all(0, w->win);
        MPI_Fetch_and_op(&one, &got, MPI_LONG, 0, W_DEFER, MPI_SUM, w->win);
        MPI_Win_unlock_all(w->win);
        if (got != 7)
            ERR("%s: fetch_and_op behind another rank's exclusive lock fetched %ld, want 7 "
                "(that rank's last put in its epoch)", kname[w->kind], got);
    } else if (w->me == 0) {
        /* rank 2's request is queued behind rank 1's lock, and its operation, the native
         * message that carries it, held back (rank 2 may lose its core between the two): let
         * rank 1 go (bounded, so that what never comes fails instead of hanging) */
        double t0 = MPI_Wtime();
        int any;
        while (pvar_read("amlapi_rma_am_deferred") == d0 && MPI_Wtime() - t0 < 60)
            MPI_Iprobe(MPI_ANY_SOURCE, 99, w->comm, &any, MPI_STATUS_IGNORE);
        if (pvar_read("amlapi_rma_am_deferred") == d0)
            ERR("%s: after 60 s no operation was held back for a queued lock request",
                kname[w->kind]);
        MPI_Send(&go, 1, MPI_INT, 1, 0, w->comm);
    }
    MPI_Barrier(w->comm);
    if (w->me == 0) {
        unsigned long long d = pvar_read("amlapi_rma_am_deferred") - d0;
        if (w->mem[W_DEFER] != 8)
            ERR("%s: the counter is %ld after the put and the fetch_and_op, want 8",
                kname[w->kind], w->mem[W_DEFER]);
        if (d == 0)
            ERR("%s: the fetch_and_op sent with the queued lock request was not deferred",
                kname[w->kind]);
    }
    MPI_Barrier(w->comm);
}

static void test_lock_counts(win_t * w, int lock)
{
    unsigned long long r0, e0, c0, r, e, c;
    long v = 1;
    int t = (w->me + 1) % w->n;
    MPI_Barrier(w->comm);
    r0 = pvar_read("amlapi_rma_lock_requests");
    e0 = pvar_read("amlapi_rma_lock_elided");
    c0 = pvar_read("amlapi_rma_lock_carried");
    MPI_Win_lock_all(0, w->win);
    MPI_Put(&v, 1, MPI_LONG, t, W_SELF, 1, MPI_LONG, w->win);
    MPI_Win_unlock_all(w->win);
    r = pvar_read("amlapi_rma_lock_requests") - r0;
    e = pvar_read("amlapi_rma_lock_elided") - e0;
    c = pvar_read("amlapi_rma_lock_carried") - c0;
    /* a native RMA message carries the target's request: no REQ, no GRANT */
    if (lock && c != 1)
        ERR("%s: lock_all + one put + unlock_all: %llu lock requests carried by the put, "
            "want 1", kname[w->kind], c);
    if (lock && (r != 2 || e != (unsigned long long) w->n - 2))
        ERR("%s: lock_all + one put + unlock_all on %d ranks asked for %llu locks and elided "
            "%llu, want 2 and %d", kname[w->kind], w->n, r, e, w->n - 2);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, w->win);
    MPI_Win_unlock(t, w->win);
    r = pvar_read("amlapi_rma_lock_requests") - r0 - r;
    if (lock && r != 0)
        ERR("%s: lock/unlock of rank %d with no operation asked for %llu locks, want none",
            kname[w->kind], t, r);
    if (!lock && (pvar_read("amlapi_rma_lock_requests") != r0 ||
                  pvar_read("amlapi_rma_lock_elided") != e0))
        ERR("%s: native locks are off for this window, yet they counted", kname[w->kind]);
    MPI_Barrier(w->comm);
}

/* The target (rank 0) makes no MPI call until every other rank's lock/put/accumulate/unlock
 * has landed in its memory. Bounded by 60 s so that a missing passive progress fails
 * instead of hanging the suite. */
static void test_passive_progress(win_t * w)
{
    long one = 1;
    if (w->me == 0) {
        volatile long *flag = &w->mem[W_FLAG];
        time_t start = time(NULL);
        while (*flag != w->n - 1 && time(NULL) - start < 60)
            __sync_synchronize();
        if (*flag != w->n - 1)
            ERR("%s: passive target: after 60 s of computing the flag is %ld, want %d",
                kname[w->kind], *flag, w->n - 1);
    } else {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w->win);
        MPI_Accumulate(&one, 1, MPI_LONG, 0, W_FLAG, 1, MPI_LONG, MPI_SUM, w->win);
        MPI_Win_unlock(0, w->win);
    }
    MPI_Barrier(w->comm);
}

static void test_errors(win_t * w, int shm)
{
    int rc, cls, t = (w->me + 1) % w->n;
    long buf[4 * W_LEN], *next = NULL;
    MPI_Aint sz;
    int du;
    memset(buf, 0x5a, sizeof(buf));
    MPI_Win_set_errhandler(w->win, MPI_ERRORS_RETURN);
    rc = MPI_Put(buf, 1, MPI_LONG, t, 0, 1, MPI_LONG, w->win);
    MPI_Error_class(rc, &cls);
    if (cls != MPI_ERR_RMA_SYNC)
        ERR("%s: a put outside any epoch returned class %d, want MPI_ERR_RMA_SYNC",
            kname[w->kind], cls);
    rc = MPI_Win_unlock(t, w->win);
    MPI_Error_class(rc, &cls);
    if (cls != MPI_ERR_RMA_SYNC)
        ERR("%s: an unlock without a lock returned class %d, want MPI_ERR_RMA_SYNC",
            kname[w->kind], cls);
    if (shm) {
        /* past the end: on a shared window the next rank's memory follows this one */
        MPI_Win_lock_all(0, w->win);
        rc = MPI_Put(buf, 2, MPI_LONG, t, W_LEN - 1, 2, MPI_LONG, w->win);
        MPI_Error_class(rc, &cls);
        if (cls != MPI_ERR_RMA_RANGE)
            ERR("%s: a put across the window's end returned class %d, want "
                "MPI_ERR_RMA_RANGE", kname[w->kind], cls);
        rc = MPI_Accumulate(buf, 3, MPI_LONG, t, W_LEN - 2, 3, MPI_LONG, MPI_SUM, w->win);
        MPI_Error_class(rc, &cls);
        if (cls != MPI_ERR_RMA_RANGE)
            ERR("%s: an accumulate across the window's end returned class %d, want "
                "MPI_ERR_RMA_RANGE", kname[w->kind], cls);
        MPI_Win_unlock_all(w->win);
        MPI_Barrier(w->comm);
        if (w->kind == K_SHARED) {
            MPI_Win_shared_query(w->win, t, &sz, &du, &next);
            MPI_Win_lock(MPI_LOCK_SHARED, t, 0, w->win);
            if (next && (next[W_LEN - 1] == 0x5a5a5a5a5a5a5a5aL ||
                         next[W_LEN - 2] == 0x5a5a5a5a5a5a5a5aL))
                ERR("%s: the refused put wrote into its target", kname[w->kind]);
            MPI_Win_unlock(t, w->win);
        }
    }
    MPI_Win_set_errhandler(w->win, MPI_ERRORS_ARE_FATAL);
    MPI_Barrier(w->comm);
}

int main(int argc, char **argv)
{
    int size, node_size, total, by_copy;
    MPI_Comm node;
    MPI_Datatype stride2;
    int coproc;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    verbose = mtest_verbose();
    mpit_init();
    /* MPI_Win_create memory is reached by single copy on the node */
    by_copy = cvar_int("MPIR_CVAR_AMLAPI_RMA_SHM_COPY") == 1 &&
        pvar_read("amlapi_vnode_single_copy") != 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    MPI_Type_vector(E, 1, 2, MPI_LONG, &stride2);
    MPI_Type_commit(&stride2);
    coproc = !strcmp(cvar_env_str("AMLAPI_PROGRESS_MODE", "polling"), "coprocessor");

    for (int k = 0; k < K_COUNT; k++) {
        win_t w;
        unsigned long long ops0, acc0, ops, acc, cp0, cp, am0, amops;
        int n, shm;
        win_open(&w, k, node);
        n = w.n;
        /* the shared-memory path: allocated memory, every rank of the window on the node */
        shm = n > 1 && (k == K_SHARED || node_size == size) &&
            (k != K_CREATE || by_copy);
        cp0 = pvar_read("amlapi_rma_shm_single_copy_ops");
        ops0 = pvar_read("amlapi_rma_shm_ops");
        acc0 = pvar_read("amlapi_rma_shm_atomics");
        am0 = pvar_read("amlapi_rma_am_ops");
        test_accumulate(&w, stride2);
        if (n > 1)
            test_order(k, node);
        test_accumulate_active(&w);
        test_fetch_and_op(&w);
        test_cas_mutex(&w);
        test_exclusive(&w);
        test_readers_writers(&w);
        test_self_lock(&w);
        if (n > 2) {
            test_lock_counts(&w, !shm && k != K_SHARED);
            /* a queued request: native locks only (MPIDIG's lock blocks in MPI_Win_lock) */
            if (!shm && k != K_SHARED)
                test_deferred(&w);
            test_early_post(&w, !shm);
        }
        ops = pvar_read("amlapi_rma_shm_ops") - ops0;
        acc = pvar_read("amlapi_rma_shm_atomics") - acc0;
        cp = pvar_read("amlapi_rma_shm_single_copy_ops") - cp0;
        amops = pvar_read("amlapi_rma_am_ops") - am0;
        if (!shm && n > 1 && amops == 0)
            ERR("%s: not a shared-memory window, yet no native RMA message was sent", kname[k]);
        if (shm && amops)
            ERR("%s: %llu native RMA messages sent, want none (a shared-memory window)",
                kname[k], amops);
        if (shm && k == K_CREATE && cp == 0)
            ERR("%s: a shared-memory window of MPI_Win_create memory, yet no single copy "
                "counted", kname[k]);
        if ((!shm || k != K_CREATE) && cp)
            ERR("%s: %llu single copies counted, want none", kname[k], cp);
        if (shm && (ops == 0 || acc == 0))
            ERR("%s: a shared-memory window, yet %llu copies and %llu atomics counted",
                kname[k], ops, acc);
        if (!shm && (ops || acc))
            ERR("%s: not a shared-memory window, yet %llu copies and %llu atomics counted",
                kname[k], ops, acc);
        /* other windows need the target's progress: the coprocessor's helper thread */
        if ((shm || coproc) && n > 1)
            test_passive_progress(&w);
        if (n > 1)
            test_errors(&w, shm);
        win_close(&w);
        (void) n;
    }

    MPI_Type_free(&stride2);
    MPI_Comm_free(&node);
    mpit_finalize();
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("rma_atomic: %d errors\n", total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total != 0;
}
