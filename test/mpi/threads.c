/*
 * MPI_THREAD_MULTIPLE over amlapi: NT threads per rank make MPI calls at the same time
 * (amlapi relies on MPICH's global critical section; configure refuses finer modes). Each
 * thread runs four parts in turn, so at any moment different threads of a rank are in
 * different parts:
 *   1. own communicator (MPI_Comm_dup per thread): ring exchange with Isend/Irecv, Sendrecv,
 *      Issend + Testall;
 *   2. shared communicator, a distinct tag per thread and message: every peer, received by
 *      preposted Irecv, Probe + Recv, Iprobe + Recv, Improbe + Mrecv, Mprobe + Imrecv, or
 *      MPI_ANY_SOURCE (each peer exactly once);
 *   3. shared communicator with wildcards: thread 0 of each rank alone receives with
 *      MPI_ANY_SOURCE and MPI_ANY_TAG, while every thread of every other rank sends to it with
 *      its thread number as tag; per (source, tag) the messages arrive in order (the sends of
 *      one thread are ordered, so MPI's non-overtaking rule applies), across protocols;
 *   4. cancel on the own communicator: an unmatched Isend is cancelled; if
 *      MPI_Test_cancelled says so the receiver must never get it (the next message with that
 *      tag is a marker sent afterwards), otherwise it arrives intact before the marker.
 * Sizes cover one-packet, eager range, the eager limit and one past it (read with MPI_T),
 * 64 KiB and 1 MiB; every payload is checked against a pattern of (sender, thread, message).
 * Afterwards each rank checks with the amlapi_send_cancels_* counters that every cancel that
 * succeeded was answered by a receiver, and (automatic protocol choice) that one-packet, eager
 * range and rendezvous messages were all sent. Fails if MPI_THREAD_MULTIPLE is not provided.
 * MPICH's MTest convention: rank 0 prints " No Errors" (" Found N errors" on any error);
 * "threads: N ranks x N threads, N errors" only with MPITEST_VERBOSE set.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT 4            /* threads per rank */
#define NS 7            /* message sizes */
#define ITER 4          /* iterations of parts 1 and 2 */
#define WILD_PER 10     /* part 3: messages per sending thread and receiving rank */

static int rank, size, errs;
static pthread_mutex_t errs_lock = PTHREAD_MUTEX_INITIALIZER;

#define ERR(...) do { pthread_mutex_lock(&errs_lock); errs++; \
                      fprintf(stderr, "rank %d: ", rank); fprintf(stderr, __VA_ARGS__); \
                      fprintf(stderr, "\n"); pthread_mutex_unlock(&errs_lock); } while (0)

#include "mpit.h"
#include "mtest.h"

static int verbose;             /* mtest_verbose() */

static struct limits lim;
static int sizes[NS];
static MPI_Comm own[NT], shared, wild;
static int cancelled[NT];       /* part 4: sends each thread saw cancelled */

enum { PART_OWN = 1, PART_SHARED, PART_WILD, PART_CANCEL, PART_MARKER };

static unsigned seed_of(int src, int t, int msg, int part)
{
    return (unsigned) (((src * NT + t) * 1000 + msg) * 8 + part);
}

static void fill(char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (char) ((i * 13 + (i >> 8) * 7 + seed * 101) & 0xff);
}

/* index of the first wrong byte, or -1 */
static long check(const char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != (char) ((i * 13 + (i >> 8) * 7 + seed * 101) & 0xff))
            return (long) i;
    return -1;
}

static void check_msg(const char *what, int t, const char *b, const MPI_Status * st,
                      int want_n, int want_src, unsigned seed)
{
    int n;
    long bad;
    MPI_Get_count(st, MPI_CHAR, &n);
    if (n != want_n || st->MPI_SOURCE != want_src)
        ERR("thread %d %s: %d bytes from %d, want %d from %d", t, what, n, st->MPI_SOURCE,
            want_n, want_src);
    else if ((bad = check(b, (size_t) n, seed)) >= 0)
        ERR("thread %d %s: %d bytes from %d wrong at byte %ld", t, what, n, want_src, bad);
}

/* ---- 1. own communicator ---------------------------------------------------------------- */

