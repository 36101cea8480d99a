/*
 * ambench: the benchmarks `maint/bench` runs on every MPI implementation (amlapi, ch4:ucx,
 * Open MPI), compiled once per MPI from this one source so that all see the same code.
 *
 *   ambench BENCH [-s SIZES] [-i ITERS] [-w WARMUP] [-W WINDOW]
 *
 * BENCH is one of the names in `benches[]` below, or of the one-sided family
 * os_OP_TYPE_MEM_SYNC (OSU's one-sided tests; see os_parse). SIZES is a comma-separated list of
 * byte counts. Output is OSU-style: two comment lines, then one "size value" row per size, so
 * the runner (and a human) can read it. Every timed value is the mean over ITERS iterations after
 * WARMUP untimed ones; without -i, one-sided and collective samples time themselves (about
 * 0.2-0.3 s each, see rma_timed and coll). Repetitions and medians are the runner's job.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/resource.h>

/* GCC 12 takes MPI_STATUSES_IGNORE (a sentinel pointer) for a zero-size status array and
 * warns at every MPI_Waitall (-Wstringop-overflow) */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define MAX_SIZES 64

static int rank, nprocs;
static int iters_arg = 0, warmup_arg = 0, window = 64;
static char *sbuf, *rbuf;
static size_t max_size;

/* Fewer iterations for large messages: about 256 MiB of traffic per size, between bounds. */
static int iters_for(size_t size, int small)
{
    int n;
    if (iters_arg)
        return iters_arg;
    if (size <= 8192)
        return small;
    n = (int) ((256u << 20) / size);
    if (n > small)
        n = small;
    return n < 20 ? 20 : n;
}

/* Windows for the streaming tests: about 256 MiB per size, 3 to 500 windows. */
static int windows_for(size_t size)
{
    size_t per = (size ? size : 1) * (size_t) window;
    size_t n = (256u << 20) / per;
    if (iters_arg)
        return iters_arg;
    return n < 3 ? 3 : n > 500 ? 500 : (int) n;
}

static int warmup_for(size_t size)
{
    if (warmup_arg)
        return warmup_arg;
    return size <= 65536 ? 100 : 10;
}

