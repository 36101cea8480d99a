/*
 * ambench: the benchmarks `maint/bench` runs on every MPI implementation (amlapi, ch4:ucx,
 * Open MPI), compiled once per MPI from this one source so that all see the same code.
 *
 *   ambench BENCH [-s SIZES] [-i ITERS] [-w WARMUP] [-W WINDOW]
 *
 * BENCH is one of the names in `benches[]` below. SIZES is a comma-separated list of byte
 * counts. Output is OSU-style: two comment lines, then one "size value" row per size, so the
 * runner (and a human) can read it. Every timed value is the mean over ITERS iterations after
 * WARMUP untimed ones; without -i, one-sided and collective samples time themselves (about
 * 0.2-0.3 s each, see rma_timed and coll). Repetitions and medians are the runner's job.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/resource.h>

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
    int longs;
    MPI_Win win;
    MPI_Group peer;
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
    struct rma_step c = { -1 - sync, get, bw ? window : 1, size, 0, win, MPI_GROUP_NULL };
    double us;
    if (sync == RMA_FENCE)
        MPI_Win_fence(0, win);
    us = rma_timed(&c);
    MPI_Barrier(MPI_COMM_WORLD);
    if (bw)
        return (double) size * c.ops / us;
    return us;
}

/* The one-sided latencies of the RMA report (docs/benchmarks/2026-11-26-rma.md), on a window
 * from MPI_Win_allocate (where an MPI may put the memory in shared memory; *_create: from
 * MPI_Win_create on malloc'd memory instead):
 * put = lock-put-unlock per operation; get, accumulate
 * (MPI_SUM of longs), fetch_and_op (MPI_SUM, one long), compare_and_swap (one long) = one
 * lock_all around all of them and op + flush per operation; put_lat_pscw: post/wait at rank 1,
 * start/put/complete at rank 0 per operation. µs per operation. */
enum { RW_PUT, RW_GET, RW_ACC, RW_FOP, RW_CAS, RW_PSCW, RW_FOP_EPOCH, RW_LOCK_CONTENDED };

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
    switch (c->what) {
        case RW_PUT:
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
            MPI_Put(sbuf, (int) size, MPI_CHAR, 1, 0, (int) size, MPI_CHAR, win);
            MPI_Win_unlock(1, win);
            return;
        case RW_FOP_EPOCH:
            /* a whole passive epoch per operation, as lock-based codes (and MPICH's
             * atomic_rmw tests) do */
            MPI_Win_lock_all(0, win);
            MPI_Fetch_and_op(sbuf, rbuf, MPI_LONG, 1, 0, MPI_SUM, win);
            MPI_Win_unlock_all(win);
            return;
        case RW_GET:
            MPI_Get(rbuf, (int) size, MPI_CHAR, 1, 0, (int) size, MPI_CHAR, win);
            break;
        case RW_ACC:
            MPI_Accumulate(sbuf, c->longs, MPI_LONG, 1, 0, c->longs, MPI_LONG, MPI_SUM, win);
            break;
        case RW_FOP:
            MPI_Fetch_and_op(sbuf, rbuf, MPI_LONG, 1, 0, MPI_SUM, win);
            break;
        case RW_CAS:
            MPI_Compare_and_swap(sbuf, rbuf + sizeof(long), rbuf, MPI_LONG, 1, 0, win);
            break;
    }
    MPI_Win_flush(1, win);
}

static double rma_alloc(size_t size, int what, MPI_Win win)
{
    int i, n, w = 50;
    double t0 = 0, t, us;
    struct rma_step c = { what, 0, 1, size, size >= sizeof(long) ? (int) (size / sizeof(long)) : 1,
        win, MPI_GROUP_NULL
    };
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
    if (rank == 0 && what != RW_PUT && what != RW_FOP_EPOCH && what != RW_PSCW)
        MPI_Win_lock_all(0, win);
    us = rma_timed(&c);
    if (rank == 0 && what != RW_PUT && what != RW_FOP_EPOCH && what != RW_PSCW)
        MPI_Win_unlock_all(win);
    if (c.peer != MPI_GROUP_NULL)
        MPI_Group_free(&c.peer);
    MPI_Barrier(MPI_COMM_WORLD);
    return us;
}

/* --- driver -------------------------------------------------------------------------------- */