static void part_own(int t, char *sb, char *rb)
{
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    MPI_Comm c = own[t];
    for (int it = 0; it < ITER; it++) {
        for (int k = 0; k < NS; k++) {
            int n = sizes[k], msg = it * NS + k, how = (it + k) % 3;
            MPI_Request q[2];
            MPI_Status st[2];
            fill(sb, n, seed_of(rank, t, msg, PART_OWN));
            memset(rb, 0, n);
            if (how == 0) {
                MPI_Irecv(rb, n, MPI_CHAR, from, msg, c, &q[0]);
                MPI_Isend(sb, n, MPI_CHAR, to, msg, c, &q[1]);
                MPI_Waitall(2, q, st);
            } else if (how == 1) {
                MPI_Sendrecv(sb, n, MPI_CHAR, to, msg, rb, n, MPI_CHAR, from, msg, c, &st[0]);
            } else {
                int done = 0;
                MPI_Issend(sb, n, MPI_CHAR, to, msg, c, &q[1]);
                MPI_Irecv(rb, n, MPI_CHAR, from, msg, c, &q[0]);
                while (!done)
                    MPI_Testall(2, q, &done, st);
            }
            check_msg("own communicator", t, rb, &st[0], n, from,
                      seed_of(from, t, msg, PART_OWN));
        }
    }
}

/* ---- 2. shared communicator, distinct tags ---------------------------------------------- */

static void part_shared(int t, char *sb, char *rb)
{
    MPI_Request *sq = malloc(sizeof(MPI_Request) * size);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * size);
    char **sbufs = malloc(sizeof(char *) * size);
    for (int p = 0; p < size; p++)
        sbufs[p] = malloc(sizes[NS - 1]);
    (void) sb;
    for (int it = 0; it < ITER; it++) {
        for (int k = 0; k < NS; k++) {
            int n = sizes[k], msg = it * NS + k, how = (it * NS + k + t) % 6;
            int tag = msg * NT + t;     /* this thread's alone on `shared` */
            int seen[64] = { 0 };
            MPI_Status st;
            /* a slice of rb per peer (preposted receives) */
            size_t slice = (size_t) sizes[NS - 1];
            if (how == 0)
                for (int p = 0; p < size; p++)
                    rq[p] = MPI_REQUEST_NULL;
            for (int p = 0; p < size; p++) {
                sq[p] = MPI_REQUEST_NULL;
                if (p == rank)
                    continue;
                if (how == 0)
                    MPI_Irecv(rb + p * slice, n, MPI_CHAR, p, tag, shared, &rq[p]);
                fill(sbufs[p], n, seed_of(rank, t, msg * 64 + p, PART_SHARED));
                MPI_Isend(sbufs[p], n, MPI_CHAR, p, tag, shared, &sq[p]);
            }
            for (int i = 0; i < size; i++) {
                int p = (rank + 1 + i) % size, flag = 0;
                char *b = rb + p * slice;
                MPI_Message m;
                MPI_Request r;
                if (p == rank)
                    continue;
                switch (how) {
                    case 0:
                        MPI_Wait(&rq[p], &st);
                        break;
                    case 1:
                        MPI_Probe(p, tag, shared, &st);
                        MPI_Recv(b, n, MPI_CHAR, p, tag, shared, &st);
                        break;
                    case 2:
                        while (!flag)
                            MPI_Iprobe(p, tag, shared, &flag, &st);
                        MPI_Recv(b, n, MPI_CHAR, p, tag, shared, &st);
                        break;
                    case 3:
                        while (!flag)
                            MPI_Improbe(p, tag, shared, &flag, &m, &st);
                        MPI_Mrecv(b, n, MPI_CHAR, &m, &st);
                        break;
                    case 4:
                        MPI_Mprobe(p, tag, shared, &m, &st);
                        MPI_Imrecv(b, n, MPI_CHAR, &m, &r);
                        MPI_Wait(&r, &st);
                        break;
                    default:   /* any source: each peer's message once */
                        b = rb;
                        MPI_Recv(b, n, MPI_CHAR, MPI_ANY_SOURCE, tag, shared, &st);
                        p = st.MPI_SOURCE;
                        if (p < 0 || p >= size || p == rank || seen[p % 64]++) {
                            ERR("thread %d: MPI_ANY_SOURCE receive got tag %d from %d twice "
                                "or from nowhere", t, tag, p);
                            continue;
                        }
                }
                check_msg("shared communicator", t, b, &st, n, p,
                          seed_of(p, t, msg * 64 + rank, PART_SHARED));
            }
            MPI_Waitall(size, sq, MPI_STATUSES_IGNORE);
        }
    }
    for (int p = 0; p < size; p++)
        free(sbufs[p]);
    free(sbufs);
    free(sq);
    free(rq);
}