static void fail(const char *msg)
{
    if (rank == 0)
        fprintf(stderr, "ambench: %s\n", msg);
    else
        sleep(1);               /* an abort here first killed rank 0 before it said why */
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void need_ranks(int n, const char *what)
{
    char msg[128];
    if (nprocs < n) {
        snprintf(msg, sizeof(msg), "%s needs at least %d ranks, got %d", what, n, nprocs);
        fail(msg);
    }
}

/* --- point to point ------------------------------------------------------------------------ */

static double latency(size_t size)
{
    int i, n = iters_for(size, 10000), w = warmup_for(size);
    double t0 = 0;
    for (i = 0; i < n + w; i++) {
        if (i == w) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            MPI_Send(sbuf, (int) size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int) size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(rbuf, (int) size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int) size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * n);
}

/* Streaming bandwidth, OSU style: a window of nonblocking sends, a short ack per window.
 * bidir: both ranks send a window at once. Result in MB/s (1e6 bytes). */
static double bandwidth(size_t size, int bidir)
{
    int i, j, n = windows_for(size), w = 3;
    MPI_Request req[2 * 256];
    double t0 = 0, t;
    char ack = 0;
    for (i = 0; i < n + w; i++) {
        if (i == w) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (rank == 0 || rank == 1) {
            int peer = 1 - rank, k = 0;
            if (rank == 0 || bidir)
                for (j = 0; j < window; j++)
                    MPI_Isend(sbuf, (int) size, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[k++]);
            if (rank == 1 || bidir)
                for (j = 0; j < window; j++)
                    MPI_Irecv(rbuf, (int) size, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[k++]);
            MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
            if (rank == 0)
                MPI_Recv(&ack, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else
                MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
        }
    }
    t = MPI_Wtime() - t0;
    return (double) size * window * n * (bidir ? 2 : 1) / t / 1e6;
}

static int rma_agree(double t, int k, double seconds, int lo);

/* The count of a sample lasting about `seconds` of run(arg, count), after two calibrating
 * runs (about 20 ms of warm-up); rank 0's timing decides for every rank (rma_agree). */
typedef double (*timed_run_t) (const void *arg, int n);
static int timed_count(timed_run_t run, const void *arg, double seconds)
{
    int k = 10;
    double t = run(arg, k);
    k = rma_agree(t, k, 0.02, 10);
    t = run(arg, k);
    return rma_agree(t, k, seconds, 20);
}

/* Message rate with nprocs/2 pairs (rank i sends to rank i + nprocs/2): million messages per
 * second, summed over pairs. Like the collectives, a sample lasts about RATE_SECONDS after
 * about 20 ms of warm-up, not a fixed count: 500 windows of 8-byte messages lasted 1.5 ms, and
 * the 7 repetitions of one run then ranged 9-23 Mmsg/s for the same build. -i N: 3 (or -w)
 * warm-up windows and N measured. */
#define RATE_SECONDS 0.2

static double msgrate_run(const void *arg, int n)
{
    size_t size = *(const size_t *) arg;
    int i, j, half = nprocs / 2;
    MPI_Request req[256];
    char ack = 0;
    int sender = rank < half, peer = sender ? rank + half : rank - half;
    double t0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < n && rank < 2 * half; i++) {
        for (j = 0; j < window; j++) {
            if (sender)
                MPI_Isend(sbuf, (int) size, MPI_CHAR, peer, 4, MPI_COMM_WORLD, &req[j]);
            else
                MPI_Irecv(rbuf, (int) size, MPI_CHAR, peer, 4, MPI_COMM_WORLD, &req[j]);
        }
        MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
        if (sender)
            MPI_Recv(&ack, 1, MPI_CHAR, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(&ack, 1, MPI_CHAR, peer, 5, MPI_COMM_WORLD);
    }
    return MPI_Wtime() - t0;
}

static double msgrate(size_t size)
{
    int n, half = nprocs / 2;
    double t, rate, sum = 0;
    if (iters_arg) {
        msgrate_run(&size, warmup_arg ? warmup_arg : 3);
        n = iters_arg;
    } else {
        n = timed_count(msgrate_run, &size, RATE_SECONDS);
    }
    t = msgrate_run(&size, n);
    rate = rank < half ? (double) window * n / t / 1e6 : 0;
    MPI_Reduce(&rate, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum;
}

/* --- collectives: mean time per call, the slowest rank's -------------------------------- */

static void coll_run(size_t size, int which, int n)
{
    int count = (int) (size / sizeof(double));
    for (int i = 0; i < n; i++) {
        switch (which) {
            case 0:
                MPI_Bcast(sbuf, (int) size, MPI_CHAR, 0, MPI_COMM_WORLD);
                break;
            case 1:
                MPI_Allreduce(sbuf, rbuf, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                break;
            case 2:
                MPI_Alltoall(sbuf, (int) size, MPI_CHAR, rbuf, (int) size, MPI_CHAR,
                             MPI_COMM_WORLD);
                break;
            default:
                MPI_Barrier(MPI_COMM_WORLD);
        }
    }
}

static double coll_time(size_t size, int which, int n)
{
    double t0, t, tmax;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    coll_run(size, which, n);
    t = MPI_Wtime() - t0;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

/* Like the one-sided steps (rma_timed), a sample lasts about COLL_SECONDS after about 20 ms of
 * warm-up, not a fixed count: with more ranks than cores a call costs several context
 * switches, and one 4-ms scheduler tick in a 1000-call sample of 7 us calls doubled it (barrier
 * on 4 ranks, 2 cores: 6.6-12.6 us for the same build between runs). -i N: 100 (or -w) warm-up
 * calls and N measured. */
#define COLL_SECONDS 0.3

struct coll_call {
    size_t size;
    int which;
};

static double coll_timed_run(const void *arg, int n)
{
    const struct coll_call *c = arg;
    return coll_time(c->size, c->which, n);
}

static double coll(size_t size, int which)
{
    struct coll_call c = { size, which };
    int n;
    if (iters_arg) {
        coll_run(size, which, warmup_for(size));
        n = iters_arg;
    } else {
        n = timed_count(coll_timed_run, &c, COLL_SECONDS);
    }
    return coll_time(size, which, n) * 1e6 / n;
}

/* --- one-sided: rank 0 is the origin, rank 1 the target -------------------------------- */

enum { RMA_FENCE, RMA_LOCK };

static void rma_op(int get, size_t size, MPI_Win win)
{
    if (get)
        MPI_Get(rbuf, (int) size, MPI_CHAR, 1, 0, (int) size, MPI_CHAR, win);
    else
        MPI_Put(sbuf, (int) size, MPI_CHAR, 1, 0, (int) size, MPI_CHAR, win);
}

/* One-sided steps are timed for about RMA_SECONDS each, not a fixed count: at a microsecond
 * per step a fixed 5000 steps last 5 ms, where one scheduler tick of the other rank (4 ms
 * here) doubled a sample, and 50 warm-up steps left first-touch costs in the first size's
 * figure (an 8-byte get looked slower than a 1-KiB one). Each rank runs the same number of
 * steps (fence and PSCW steps involve both); in passive-target steps rank 1 does nothing and
 * waits in the broadcast, where it progresses. */
#define RMA_SECONDS 0.2

struct rma_step {
    int what;                   /* RW_* or, for rma(), -1 - sync */
    int get, ops;
    size_t size;
    MPI_Win win;
    MPI_Group peer;
    /* RW_OS (os_step): OS_* operation, flush (else lock) sync, count elements of dt (bytes
     * in all) per operation, the ops of a window spread over `slots` distinct places */
    int op, flush, count, slots;
    MPI_Datatype dt;
    size_t bytes;
};

static void rma_step(const struct rma_step *c);

/* k steps; rank 0's elapsed seconds */
static double rma_run(const struct rma_step *c, int k)
{
    double t0 = MPI_Wtime();
    for (int i = 0; i < k; i++)
        rma_step(c);
    return MPI_Wtime() - t0;
}

/* rank 0 picks how many steps fill `seconds` from t for k, and every rank runs that many */
static int rma_agree(double t, int k, double seconds, int lo)
{
    int n = t > 0 ? (int) (seconds * k / t) : 1000000;
    n = n < lo ? lo : n > 1000000 ? 1000000 : n;
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return n;
}

/* µs per step at rank 0: 10 steps, about 20 ms of warm-up, then about RMA_SECONDS measured
 * (-i N: 50 warm-up steps and N measured) */
static double rma_timed_run(const void *arg, int n)
{
    return rma_run(arg, n);
}

static double rma_timed(const struct rma_step *c)
{
    int n;
    double t;
    if (iters_arg) {
        rma_run(c, warmup_arg ? warmup_arg : 50);
        MPI_Barrier(MPI_COMM_WORLD);
        n = iters_arg;
    } else {
        n = timed_count(rma_timed_run, c, RMA_SECONDS);
    }
    t = rma_run(c, n);
    MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return t * 1e6 / n;
}

/* latency: one operation per epoch (fence-op-fence, or lock-op-unlock), µs per epoch.
 * bandwidth: a window of operations per epoch, MB/s. */
static double rma(size_t size, int get, int sync, int bw, MPI_Win win)
{
    struct rma_step c = {.what = -1 - sync,.get = get,.ops = bw ? window : 1,.size = size,
        .win = win,.peer = MPI_GROUP_NULL
    };
    double us;
    if (sync == RMA_FENCE)
        MPI_Win_fence(0, win);
    us = rma_timed(&c);
    MPI_Barrier(MPI_COMM_WORLD);
    if (bw)
        return (double) size * c.ops / us;
    return us;
}

/* The other one-sided steps, µs per operation: put_lat_pscw: post/wait at rank 1,
 * start/put/complete at rank 0; fop_epoch_create: lock_all-fop-unlock_all; lock_contended
 * (rma_alloc); RW_OS: a step of the os_ family (os_step). */
enum { RW_PSCW, RW_FOP_EPOCH, RW_LOCK_CONTENDED, RW_OS };

static void os_step(const struct rma_step *c);

static void rma_step(const struct rma_step *c)
{
    MPI_Win win = c->win;
    size_t size = c->size;
    if (c->what < 0) {          /* rma(): -1 - RMA_FENCE or -1 - RMA_LOCK */
        if (c->what == -1 - RMA_FENCE) {
            if (rank == 0)
                for (int j = 0; j < c->ops; j++)
                    rma_op(c->get, size, win);
            MPI_Win_fence(0, win);
        } else if (rank == 0) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
            for (int j = 0; j < c->ops; j++)
                rma_op(c->get, size, win);
            MPI_Win_unlock(1, win);
        }
        return;
    }
    if (c->what == RW_PSCW) {
        if (rank == 0) {
            MPI_Win_start(c->peer, 0, win);
            MPI_Put(sbuf, (int) size, MPI_CHAR, 1, 0, (int) size, MPI_CHAR, win);
            MPI_Win_complete(win);
        } else if (rank == 1) {
            MPI_Win_post(c->peer, 0, win);
            MPI_Win_wait(win);
        }
        return;
    }
    if (rank != 0)
        return;
    if (c->what == RW_OS) {
        os_step(c);
    } else if (c->what == RW_FOP_EPOCH) {
        /* a whole passive epoch per operation, as lock-based codes (and MPICH's atomic_rmw
         * tests) do */
        MPI_Win_lock_all(0, win);
        MPI_Fetch_and_op(sbuf, rbuf, MPI_LONG, 1, 0, MPI_SUM, win);
        MPI_Win_unlock_all(win);
    }
}

static double rma_alloc(size_t size, int what, MPI_Win win)
{
    int i, n, w = 50;
    double t0 = 0, t, us;
    struct rma_step c = {.what = what,.ops = 1,.size = size,.win = win,.peer = MPI_GROUP_NULL };
    MPI_Group world;
    MPI_Barrier(MPI_COMM_WORLD);
    if (what == RW_LOCK_CONTENDED) {
        /* every rank takes rank 0's exclusive lock, puts and unlocks, n times: us per epoch
         * over all ranks, the lock's throughput under contention (MPICH's lockcontention
         * tests' pattern; oversubscribed with --np above the cores) */
        n = iters_for(size, 2000);
        for (i = 0; i < n + w; i++) {
            if (i == w) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
            MPI_Put(sbuf, (int) size, MPI_CHAR, 0, 0, (int) size, MPI_CHAR, win);
            MPI_Win_unlock(0, win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime() - t0;
        return t * 1e6 / ((double) n * nprocs);
    }
    if (what == RW_PSCW) {
        int other = 1 - rank;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, rank < 2 ? 1 : 0, &other, &c.peer);
        MPI_Group_free(&world);
    }
    us = rma_timed(&c);
    if (c.peer != MPI_GROUP_NULL)
        MPI_Group_free(&c.peer);
    MPI_Barrier(MPI_COMM_WORLD);
    return us;
}

/* --- one-sided, the os_OP_TYPE_MEM_SYNC family ----------------------------------------- */

/* The field's one-sided measurements (OSU's osu_put_latency, osu_get_latency, osu_acc_latency,
 * osu_fop_latency, osu_cas_latency, osu_put_bw, osu_get_bw), so that a figure here stands beside
 * a published one: rank 0 the origin, rank 1 the target waiting inside MPI (rma_timed's
 * broadcast), page-aligned buffers, and the name saying all that moves the figure:
 *   OP    put, get, acc (MPI_Accumulate, MPI_SUM), fop (MPI_Fetch_and_op, MPI_SUM), cas
 *         (MPI_Compare_and_swap): µs per operation; putbw, getbw: a window of -W (64)
 *         operations per synchronisation, to distinct places as OSU's (up to OS_SPAN_MAX), MB/s
 *   TYPE  char schar int float double long: size / sizeof(TYPE) elements, at least one; fop and
 *         cas one element whatever the size. char for put and get only (MPI_SUM is not defined
 *         on MPI_CHAR), cas on integers only (int, long), fop on int, long, double
 *   MEM   alloc (MPI_Win_allocate: an MPI may map it for its peers), create (MPI_Win_create over
 *         page-aligned memory, touched first: nothing can be mapped, only registered), allocmem
 *         (MPI_Win_create over MPI_Alloc_mem memory, which an MPI may have prepared)
 *   SYNC  lock: lock(shared)-op-unlock per operation, a whole epoch each (OSU's -s lock);
 *         flush: one lock around all steps, op + flush per operation (OSU's -s flush)
 * The row's x is the byte size asked for; the buffers start zeroed, so no sum goes to a NaN or
 * a denormal that would cost the target's arithmetic more than an operation. */
enum { OS_PUT, OS_GET, OS_ACC, OS_FOP, OS_CAS, OS_PUTBW, OS_GETBW, OS_NOPS };
enum { OS_ALLOC, OS_CREATE, OS_ALLOCMEM, OS_NMEMS };
enum { OS_LOCK, OS_FLUSH, OS_NSYNCS };
static const char *const os_ops[] = { "put", "get", "acc", "fop", "cas", "putbw", "getbw" };
static const char *const os_mems[] = { "alloc", "create", "allocmem" };
static const char *const os_syncs[] = { "lock", "flush" };

#define OS_MOVE (1 << OS_PUT | 1 << OS_GET | 1 << OS_PUTBW | 1 << OS_GETBW)
static const struct os_type {
    const char *name;
    size_t size;
    int ops;                    /* the OPs taking it: 1 << OS_* */
} os_types[] = {
    {"char", sizeof(char), OS_MOVE},
    {"schar", sizeof(signed char), OS_MOVE | 1 << OS_ACC},
    {"int", sizeof(int), OS_MOVE | 1 << OS_ACC | 1 << OS_FOP | 1 << OS_CAS},
    {"float", sizeof(float), OS_MOVE | 1 << OS_ACC},
    {"double", sizeof(double), OS_MOVE | 1 << OS_ACC | 1 << OS_FOP},
    {"long", sizeof(long), OS_MOVE | 1 << OS_ACC | 1 << OS_FOP | 1 << OS_CAS},
};
#define OS_NTYPES ((int) (sizeof(os_types) / sizeof(os_types[0])))

/* bw windows spread over at most this many bytes: OSU's 64 distinct 4-MiB targets would hold
 * 256 MiB in each of three buffers per rank */
#define OS_SPAN_MAX ((size_t) 64 << 20)

/* in os_types' order (a handle is not a constant in every MPI: Open MPI's are addresses) */
static MPI_Datatype os_dt(int type)
{
    switch (type) {
        case 0:
            return MPI_CHAR;
        case 1:
            return MPI_SIGNED_CHAR;
        case 2:
            return MPI_INT;
        case 3:
            return MPI_FLOAT;
        case 4:
            return MPI_DOUBLE;
        default:
            return MPI_LONG;
    }
}

static int os_is_bw(int op)
{
    return op == OS_PUTBW || op == OS_GETBW;
}

/* elements per operation for `size` bytes */
static int os_count(int op, int type, size_t size)
{
    size_t n = size / os_types[type].size;
    if (op == OS_FOP || op == OS_CAS || n < 1)
        return 1;
    if (n > 0x7fffffff)
        fail("size too large for an int count of elements");
    return (int) n;
}

/* rank 0's operations of one step; the target takes no part */
static void os_step(const struct rma_step *c)
{
    MPI_Win win = c->win;
    if (!c->flush)
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
    for (int j = 0; j < c->ops; j++) {
        size_t off = (size_t) (j % c->slots) * c->bytes;
        switch (c->op) {
            case OS_PUT:
            case OS_PUTBW:
                MPI_Put(sbuf + off, c->count, c->dt, 1, (MPI_Aint) off, c->count, c->dt, win);
                break;
            case OS_GET:
            case OS_GETBW:
                MPI_Get(rbuf + off, c->count, c->dt, 1, (MPI_Aint) off, c->count, c->dt, win);
                break;
            case OS_ACC:
                MPI_Accumulate(sbuf, c->count, c->dt, 1, 0, c->count, c->dt, MPI_SUM, win);
                break;
            case OS_FOP:
                MPI_Fetch_and_op(sbuf, rbuf, c->dt, 1, 0, MPI_SUM, win);
                break;
            case OS_CAS:       /* compare 0 with 0: it always swaps */
                MPI_Compare_and_swap(sbuf, sbuf + c->bytes, rbuf, c->dt, 1, 0, win);
                break;
        }
    }
    if (c->flush)
        MPI_Win_flush(1, win);
    else
        MPI_Win_unlock(1, win);
}

/* µs per operation, or MB/s for putbw/getbw; span: the bytes of each buffer and the window */
static double os_bench(size_t size, int op, int type, int sync, MPI_Win win, size_t span)
{
    struct rma_step c = {.what = RW_OS,.ops = os_is_bw(op) ? window : 1,.size = size,
        .win = win,.peer = MPI_GROUP_NULL,.op = op,.flush = sync == OS_FLUSH,
        .count = os_count(op, type, size),.dt = os_dt(type)
    };
    double us;
    c.bytes = (size_t) c.count * os_types[type].size;
    c.slots = span / c.bytes < (size_t) c.ops ? (int) (span / c.bytes) : c.ops;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && c.flush)
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
    us = rma_timed(&c);
    if (rank == 0 && c.flush)
        MPI_Win_unlock(1, win);
    MPI_Barrier(MPI_COMM_WORLD);
    return os_is_bw(op) ? (double) c.bytes * c.ops / us : us;
}

/* the bytes each buffer and the window need for these sizes (a cas compares from sbuf + its
 * element, so at least two longs) */
static size_t os_span(int op, int type, const size_t *sizes, int nsizes)
{
    size_t most = 2 * sizeof(long), span;
    for (int i = 0; i < nsizes; i++) {
        size_t b = (size_t) os_count(op, type, sizes[i]) * os_types[type].size;
        most = b > most ? b : most;
    }
    if (!os_is_bw(op))
        return most;
    span = most * (size_t) window;
    return span < OS_SPAN_MAX ? span : most > OS_SPAN_MAX ? most : OS_SPAN_MAX;
}

static void os_bad(const char *name, const char *what, const char *field,
                   const char *const *names, int n)
{
    char msg[512];
    int len = snprintf(msg, sizeof(msg), "unknown benchmark '%s' (os_OP_TYPE_MEM_SYNC): %s '%s' "
                       "is not one of:", name, what, field);
    for (int i = 0; i < n && len < (int) sizeof(msg) - 20; i++)
        len += snprintf(msg + len, sizeof(msg) - len, " %s", names[i]);
    fail(msg);
}

static int os_field(const char *field, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(field, names[i]) == 0)
            return i;
    return -1;
}

/* --- driver -------------------------------------------------------------------------------- */

struct bench {
    const char *name, *unit, *sizes;
    int kind, arg1, arg2, arg3, arg4;
};

/* Flood: every rank but 0 sends it ITERS (default 100000) messages of the size,
 * while rank 0 receives nothing until all have sent (it waits in a barrier the senders enter
 * when done), then receives them all. flood: seconds until rank 0 has them all; flood_mem:
 * the largest growth of any rank's peak resident memory during it (MiB). */
static double flood(size_t size, int mem)
{
    int n = iters_arg ? iters_arg : 100000;
    struct rusage ru;
    long rss0;
    double t0, t, mib, out;

    getrusage(RUSAGE_SELF, &ru);
    rss0 = ru.ru_maxrss;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    if (rank != 0) {
        for (int i = 0; i < n; i++)
            MPI_Send(sbuf, (int) size, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < (long) n * (nprocs - 1); i++)
            MPI_Recv(rbuf, (int) size, MPI_CHAR, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    }
    t = MPI_Wtime() - t0;
    getrusage(RUSAGE_SELF, &ru);
    mib = (double) (ru.ru_maxrss - rss0) / 1024.0;
    if (mem)
        MPI_Reduce(&mib, &out, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    else
        out = t;        /* rank 0's: it finishes last */
    return out;
}

enum { K_LAT, K_BW, K_BIBW, K_RATE, K_COLL, K_RMA, K_FLOOD, K_RMAW, K_OS };

/* the os_OP_TYPE_MEM_SYNC family is not listed: os_parse reads its names */
static const struct bench benches[] = {
    {"latency", "Latency (us)",
     "0,1,8,64,512,4096,16384,65536,262144,1048576,4194304", K_LAT, 0, 0, 0, 0},
    {"bw", "Bandwidth (MB/s)",
     "1,64,1024,4096,16384,65536,262144,1048576,4194304", K_BW, 0, 0, 0, 0},
    {"bibw", "Bandwidth (MB/s)",
     "1,64,1024,4096,16384,65536,262144,1048576,4194304", K_BIBW, 0, 0, 0, 0},
    {"msgrate", "Rate (Mmsg/s)", "1,8,64,512,4096", K_RATE, 0, 0, 0, 0},
    {"bcast", "Latency (us)", "8,1024,65536,1048576", K_COLL, 0, 0, 0, 0},
    {"allreduce", "Latency (us)", "8,1024,65536,1048576", K_COLL, 1, 0, 0, 0},
    {"alltoall", "Latency (us)", "8,1024,65536", K_COLL, 2, 0, 0, 0},
    {"barrier", "Latency (us)", "0", K_COLL, 3, 0, 0, 0},
    {"flood", "Time (s)", "8", K_FLOOD, 0, 0, 0, 0},
    {"flood_mem", "Memory (MiB)", "8", K_FLOOD, 1, 0, 0, 0},
    {"put_lat_pscw", "Latency (us)", "8,4096,65536", K_RMAW, RW_PSCW, 0, 0, 0},
    /* on MPI_Win_create memory (malloc'd: no MPI can map it for its peers) */
    {"fop_epoch_create", "Latency (us)", "8", K_RMAW, RW_FOP_EPOCH, 1, 0, 0},
    {"lock_contended_create", "Time per epoch (us)", "8", K_RMAW, RW_LOCK_CONTENDED, 1, 0, 0},
    {"put_lat_pscw_create", "Latency (us)", "8,4096,65536", K_RMAW, RW_PSCW, 1, 0, 0},
    {"put_lat_fence", "Latency (us)", "8,1024,65536,1048576", K_RMA, 0, RMA_FENCE, 0, 0},
    {"put_lat_lock", "Latency (us)", "8,1024,65536,1048576", K_RMA, 0, RMA_LOCK, 0, 0},
    {"get_lat_fence", "Latency (us)", "8,1024,65536,1048576", K_RMA, 1, RMA_FENCE, 0, 0},
    {"get_lat_lock", "Latency (us)", "8,1024,65536,1048576", K_RMA, 1, RMA_LOCK, 0, 0},
    {"put_bw_fence", "Bandwidth (MB/s)", "8,1024,65536,1048576", K_RMA, 0, RMA_FENCE, 1, 0},
    {"put_bw_lock", "Bandwidth (MB/s)", "8,1024,65536,1048576", K_RMA, 0, RMA_LOCK, 1, 0},
    {"get_bw_fence", "Bandwidth (MB/s)", "8,1024,65536,1048576", K_RMA, 1, RMA_FENCE, 1, 0},
    {"get_bw_lock", "Bandwidth (MB/s)", "8,1024,65536,1048576", K_RMA, 1, RMA_LOCK, 1, 0},
};

static int parse_sizes(const char *s, size_t * out)
{
    int n = 0;
    char *end;
    while (*s) {
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || (*end && *end != ',') || n == MAX_SIZES)
            return -1;
        out[n++] = (size_t) v;
        s = *end ? end + 1 : end;
    }
    return n;
}

/* os_OP_TYPE_MEM_SYNC into b; 0 when name is not of the family, and a bad field fails naming
 * it */
static int os_parse(const char *name, struct bench *b)
{
    static char fop_size[24];
    const char *names[OS_NTYPES];
    char buf[128], head[256], *f[4], *p;
    int n = 1, op, type, mem, sync, k;
    if (strncmp(name, "os_", 3) != 0)
        return 0;
    snprintf(buf, sizeof(buf), "%s", name + 3);
    f[0] = buf;
    for (p = buf; *p && n <= 4; p++)
        if (*p == '_') {
            *p = '\0';
            if (n++ < 4)
                f[n - 1] = p + 1;
        }
    if (n != 4) {
        snprintf(head, sizeof(head), "unknown benchmark '%s': the family's names have four "
                 "fields, os_OP_TYPE_MEM_SYNC (as os_put_char_alloc_lock)", name);
        fail(head);
    }
    for (k = 0; k < OS_NTYPES; k++)
        names[k] = os_types[k].name;
    if ((op = os_field(f[0], os_ops, OS_NOPS)) < 0)
        os_bad(name, "OP", f[0], os_ops, OS_NOPS);
    if ((type = os_field(f[1], names, OS_NTYPES)) < 0)
        os_bad(name, "TYPE", f[1], names, OS_NTYPES);
    if ((mem = os_field(f[2], os_mems, OS_NMEMS)) < 0)
        os_bad(name, "MEM", f[2], os_mems, OS_NMEMS);
    if ((sync = os_field(f[3], os_syncs, OS_NSYNCS)) < 0)
        os_bad(name, "SYNC", f[3], os_syncs, OS_NSYNCS);
    if (!(os_types[type].ops & 1 << op)) {
        for (n = k = 0; k < OS_NTYPES; k++)
            if (os_types[k].ops & 1 << op)
                names[n++] = os_types[k].name;
        snprintf(head, sizeof(head), "%s's TYPE", os_ops[op]);
        os_bad(name, head, f[1], names, n);
    }
    b->name = name;
    b->kind = K_OS;
    b->arg1 = op;
    b->arg2 = type;
    b->arg3 = mem;
    b->arg4 = sync;
    b->unit = os_is_bw(op) ? "Bandwidth (MB/s)" : "Latency (us)";
    if (op == OS_FOP || op == OS_CAS) {
        snprintf(fop_size, sizeof(fop_size), "%zu", os_types[type].size);
        b->sizes = fop_size;
    } else {
        b->sizes = os_is_bw(op) ? "8,512,8192,65536,4194304" :
            "1,8,64,512,4096,8192,65536,1048576,4194304";
    }
    return 1;
}

int main(int argc, char **argv)
{
    const struct bench *b = NULL;
    const char *sizes_arg = NULL;
    size_t sizes[MAX_SIZES];
    int i, nsizes, opt_err = 0;
    char msg[1024];
    MPI_Win win = MPI_WIN_NULL;
    void *wmem = NULL;          /* *_create benches: the window's memory */
    void *wmem_mpi = NULL;      /* os_*_allocmem: the window's memory, from MPI_Alloc_mem */
    static struct bench os;
    size_t page = (size_t) sysconf(_SC_PAGESIZE);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

    if (argc < 2)
        fail("usage: ambench BENCH [-s SIZES] [-i ITERS] [-w WARMUP] [-W WINDOW]");
    for (i = 0; i < (int) (sizeof(benches) / sizeof(benches[0])); i++)
        if (strcmp(argv[1], benches[i].name) == 0)
            b = &benches[i];
    if (!b && os_parse(argv[1], &os))
        b = &os;
    if (!b) {
        int len = snprintf(msg, sizeof(msg), "unknown benchmark '%s'; known: os_OP_TYPE_MEM_SYNC",
                           argv[1]);
        for (i = 0; i < (int) (sizeof(benches) / sizeof(benches[0])) && len < 1000; i++)
            len += snprintf(msg + len, sizeof(msg) - len, " %s", benches[i].name);
        fail(msg);
    }
    for (i = 2; i < argc; i++) {
        if (i + 1 >= argc) {
            opt_err = 1;
            break;
        }
        if (!strcmp(argv[i], "-s"))
            sizes_arg = argv[++i];
        else if (!strcmp(argv[i], "-i"))
            iters_arg = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w"))
            warmup_arg = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-W"))
            window = atoi(argv[++i]);
        else
            opt_err = 1;
    }
    if (opt_err || window < 1 || window > 256 || iters_arg < 0 || warmup_arg < 0)
        fail("bad option (options: -s SIZES -i ITERS -w WARMUP -W WINDOW<=256)");
    nsizes = parse_sizes(sizes_arg ? sizes_arg : b->sizes, sizes);
    if (nsizes <= 0)
        fail("bad size list (comma-separated byte counts)");
    need_ranks(2, b->name);

    max_size = 1;
    for (i = 0; i < nsizes; i++) {
        size_t need = sizes[i] * (b->kind == K_COLL && b->arg1 == 2 ? (size_t) nprocs : 1);
        if (need > max_size)
            max_size = need;
    }
    if (b->kind == K_OS)
        max_size = os_span(b->arg1, b->arg2, sizes, nsizes);
    else if (b->kind == K_RMAW && max_size < 2 * sizeof(long))
        max_size = 2 * sizeof(long);
    if (b->kind == K_RMA || b->kind == K_RMAW || b->kind == K_OS) {
        /* page-aligned, as OSU's: where an MPI registers or maps the origin buffer, a
         * malloc'd one shares its first and last pages with other data */
        void *s1 = NULL, *r1 = NULL;
        if (posix_memalign(&s1, page, max_size) || posix_memalign(&r1, page, max_size))
            fail("out of memory for the buffers");
        sbuf = s1;
        rbuf = r1;
    } else {
        sbuf = malloc(max_size);
        rbuf = malloc(max_size);
    }
    if (!sbuf || !rbuf)
        fail("out of memory for the buffers");
    /* one-sided: zeros, the operands of the sums (os_ family; fop_epoch_create's longs) */
    memset(sbuf, b->kind == K_OS || b->kind == K_RMAW ? 0 : 'a', max_size);
    memset(rbuf, b->kind == K_OS || b->kind == K_RMAW ? 0 : 'b', max_size);
    if (b->kind == K_RMA) {
        MPI_Win_create(rank == 1 ? rbuf : sbuf, (MPI_Aint) max_size, 1, MPI_INFO_NULL,
                       MPI_COMM_WORLD, &win);
    } else if (b->kind == K_RMAW) {
        void *mem;
        if (b->arg2) {
            wmem = calloc(1, max_size);
            if (!wmem)
                fail("out of memory for the window");
            MPI_Win_create(wmem, (MPI_Aint) max_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        } else {
            MPI_Win_allocate((MPI_Aint) max_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem,
                             &win);
        }
    } else if (b->kind == K_OS) {
        void *mem;
        if (b->arg3 == OS_ALLOC) {
            MPI_Win_allocate((MPI_Aint) max_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem,
                             &win);
            /* zeroed and touched like the others; in an epoch, as a store to window memory
             * must be in every memory model */
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
            memset(mem, 0, max_size);
            MPI_Win_unlock(rank, win);
        } else {
            if (b->arg3 == OS_CREATE) {
                if (posix_memalign(&wmem, page, max_size))
                    fail("out of memory for the window");
                mem = wmem;
            } else {
                MPI_Alloc_mem((MPI_Aint) max_size, MPI_INFO_NULL, &wmem_mpi);
                mem = wmem_mpi;
            }
            /* touched before creation, so an MPI registering it finds its pages */
            memset(mem, 0, max_size);
            MPI_Win_create(mem, (MPI_Aint) max_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }

    if (rank == 0) {
        printf("# ambench %s, %d ranks\n# Size  %s\n", b->name, nprocs, b->unit);
        fflush(stdout);
    }
    for (i = 0; i < nsizes; i++) {
        size_t s = sizes[i];
        double v = 0;
        if (b->kind == K_COLL && b->arg1 == 1 && s < sizeof(double))
            s = sizeof(double);
        switch (b->kind) {
            case K_LAT:
                v = latency(s);
                break;
            case K_BW:
                v = bandwidth(s, 0);
                break;
            case K_BIBW:
                v = bandwidth(s, 1);
                break;
            case K_RATE:
                v = msgrate(s);
                break;
            case K_COLL:
                v = coll(s, b->arg1);
                break;
            case K_RMA:
                v = rma(s, b->arg1, b->arg2, b->arg3, win);
                break;
            case K_FLOOD:
                v = flood(s, b->arg1);
                break;
            case K_RMAW:
                v = rma_alloc(s, b->arg1, win);
                break;
            case K_OS:
                v = os_bench(s, b->arg1, b->arg2, b->arg4, win, max_size);
                break;
        }
        if (rank == 0) {
            printf("%-10zu %.3f\n", s, v);
            fflush(stdout);
        }
    }
    if (win != MPI_WIN_NULL)
        MPI_Win_free(&win);
    free(wmem);
    if (wmem_mpi)
        MPI_Free_mem(wmem_mpi);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