struct bench {
    const char *name, *unit, *sizes;
    int kind, arg1, arg2, arg3;
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

enum { K_LAT, K_BW, K_BIBW, K_RATE, K_COLL, K_RMA, K_FLOOD, K_RMAW };

static const struct bench benches[] = {
    {"latency", "Latency (us)", "0,1,8,64,512,4096,16384,65536,262144,1048576,4194304", K_LAT},
    {"bw", "Bandwidth (MB/s)", "1,64,1024,4096,16384,65536,262144,1048576,4194304", K_BW},
    {"bibw", "Bandwidth (MB/s)", "1,64,1024,4096,16384,65536,262144,1048576,4194304", K_BIBW},
    {"msgrate", "Rate (Mmsg/s)", "1,8,64,512,4096", K_RATE},
    {"bcast", "Latency (us)", "8,1024,65536,1048576", K_COLL, 0},
    {"allreduce", "Latency (us)", "8,1024,65536,1048576", K_COLL, 1},
    {"alltoall", "Latency (us)", "8,1024,65536", K_COLL, 2},
    {"barrier", "Latency (us)", "0", K_COLL, 3},
    {"flood", "Time (s)", "8", K_FLOOD, 0},
    {"flood_mem", "Memory (MiB)", "8", K_FLOOD, 1},
    {"put_lat_alloc", "Latency (us)", "8,1024,4096,65536,1048576", K_RMAW, RW_PUT},
    {"get_lat_alloc", "Latency (us)", "8,1024,4096,65536,1048576", K_RMAW, RW_GET},
    {"acc_lat_alloc", "Latency (us)", "8,1024,4096,65536", K_RMAW, RW_ACC},
    {"fop_lat", "Latency (us)", "8", K_RMAW, RW_FOP},
    {"cas_lat", "Latency (us)", "8", K_RMAW, RW_CAS},
    {"put_lat_pscw", "Latency (us)", "8,4096,65536", K_RMAW, RW_PSCW},
    /* the same on MPI_Win_create memory (malloc'd: no MPI can map it for its peers) */
    {"put_lat_create", "Latency (us)", "8,1024,4096,65536,1048576", K_RMAW, RW_PUT, 1},
    {"get_lat_create", "Latency (us)", "8,1024,4096,65536,1048576", K_RMAW, RW_GET, 1},
    {"acc_lat_create", "Latency (us)", "8,1024,4096,65536", K_RMAW, RW_ACC, 1},
    {"fop_lat_create", "Latency (us)", "8", K_RMAW, RW_FOP, 1},
    {"cas_lat_create", "Latency (us)", "8", K_RMAW, RW_CAS, 1},
    {"fop_epoch_create", "Latency (us)", "8", K_RMAW, RW_FOP_EPOCH, 1},
    {"lock_contended_create", "Time per epoch (us)", "8", K_RMAW, RW_LOCK_CONTENDED, 1},
    {"put_lat_pscw_create", "Latency (us)", "8,4096,65536", K_RMAW, RW_PSCW, 1},
    {"put_lat_fence", "Latency (us)", "8,1024,65536,1048576", K_RMA, 0, RMA_FENCE, 0},
    {"put_lat_lock", "Latency (us)", "8,1024,65536,1048576", K_RMA, 0, RMA_LOCK, 0},
    {"get_lat_fence", "Latency (us)", "8,1024,65536,1048576", K_RMA, 1, RMA_FENCE, 0},
    {"get_lat_lock", "Latency (us)", "8,1024,65536,1048576", K_RMA, 1, RMA_LOCK, 0},
    {"put_bw_fence", "Bandwidth (MB/s)", "8,1024,65536,1048576", K_RMA, 0, RMA_FENCE, 1},
    {"put_bw_lock", "Bandwidth (MB/s)", "8,1024,65536,1048576", K_RMA, 0, RMA_LOCK, 1},
    {"get_bw_fence", "Bandwidth (MB/s)", "8,1024,65536,1048576", K_RMA, 1, RMA_FENCE, 1},
    {"get_bw_lock", "Bandwidth (MB/s)", "8,1024,65536,1048576", K_RMA, 1, RMA_LOCK, 1},
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

int main(int argc, char **argv)
{
    const struct bench *b = NULL;
    const char *sizes_arg = NULL;
    size_t sizes[MAX_SIZES];
    int i, nsizes, opt_err = 0;
    char msg[256];
    MPI_Win win = MPI_WIN_NULL;
    void *wmem = NULL;          /* *_create benches: the window's memory */

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

    if (argc < 2)
        fail("usage: ambench BENCH [-s SIZES] [-i ITERS] [-w WARMUP] [-W WINDOW]");
    for (i = 0; i < (int) (sizeof(benches) / sizeof(benches[0])); i++)
        if (strcmp(argv[1], benches[i].name) == 0)
            b = &benches[i];
    if (!b) {
        int len = snprintf(msg, sizeof(msg), "unknown benchmark '%s'; known:", argv[1]);
        for (i = 0; i < (int) (sizeof(benches) / sizeof(benches[0])) && len < 240; i++)
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
    sbuf = malloc(max_size);
    rbuf = malloc(max_size);
    if (!sbuf || !rbuf)
        fail("out of memory for the buffers");
    memset(sbuf, 'a', max_size);
    memset(rbuf, 'b', max_size);
    if (b->kind == K_RMA) {
        MPI_Win_create(rank == 1 ? rbuf : sbuf, (MPI_Aint) max_size, 1, MPI_INFO_NULL,
                       MPI_COMM_WORLD, &win);
    } else if (b->kind == K_RMAW) {
        void *mem;
        if (max_size < 2 * sizeof(long)) {
            free(sbuf);
            free(rbuf);
            max_size = 2 * sizeof(long);
            sbuf = calloc(1, max_size);
            rbuf = calloc(1, max_size);
        }
        if (b->arg2) {
            wmem = calloc(1, max_size);
            if (!wmem)
                fail("out of memory for the window");
            MPI_Win_create(wmem, (MPI_Aint) max_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        } else {
            MPI_Win_allocate((MPI_Aint) max_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem,
                             &win);
        }
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
        }
        if (rank == 0) {
            printf("%-10zu %.3f\n", s, v);
            fflush(stdout);
        }
    }
    if (win != MPI_WIN_NULL)
        MPI_Win_free(&win);
    free(wmem);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