/* ---- 3. wildcards ----------------------------------------------------------------------- */

static int wild_len(int t, int s)
{
    return sizes[(s + t) % NS];
}

static void part_wild(int t, char *sb, char *rb)
{
    int nsend = (size - 1) * WILD_PER;
    char **sbufs = malloc(sizeof(char *) * nsend);
    MPI_Request *sq = malloc(sizeof(MPI_Request) * nsend);
    int j = 0;
    (void) sb;
    /* nonblocking sends first: thread 0 receives below while its own sends are in flight */
    for (int s = 0; s < WILD_PER; s++) {
        for (int p = 0; p < size; p++) {
            if (p == rank)
                continue;
            int n = wild_len(t, s);
            sbufs[j] = malloc(n + 1);
            fill(sbufs[j], n, seed_of(rank, t, s * 64 + p, PART_WILD));
            MPI_Isend(sbufs[j], n, MPI_CHAR, p, t, wild, &sq[j]);
            j++;
        }
    }
    if (t == 0) {
        int next[64][NT];
        memset(next, 0, sizeof(next));
        for (int i = 0; i < (size - 1) * NT * WILD_PER; i++) {
            MPI_Status st;
            MPI_Recv(rb, sizes[NS - 1], MPI_CHAR, MPI_ANY_SOURCE, MPI_ANY_TAG, wild, &st);
            int src = st.MPI_SOURCE, tag = st.MPI_TAG;
            if (src < 0 || src >= size || src == rank || tag < 0 || tag >= NT || src >= 64) {
                ERR("wildcard receive: source %d tag %d", src, tag);
                continue;
            }
            int s = next[src][tag]++;
            if (s >= WILD_PER) {
                ERR("wildcard receive: message %d from %d thread %d, only %d sent", s, src, tag,
                    WILD_PER);
                continue;
            }
            /* the s-th message from (src, tag) must be the s-th sent: else size or data differ */
            check_msg("wildcard (out of order?)", t, rb, &st, wild_len(tag, s), src,
                      seed_of(src, tag, s * 64 + rank, PART_WILD));
        }
    }
    MPI_Waitall(nsend, sq, MPI_STATUSES_IGNORE);
    for (int i = 0; i < nsend; i++)
        free(sbufs[i]);
    free(sbufs);
    free(sq);
}

/* ---- 4. cancel -------------------------------------------------------------------------- */

static void part_cancel(int t, char *sb, char *rb)
{
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    MPI_Comm c = own[t];
    for (int k = 0; k < NS; k++) {
        int n = sizes[k], tag = 500 + k, flag, rflag;
        MPI_Request q;
        MPI_Status st;
        fill(sb, n, seed_of(rank, t, k, PART_CANCEL));
        /* nothing at `to` receives `tag` before our flag says what became of this send */
        MPI_Isend(sb, n, MPI_CHAR, to, tag, c, &q);
        MPI_Cancel(&q);
        MPI_Wait(&q, &st);
        MPI_Test_cancelled(&st, &flag);
        cancelled[t] += !!flag;
        /* a rendezvous scout is at the receiver when the cancel request arrives behind it */
        if (!flag && n > lim.eager)
            ERR("thread %d: unmatched rendezvous send of %d bytes was not cancelled", t, n);
        /* blocking sends of the flag and marker would deadlock with a ring of rendezvous
         * sends on two ranks: both nonblocking */
        MPI_Request fq[2];
        char marker[8];
        fill(marker, 8, seed_of(rank, t, k, PART_MARKER));
        MPI_Isend(&flag, 1, MPI_INT, to, 600 + k, c, &fq[0]);
        MPI_Isend(marker, 8, MPI_CHAR, to, tag, c, &fq[1]);

        MPI_Recv(&rflag, 1, MPI_INT, from, 600 + k, c, MPI_STATUS_IGNORE);
        if (!rflag) {   /* not cancelled: it arrives, intact, before the marker */
            MPI_Recv(rb, n, MPI_CHAR, from, tag, c, &st);
            check_msg("send that was not cancelled", t, rb, &st, n, from,
                      seed_of(from, t, k, PART_CANCEL));
        }
        MPI_Recv(rb, n, MPI_CHAR, from, tag, c, &st);
        check_msg(rflag ? "marker after a cancelled send (the cancelled message arrived?)" :
                  "marker", t, rb, &st, 8, from, seed_of(from, t, k, PART_MARKER));
        MPI_Waitall(2, fq, MPI_STATUSES_IGNORE);
    }
}

static void *thread_main(void *arg)
{
    int t = (int) (long) arg;
    size_t max = (size_t) sizes[NS - 1];
    char *sb = malloc(max), *rb = malloc(max * size);
    part_own(t, sb, rb);
    part_shared(t, sb, rb);
    part_wild(t, sb, rb);
    part_cancel(t, sb, rb);
    free(sb);
    free(rb);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, total, ncancelled = 0;
    unsigned long long c0[P_COUNT], c1[P_COUNT], ok0, no0, ok, no;
    pthread_t th[NT];

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    verbose = mtest_verbose();
    if (provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "threads: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (size < 2 || size > 64) {
        fprintf(stderr, "threads needs 2 to 64 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    mpit_init();
    read_limits(&lim);
    {
        int s[NS] = { 8, 4096, 10240, lim.eager, lim.eager + 1, 65536, 1 << 20 };
        memcpy(sizes, s, sizeof(s));
    }
    for (int t = 0; t < NT; t++)
        MPI_Comm_dup(MPI_COMM_WORLD, &own[t]);
    MPI_Comm_dup(MPI_COMM_WORLD, &shared);
    MPI_Comm_dup(MPI_COMM_WORLD, &wild);

    proto_counts(c0);
    ok0 = pvar_read("amlapi_send_cancels_ok");
    no0 = pvar_read("amlapi_send_cancels_failed");
    for (int t = 0; t < NT; t++)
        if (pthread_create(&th[t], NULL, thread_main, (void *) (long) t)) {
            fprintf(stderr, "threads: pthread_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    for (int t = 0; t < NT; t++) {
        pthread_join(th[t], NULL);
        ncancelled += cancelled[t];
    }
    proto_counts(c1);
    ok = pvar_read("amlapi_send_cancels_ok") - ok0;
    no = pvar_read("amlapi_send_cancels_failed") - no0;
    /* every cancelled send was dropped by its receiver in answer to a CANCEL_REQ, and every
     * send not completed at injection sent one (and got one answer) */
    if (ok != (unsigned long long) ncancelled)
        ERR("%d sends cancelled but amlapi_send_cancels_ok grew by %llu", ncancelled, ok);
    int big = 0;        /* sizes above any inline limit (< 256 bytes): these have a message id */
    for (int k = 0; k < NS; k++)
        big += sizes[k] >= 256;
    if (ok + no < (unsigned long long) NT * big || ok + no > (unsigned long long) NT * NS)
        ERR("%llu cancel answers (ok %llu, failed %llu), want %d to %d", ok + no, ok, no,
            NT * big, NT * NS);
    {
        int mid = lim.credits ? P_ADAPTIVE : P_EAGER;
        if (c1[P_ONEPACKET] == c0[P_ONEPACKET] || c1[P_RNDV] == c0[P_RNDV] ||
            (lim.onepacket < lim.eager && c1[mid] == c0[mid]))
            ERR("not every protocol was used: one-packet +%llu, %s +%llu, rendezvous +%llu",
                c1[P_ONEPACKET] - c0[P_ONEPACKET], proto_name[mid], c1[mid] - c0[mid],
                c1[P_RNDV] - c0[P_RNDV]);
    }

    for (int t = 0; t < NT; t++)
        MPI_Comm_free(&own[t]);
    MPI_Comm_free(&shared);
    MPI_Comm_free(&wild);
    mpit_finalize();
    MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && verbose)
        printf("threads: %d ranks x %d threads, %d errors\n", size, NT, total);
    if (rank == 0)
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
